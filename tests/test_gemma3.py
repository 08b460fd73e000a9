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
from tests.conftest import PROMPTS, _randomise, close, small_model
from tests.hand import assert_attention_rows, assert_exact, assert_position_free_row, assert_query_in_key_space
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
            (dec.neurons[:, l] @ block.mlp.down_proj.weight.T, dec.ffn_scale[:, l], block.post_feedforward_layernorm, dec.ffn[:, l]),
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
    assert_attention_rows(gemma, dec, hf.hidden_states)


def test_the_window_matters_on_the_test_prompts(gemma, dec):
    """Sliding layers (0, 2) give the last position nothing outside its 4-token window; the full layer (1) does."""
    T = dec.input_ids.shape[1]
    outside = torch.arange(T, device=dec.last.device)[None] <= dec.last[:, None] - 4  # [B, T]
    for l in (0, 2):
        assert dec.pattern[:, l].permute(0, 2, 1)[outside].abs().max() == 0
    assert dec.pattern[:, 1].permute(0, 2, 1)[outside].min() > 0


def test_the_query_in_key_space_dots_with_the_normed_input_as_the_query_with_the_key(gemma, dec, hf):
    """q . k_norm(k_p) = ((q @ W_K) . input_layernorm(x_p) + (q (1 + w)) . b_K) / rms(k_p) at
    every position p: W_K carries k_norm's (1 + w), and each key's own 1/rms stays outside."""
    assert_query_in_key_space(gemma, dec, hf.hidden_states)


# --- a prompt longer than the window -----------------------------------------------------
def test_a_prompt_longer_than_the_window_decomposes_exactly(gemma):
    assert len(gemma.tokenizer(LONG)["input_ids"]) > 5 * gemma.model.config.sliding_window
    assert_exact(gemma, [LONG, PROMPTS[0], LONG[:40]])


# --- interventions ----------------------------------------------------------------------------
@pytest.mark.parametrize("layer", [1, 2], ids=["full", "sliding"])
def test_position_free_label_keys_are_k_normed_keys_rotated_to_the_target(gemma, layer):
    """The edited row, by hand: label keys (k_norm applied) rotated to the target position
    with the layer's own base, the other keys at their own positions; in the sliding layer
    the labels outside the window stay masked."""
    assert_position_free_row(gemma, layer)


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
    assert_exact(m, PROMPTS)
    ours, theirs = decompose(m, PROMPTS, record=["pattern"]), decompose(alone, PROMPTS, record=["pattern"])
    for name in ("resid", "attn", "ffn", "z", "pattern", "attn_scale", "logits"):
        close(getattr(ours, name), getattr(theirs, name))
    labels = labels_of(m, EXAMPLES)
    with position_free_labels(m, [(1, 0), (2, 3)], labels, target=torch.tensor([2, 9, 5])):
        edited = last_logits(m, EXAMPLES)
    with position_free_labels(alone, [(1, 0), (2, 3)], labels, target=torch.tensor([2, 9, 5])):
        close(edited, last_logits(alone, EXAMPLES))
