"""Dataset-level sweeps against one-batch computations, and the located-heads cache."""
from __future__ import annotations

import pytest
import torch

from icl_helpers import locate as locate_module
from icl_helpers import sweeps
from icl_helpers.attribution import Readout
from icl_helpers.decompose import decompose
from icl_helpers.heads import label_value_ranks
from icl_helpers.locate import locate
from tests.conftest import PROMPTS
from tests.test_decompose import close

TRUE = [[8, 11], [2], [1, 4]]
FALSE = [[2, 5], [], [0, 3, 6]]
HEADS = [(2, 3), (0, 1)]


def test_label_attention_sweep_matches_one_batch(small):
    att = sweeps.label_attention_sweep(small, PROMPTS, TRUE, FALSE, batch_size=2)
    dec = decompose(small, PROMPTS, pattern=True)
    for positions, got in ((TRUE, att.true), (FALSE, att.false)):
        for i, pos in enumerate(positions):
            close(got[i], dec.pattern[i][..., pos].sum(-1))
    assert torch.equal(att.predictions, dec.predictions)
    true, false = att.at(HEADS)
    assert true.shape == false.shape == (3, 2)
    close(true[:, 0], att.true[:, 2, 3])


def test_label_value_ranks_sweep_matches_one_batch(small):
    ranks = sweeps.label_value_ranks_sweep(small, PROMPTS, FALSE, HEADS, batch_size=2)
    dec = decompose(small, PROMPTS, values=True)
    mask = sweeps.position_mask(FALSE, dec.input_ids.shape[1])
    want = label_value_ranks(Readout(small.arch), dec, HEADS, mask)
    assert ranks.shape == (3, 2, 3)
    for i, pos in enumerate(FALSE):
        assert torch.equal(ranks[i, :, : len(pos)], want[i][:, pos])
        assert ranks[i, :, len(pos):].isnan().all()


def test_mrr_averages_reciprocal_ranks_over_prompts_and_labels():
    ranks = torch.tensor([[[1.0, 2.0]], [[4.0, torch.nan]]])  # [N=2, S=1, K=2]
    close(sweeps.mrr(ranks), torch.tensor([(1 + 0.5 + 0.25) / 3]))


def test_random_heads_share_the_layer_and_avoid_the_listed_heads():
    heads = [(3, 0), (3, 1), (5, 2)]
    picks = sweeps.random_heads(heads, n_heads=4, seed=1)
    assert [l for l, _ in picks] == [3, 3, 5]
    assert not set(picks) & set(heads)
    assert sweeps.random_heads([(0, 0), (0, 1)], n_heads=2) == [(0, 1), (0, 0)]  # layer full: any other head


def test_overlap_counts_shared_heads():
    got = sweeps.overlap({"a": [(1, 1), (2, 2)], "b": [(2, 2), (3, 3)], "c": [(4, 4)]})
    assert got.tolist() == [[2, 1, 0], [1, 2, 0], [0, 0, 1]]


def test_prompt_set_finds_label_positions(small):
    ps = sweeps.prompt_set(small, "sentiment_number", "imbalanced", n=4)
    assert len(ps.prompts) == 4 and ps.directions[:2] == ["sentiment/number", "number/sentiment"]
    ids = small.encode(ps.texts)["input_ids"]
    for i in range(4):
        assert [small.tokenizer.decode(ids[i, p]) for p in ps.true[i]] == [" foo"]
        assert [small.tokenizer.decode(ids[i, p]) for p in ps.false[i]] == [" bar", " bar"]
        assert ps.labels[i] == sorted(ps.false[i] + ps.true[i])


def test_located_is_cached_under_its_key(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = sweeps.prompt_set(small, "animal_country", n=3)
    first = sweeps.located(small, ps)
    close(first.head, locate(small, ps.texts).head)
    monkeypatch.setattr(sweeps, "locate", lambda *a, **k: pytest.fail("recomputed a cached result"))
    again = sweeps.located(small, ps)
    assert torch.equal(again.head, first.head) and torch.equal(again.targets, first.targets)
    files = list((tmp_path / "results").iterdir())
    assert len(files) == 1 and all(s in files[0].name for s in (small.name, "animal_country", "balanced", "n=3", "seed=0"))
    monkeypatch.setattr(sweeps, "locate", locate_module.locate)
    sweeps.located(small, sweeps.prompt_set(small, "animal_country", n=2))  # another N: another file
    assert len(list((tmp_path / "results").iterdir())) == 2


def test_accuracy_table_has_a_cell_per_direction_and_label(small):
    table = sweeps.accuracy_table(small, ["sentiment_number"], n=4)
    assert table.index.tolist() == ["sentiment/number", "number/sentiment"]
    assert table.columns.tolist() == [("top-1", "foo"), ("top-1", "bar"), ("ranked", "foo"), ("ranked", "bar")]
    assert ((table >= 0) & (table <= 1)).all().all()


def test_projection_table_has_a_row_per_vector(small):
    table = sweeps.projection_table(small, sweeps.decompose_for_projection(small, PROMPTS[0]), [2, 5, 8, 11], (1, 2), k=5)
    assert table["vector"].tolist() == ["label value"] * 4 + ["label key"] * 4 + ["last query"]
    assert table["token"].tolist()[:4] == [" bar", " bar", " foo", " foo"]
    assert all(len(t.split(", ")) == 5 for t in table["top tokens"])


def test_prompt_attention_rows_are_distributions(small):
    pa = sweeps.prompt_attention(small, PROMPTS[1], [2], [])
    assert pa.tokens == ["cat", " :", " foo"]
    close(pa.pattern.sum(-1), torch.ones(small.arch.n_layers, small.arch.n_heads))
    assert pa.true.tolist() == [False, False, True] and not pa.false.any()


def test_sweeps_on_a_prompt_set_are_cached(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = sweeps.prompt_set(small, "sentiment_number", "imbalanced", n=3)
    att = sweeps.attention_on_labels(small, ps)
    ranks = sweeps.label_ranks(small, ps, HEADS)
    assert torch.equal(ranks, sweeps.label_value_ranks_sweep(small, ps.texts, ps.labels, HEADS))
    monkeypatch.setattr(sweeps, "label_attention_sweep", lambda *a, **k: pytest.fail("recomputed"))
    monkeypatch.setattr(sweeps, "label_value_ranks_sweep", lambda *a, **k: pytest.fail("recomputed"))
    assert torch.equal(sweeps.attention_on_labels(small, ps).true, att.true)
    assert torch.equal(sweeps.label_ranks(small, ps, HEADS), ranks)
    with pytest.raises(pytest.fail.Exception):
        sweeps.label_ranks(small, ps, HEADS[:1])  # other heads: another key


def test_variant_study_compares_balanced_with_the_variant(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    st = sweeps.variant_study(small, "animal_country", "reordered", n=4, k=3)
    assert len(st.heads) == 3 and set(st.attention) == set(st.accuracy) == {"balanced", "reordered"}
    want = sweeps.prompt_accuracy(small, sweeps.prompt_set(small, "animal_country", "reordered", n=4)).top1
    assert st.accuracy["reordered"] == pytest.approx(want)
    true, false = st.at_heads()["reordered"]
    assert true.shape == false.shape == (4, 3)
