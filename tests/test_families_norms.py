"""Qwen 3, OLMo 2, Gemma 1 and Gemma 2 (issue 36): what differs from Llama, each checked
against the model's own computation written out by hand (`tests.hand`): query and key norms
(over each head in Qwen 3, over all heads in OLMo 2), the norms that end each residual branch
(OLMo 2, Gemma 2), (1 + w) gains and the scaled embedding (Gemma), sliding windows,
query_pre_attn_scalar and both soft caps (Gemma 2), in the decomposition, in `locate` and in
the interventions. The generic tests of test_decompose, test_attribution and test_interventions
run on these families too: this module's `small` replaces conftest's for them."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import ICLModel, UsageError
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.locate import locate
from tests.conftest import NORMED, PROMPTS, close, logprob_scale, small_model
from tests.generic import *  # noqa: F403 (the generic tests, on this module's `small`)
from tests.hand import (
    assert_attention_rows,
    assert_exact,
    assert_position_free_row,
    assert_query_in_key_space,
    attention_inputs,
    base_of,
    log_prob,
    rope,
    scaled_scores,
)
from tests.test_gemma3 import LONG

FAMILIES = ["qwen3", "olmo2", "gemma", "gemma2"]  # small_model kinds, one a family


@pytest.fixture(scope="module", params=FAMILIES)
def small(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


def test_each_family_has_its_own_adapter(small):
    assert small.arch.family == small.model.config.model_type
    assert (small.arch.n_layers, small.arch.n_heads, small.arch.d_model) == (3, 4, 64)


# --- the decomposition ----------------------------------------------------------------------
def test_a_prompt_longer_than_the_window_decomposes_exactly(small):
    """Gemma 2's sliding layers have a 4-token window; the others attend to every earlier token."""
    assert_exact(small, [LONG, PROMPTS[0], LONG[:40]])


def test_x0_is_the_embedding_times_the_root_of_the_width_in_gemma(small, full):
    scale = small.arch.d_model**0.5 if small.arch.family.startswith("gemma") else 1.0
    ids = full.input_ids[torch.arange(len(PROMPTS)), full.last]
    close(full.resid[:, 0], small.model.model.embed_tokens.weight[ids] * scale)


def test_queries_are_after_the_query_norm_and_rebuild_the_attention_row(small, full, hf):
    """The recorded queries against queries made by hand; rotated, against keys made by hand,
    scaled, soft-capped (Gemma 2), masked (to Gemma 2's windows): the model's row."""
    assert_attention_rows(small, full, hf.hidden_states)


def test_the_query_in_key_space_dots_with_the_key_input_as_the_query_with_the_key(small, full, hf):
    """W_K carries the key norm's gain (Qwen 3 per head, OLMo 2 a slice of the full width's),
    each key's 1/rms stays outside (`assert_query_in_key_space`)."""
    assert_query_in_key_space(small, full, hf.hidden_states)


def test_located_increases_are_differences_of_log_probabilities_by_hand(small):
    """I(head | x_l), I(ATTN_l | x_l), I(FFN_l | m_l) for the model's predictions, against log
    p of the frozen final norm, the unembedding and (Gemma 2) the final soft cap, by hand."""
    result, dec = locate(small, PROMPTS, progress=False), decompose(small, PROMPTS)
    w, sigma = result.targets, dec.scale
    assert w.tolist() == dec.logits.argmax(-1).tolist()
    at = logprob_scale(dec)
    heads = dec.heads()
    for l in range(small.arch.n_layers):
        x, mid = dec.resid[:, l], dec.mid[:, l]
        before = log_prob(small, x, sigma, w)
        close(result.head[:, l], log_prob(small, x[:, None] + heads[:, l], sigma, w) - before[:, None], scale=at)
        close(result.attn[:, l], log_prob(small, x + dec.attn[:, l], sigma, w) - before, scale=at)
        close(result.ffn[:, l], log_prob(small, mid + dec.ffn[:, l], sigma, w) - log_prob(small, mid, sigma, w), scale=at)


def test_gemma2s_soft_caps_bind_and_the_direct_logits_no_longer_sum(small, full, hf):
    """The small Gemma 2's caps (1 on scores, 2 on logits) lie within its scores' and logits'
    range, so they change its attention and logits. The model's logits are the capped
    readout; the direct logits of the parts still sum to the readout's, their capped logits
    do not sum to the model's."""
    if small.arch.final_softcap is None:
        pytest.skip("Gemma 2 only")
    cfg, readout, l = small.model.config, Readout(small.arch), 1
    direct = readout.direct(full.resid[:, -1], full.scale)
    assert (direct - full.logits).abs().max() > 0.1 and direct.abs().max() > cfg.final_logit_softcapping
    by_hand = attention_inputs(small, hf.hidden_states[l], l)
    T, base = by_hand.keys.shape[2], base_of(small, l)
    q_rot = rope(full.queries[:, l, :, None], full.last[:, None], base)[:, :, 0]
    scores = scaled_scores(small, q_rot, rope(by_hand.keys, torch.arange(T), base))  # [B, H, T]
    real = torch.arange(T, device=full.last.device)[None] <= full.last[:, None]  # [B, T]
    assert scores.transpose(1, 2)[real].abs().max() > 2 * cfg.attn_logit_softcapping
    parts = torch.cat([full.resid[:, :1], full.attn, full.ffn], 1)  # x_0, every ATTN_l and FFN_l: they sum to x_L
    terms = (parts.abs() @ readout.G.abs().T).sum(1) / full.scale[:, None]
    close(readout.direct(parts, full.scale).sum(1), direct, scale=float(terms.max()))
    assert (readout.logits(parts, full.scale).sum(1) - full.logits).abs().max() > 0.1


# --- interventions ----------------------------------------------------------------------------
@pytest.mark.parametrize("layer", [1, 2])
def test_position_free_label_keys_are_the_normed_keys_rotated_to_the_target(small, layer):
    """By hand (`assert_position_free_row`): label keys after any key norm, rotated, scaled,
    soft-capped and masked as the model does (layer 2 is a sliding one in Gemma 2)."""
    assert_position_free_row(small, layer)


# --- refusals -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, title", [("gemma", "Gemma"), ("gemma2", "Gemma 2")])
def test_bidirectional_gemma_is_refused_in_one_line(gpt2_tokenizer, kind, title):
    model_class, config_class, _ = NORMED[kind]
    sizes = dict(vocab_size=100, num_hidden_layers=1, hidden_size=16, intermediate_size=32, num_attention_heads=2, head_dim=8)
    model = model_class(config_class(**sizes, use_bidirectional_attention=True))
    with pytest.raises(UsageError, match=rf"^This {title} model sets use_bidirectional_attention=True: the decomposition "
                                         rf"needs a causal model; use a {title} checkpoint without it\.$"):
        ICLModel(model, gpt2_tokenizer)
