"""Frozen-norm projection and log-probability increase, against a naive full-vocabulary version."""
from __future__ import annotations

import pytest
import torch

from icl_helpers.core.attribution import (
    Readout,
    heads_position_increase,
    layer_head_increase,
    neuron_increase,
    position_increase,
)
from icl_helpers.core.decompose import decompose
from icl_helpers.core.locate import locate
from tests.conftest import PROMPTS, close, logit_constant, logprob_scale


def naive_increase(readout: Readout, base, vectors, target, scale) -> torch.Tensor:
    """I(v | x) from explicit full-vocabulary log-softmaxes. base [B, d], vectors [B, n, d] -> [B, n]."""
    rows = torch.arange(len(target))
    before = readout.logits(base, scale).log_softmax(-1)[rows, target]  # [B]
    after = readout.logits(base[:, None] + vectors, scale).log_softmax(-1)  # [B, n, V]
    return after[rows, :, target] - before[:, None]


@pytest.fixture(scope="module")
def dec(small):
    return decompose(small, PROMPTS * 8, record=["pattern", "values", "neurons"])  # 24 prompts


def test_projection_of_final_residual_is_the_models_logits(small, dec):
    logits = Readout(small.arch).logits(dec.resid[:, -1], dec.scale)
    close(logits + logit_constant(small.arch), dec.logits)  # bs leaves out W_U beta and b_U


def test_projection_is_linear(small, dec):
    """bs, the direct logits (before any final soft cap)."""
    r = Readout(small.arch)
    x, v = dec.resid[:, 1], dec.attn[:, 1]
    close(r.direct(x + v, dec.scale), r.direct(x, dec.scale) + r.direct(v, dec.scale))


@pytest.mark.parametrize("n_prompts", [3, 24])  # 24 prompts take the folded path (B(H-1) > d)
def test_layer_head_increase_equals_naive(small, dec, n_prompts):
    r = Readout(small.arch)
    rows = slice(0, n_prompts)
    w, scale = dec.predictions[rows], dec.scale[rows]
    head, attn, ffn = layer_head_increase(r, small.arch, dec.z[rows], dec.resid[rows], w, scale, dec.attn_scale[rows])
    heads = dec.heads()[rows]
    at = logprob_scale(dec)
    for l in range(small.arch.n_layers):
        close(head[:, l], naive_increase(r, dec.resid[rows, l], heads[:, l], w, scale), scale=at)
        close(attn[:, l], naive_increase(r, dec.resid[rows, l], dec.attn[rows, l, None], w, scale)[:, 0], scale=at)
        close(ffn[:, l], naive_increase(r, dec.mid[rows, l], dec.ffn[rows, l, None], w, scale)[:, 0], scale=at)


def test_chunking_changes_nothing(small, dec):
    w = dec.predictions
    whole = layer_head_increase(Readout(small.arch), small.arch, dec.z, dec.resid, w, dec.scale, dec.attn_scale)
    tiny = Readout(small.arch, vocab_chunk=999, block_floats=4_000)  # uneven chunks, 1-prompt blocks
    assert [rows.stop - rows.start for rows in tiny.blocks(3, small.arch.n_layers + small.arch.n_heads + 2)] == [1, 1, 1]
    for got, want in zip(layer_head_increase(tiny, small.arch, dec.z, dec.resid, w, dec.scale, dec.attn_scale), whole):
        close(got, want, scale=logprob_scale(dec))


def test_position_increase_equals_naive(small, dec):
    """Toward the predictions, and toward the vocabulary's last token, which lies in the last,
    partial vocabulary chunk (a small vector's increase barely feels that chunk otherwise)."""
    r = Readout(small.arch)
    last_token = torch.full_like(dec.predictions, r.G.shape[0] - 1)
    for w in (dec.predictions, last_token):
        for l, h in [(0, 0), (small.arch.n_layers - 1, small.arch.n_heads - 1)]:
            want = naive_increase(r, dec.resid[:, l], dec.position_terms(l, h), w, dec.scale)
            close(position_increase(r, dec, l, h, w), want, scale=logprob_scale(dec))


def test_heads_position_increase_equals_naive_at_the_chosen_positions(small, dec):
    """Several heads (of different layers and, with GQA, of a shared key-value head) at three
    positions a prompt, one of them repeated, in one pass."""
    r, w = Readout(small.arch), dec.predictions
    L, H = small.arch.n_layers, small.arch.n_heads
    heads = [(L - 1, H - 1), (0, 0), (1, 1), (0, 1)]
    T = dec.input_ids.shape[1]
    positions = torch.stack([torch.arange(len(w)) % T, torch.zeros(len(w), dtype=torch.long), torch.full((len(w),), 2)], 1)
    got = heads_position_increase(r, dec, heads, positions, w)
    assert got.shape == (len(w), len(heads), 3)
    rows = torch.arange(len(w))[:, None]
    for s, (l, h) in enumerate(heads):
        every = naive_increase(r, dec.resid[:, l], dec.position_terms(l, h), w, dec.scale)  # [B, T]
        close(got[:, s], every[rows, positions], scale=logprob_scale(dec))


def test_neuron_increase_equals_naive(small, dec):
    r = Readout(small.arch)
    w, l = dec.predictions, small.arch.n_layers - 1
    neurons = dec.neurons[:, l, :, None] * small.arch.W_out(l) * dec.ffn_scale[:, l, None, None]  # [B, K, d]
    close(neuron_increase(r, dec, l, w), naive_increase(r, dec.mid[:, l], neurons, w, dec.scale), scale=logprob_scale(dec))


def test_locate_scores_layers_and_is_independent_of_batch_size(small, dec):
    prompts = PROMPTS * 8
    one_batch = locate(small, prompts, batch_size=len(prompts))
    per_prompt = locate(small, prompts, batch_size=1)
    at = logprob_scale(dec)
    close(one_batch.head, per_prompt.head, scale=at)
    r = Readout(small.arch)
    w = dec.predictions
    heads = dec.heads()
    for l in range(small.arch.n_layers):
        close(one_batch.head[:, l], naive_increase(r, dec.resid[:, l], heads[:, l], w, dec.scale), scale=at)
        close(one_batch.attn[:, l], naive_increase(r, dec.resid[:, l], dec.attn[:, l, None], w, dec.scale)[:, 0], scale=at)
        close(one_batch.ffn[:, l], naive_increase(r, dec.mid[:, l], dec.ffn[:, l, None], w, dec.scale)[:, 0], scale=at)
    top = one_batch.top_heads(3)
    scores = one_batch.head_scores(top).tolist()  # read from the same head_mean: exact
    assert scores == sorted(one_batch.head_mean.flatten().tolist(), reverse=True)[:3]
    assert scores[0] == one_batch.head_mean[top[0]] == one_batch.head_mean.max()


def test_locate_scores_given_targets(small):
    targets = torch.tensor([11] * len(PROMPTS))
    result = locate(small, PROMPTS, targets=targets)
    assert result.targets.tolist() == [11] * len(PROMPTS)
    dec = decompose(small, PROMPTS)  # in prompt order; locate runs them shortest first
    want = layer_head_increase(Readout(small.arch), small.arch, dec.z, dec.resid, targets, dec.scale, dec.attn_scale)
    for got, expected in zip((result.head, result.attn, result.ffn), want):
        close(got, expected, scale=logprob_scale(dec))


def test_locate_in_groups_equals_one_group(small, dec, monkeypatch):
    prompts = PROMPTS * 4
    whole = locate(small, prompts, batch_size=4)
    monkeypatch.setattr("icl_helpers.core.locate.GROUP_FLOATS", 1)  # one batch of 4 prompts a group
    grouped = locate(small, prompts, batch_size=4)
    for got, want in zip((grouped.head, grouped.attn, grouped.ffn), (whole.head, whole.attn, whole.ffn)):
        close(got, want, scale=logprob_scale(dec))  # dec: the same prompts, 8 times over
    assert torch.equal(grouped.targets, whole.targets)
