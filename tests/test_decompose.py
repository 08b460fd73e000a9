"""The decomposition must sum back to what the model computed, to float tolerance."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import UsageError
from icl_helpers.core.decompose import concat, decompose
from tests.conftest import PROMPTS, close, exact

# The module each family's attention projects its keys with, by model_type (written from the HF modeling files)
KEY_PROJECTIONS = {"gpt2": "attn.c_attn", "gptj": "attn.k_proj", "gpt_neox": "attention.query_key_value",
                   "phi3": "self_attn.qkv_proj"}  # every other family: self_attn.k_proj


@pytest.fixture(scope="module")
def full(small):
    return decompose(small, PROMPTS, record=["pattern", "values", "attn_all", "queries", "neurons", "key_input"])


@pytest.fixture(scope="module")
def hf(small):
    """The model's own forward pass on PROMPTS, with hidden states and attention rows."""
    with torch.no_grad():
        return small.model(**small.encode(PROMPTS), output_hidden_states=True, output_attentions=True)


def test_residual_stream_is_embeddings_plus_every_layer(small, full):
    terms = full.resid[:, 0].abs() + full.attn.abs().sum(1) + full.ffn.abs().sum(1)
    close(full.resid[:, 0] + full.attn.sum(1) + full.ffn.sum(1), full.resid[:, -1], scale=float(terms.max()))
    if small.arch.parallel:  # x_{l+1} = (ATTN_l + FFN_l) + x_l: the parallel block's own two additions
        exact(full.attn + full.ffn + full.resid[:, :-1], full.resid[:, 1:])
    else:  # x_{l+1} = (x_l + ATTN_l) + FFN_l
        exact(full.mid + full.ffn, full.resid[:, 1:])


def test_layer_inputs_match_models_hidden_states(small, full, hf):
    rows = torch.arange(len(PROMPTS))
    for l in range(small.arch.n_layers):
        exact(full.resid[:, l], hf.hidden_states[l][rows, full.last])  # the same forward pass of the same batch


def test_heads_plus_bias_equal_attention_output(small, full):
    heads = full.heads()
    for l in range(small.arch.n_layers):
        b_O = small.arch.b_O(l)
        bias = 0 if b_O is None else b_O * full.attn_scale[:, l, None]
        terms = heads[:, l].abs().sum(1) + abs(bias)
        close(heads[:, l].sum(1) + bias, full.attn[:, l], scale=float(terms.max()))


def test_position_terms_sum_to_each_head(small, full):
    heads = full.heads()
    for l in range(small.arch.n_layers):
        for h in range(small.arch.n_heads):
            terms = full.position_terms(l, h)
            close(terms.sum(1), heads[:, l, h], scale=float(terms.abs().sum(1).max()))


def test_neurons_sum_to_ffn_output(small, full):
    for l in range(small.arch.n_layers):
        bias = small.arch.b_out(l)
        bias = 0 if bias is None else bias
        post = full.ffn_scale[:, l, None]  # a post-FFN norm's frozen 1/sigma (Gemma); ones elsewhere
        terms = (full.neurons[:, l].abs() @ small.arch.W_out(l).abs() + abs(bias)) * post
        close((full.neurons[:, l] @ small.arch.W_out(l) + bias) * post, full.ffn[:, l], scale=float(terms.max()))


def test_attention_rows_match_models_attentions(small, full, hf):
    rows = torch.arange(len(PROMPTS))
    for l in range(small.arch.n_layers):
        exact(full.pattern[:, l], hf.attentions[l][rows, :, full.last])  # the same forward pass of the same batch
    # the last position attends to real tokens only
    T = full.input_ids.shape[1]
    after_last = torch.arange(T, device=full.last.device)[None, :] > full.last[:, None]
    assert full.pattern.permute(0, 3, 1, 2)[after_last].abs().max() == 0


def test_attention_sums_are_earlier_attention_outputs(small, full):
    rows = torch.arange(len(PROMPTS))
    for l in range(small.arch.n_layers + 1):
        close(full.attention_sums(l)[rows, full.last], full.attn[:, :l].sum(1))


def test_the_key_input_is_what_the_key_projection_reads(small, full):
    """At every position of every layer, the recorded key input is the first input of the module that
    projects the keys (`KEY_PROJECTIONS`), caught by a hook of this test on the model's own pass."""
    path, seen = KEY_PROJECTIONS.get(small.model.config.model_type, "self_attn.k_proj"), {}
    modules = [small.arch.blocks()[l].get_submodule(path) for l in range(small.arch.n_layers)]
    hooks = [module.register_forward_pre_hook(lambda mod, args, l=l: seen.update({l: args[0]}))
             for l, module in enumerate(modules)]
    try:
        with torch.no_grad():
            small.model(**small.encode(PROMPTS))
    finally:
        for hook in hooks:
            hook.remove()
    for l in range(small.arch.n_layers):
        exact(full.key_input[:, l], seen[l])  # the same forward pass of the same batch


def test_query_in_key_space_rebuilds_the_attention_row(small, full, hf):
    """GPT-2 (no rotation): softmax_p((q W_K^T) . ln_1(x_p) + q . b_K) / sqrt(dh) = alpha(t, p)."""
    if small.arch.family != "gpt2":
        pytest.skip("keys are rotated by position in the other families")
    arch = small.arch
    real = small.encode(PROMPTS)["attention_mask"].bool()
    for l in range(arch.n_layers):
        with torch.no_grad():
            normed = arch.blocks()[l].ln_1(hf.hidden_states[l])  # [B, T, d]
        b_K = arch.attn(l).c_attn.bias[arch.d_model : 2 * arch.d_model].view(arch.n_heads, arch.d_head)
        for h in range(arch.n_heads):
            q = full.queries[:, l, h]
            scores = (normed @ full.query_in_key_space(l, h)[:, :, None]).squeeze(-1) + (q @ b_K[h])[:, None]
            scores = (scores / arch.d_head**0.5).masked_fill(~real, -torch.inf)
            close(scores.softmax(-1), full.pattern[:, l, h])


def test_batched_equals_one_prompt_at_a_time(small, full):
    for i, prompt in enumerate(PROMPTS):
        one = decompose(small, [prompt], record=["pattern", "values", "neurons"])
        n = int(one.last[0]) + 1
        for name in ("resid", "attn", "ffn", "z", "logits", "scale", "attn_scale", "ffn_scale", "neurons"):
            close(getattr(full, name)[i], getattr(one, name)[0])
        close(full.pattern[i, ..., :n], one.pattern[0])
        close(full.values[i, :, :, :n], one.values[0])


def test_final_scale_is_the_norm_the_model_used(small, full):
    norm = small.arch.final_norm()
    with torch.no_grad():
        normed = norm(full.resid[:, -1])
    gamma = small.arch.norm_weight()
    beta = getattr(norm, "bias", None)
    f = full.resid[:, -1]
    centred = f - f.mean(-1, keepdim=True) if small.arch.norm_kind == "layer" else f
    close(gamma * centred / full.scale[:, None] + (0 if beta is None else beta), normed)
    tiny = f * 1e-3  # where the norm's eps is about as large as the variance
    with torch.no_grad():
        normed = norm(tiny)
    centred = tiny - tiny.mean(-1, keepdim=True) if small.arch.norm_kind == "layer" else tiny
    close(gamma * centred / small.arch.sigma(tiny)[:, None] + (0 if beta is None else beta), normed)


def test_at_positions_keeps_the_chosen_positions_of_every_position_field(full):
    index = torch.tensor([[0, 2], [1, 1], [3, 0]])  # [B, P]
    at = full.at_positions(index)
    for b, row in enumerate(index.tolist()):
        assert at.input_ids[b].tolist() == full.input_ids[b, row].tolist()
        assert torch.equal(at.values[b], full.values[b, :, :, row])
        assert torch.equal(at.attn_all[b], full.attn_all[b, :, row])
        assert torch.equal(at.pattern[b], full.pattern[b, ..., row])
    assert at.z is full.z and at.queries is full.queries  # last-position fields untouched
    both = concat([at, at])
    assert torch.equal(both.values, torch.cat([at.values, at.values])) and both.neurons.shape[0] == 2 * len(PROMPTS)


def test_select_takes_prompts_in_the_order_given(full):
    picked = full.select(torch.tensor([2, 0]))
    assert torch.equal(picked.input_ids, full.input_ids[[2, 0]]) and torch.equal(picked.logits, full.logits[[2, 0]])
    assert torch.equal(picked.values, full.values[[2, 0]]) and torch.equal(picked.scale, full.scale[[2, 0]])


def test_an_unknown_quantity_is_refused(small):
    with pytest.raises(UsageError, match="cannot record keys; choose from pattern, values, attn_all, key_input, queries, neurons"):
        decompose(small, PROMPTS, record=["keys"])
