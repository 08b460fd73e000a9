"""Appendix E's study: position-level increases of every position and where the largest lies,
and neuron-level increases of the top FFN layers, against naive full-vocabulary increases."""
from __future__ import annotations

import torch

from icl_helpers.cache import stored
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.data.positions import LabelPositions
from icl_helpers.studies import order, subvalues
from icl_helpers.studies.subvalues import DEMONSTRATION, FALSE_LABEL, LAST, OTHER, TRUE_LABEL
from icl_helpers.verdicts import claims, evidence
from icl_helpers.verdicts.claims.appendices import judge_app_e
from tests.conftest import MIXED_TEXTS as TEXTS
from tests.conftest import STUDY_HEADS as HEADS
from tests.conftest import close, exact, logprob_scale
from tests.test_attribution import naive_increase


def test_position_increases_are_position_increase_in_batches_of_two(small, ps, tmp_path, monkeypatch):
    """Every position's increase, batched in twos, against the naive increase of one batch
    head by head; NaN past each prompt's last position; the cached result (batched otherwise)
    is the same, and reads back unchanged."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    got = subvalues.position_increases(small, ps, HEADS, batch_size=2, cache=False)
    dec = decompose(small, TEXTS, record=["pattern", "values"])
    scale = logprob_scale(dec)
    assert got.shape == (3, 2, dec.input_ids.shape[1])
    for s, (l, h) in enumerate(HEADS):
        every = naive_increase(Readout(small.arch), dec.resid[:, l], dec.position_terms(l, h), dec.predictions, dec.scale)
        for i, last in enumerate(ps.positions.last.tolist()):
            close(got[i, s, : last + 1], every[i, : last + 1], scale=scale)
            assert got[i, s, last + 1 :].isnan().all()
    cached = subvalues.position_increases(small, ps, HEADS)  # one batch of three: another summation order
    close(cached, got, scale=scale, equal_nan=True)
    exact(subvalues.position_increases(small, ps, HEADS), cached)  # a cache read


def hand_built() -> LabelPositions:
    """Two prompts of 9 and 7 tokens: "a b : F c : T x :" and "a : F c : T :" (F a false label, T a true one)."""
    return LabelPositions(labels=torch.tensor([[3, 6], [2, 5]]), is_true=torch.tensor([[False, True], [False, True]]),
                          demos=torch.tensor([[[0, 2], [4, 5]], [[0, 1], [3, 4]]]), last=torch.tensor([8, 6]))


def test_position_kinds_of_a_hand_built_prompt():
    kinds = subvalues.position_kinds(hand_built(), 9)
    D, F, T, O, L = DEMONSTRATION, FALSE_LABEL, TRUE_LABEL, OTHER, LAST
    assert kinds.tolist() == [[D, D, O, F, D, O, T, O, L], [D, O, F, D, O, T, L, O, O]]


def test_the_top_position_is_the_largest_increase_before_the_last_position():
    increase = torch.full((2, 3, 9), -1.0)
    increase[1, :, 7:] = torch.nan  # past the second prompt's last position
    increase[0, 0, 6], increase[0, 1, 3], increase[0, 2, 7] = 2.0, 2.0, 2.0  # true label, false label, other
    increase[1, 0, 6], increase[1, 1, 0] = 2.0, 0.5  # last position; a demonstration
    increase[1, 2, 5] = 0.1  # the true label, barely above the rest
    kinds = subvalues.top_position_kinds(increase, hand_built())
    assert kinds.tolist() == [[TRUE_LABEL, FALSE_LABEL, OTHER], [LAST, DEMONSTRATION, TRUE_LABEL]]
    shares = subvalues.kind_shares(kinds)
    # shares of two prompts are 0, 1/2 or 1, exact in binary floating point
    assert shares.shape == (3, len(subvalues.POSITION_KINDS)) and shares[2, TRUE_LABEL] == 0.5 and shares.sum(1).eq(1).all()
    # one float64 division of the same two integers as Python's: the same correctly rounded quotient
    exact(subvalues.true_label_chance(hand_built()), torch.tensor([1 / 9, 1 / 7], dtype=torch.float64))


def test_neuron_increases_and_their_ranking_are_neuron_increase(small, ps, tmp_path, monkeypatch):
    """Neuron-level increases of two layers, the prompts decomposed in twos and scored together,
    against the naive increases of one batch; the top neurons rank the mean and show their tokens."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    layers = [2, 0]
    got = subvalues.neuron_increases(small, ps, layers, batch_size=2, cache=False)
    dec = decompose(small, TEXTS, record=["neurons"])
    r, W_out = Readout(small.arch), small.arch.W_out
    neurons = [dec.neurons[:, l, :, None] * W_out(l) * dec.ffn_scale[:, l, None, None] for l in layers]  # [B, d_ffn, d] each
    want = torch.stack([naive_increase(r, dec.mid[:, l], n, dec.predictions, dec.scale) for l, n in zip(layers, neurons)], 1)
    scale = logprob_scale(dec)
    close(got, want, scale=scale)
    table = subvalues.top_neurons(small, layers, got, k=3, tokens=4)
    assert table["FFN layer"].tolist() == [2, 2, 2, 0, 0, 0]
    for i, layer in enumerate(layers):
        best = got.mean(0)[i].topk(3)
        part = table[table["FFN layer"] == layer]
        assert part["neuron"].tolist() == best.indices.tolist()
        assert part["mean increase"].tolist() == best.values.tolist()  # the same means, as top_neurons takes them
    assert all(len(t) == 4 for t in table["top tokens"])
    close(subvalues.neuron_increases(small, ps, layers), got, scale=scale)  # decomposed in one batch, not in twos
    top = subvalues.top_ffn_layers(small, ps, 2)
    loc = stored("locate", small, ps, lambda: {})  # filled by top_ffn_layers
    assert top == loc["ffn"].mean(0).topk(2).indices.tolist()


def test_the_report_judges_the_order_study_and_describes_the_top_positions(small, tmp_path, monkeypatch):
    """app_e's finding is the judge on the order study of the in-context heads, with where the top
    5 heads' largest position-level increase lies as its description."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 2, 0, None)
    ps, heads = s.prompts(evidence.FIRST), s.heads(evidence.FIRST)
    f = claims.CLAIMS["app_e"].find(s)
    kinds = subvalues.top_position_kinds(subvalues.position_increases(small, ps, heads[:5]), ps.positions)
    shares = subvalues.kind_shares(kinds)
    l, h = heads[0]
    first = f"{l}-{h}: " + ", ".join(f"{name} {float(x):.1%}" for name, x in zip(subvalues.POSITION_KINDS, shares[0]) if x > 0)
    assert f.n == 12 and f"Where the top 5 heads' largest position-level increase lies: {first}" in f.why
    assert f == judge_app_e(order.order_increases(small, ps, heads), heads, f.why.split(". ")[-1], s.clusters([evidence.FIRST]))


def test_the_first_prompts_of_a_set_are_its_prefix(ps):
    first = ps.first(2)
    assert first.texts == ps.texts[:2] and first.directions == ps.directions[:2] and len(ps.first(10**6)) == len(ps)
    assert torch.equal(first.positions.labels, ps.positions.labels[:2])
    assert torch.equal(first.positions.last, ps.positions.last[:2])
