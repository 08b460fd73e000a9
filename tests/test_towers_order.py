"""The two towers' word ranks and Appendix E's order-insensitivity study, against naive
full-vocabulary computations on a small random model."""
from __future__ import annotations

import torch

from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.studies import order, towers
from icl_helpers.studies.runner import prompt_set
from tests.conftest import EPS32, ULPS, close, exact, logprob_scale
from tests.conftest import MIXED_TEXTS as TEXTS
from tests.conftest import STUDY_HEADS as HEADS
from tests.test_attribution import naive_increase


def test_a_prompts_words_are_its_demonstrations_then_its_input(ps):
    assert towers.words_of(ps.prompts[0]) == ["love", "like", "eight", "two", "one"]
    assert towers.words_of(ps.prompts[2]) == ["a rather long demonstration here", "twelve", "six"]


def test_a_word_is_looked_for_in_four_spellings(small):
    ids = towers.spellings(small.tokenizer, "love")
    assert [small.tokenizer.decode([i]) for i in ids] == [" love", "love", " Love", "Love"]


def brute_rank_bounds(logits: torch.Tensor, spelled: list[int], scale: float) -> tuple[int, int]:
    """The rank of the best spelling from full logits [V], as an interval: tokens within float32
    rounding of it (at the scale of the terms summed into a logit) may fall on either side in
    another summation order."""
    best = logits[spelled].max()
    others = torch.ones_like(logits, dtype=torch.bool)
    others[spelled] = False
    slack = ULPS * EPS32 * scale
    return int((logits[others] > best + slack).sum()) + 1, int((logits[others] > best - slack).sum()) + 1


def terms(readout: Readout, v: torch.Tensor) -> float:
    """The largest sum of |terms| of a logit of bs(v): sum_i |v_i G_wi|."""
    return float((v.abs() @ readout.G.abs().T).max())


def test_tower_ranks_are_the_ranks_in_the_full_projection(small, tmp_path, monkeypatch):
    """Every key's and query's rank, counted over vocabulary chunks, batched in twos, lies where the
    full projection puts it; NaN past a prompt's demonstrations; the cached result is the same."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = prompt_set(small, "sentiment_number", "balanced", 3)
    got = towers.tower_ranks(small, ps, HEADS, batch_size=2, cache=False)
    layers = sorted({l for l, _ in HEADS})
    dec = decompose(small, ps.texts, record=["attn_all", "queries"])
    readout, words = Readout(small.arch), towers.candidates(small, ps)
    for n in range(len(ps)):
        spelled = [[int(t) for t in w if t >= 0] for w in words[n]]
        for f, layer in enumerate(layers):
            for k, p in enumerate(ps.positions.labels[n].tolist()):
                key = dec.key_inputs(layer)[n, p][None]
                logits = readout.direct(key, torch.ones(1))[0]
                for j in range(len(spelled) - 1):
                    low, high = brute_rank_bounds(logits, spelled[j], terms(readout, key))
                    assert low <= got["key"][n, f, k, j] <= high
        for s, (l, h) in enumerate(HEADS):
            q = dec.require("queries")[n, l, h]
            W_K = small.arch.W_K(l)[small.arch.kv_head(h)]
            logits = readout.direct(q @ W_K, torch.ones(1)[0])
            for j, spelling in enumerate(spelled):
                low, high = brute_rank_bounds(logits, spelling, float((q.abs() @ W_K.abs() @ readout.G.abs().T).max()))
                assert low <= got["query"][n, s, j] <= high
    assert got["key"].shape == (3, len(layers), 4, 4) and got["query"].shape == (3, len(HEADS), 5)
    stored, read = towers.tower_ranks(small, ps, HEADS), towers.tower_ranks(small, ps, HEADS)  # computed, then a cache read
    for kind in ("key", "query"):
        exact(read[kind], stored[kind])


def test_order_increases_add_each_head_alone_in_a_random_order_and_last(small, ps, tmp_path, monkeypatch):
    """Alone: I(head | x_l); random order: I(head | x_l + the heads before it), the order drawn from
    the seeded generator as documented; last: I(head | x_l + every other head of its layer); batched
    in twos against naive full-vocabulary increases of one batch."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    got = order.order_increases(small, ps, HEADS, seed=3, batch_size=2, cache=False)
    dec = decompose(small, TEXTS)
    parts, readout, H = dec.heads(), Readout(small.arch), small.arch.n_heads
    place = torch.rand(len(TEXTS), len(HEADS), H, generator=torch.Generator().manual_seed(3))
    for s, (l, h) in enumerate(HEADS):
        before = place[:, s] < place[:, s, h : h + 1]  # [N, H]
        bases = [dec.resid[:, l], dec.resid[:, l] + (parts[:, l] * before[..., None]).sum(1),
                 dec.resid[:, l] + parts[:, l].sum(1) - parts[:, l, h]]
        for o, base in enumerate(bases):
            want = naive_increase(readout, base, parts[:, l, h][:, None], dec.predictions, dec.scale)[:, 0]
            close(got[:, s, o], want, scale=logprob_scale(dec))
    assert not torch.equal(got[..., 0], got[..., 1])  # the order matters a little in a random model
    cached = order.order_increases(small, ps, HEADS, seed=3)
    close(cached, got, scale=logprob_scale(dec))  # one batch of three: another summation order
    exact(order.order_increases(small, ps, HEADS, seed=3), cached)  # a cache read


def test_similarity_is_the_cosine_of_the_mean_input_embeddings(small, ps):
    got = towers.similarity(small, ps)
    E = small.model.get_input_embeddings().weight.detach().float()

    def embed(text: str) -> torch.Tensor:
        return E[small.tokenizer(" " + text, add_special_tokens=False)["input_ids"]].mean(0)
    want = torch.cosine_similarity(embed("a rather long demonstration here"), embed("six"), dim=0)
    close(got[2, 0], want, scale=1.0)
    assert got[2, 2:].isnan().all() and not got[0].isnan().any()  # two demonstrations, then padding


def test_double_centring_leaves_no_prompt_or_position_mean():
    x = torch.randn(6, 3, 4, generator=torch.Generator().manual_seed(0)) + torch.arange(4.0) + torch.arange(6.0)[:, None, None]
    c = towers.double_centred(x)
    close(c.mean(-1), torch.zeros(6, 3), scale=float(x.abs().max()))
    close(c.mean(0), torch.zeros(3, 4), scale=float(x.abs().max()))
    close(c, x - x.mean(-1, keepdim=True) - x.mean(0, keepdim=True) + x.mean((0, 2), keepdim=True), scale=float(x.abs().max()))
