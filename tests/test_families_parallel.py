"""GPT-NeoX (Pythia; parallel blocks, and sequential ones where use_parallel_residual is off)
and Phi-3: what differs from the families before them, each checked against the model's own
computation rebuilt by hand: the parallel residual, the fused projections (GPT-NeoX's per-head
[q, k, v], Phi-3's [q | k | v] of unequal widths under GQA) and the partial rotary embedding,
in the decomposition, in `locate` and in the interventions.

The package's generic tests of the decomposition, the readout's increases, the interventions
and the passes that share a prefix run on these kinds too: they are imported below, and this
module's `small` gives them these families' models (conftest's KINDS does not list them).
"""
from __future__ import annotations

import pytest
import torch

from icl_helpers import ICLModel, UsageError
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.interventions import ablated, position_free_labels
from icl_helpers.core.locate import locate
from tests.conftest import PROMPTS, close, exact, logprob_scale, small_model
from tests.hand import assert_exact, rope
from tests.test_attribution import (  # noqa: F401
    dec,
    naive_increase,
    test_layer_head_increase_equals_naive,
    test_neuron_increase_equals_naive,
    test_position_increase_equals_naive,
    test_projection_is_linear,
    test_projection_of_final_residual_is_the_models_logits,
)
from tests.test_decompose import (  # noqa: F401
    full,
    hf,
    test_attention_rows_match_models_attentions,
    test_batched_equals_one_prompt_at_a_time,
    test_final_scale_is_the_norm_the_model_used,
    test_heads_plus_bias_equal_attention_output,
    test_key_inputs_are_earlier_attention_outputs,
    test_layer_inputs_match_models_hidden_states,
    test_neurons_sum_to_ffn_output,
    test_position_terms_sum_to_each_head,
)
from tests.test_interventions import (  # noqa: F401
    EXAMPLES,
    labels_of,
    last_logits,
    test_ablation_removes_exactly_the_heads_contribution,
    test_balancing_divides_label_weights_by_class_count,
    test_balancing_equal_classes_changes_nothing,
    test_identity_rotation_changes_nothing,
    test_interventions_work_in_a_batch_as_one_by_one,
    test_mean_ablation_sets_z_to_the_dataset_mean,
    test_model_is_unchanged_afterwards,
)
from tests.test_prefix import test_a_resumed_pass_is_the_full_pass, test_position_free_keys_resumed  # noqa: F401

FAMILIES = ["neox", "neox-sequential", "phi3"]


@pytest.fixture(scope="module", params=FAMILIES)
def small(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


def qkv_by_hand(m: ICLModel, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, ...]:
    """From the block input x [B, T, d]: queries [B, H, T, dh], keys and values [B, H_kv, T,
    dh], before any rotation, split from the fused projection as the family lays it out."""
    block, (B, T, _), arch = m.arch.blocks()[layer], x.shape, m.arch
    dh, H, H_kv = arch.d_head, arch.n_heads, arch.n_kv_heads
    normed = block.input_layernorm(x)
    if arch.family == "gpt_neox":  # per head: [q, k, v]
        q, k, v = block.attention.query_key_value(normed).view(B, T, H, 3, dh).unbind(3)
    else:  # Phi-3: [all queries | all keys | all values]
        q, k, v = block.self_attn.qkv_proj(normed).split([H * dh, H_kv * dh, H_kv * dh], -1)
        q, k, v = (t.reshape(B, T, -1, dh) for t in (q, k, v))
    return tuple(t.transpose(1, 2) for t in (q, k, v))


def key_bias(m: ICLModel, layer: int) -> torch.Tensor:
    """[H_kv, dh]: the keys' bias in the fused projection (GPT-NeoX's), zeros where it has none (Phi-3)."""
    arch = m.arch
    if arch.family == "gpt_neox":
        return arch.attn(layer).query_key_value.bias.view(arch.n_heads, 3, arch.d_head)[:, 1]
    return torch.zeros(arch.n_kv_heads, arch.d_head)


def rotary(m: ICLModel) -> tuple[float, int]:
    """(base, rotary dimensions) of the family's RoPE."""
    rope_parameters = m.model.config.rope_parameters
    return rope_parameters["rope_theta"], int(m.arch.d_head * rope_parameters["partial_rotary_factor"])


def attention_row(m: ICLModel, q: torch.Tensor, k: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """[B, H, T]: the last position's attention from rotated queries q [B, H, dh] and rotated
    keys k [B, H_kv, T, dh], scaled by dh**-0.5 and masked to the prompt's real tokens."""
    scores = torch.einsum("bhd,bhtd->bht", q, k.repeat_interleave(q.shape[1] // k.shape[1], 1)) * m.arch.d_head**-0.5
    allowed = torch.arange(k.shape[2])[None] <= last[:, None]
    return scores.masked_fill(~allowed[:, None], -torch.inf).softmax(-1)


# --- the decomposition ----------------------------------------------------------------------
def test_the_decomposition_is_the_models_own_pass(small):
    assert_exact(small, PROMPTS)
    assert_exact(small, PROMPTS[1:2])  # one prompt, no padding


def test_the_ffn_reads_the_block_input_in_a_parallel_block(small, full, hf):
    """FFN_l by hand: mlp(post_attention_layernorm(x_l)) in a parallel block, of x_l + ATTN_l in a
    sequential one. The residual still adds up: x_{l+1} = x_l + ATTN_l + FFN_l, to the bit only
    where the model itself sums (x_l + ATTN_l) + FFN_l."""
    assert small.arch.parallel == (small.name == "neox")
    rows = torch.arange(len(PROMPTS))
    for l, block in enumerate(small.arch.blocks()):
        x = hf.hidden_states[l][rows, full.last]
        with torch.no_grad():
            ffn = block.mlp(block.post_attention_layernorm(x if small.arch.parallel else x + full.attn[:, l]))
        close(full.mlp[:, l], ffn)
    if small.arch.parallel:
        terms = full.mid.abs() + full.mlp.abs()
        close(full.mid + full.mlp, full.resid[:, 1:], scale=float(terms.max()))
    else:
        exact(full.mid + full.mlp, full.resid[:, 1:])  # the model's own two additions


def test_the_fused_projection_is_read_in_its_layout(small, full, hf):
    """The recorded queries and values are the fused projection's, W_K and the key bias give its
    keys, and the queries and keys rotated by hand on their first r dimensions give the model's
    attention row."""
    arch, rows = small.arch, torch.arange(len(PROMPTS))
    base, r = rotary(small)
    assert 0 < r < arch.d_head  # a partial rotary embedding
    for l in range(arch.n_layers):
        x = hf.hidden_states[l]
        with torch.no_grad():
            q, k, v = qkv_by_hand(small, x, l)
            normed = arch.blocks()[l].input_layernorm(x)
        close(full.queries[:, l], q[rows, :, full.last])
        close(full.values[:, l], v)
        close(torch.einsum("btd,gkd->bgtk", normed, arch.W_K(l)) + key_bias(small, l)[None, :, None], k)
        T = k.shape[2]
        q_rot = rope(full.queries[:, l, :, None], full.last[:, None], base, r)[:, :, 0]
        close(attention_row(small, q_rot, rope(k, torch.arange(T), base, r), full.last), full.pattern[:, l])


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
        close(result.ffn[:, l], naive_increase(readout, mid, dec.mlp[:, l, None], w, dec.scale)[:, 0], scale=at)


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
        ffn = block.mlp(block.post_attention_layernorm(x if small.arch.parallel else x + attn))
        want = small.model.get_output_embeddings()(small.arch.final_norm()(x + attn + ffn))
    with ablated(small, [(layer, head)]):
        got = last_logits(small, EXAMPLES)
    close(got, want)
    assert (got - last_logits(small, EXAMPLES)).abs().max() > 1e-3  # the head mattered


@pytest.mark.parametrize("layer", [1, 2])
def test_position_free_label_keys_turn_only_the_rotary_dimensions(small, layer):
    """The edited row, by hand: label keys rotated (on their first r dimensions, half layout) to
    the target position, the other keys at their own positions; other heads unchanged."""
    head, labels, target = 3, labels_of(small, EXAMPLES), torch.tensor([2, 9, 5])
    with position_free_labels(small, [(layer, head)], labels, target=target):
        edited = decompose(small, EXAMPLES, record=["pattern", "queries"])
    with torch.no_grad():
        x = small.model(**small.encode(EXAMPLES), output_hidden_states=True).hidden_states[layer]
        _, k, _ = qkv_by_hand(small, x, layer)
    base, r = rotary(small)
    T = k.shape[2]
    at = torch.where(labels.class_masks(T).any(1), target[:, None], torch.arange(T))  # each key's position
    q_rot = rope(edited.queries[:, layer, :, None], edited.last[:, None], base, r)[:, :, 0]
    want = attention_row(small, q_rot, rope(k, at, base, r), edited.last)
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
