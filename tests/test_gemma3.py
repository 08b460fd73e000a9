"""Gemma 3: what differs from Llama, each checked against the model's own computation
rebuilt by hand (the kind "gemma3" of `small` runs every generic test too): the scaled
embedding, the (1 + w) norms, the post-norms that end each residual branch, the query and
key norms, the sliding windows and query_pre_attn_scalar, in the decomposition and in the
interventions; the refusals; and the vision-language variant ("gemma3") run on text."""
from __future__ import annotations

import pytest
import torch
from transformers import Gemma3Config, Gemma3TextConfig, SiglipVisionConfig
from transformers.models.gemma3.modeling_gemma3 import Gemma3ForCausalLM, Gemma3ForConditionalGeneration

from icl_helpers import ICLModel, UsageError
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.interventions import balanced_labels, position_free_labels
from tests.conftest import PROMPTS, _randomise, check_decomposition, close, rope, small_model
from tests.test_interventions import EXAMPLES, labels_of, last_logits

LONG = "one : foo two : bar three : foo four : bar five : foo six : bar seven : foo eight :"  # 23 tokens, window 4


@pytest.fixture(scope="module")
def gemma(gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model("gemma3"), gpt2_tokenizer, name="gemma3")


@pytest.fixture(scope="module")
def hf(gemma):
    """The model's own pass on PROMPTS: block inputs at every position."""
    with torch.no_grad():
        return gemma.model(**gemma.encode(PROMPTS), output_hidden_states=True)


@pytest.fixture(scope="module")
def dec(gemma):
    return decompose(gemma, PROMPTS, record=["pattern", "queries", "neurons"])


def keys_and_queries(m: ICLModel, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
    """By hand, from the block input x [B, T, d]: keys [B, H_kv, T, dh] and queries [B, H, T,
    dh], each through its RMS norm with (1 + w), before the rotation."""
    block = m.model.model.layers[layer]
    attn, dh, eps = block.self_attn, m.arch.d_head, m.model.config.rms_norm_eps

    def rms(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return t / (t.pow(2).mean(-1, keepdim=True) + eps).sqrt() * (1 + w)

    normed = rms(x, block.input_layernorm.weight)
    B, T, _ = x.shape
    k = rms(attn.k_proj(normed).view(B, T, -1, dh), attn.k_norm.weight)
    q = rms(attn.q_proj(normed).view(B, T, -1, dh), attn.q_norm.weight)
    return k.transpose(1, 2), q.transpose(1, 2)


def attention_row(m: ICLModel, q: torch.Tensor, k: torch.Tensor, last: torch.Tensor, layer: int) -> torch.Tensor:
    """[B, H, T]: the last position's attention from rotated queries q [B, H, dh] (at `last`)
    and rotated keys k [B, H_kv, T, dh], scaled by query_pre_attn_scalar**-0.5, masked
    causally, to the prompt's real tokens and, in a sliding layer, to its window."""
    cfg = m.model.config
    T = k.shape[2]
    scores = torch.einsum("bhd,bhtd->bht", q, k.repeat_interleave(q.shape[1] // k.shape[1], 1)) * cfg.query_pre_attn_scalar**-0.5
    p = torch.arange(T)
    allowed = p[None] <= last[:, None]
    if cfg.layer_types[layer] == "sliding_attention":
        allowed &= p[None] > last[:, None] - cfg.sliding_window
    return scores.masked_fill(~allowed[:, None], -torch.inf).softmax(-1)


def base_of(m: ICLModel, layer: int) -> float:
    return m.model.config.rope_parameters[m.model.config.layer_types[layer]]["rope_theta"]


# --- the decomposition ----------------------------------------------------------------------
def test_x0_is_the_embedding_scaled_by_the_root_of_the_width(gemma, dec):
    rows = torch.arange(len(PROMPTS))
    ids = dec.input_ids[rows, dec.last]
    close(dec.resid[:, 0], gemma.model.model.embed_tokens.weight[ids] * gemma.arch.d_model**0.5)


def test_the_post_norms_scale_is_the_inverse_rms_of_the_branch_output(gemma, dec):
    """ATTN_l = (1 + w) * o / rms(o) for o = z @ W_O^T + b_O, the output projection's raw
    output; attn_scale = 1 / rms(o). The FFN branch alike from the neurons."""
    arch, eps = gemma.arch, gemma.model.config.rms_norm_eps
    for l, block in enumerate(gemma.model.model.layers):
        o_proj = block.self_attn.o_proj
        for o, scale, norm, out in (
            (o_proj(dec.z[:, l].flatten(1)), dec.attn_scale[:, l], block.post_attention_layernorm, dec.attn[:, l]),
            (dec.neurons[:, l] @ block.mlp.down_proj.weight.T, dec.mlp_scale[:, l], block.post_feedforward_layernorm, dec.mlp[:, l]),
        ):
            inv_rms = 1 / (o.pow(2).mean(-1) + eps).sqrt()
            close(scale, inv_rms)
            close(o * inv_rms[:, None] * (1 + norm.weight), out)
    assert not torch.allclose(dec.attn_scale, torch.ones_like(dec.attn_scale), atol=0.1)  # the scale matters here
    assert arch.branch_norm("attn", 0) is gemma.model.model.layers[0].post_attention_layernorm


def test_the_readout_uses_one_plus_w_and_equals_the_models_logits(gemma, dec):
    enc = gemma.encode(PROMPTS)
    with torch.no_grad():
        logits = gemma.model(**enc).logits[torch.arange(len(PROMPTS)), dec.last]
    close(Readout(gemma.arch).logits(dec.resid[:, -1], dec.scale), logits)
    close(gemma.arch.norm_weight(), 1 + gemma.model.model.norm.weight)


def test_queries_are_after_q_norm_and_rebuild_the_windowed_attention_row(gemma, dec, hf):
    """The recorded queries, rotated, against keys made by hand (k_norm, each layer's own RoPE
    base), scaled by query_pre_attn_scalar**-0.5 and masked to the window: the model's row."""
    rows = torch.arange(len(PROMPTS))
    for l in range(gemma.arch.n_layers):
        k, q = keys_and_queries(gemma, hf.hidden_states[l], l)
        close(dec.queries[:, l], q[rows, :, dec.last])
        T = k.shape[2]
        k_rot = rope(k, torch.arange(T), base_of(gemma, l))
        q_rot = rope(dec.queries[:, l, :, None], dec.last[:, None], base_of(gemma, l))[:, :, 0]
        close(attention_row(gemma, q_rot, k_rot, dec.last, l), dec.pattern[:, l])


def test_the_window_matters_on_the_test_prompts(gemma, dec):
    """Sliding layers (0, 2) give the last position nothing outside its 4-token window; the full layer (1) does."""
    T = dec.input_ids.shape[1]
    outside = torch.arange(T)[None] <= dec.last[:, None] - 4  # [B, T]
    for l in (0, 2):
        assert dec.pattern[:, l].permute(0, 2, 1)[outside].abs().max() == 0
    assert dec.pattern[:, 1].permute(0, 2, 1)[outside].min() > 0


def test_the_query_in_key_space_dots_with_the_normed_input_as_the_query_with_the_key(gemma, dec, hf):
    """q . k_norm(k_p) = ((q @ W_K) . input_layernorm(x_p) + (q (1 + w)) . b_K) / rms(k_p) at
    every position p: W_K carries k_norm's (1 + w), and each key's own 1/rms stays outside."""
    arch, eps = gemma.arch, gemma.model.config.rms_norm_eps
    rows = torch.arange(len(PROMPTS))
    for l in range(arch.n_layers):
        block = gemma.model.model.layers[l]
        x = hf.hidden_states[l]
        normed = x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * (1 + block.input_layernorm.weight)
        k, _ = keys_and_queries(gemma, x, l)  # [B, H_kv, T, dh], after k_norm
        raw = block.self_attn.k_proj(normed).view(*x.shape[:2], arch.n_kv_heads, arch.d_head)
        rms = (raw.pow(2).mean(-1) + eps).sqrt().transpose(1, 2)  # [B, H_kv, T]
        b_K = block.self_attn.k_proj.bias.view(arch.n_kv_heads, arch.d_head) * (1 + block.self_attn.k_norm.weight)
        for h in range(arch.n_heads):
            g = arch.kv_head(h)
            want = torch.einsum("bd,btd->bt", dec.queries[:, l, h], k[:, g])
            from_input = torch.einsum("bd,btd->bt", dec.query_in_key_space(l, h), normed)
            got = (from_input + (dec.queries[:, l, h] @ b_K[g])[:, None]) / rms[:, g]
            close(got[rows], want[rows])


# --- a prompt longer than the window -----------------------------------------------------
def test_a_prompt_longer_than_the_window_decomposes_exactly(gemma):
    assert len(gemma.tokenizer(LONG)["input_ids"]) > 5 * gemma.model.config.sliding_window
    check_decomposition(gemma, [LONG, PROMPTS[0], LONG[:40]])


# --- interventions ----------------------------------------------------------------------------
@pytest.mark.parametrize("layer", [1, 2], ids=["full", "sliding"])
def test_position_free_label_keys_are_k_normed_keys_rotated_to_the_target(gemma, hf, layer):
    """The edited row, by hand: label keys (k_norm applied) rotated to the target position
    with the layer's own base, the other keys at their own positions; in the sliding layer
    the labels outside the window stay masked."""
    prompts, head = EXAMPLES, 3
    labels = labels_of(gemma, prompts)
    target = torch.tensor([2, 9, 5])
    with position_free_labels(gemma, [(layer, head)], labels, target=target):
        edited = decompose(gemma, prompts, record=["pattern", "queries"])
    enc = gemma.encode(prompts)
    with torch.no_grad():
        x = gemma.model(**enc, output_hidden_states=True).hidden_states[layer]
    k, _ = keys_and_queries(gemma, x, layer)
    T, base = k.shape[2], base_of(gemma, layer)
    is_label = labels.class_masks(T).any(1)  # [B, T]
    at = torch.where(is_label, target[:, None], torch.arange(T))  # each key's position: the target for labels
    k_rot = rope(k, at, base)
    q_rot = rope(edited.queries[:, layer, :, None], edited.last[:, None], base)[:, :, 0]
    want = attention_row(gemma, q_rot, k_rot, edited.last, layer)
    close(edited.pattern[:, layer, head], want[:, head])
    plain = decompose(gemma, prompts, record=["pattern"])
    others = [h for h in range(gemma.arch.n_heads) if h != head]
    close(edited.pattern[:, layer, others], plain.pattern[:, layer, others])
    assert not torch.allclose(edited.pattern[:, layer, head], plain.pattern[:, layer, head], atol=1e-4)


def test_balancing_counts_only_the_labels_in_the_window(gpt2_tokenizer):
    """Window 8: the last position of "a : foo b : bar c : foo d :" sees one bar and one foo
    (the first foo is outside). Balanced in the sliding layer: nothing changes; in the full
    layer, which sees two foo and one bar: it does."""
    m = ICLModel(small_model("gemma3", sliding_window=8), gpt2_tokenizer)
    prompt = ["a : foo b : bar c : foo d :"]
    labels = labels_of(m, prompt)
    assert labels.class_masks(11).sum(-1).tolist() == [[2, 1]]  # foo (true) twice, bar once
    plain = last_logits(m, prompt)
    with balanced_labels(m, [(2, h) for h in range(4)], labels):
        close(last_logits(m, prompt), plain)
    with balanced_labels(m, [(1, h) for h in range(4)], labels):
        assert (last_logits(m, prompt) - plain).abs().max() > 1e-4


# --- refusals and the vision-language variant -------------------------------------------------
@pytest.mark.parametrize("setting", [dict(final_logit_softcapping=30.0), dict(attn_logit_softcapping=50.0),
                                     dict(use_bidirectional_attention=True)])
def test_soft_capping_and_bidirectional_attention_are_refused_in_one_line(gpt2_tokenizer, setting):
    (name, value), = setting.items()
    model = Gemma3ForCausalLM(Gemma3TextConfig(vocab_size=100, num_hidden_layers=1, hidden_size=16, intermediate_size=32,
                                               num_attention_heads=2, head_dim=8, **setting))
    with pytest.raises(UsageError, match=rf"^This Gemma 3 model sets {name}={value!r}: the decomposition needs a causal "
                                         r"model with linear logits; use a Gemma 3 checkpoint without it\.$"):
        ICLModel(model, gpt2_tokenizer)


def test_the_vision_language_model_decomposes_its_text_exactly(gpt2_tokenizer):
    """model_type "gemma3": the text model under model.language_model, sizes in text_config;
    the same text weights give the text-only model's numbers."""
    text = small_model("gemma3")
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    config = Gemma3Config(text_config=text.config.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
                          image_token_index=50250, boi_token_index=50251, eoi_token_index=50252)
    both = _randomise(Gemma3ForConditionalGeneration(config), seed=1)
    both.model.language_model.load_state_dict(text.model.state_dict())
    m, alone = ICLModel(both, gpt2_tokenizer), ICLModel(text, gpt2_tokenizer)
    assert (m.arch.family, m.arch.n_layers, m.arch.d_head) == ("gemma3", 3, 16)
    check_decomposition(m, PROMPTS)
    ours, theirs = decompose(m, PROMPTS, record=["pattern"]), decompose(alone, PROMPTS, record=["pattern"])
    for name in ("resid", "attn", "mlp", "z", "pattern", "attn_scale", "logits"):
        close(getattr(ours, name), getattr(theirs, name))
    labels = labels_of(m, EXAMPLES)
    with position_free_labels(m, [(1, 0), (2, 3)], labels, target=torch.tensor([2, 9, 5])):
        edited = last_logits(m, EXAMPLES)
    with position_free_labels(alone, [(1, 0), (2, 3)], labels, target=torch.tensor([2, 9, 5])):
        close(edited, last_logits(alone, EXAMPLES))
