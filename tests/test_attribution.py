"""Frozen-norm projection and log-probability increase, against a naive full-vocabulary version."""
from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.core import sizes
from icl_helpers.core.attribution import (
    Readout,
    heads_position_increase,
    layer_head_increase,
    neuron_increase,
    position_increase,
    readout_of,
)
from icl_helpers.core.decompose import decompose
from icl_helpers.core.locate import locate
from tests.conftest import PROMPTS, close, logit_constant, logprob_scale

KEEP_ALL = 2**62  # a fold budget that keeps any fold


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


@pytest.mark.parametrize("keep_floats", [0, KEEP_ALL])  # the fold made each chunk; kept from the first call on
@pytest.mark.parametrize("n_prompts", [3, 24])  # 24 prompts take the folded path (B(H-1) > d)
def test_layer_head_increase_equals_naive(small, dec, n_prompts, keep_floats):
    r = Readout(small.arch, keep_floats=keep_floats)
    layer_head_increase(r, dec.z, dec.resid, dec.predictions, dec.scale, dec.attn_scale)  # keeps the fold, if it may
    assert bool(r.kept) == (keep_floats == KEEP_ALL)
    rows = slice(0, n_prompts)
    w, scale = dec.predictions[rows], dec.scale[rows]
    head, attn, ffn = layer_head_increase(r, dec.z[rows], dec.resid[rows], w, scale, dec.attn_scale[rows])
    heads = dec.heads()[rows]
    at = logprob_scale(dec)
    for l in range(small.arch.n_layers):
        close(head[:, l], naive_increase(r, dec.resid[rows, l], heads[:, l], w, scale), scale=at)
        close(attn[:, l], naive_increase(r, dec.resid[rows, l], dec.attn[rows, l, None], w, scale)[:, 0], scale=at)
        close(ffn[:, l], naive_increase(r, dec.mid[rows, l], dec.ffn[rows, l, None], w, scale)[:, 0], scale=at)


def test_chunking_changes_nothing(small, dec):
    w = dec.predictions
    whole = layer_head_increase(Readout(small.arch), dec.z, dec.resid, w, dec.scale, dec.attn_scale)
    tiny = Readout(small.arch, vocab_chunk=999, block_floats=4_000, keep_floats=0)  # uneven chunks, 1-prompt blocks
    assert [rows.stop - rows.start for rows in tiny.blocks(3, small.arch.n_layers + small.arch.n_heads + 2)] == [1, 1, 1]
    for got, want in zip(layer_head_increase(tiny, dec.z, dec.resid, w, dec.scale, dec.attn_scale), whole):
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


@pytest.mark.parametrize("kept", [False, True])  # the listed heads' fold made, or taken from every head's kept fold
def test_heads_position_increase_equals_naive_at_the_chosen_positions(small, dec, kept):
    """Several heads (of different layers and, with GQA, of a shared key-value head) at three
    positions a prompt, one of them repeated, in one pass."""
    r, w = Readout(small.arch, keep_floats=KEEP_ALL if kept else 0), dec.predictions
    layer_head_increase(r, dec.z, dec.resid, w, dec.scale, dec.attn_scale)  # 24 prompts: folded
    assert bool(r.kept) == kept
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
    neurons = dec.neurons[:, l, :, None] * small.arch.W_out(l) * dec.ffn_scale[:, l, None, None]  # [B, d_ffn, d]
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
    want = layer_head_increase(Readout(small.arch), dec.z, dec.resid, targets, dec.scale, dec.attn_scale)
    for got, expected in zip((result.head, result.attn, result.ffn), want):
        close(got, expected, scale=logprob_scale(dec))


def test_locate_in_groups_equals_one_group(small, dec, monkeypatch):
    prompts = PROMPTS * 4
    whole = locate(small, prompts, batch_size=4)
    readout = readout_of(small)  # the one locate made, kept on the model: its plan cut the groups
    monkeypatch.setattr(readout, "sizes", replace(readout.sizes, group_floats=1))  # one batch of 4 prompts a group
    grouped = locate(small, prompts, batch_size=4)
    for got, want in zip((grouped.head, grouped.attn, grouped.ffn), (whole.head, whole.attn, whole.ffn)):
        close(got, want, scale=logprob_scale(dec))  # dec: the same prompts, 8 times over
    assert torch.equal(grouped.targets, whole.targets)


def test_a_model_keeps_its_readout_until_its_weights_change(small, dec, monkeypatch):
    keep_all = sizes.Sizes(1024, sizes.CPU_BLOCK, sizes.CPU_GROUP, KEEP_ALL)  # whatever memory this machine has free
    monkeypatch.setattr("icl_helpers.core.attribution.sizes_for", lambda device: keep_all)
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer)
    prompts = PROMPTS * 8
    first = locate(m, prompts)
    r = readout_of(m)
    assert r is readout_of(m) and r.kept  # 24 prompts: folded, and the fold kept
    close(locate(m, prompts).head, first.head, scale=logprob_scale(dec))  # from the kept fold
    with torch.no_grad():  # an attention output weight, edited in place
        next(p for n, p in m.model.named_parameters() if n.endswith(("o_proj.weight", "c_proj.weight"))).mul_(3)
    assert readout_of(m) is not r
    fresh = locate(m, prompts)
    dec_after = decompose(m, prompts)
    want = layer_head_increase(Readout(m.arch, keep_floats=0), dec_after.z, dec_after.resid, dec_after.predictions,
                               dec_after.scale, dec_after.attn_scale)[0]
    close(fresh.head, want, scale=logprob_scale(dec_after))
    assert (fresh.head - first.head).abs().max() > 1e-3  # the edit moved the scores


def test_scoring_asks_one_plan_once(small, monkeypatch):
    """A readout decides its chunks, tiles, groups and kept fold once, when it is made; locate asks
    that plan, never the device again, however many calls it scores."""
    asked = []
    available, free_on_gpu = sizes.available_memory, torch.cuda.mem_get_info
    monkeypatch.setattr(sizes, "available_memory", lambda: asked.append(1) or available())  # once a sizes_for("cpu")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: asked.append(1) or free_on_gpu(device))  # "cuda"
    m = ICLModel(copy.deepcopy(small.model), small.tokenizer)
    locate(m, PROMPTS * 4, batch_size=3)
    locate(m, PROMPTS, batch_size=3)
    assert len(asked) == 1  # when locate made the readout


def test_sizes_suit_the_device(monkeypatch):
    cpu = sizes.sizes_for("cpu")
    assert (cpu.vocab_chunk, cpu.block_floats, cpu.group_floats) == (1024, 2**22, 2**27)
    assert cpu.keep_floats == sizes.available_memory() // 64  # a sixteenth of the free memory, in floats
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (80 * 2**30, 94 * 2**30))  # 80 GiB free
    gpu = sizes.sizes_for("cuda:0")
    assert (gpu.vocab_chunk, gpu.block_floats, gpu.group_floats, gpu.keep_floats) == (8192, 2**28, 20 * 2**27, 20 * 2**30 // 3)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (2**27, 8 * 2**30))  # 128 MiB free: the CPU's floors
    small_gpu = sizes.sizes_for("cuda")
    assert (small_gpu.block_floats, small_gpu.group_floats, small_gpu.keep_floats) == (2**22, 2**27, 2**25 // 3)
