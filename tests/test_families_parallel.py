"""GPT-NeoX (Pythia; parallel blocks, and sequential ones where use_parallel_residual is off),
Phi-3 and GPT-J: what differs from the families before them, each checked against the model's
own computation rebuilt by hand: the parallel residual (GPT-J's under one LayerNorm), the fused
projections (GPT-NeoX's per-head [q, k, v], Phi-3's [q | k | v] of unequal widths under GQA),
the partial rotary embedding (GPT-J's in interleaved pairs), GPT-J's lm_head bias and its own
attention code, which the label edits replace while they act, in the decomposition, in `locate`
and in the interventions.

The package's generic tests of the decomposition, the readout's increases, the interventions
and the passes that share a prefix run on these kinds too: they are imported below, and this
module's `small` gives them these families' models (conftest's KINDS does not list them).
"""
from __future__ import annotations

import pytest
import torch
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb

from icl_helpers import ICLModel, UsageError
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.interventions import ablated, balanced_labels, position_free_labels
from icl_helpers.core.locate import locate
from tests.conftest import PROMPTS, close, exact, logprob_scale, small_model
from tests.generic import *  # noqa: F403 (the generic tests, on this module's `small`)
from tests.hand import assert_exact, rope
from tests.test_attribution import naive_increase
from tests.test_interventions import EXAMPLES, labels_of, last_logits

FAMILIES = ["neox", "neox-sequential", "phi3", "gptj"]


@pytest.fixture(scope="module", params=FAMILIES)
def small(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


def norms(m: ICLModel, block: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(the norm the attention reads through, the FFN's): GPT-J's one ln_1 is both."""
    if m.arch.family == "gptj":
        return block.ln_1, block.ln_1
    return block.input_layernorm, block.post_attention_layernorm


def qkv_by_hand(m: ICLModel, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, ...]:
    """From the block input x [B, T, d]: queries [B, H, T, dh], keys and values [B, H_kv, T,
    dh], before any rotation, split from the fused projection as the family lays it out
    (GPT-J: three projections)."""
    block, (B, T, _), arch = m.arch.blocks()[layer], x.shape, m.arch
    dh, H, H_kv = arch.d_head, arch.n_heads, arch.n_kv_heads
    normed = norms(m, block)[0](x)
    if arch.family == "gpt_neox":  # per head: [q, k, v]
        q, k, v = block.attention.query_key_value(normed).view(B, T, H, 3, dh).unbind(3)
    elif arch.family == "gptj":
        q, k, v = (p(normed).view(B, T, H, dh) for p in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj))
    else:  # Phi-3: [all queries | all keys | all values]
        q, k, v = block.self_attn.qkv_proj(normed).split([H * dh, H_kv * dh, H_kv * dh], -1)
        q, k, v = (t.reshape(B, T, -1, dh) for t in (q, k, v))
    return tuple(t.transpose(1, 2) for t in (q, k, v))


def key_bias(m: ICLModel, layer: int) -> torch.Tensor:
    """[H_kv, dh]: the keys' bias in the fused projection (GPT-NeoX's), zeros where it has none (Phi-3, GPT-J)."""
    arch = m.arch
    if arch.family == "gpt_neox":
        return arch.attn(layer).query_key_value.bias.view(arch.n_heads, 3, arch.d_head)[:, 1]
    return torch.zeros(arch.n_kv_heads, arch.d_head, device=m.device)


def rotary(m: ICLModel) -> dict:
    """The family's RoPE as `rope`'s arguments: base, rotary_dim and pairs (GPT-J's layout,
    its base fixed at 10,000 in its code)."""
    if m.arch.family == "gptj":
        return dict(base=10000.0, rotary_dim=m.model.config.rotary_dim, pairs=True)
    rope_parameters = m.model.config.rope_parameters
    return dict(base=rope_parameters["rope_theta"], rotary_dim=int(m.arch.d_head * rope_parameters["partial_rotary_factor"]))


def attention_row(m: ICLModel, q: torch.Tensor, k: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """[B, H, T]: the last position's attention from rotated queries q [B, H, dh] and rotated
    keys k [B, H_kv, T, dh], scaled by dh**-0.5 and masked to the prompt's real tokens."""
    scores = torch.einsum("bhd,bhtd->bht", q, k.repeat_interleave(q.shape[1] // k.shape[1], 1)) * m.arch.d_head**-0.5
    allowed = torch.arange(k.shape[2], device=last.device)[None] <= last[:, None]
    return scores.masked_fill(~allowed[:, None], -torch.inf).softmax(-1)


# --- the decomposition ----------------------------------------------------------------------
def test_the_decomposition_is_the_models_own_pass(small):
    assert_exact(small, PROMPTS)
    assert_exact(small, PROMPTS[1:2])  # one prompt, no padding


def test_the_ffn_reads_the_block_input_in_a_parallel_block(small, full, hf):
    """FFN_l by hand: mlp(post_attention_layernorm(x_l)) in a parallel block (GPT-J: mlp(ln_1(x_l))),
    of x_l + ATTN_l in a sequential one. The residual still adds up: x_{l+1} = x_l + ATTN_l + FFN_l,
    to the bit only where the model itself sums (x_l + ATTN_l) + FFN_l."""
    assert small.arch.parallel == (small.name in ("neox", "gptj"))
    rows = torch.arange(len(PROMPTS))
    for l, block in enumerate(small.arch.blocks()):
        x = hf.hidden_states[l][rows, full.last]
        with torch.no_grad():
            ffn = block.mlp(norms(small, block)[1](x if small.arch.parallel else x + full.attn[:, l]))
        close(full.ffn[:, l], ffn)
    if small.arch.parallel:
        terms = full.mid.abs() + full.ffn.abs()
        close(full.mid + full.ffn, full.resid[:, 1:], scale=float(terms.max()))
    else:
        exact(full.mid + full.ffn, full.resid[:, 1:])  # the model's own two additions


def test_the_fused_projection_is_read_in_its_layout(small, full, hf):
    """The recorded queries and values are the fused projection's, W_K and the key bias give its
    keys, and the queries and keys rotated by hand on their first r dimensions give the model's
    attention row."""
    arch, rows, turn = small.arch, torch.arange(len(PROMPTS)), rotary(small)
    assert 0 < turn["rotary_dim"] < arch.d_head  # a partial rotary embedding
    for l in range(arch.n_layers):
        x = hf.hidden_states[l]
        with torch.no_grad():
            q, k, v = qkv_by_hand(small, x, l)
            normed = norms(small, arch.blocks()[l])[0](x)
        close(full.queries[:, l], q[rows, :, full.last])
        close(full.values[:, l], v)
        close(torch.einsum("btd,gkd->bgtk", normed, arch.W_K(l)) + key_bias(small, l)[None, :, None], k)
        T = k.shape[2]
        q_rot = rope(full.queries[:, l, :, None], full.last[:, None], **turn)[:, :, 0]
        close(attention_row(small, q_rot, rope(k, torch.arange(T), **turn), full.last), full.pattern[:, l])


def test_locate_scores_are_log_probability_increases_on_the_residual(small):
    """By hand on the frozen-norm readout: a head and ATTN_l added to x_l, FFN_l to x_l + ATTN_l
    (whatever the FFN read)."""
    dec = decompose(small, PROMPTS)
    result = locate(small, PROMPTS, progress=False)
    readout, w, at = Readout(small.arch), dec.predictions, logprob_scale(dec)
    exact(result.targets, w)  # the predictions of the same pass
    heads = dec.heads()
    for l in range(small.arch.n_layers):
        close(result.head[:, l], naive_increase(readout, dec.resid[:, l], heads[:, l], w, dec.scale), scale=at)
        close(result.attn[:, l], naive_increase(readout, dec.resid[:, l], dec.attn[:, l, None], w, dec.scale)[:, 0], scale=at)
        mid = dec.resid[:, l] + dec.attn[:, l]
        close(result.ffn[:, l], naive_increase(readout, mid, dec.ffn[:, l, None], w, dec.scale)[:, 0], scale=at)


# --- interventions ----------------------------------------------------------------------------
def test_ablating_a_head_reruns_the_block_by_hand(small):
    """A head of the last layer ablated: the block by hand from its input x and its attention
    output less the head, the FFN reading x (parallel) or x + the ablated ATTN (sequential)."""
    layer, head = small.arch.n_layers - 1, 2
    dec = decompose(small, EXAMPLES)
    attn = dec.attn[:, layer] - dec.heads()[:, layer, head]
    x = dec.resid[:, layer]
    block = small.arch.blocks()[layer]
    with torch.no_grad():
        ffn = block.mlp(norms(small, block)[1](x if small.arch.parallel else x + attn))
        want = small.model.get_output_embeddings()(small.arch.final_norm()(x + attn + ffn))
    with ablated(small, [(layer, head)]):
        got = last_logits(small, EXAMPLES)
    close(got, want)
    assert (got - last_logits(small, EXAMPLES)).abs().max() > 1e-3  # the head mattered


@pytest.mark.parametrize("layer", [1, 2])
def test_position_free_label_keys_turn_only_the_rotary_dimensions(small, layer):
    """The edited row, by hand: label keys rotated (on their first r dimensions, in the family's
    layout) to the target position, the other keys at their own positions; other heads unchanged."""
    head, labels, target = 3, labels_of(small, EXAMPLES), torch.tensor([2, 9, 5])
    with position_free_labels(small, [(layer, head)], labels, target=target):
        edited = decompose(small, EXAMPLES, record=["pattern", "queries"])
    with torch.no_grad():
        x = small.model(**small.encode(EXAMPLES), output_hidden_states=True).hidden_states[layer]
        _, k, _ = qkv_by_hand(small, x, layer)
    turn, T = rotary(small), k.shape[2]
    at = torch.where(labels.class_masks(T).any(1), target[:, None], torch.arange(T))  # each key's position
    q_rot = rope(edited.queries[:, layer, :, None], edited.last[:, None], **turn)[:, :, 0]
    want = attention_row(small, q_rot, rope(k, at, **turn), edited.last)
    close(edited.pattern[:, layer, head], want[:, head])
    plain = decompose(small, EXAMPLES, record=["pattern"])
    others = [h for h in range(small.arch.n_heads) if h != head]
    close(edited.pattern[:, layer, others], plain.pattern[:, layer, others])
    assert (edited.pattern[:, layer, head] - plain.pattern[:, layer, head]).abs().max() > 1e-4


def test_a_long_context_rope_past_its_original_length_is_refused_in_one_line(gpt2_tokenizer):
    """longrope (original length 8 here): a pass within it is exact (the identity rotation changes
    nothing), one past it, turned with the long frequencies, is refused."""
    factors = dict(rope_type="longrope", short_factor=[1.0, 1.5, 2.0, 3.0], long_factor=[2.0, 4.0, 8.0, 16.0])
    rope_parameters = {"rope_theta": 10000.0, "partial_rotary_factor": 0.5, **factors}
    m = ICLModel(small_model("phi3", rope_parameters=rope_parameters, original_max_position_embeddings=8), gpt2_tokenizer)
    short = ["love : foo one :"]  # 5 tokens, one label: the target is its own position
    with position_free_labels(m, [(1, 0)], labels_of(m, short)):
        edited = last_logits(m, short)
    close(edited, last_logits(m, short))
    with pytest.raises(UsageError, match=r"^This Phi-3 pass is longer than its RoPE's original_max_position_embeddings, "
                                         r"so it uses the long-context frequencies, which position-free keys do not "
                                         r"support: use shorter prompts\.$"):
        with position_free_labels(m, [(1, 0)], labels_of(m, EXAMPLES[:1])):
            last_logits(m, EXAMPLES[:1])


# --- GPT-J: rotary in pairs, its own attention code --------------------------------------------
@pytest.fixture(scope="module")
def gptj(gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model("gptj"), gpt2_tokenizer, name="gptj")


def test_gptj_angles_and_position_free_keys_follow_its_pair_layout(gptj):
    """The adapter's angles at positions 0..T-1 are the model's embed_positions table as
    apply_rotary_pos_emb reads it (a sin half and a cos half, each pair's value twice), at
    negative positions the same angles turned back; the position-free keys take keys the model
    rotated at their own positions to those it rotates at the target, on the first rotary_dim
    dimensions only. The model's biases: none on the attention's projections, one on lm_head."""
    arch, T, B = gptj.arch, 12, 2
    r, H, dh = arch.rotary_dim, arch.n_heads, arch.d_head
    assert arch.b_O(0) is None and arch.b_U() is not None and arch.b_U().abs().max() > 1e-2
    table = arch.attn(0).embed_positions[:T]  # [T, r]: sin | cos
    sin, cos = table.split(r // 2, -1)
    got_cos, got_sin = arch.angles(0)(table, torch.arange(T)[None])
    close(got_cos[0], cos.repeat_interleave(2, -1))
    close(got_sin[0], sin.repeat_interleave(2, -1))
    back_cos, back_sin = arch.angles(0)(table, -torch.arange(T)[None])
    close(back_cos, got_cos)
    close(back_sin, -got_sin)

    def model_rotates(key: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """key [B, T, H, dh] rotated by the model's own apply_rotary_pos_emb at positions [B, T]."""
        s, c = arch.attn(0).embed_positions[positions].split(r // 2, -1)
        return torch.cat([apply_rotary_pos_emb(key[..., :r], s, c), key[..., r:]], -1)

    key, target = torch.randn(B, T, H, dh, generator=torch.Generator().manual_seed(0)).to(table.device), torch.tensor([5, 2])
    own = model_rotates(key, torch.arange(T).expand(B, T)).transpose(1, 2)  # [B, H, T, dh]
    want = model_rotates(key, target[:, None].expand(B, T)).transpose(1, 2)
    close(arch.position_free_keys(0, target)(own), want)
    exact(arch.position_free_keys(0, target)(own)[..., r:], own[..., r:])  # the other dimensions: a copy


def test_gptj_label_edits_act_through_its_own_attn(gptj):
    """GPT-J's attention is its own `_attn`, which transformers' attention functions do not reach:
    a label edit replaces it in the edited layers only while it acts (nested edits put back the
    outer one's). Balanced labels by hand: the edited head's last row is the plain one with each
    label's weight divided by its class's count, rescaled to the labels' old total, and it is the
    row the model used (the head's z is that row times its values); elsewhere the pattern is the
    model's own."""
    layer, head, prompts = 1, 0, [EXAMPLES[1]]  # one bar label, two foo labels
    labels, attns = labels_of(gptj, prompts), [gptj.arch.attn(l) for l in range(gptj.arch.n_layers)]
    plain = decompose(gptj, prompts, record=["pattern", "values"])
    with balanced_labels(gptj, [(layer, head)], labels):
        assert ["_attn" in a.__dict__ for a in attns] == [l == layer for l in range(len(attns))]
        outer = attns[layer]._attn
        with position_free_labels(gptj, [(layer, 2)], labels):
            assert attns[layer]._attn is not outer
        assert attns[layer]._attn is outer
        edited = decompose(gptj, prompts, record=["pattern", "values"])
    assert not any("_attn" in a.__dict__ for a in attns)
    foo, bar = labels.class_masks(plain.input_ids.shape[1])[0].to(plain.pattern.device)
    row, is_label = plain.pattern[0, layer, head], foo | bar
    want = row / torch.where(foo, foo.sum(), torch.where(bar, bar.sum(), 1))
    want[is_label] *= row[is_label].sum() / want[is_label].sum()
    close(edited.pattern[0, layer, head], want)
    assert (edited.pattern[0, layer, head] - row).abs().max() > 1e-3  # the edit acted
    values = plain.values[0, layer, head]  # [T, dh]: the edited layer's values, computed before its attention
    close(edited.z[0, layer, head], want @ values, scale=float((want.abs() @ values.abs()).max()))
    exact(edited.pattern[:, :layer], plain.pattern[:, :layer])  # the model's own _attn on the same batch
    exact(edited.pattern[:, layer, 1:], plain.pattern[:, layer, 1:])  # the same scores (times 1/4: exact), the same softmax
