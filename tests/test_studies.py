"""Studies on prompt sets against one-batch computations, their disk cache, and their summaries."""
from __future__ import annotations

import os
import warnings
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from icl_helpers import ICLModel, UsageError, entries
from icl_helpers import cache as results_cache
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.heads import same_layer_random_heads
from icl_helpers.core.interventions import ablated
from icl_helpers.core.locate import LocateResult, locate
from icl_helpers.core.projections import kept_tokens, label_value_ranks, value_ranks
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.studies import accuracy, in_context_heads, label_attention, mrr, projection, prompt_pass, runner
from tests.conftest import MIXED_TEXTS as TEXTS
from tests.conftest import STUDY_HEADS as HEADS
from tests.conftest import close, exact, logprob_scale, rank_slack, small_model
from tests.test_attribution import naive_increase


def test_attention_on_labels_matches_one_batch(small, ps):
    att = label_attention.attention_on_labels(small, ps, batch_size=2, cache=False)
    dec = decompose(small, TEXTS, record=["pattern"])
    T = dec.input_ids.shape[1]
    for true, got in ((True, att.true), (False, att.false)):
        mask = ps.positions.mask(T, true)
        for i in range(len(TEXTS)):
            close(got[i], dec.pattern[i][..., mask[i]].sum(-1))
    assert torch.equal(att.predictions, dec.predictions.cpu())
    for i, labels in enumerate(ps.positions.labels):  # per label: that position of the pattern, NaN past the labels
        close(att.per_label[i][..., labels >= 0], dec.pattern[i][..., labels[labels >= 0]])
        assert att.per_label[i][..., labels < 0].isnan().all()
    per_class = torch.where(ps.positions.is_true[:, None, None], att.per_label, 0).nansum(-1)
    close(per_class, att.true)  # the per-label weights sum to the true-label total
    true, false = att.at(HEADS)
    assert true.shape == false.shape == (3, 2)
    exact(true[:, 0], att.true[:, 2, 3])  # an index


def test_decomposed_batches_prompts_of_similar_length_each_once(small, ps):
    """In twos, the two shortest of the three prompts go first, each batch padded to its own longest."""
    lengths = small.encode(TEXTS)["attention_mask"].sum(1)
    shortest = lengths.argsort(stable=True).tolist()
    assert shortest != [0, 1, 2]  # not prompt order, so a result left in batch order would show
    batches = [(rows.tolist(), dec.input_ids.shape[1]) for rows, dec in runner.decomposed(small, ps, batch_size=2)]
    assert batches == [(shortest[:2], int(lengths[shortest[1]])), (shortest[2:], int(lengths[shortest[2]]))]


def test_label_increases_match_one_batch(small, ps):
    """Fig. 7's increase at each label position, batched in twos, against every position's
    increase in one batch, head by head."""
    got = label_attention.label_increases(small, ps, HEADS, batch_size=2, cache=False)
    dec = decompose(small, TEXTS, record=["pattern", "values"])
    scale = logprob_scale(dec)
    assert got.shape == (3, 2, 4)
    for s, (l, h) in enumerate(HEADS):
        every = naive_increase(Readout(small.arch), dec.resid[:, l], dec.position_terms(l, h), dec.predictions, dec.scale)
        for i, labels in enumerate(ps.positions.labels):
            close(got[i, s, labels >= 0], every[i, labels[labels >= 0]], scale=scale)
            assert got[i, s, labels < 0].isnan().all()
    att = label_attention.attention_on_labels(small, ps)
    exact(att.per_label_at(HEADS)[:, 1], att.per_label[:, 0, 1])  # an index
    weight, increase, is_true = label_attention.label_points(small, ps, HEADS)
    assert len(weight) == len(increase) == len(is_true) == (4 + 3 + 2) * len(HEADS)  # every label, no padding
    assert int(is_true.sum()) == int(ps.positions.chosen(True).sum()) * len(HEADS)
    exact(weight[-2:], att.per_label[2, 0, 1, :2])  # the last prompt's two labels in the last head: the same cached pass
    close(increase[-2:], got[2, 1, :2], scale=scale)  # scored in one block of three, not in twos


def test_label_ranks_match_one_batch(small, ps):
    ranks = mrr.label_ranks(small, ps, HEADS, batch_size=2, cache=False)
    dec = decompose(small, TEXTS, record=["values"])
    labels = ps.positions.labels
    is_label = ps.positions.mask(dec.input_ids.shape[1], True) | ps.positions.mask(dec.input_ids.shape[1], False)
    want = label_value_ranks(Readout(small.arch), dec, HEADS, is_label).cpu()
    slack = rank_slack(dec, HEADS).cpu()  # values of another batching: a tie within rounding may count either way
    assert ranks.shape == (3, 2, 4)
    for i in range(len(TEXTS)):
        K = int(ps.positions.valid[i].sum())
        assert ((ranks[i, :, :K] - want[i][:, labels[i, :K]]).abs() <= slack[i][:, labels[i, :K]]).all()
        assert ranks[i, :, K:].isnan().all()


def test_concept_ranks_rank_each_labels_related_concepts_among_the_shown_tokens(small, ps):
    """bar, bar, foo, foo / bar, foo, foo / bar, foo: each label position's related concepts (GPT-2's
    five of bar, three of foo), ranked as one batch ranks them, stop words and punctuation not counted."""
    bar, foo = [2318, 2409, 5657, 10374, 31597], [21943, 22944, 36080, -1, -1]
    concepts = mrr.label_concepts(small, ps)
    assert concepts.tolist() == [[bar, bar, foo, foo], [bar, foo, foo, [-1] * 5], [bar, foo, [-1] * 5, [-1] * 5]]
    ranks = mrr.concept_ranks(small, ps, HEADS, batch_size=2, cache=False)
    dec = decompose(small, TEXTS, record=["values"])
    labels = ps.positions.labels
    targets = torch.full((*dec.input_ids.shape, 5), -1)
    for i, row in enumerate(labels):
        targets[i, row[row >= 0]] = concepts[i, row >= 0]
    want = value_ranks(Readout(small.arch), dec, HEADS, targets, kept_tokens(small.tokenizer)).cpu()
    assert ranks.shape == (3, 2, 4)
    for i in range(len(TEXTS)):
        K = int(ps.positions.valid[i].sum())
        assert (ranks[i, :, :K] - want[i][:, labels[i, :K]]).abs().max() <= 1  # another batching: a tie may count either way
        assert ranks[i, :, K:].isnan().all()
    own = mrr.label_ranks(small, ps, HEADS, cache=False)
    assert ((ranks <= own) | own.isnan()).all()  # the own token is one of the concepts


def test_mrr_averages_reciprocal_ranks_over_prompts_and_labels():
    ranks = torch.tensor([[[1.0, 2.0]], [[4.0, torch.nan]]])  # [N=2, S=1, D=2]
    close(mrr.mrr(ranks), torch.tensor([(1 + 0.5 + 0.25) / 3]))


def test_mrr_by_label_splits_the_label_positions_by_their_word(small, ps):
    """bar, bar, foo, foo / bar, foo, foo / bar, foo: each word's MRR over its own positions."""
    ranks = torch.tensor([[1.0, 2.0, 4.0, 8.0], [1.0, 3.0, 5.0, torch.nan], [2.0, 4.0, torch.nan, torch.nan]])[:, None]
    by = mrr.mrr_by_label(small, ps, ranks)
    assert sorted(by) == ["bar", "foo"]
    close(by["bar"], torch.tensor([(1 + 1 / 2 + 1 + 1 / 2) / 4]))
    close(by["foo"], torch.tensor([(1 / 4 + 1 / 8 + 1 / 3 + 1 / 5 + 1 / 4) / 5]))
    close((4 * by["bar"] + 5 * by["foo"]) / 9, mrr.mrr(ranks))  # the pooled MRR, weighted by positions


def test_answered_correctly_compares_the_located_prediction_with_the_true_label(small, ps, monkeypatch):
    true = prompt_label_ids(small.tokenizer, ps.prompts)[0]
    acc = accuracy.prompt_accuracy(small, ps)
    assert torch.equal(in_context_heads.answered_correctly(small, ps), acc.predictions == true)  # located's targets: the argmax
    for targets, first in ((torch.stack([true[0] + 1, true[1], true[2]]), 1), (true + 1, None)):
        monkeypatch.setattr(in_context_heads, "located", lambda m, ps, t=targets: SimpleNamespace(targets=t))
        assert in_context_heads.first_correct(small, ps) == first


def test_shared_heads_are_those_in_every_top_list_best_first_else_the_top_of_the_mean():
    scores = torch.arange(12.0).reshape(3, 4)  # head (l, h) scores 4l + h
    heads, which = in_context_heads.shared_heads({"a": [(0, 1), (2, 3), (1, 0)], "b": [(1, 0), (0, 1), (2, 0)]}, scores)
    assert heads == [(1, 0), (0, 1)] and which == "the 2 heads in both datasets' top 3"
    heads, which = in_context_heads.shared_heads({"a": [(0, 1), (0, 2)], "b": [(1, 0), (1, 1)]}, scores)
    assert heads == [(2, 3), (2, 2)] and "no head is in both datasets' top 2" in which


def test_layer_matched_mrr_is_the_heads_and_their_random_heads_reciprocal_ranks(small, ps):
    ours, random = mrr.layer_matched_mrr(small, ps, HEADS, draws=3, seed=5)
    close(ours, mrr.label_ranks(small, ps, HEADS).reciprocal().nanmean(2))
    assert random.shape == (3, len(ps), len(HEADS))
    for d in range(3):
        drawn = same_layer_random_heads(HEADS, small.arch.n_heads, seed=5 + d)
        close(random[d], mrr.label_ranks(small, ps, drawn).reciprocal().nanmean(2))


def test_in_context_heads_are_the_given_heads_where_given(small, ps, monkeypatch):
    """Given heads: checked against the model, nothing located; else the top k located."""
    top = in_context_heads.in_context_heads(small, ps, 3)
    assert top == in_context_heads.located(small, ps).top_heads(3) and len(top) == 3
    monkeypatch.setattr(in_context_heads, "located", lambda *a, **k: pytest.fail("located given heads"))
    assert in_context_heads.in_context_heads(small, ps, 3, ((2, 3), (0, 1))) == HEADS
    with pytest.raises(UsageError, match=r"^Head 3-0 is not in this model: it has 3 layers x 4 heads"):
        in_context_heads.in_context_heads(small, ps, 3, [(3, 0)])


def test_overlap_counts_shared_heads():
    got = in_context_heads.overlap({"a": [(1, 1), (2, 2)], "b": [(2, 2), (3, 3)], "c": [(4, 4)]})
    assert got.tolist() == [[2, 1, 0], [1, 2, 0], [0, 0, 1]]
    close(in_context_heads.mean_shared(got), 1 / 3)


def test_prompt_set_finds_label_positions(small):
    ps = runner.prompt_set(small, "sentiment_number", "imbalanced", n=4)
    assert len(ps) == 4 and ps.directions[:2] == ["sentiment/number", "number/sentiment"]
    ids = small.encode(ps.texts)["input_ids"]
    for i in range(4):
        labels, true = ps.positions.labels[i], ps.positions.is_true[i]
        assert [small.tokenizer.decode(ids[i, p]) for p in labels[true]] == [" foo"]
        assert [small.tokenizer.decode(ids[i, p]) for p in labels[~true & (labels >= 0)]] == [" bar", " bar"]


def test_located_is_cached_under_its_key(small, tmp_path, monkeypatch):
    """One pass stores the three results of a prompt set, each under a key naming it."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = runner.prompt_set(small, "animal_country", n=3)
    first = in_context_heads.located(small, ps)
    exact(first.head, locate(small, ps.texts).head)  # locate's batches and scoring (the pass records more, reading only)
    run = prompt_pass.prompt_pass
    monkeypatch.setattr(prompt_pass, "prompt_pass", lambda *a, **k: pytest.fail("recomputed a cached result"))
    again = in_context_heads.located(small, ps)
    assert torch.equal(again.head, first.head) and torch.equal(again.targets, first.targets)
    files = sorted((tmp_path / "results").glob("*.pt"))
    assert [f.name.split("__")[0] for f in files] == ["label-attention", "label-record", "locate"]
    assert all(s in f.name for f in files for s in (small.name, "animal_country", "balanced", "n=3", "seed=0"))
    monkeypatch.setattr(prompt_pass, "prompt_pass", run)
    in_context_heads.located(small, runner.prompt_set(small, "animal_country", n=2))  # another N: other files
    assert len(list((tmp_path / "results").glob("*.pt"))) == 6
    assert {p.suffix for p in (tmp_path / "results").iterdir()} == {".pt", ".lock"}  # one file an entry, its checksum inside


def test_accuracy_table_has_a_cell_per_direction_and_label(small):
    table = accuracy.accuracy_table(small, ["sentiment_number"], n=4)
    assert table.index.tolist() == ["sentiment/number", "number/sentiment"]
    assert table.columns.tolist() == [("top-1", "foo"), ("top-1", "bar"), ("ranked", "foo"), ("ranked", "bar")]
    assert ((table >= 0) & (table <= 1)).all().all()


def test_projection_table_has_a_row_per_vector(small, ps):
    proj = projection.projections(small, ps, batch_size=2)
    table = proj.table(0, (1, 2), k=5)
    assert table["vector"].tolist() == ["label value"] * 4 + ["label key"] * 4 + ["last query"]
    assert table["token"].tolist() == [" bar", " bar", " foo", " foo"] * 2 + [" :"]
    assert table["position"].tolist() == [2, 5, 8, 11] * 2 + [13]
    assert all(len(t) == 5 and all(isinstance(w, str) and w.strip() for w in t) for t in table["top tokens"])
    short = proj.table(2, (1, 2), k=5)  # 2 labels, padded to 4 in the batch
    assert short["vector"].tolist() == ["label value"] * 2 + ["label key"] * 2 + ["last query"]


def test_projections_of_a_batch_equal_one_prompt_at_a_time(small, ps):
    batched = projection.projections(small, ps, batch_size=3)
    for i, text in enumerate(TEXTS):
        alone = projection.projections(small, runner.prompt_set_from_texts(small, [text]))
        for head in ((0, 1), (2, 3)):
            assert batched.table(i, head, k=8).equals(alone.table(0, head, k=8))


def test_projection_hits_count_label_words():
    table = pd.DataFrame({"vector": ["label value", "label value", "label key"],
                          "token": [" bar", " foo", " bar"],
                          "top tokens": [("BAR", " Bar", "bars"), (" one", "two"), (" bar",)]})
    assert projection.label_value_hits(table) == 0.5


def test_label_attention_alone_is_recorded_without_scoring_heads(small, ps, tmp_path, monkeypatch):
    """A prompt variant's label attention: its pass stores that result only, and scores no head."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(prompt_pass, "Scoring", lambda *a, **k: pytest.fail("scored the heads"))
    att = label_attention.attention_on_labels(small, ps)
    assert [f.name.split("__")[0] for f in (tmp_path / "results").glob("*.pt")] == ["label-attention"]
    exact(att.true, label_attention.attention_on_labels(small, ps, cache=False).true)  # the same pass, run again


def test_an_unknown_kind_of_pass_is_refused_before_any_pass(small, ps, monkeypatch):
    monkeypatch.setattr(prompt_pass, "decompose", lambda *a, **k: pytest.fail("ran the model"))
    with pytest.raises(UsageError, match="records locate, label-attention, label-record, not attention"):
        prompt_pass.prompt_pass(small, ps, kinds=("locate", "attention"))


def test_a_located_prompt_set_runs_through_the_model_once(small, ps, tmp_path, monkeypatch):
    """After `located`, label attention, Fig. 7's increases and Fig. 5's ranks of any heads
    come without a model pass, and equal those of their own passes."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    batches = []
    handle = small.model.base_model.register_forward_pre_hook(lambda *a: batches.append(1))
    try:
        loc = in_context_heads.located(small, ps, batch_size=2)
        att = label_attention.attention_on_labels(small, ps)
        increase = label_attention.label_increases(small, ps, HEADS)
        ranks = mrr.label_ranks(small, ps, HEADS)
    finally:
        handle.remove()
    assert len(batches) == 2  # 3 prompts in batches of 2, once
    dec = decompose(small, TEXTS, record=["pattern", "values"])  # in one batch: other summation orders throughout
    scale = logprob_scale(dec)
    close(loc.head, locate(small, ps.texts).head, scale=scale)
    own = label_attention.attention_on_labels(small, ps, batch_size=3, cache=False)
    for name in ("true", "false", "per_label"):
        close(getattr(att, name), getattr(own, name), equal_nan=True)
    assert torch.equal(att.predictions, own.predictions)
    for s, (l, h) in enumerate(HEADS):
        every = naive_increase(Readout(small.arch), dec.resid[:, l], dec.position_terms(l, h), dec.predictions, dec.scale)
        for i, labels in enumerate(ps.positions.labels):
            close(increase[i, s, labels >= 0], every[i, labels[labels >= 0]], scale=scale)
            assert increase[i, s, labels < 0].isnan().all()
    is_label = ps.positions.mask(dec.input_ids.shape[1], True) | ps.positions.mask(dec.input_ids.shape[1], False)
    want, slack = label_value_ranks(Readout(small.arch), dec, HEADS, is_label).cpu(), rank_slack(dec, HEADS).cpu()
    for i, labels in enumerate(ps.positions.labels):
        at = labels[labels >= 0]
        assert ((ranks[i][:, labels >= 0] - want[i][:, at]).abs() <= slack[i][:, at]).all()


def test_prompt_attention_rows_are_distributions(small, ps):
    pa = label_attention.prompt_attention(small, ps, batch_size=2)
    assert pa.tokens[2][:3] == ["a", " rather", " long"] and len(pa.tokens[0]) == 14
    real = torch.zeros_like(pa.pattern[:, 0, 0], dtype=torch.bool)
    for i, tokens in enumerate(pa.tokens):
        real[i, : len(tokens)] = True
    close(pa.pattern.sum(-1), torch.ones(3, small.arch.n_layers, small.arch.n_heads))
    assert (pa.pattern.permute(0, 3, 1, 2)[~real] == 0).all()
    assert pa.true[0].nonzero().flatten().tolist() == [8, 11] and pa.false[0].nonzero().flatten().tolist() == [2, 5]


def test_studies_on_a_prompt_set_are_cached(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    ps = runner.prompt_set(small, "sentiment_number", "imbalanced", n=3)
    att = label_attention.attention_on_labels(small, ps)
    ranks = mrr.label_ranks(small, ps, HEADS)
    assert torch.equal(ranks, mrr.label_ranks(small, ps, HEADS, cache=False))  # computed as the cache computed it
    acc = accuracy.prompt_accuracy(small, ps)
    plain = accuracy.accuracy(small, ps.texts, *prompt_label_ids(small.tokenizer, ps.prompts))
    assert all(torch.equal(getattr(acc, f), getattr(plain, f)) for f in ("true_logit", "false_logit", "predictions", "true_id"))
    monkeypatch.setattr(prompt_pass, "prompt_pass", lambda *a, **k: pytest.fail("recomputed"))
    monkeypatch.setattr(mrr, "value_ranks", lambda *a, **k: pytest.fail("recomputed"))
    monkeypatch.setattr(accuracy, "accuracies", lambda *a, **k: pytest.fail("recomputed"))
    assert torch.equal(accuracy.prompt_accuracy(small, ps).true_prob, acc.true_prob)
    assert torch.equal(label_attention.attention_on_labels(small, ps).true, att.true)
    assert torch.equal(mrr.label_ranks(small, ps, HEADS), ranks)
    with pytest.raises(pytest.fail.Exception):
        mrr.label_ranks(small, ps, HEADS[:1])  # other heads: another key


def test_variant_study_compares_balanced_with_the_variant(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    st = label_attention.variant_study(small, "animal_country", "reordered", n=4, k=3)
    assert len(st.heads) == 3 and set(st.attention) == set(st.accuracy) == {"balanced", "reordered"}
    want = accuracy.prompt_accuracy(small, runner.prompt_set(small, "animal_country", "reordered", n=4)).top1
    close(st.accuracy["reordered"], want)
    true, false = st.at_heads()["reordered"]
    assert true.shape == false.shape == (4, 3)
    given = label_attention.variant_study(small, "animal_country", "reordered", n=4, k=3, heads=HEADS)
    assert given.heads == HEADS and torch.equal(given.at_heads()["reordered"][0], st.attention["reordered"].at(HEADS)[0])


def test_true_vs_false_counts_heads_with_more_true_attention():
    true = torch.tensor([[0.5, 0.1], [0.3, 0.1]])
    false = torch.tensor([[0.1, 0.2], [0.1, 0.2]])
    got = label_attention.true_vs_false(true, false)
    assert (got.heads_true_above, got.heads) == (1, 2)
    close(got.true, 0.25)
    close(got.false, 0.15)


def test_variant_change_counts_heads_that_move():
    before = (torch.tensor([[0.6, 0.2]]), torch.tensor([[0.1, 0.1]]))
    after = (torch.tensor([[0.4, 0.3]]), torch.tensor([[0.2, 0.1]]))
    got = label_attention.variant_change(before, after)
    assert (got.heads_true_down, got.heads_false_up, got.heads) == (1, 1, 2)
    close(got.true_before, 0.4)
    close(got.true_after, 0.35)


def test_predicted_labels_name_the_true_label_the_false_one_or_neither(small, ps, monkeypatch):
    """0 where the top-1 prediction is the prompt's true label, 1 its false one, -1 any other token."""
    true, false = prompt_label_ids(small.tokenizer, ps.prompts)
    predictions = torch.stack([false[0], true[1], true[2] + 1])
    monkeypatch.setattr(label_attention, "attention_on_labels", lambda m, ps: SimpleNamespace(predictions=predictions))
    assert label_attention.predicted_labels(small, ps).tolist() == [1, 0, -1]


def test_label_shift_reads_the_predicted_label_first():
    """Summed attention (true, false) from before to after: the change on the predicted label's positions, then the other's."""
    before = torch.tensor([[0.5, 0.2], [0.5, 0.2], [0.4, 0.4]])
    after = torch.tensor([[0.3, 0.35], [0.3, 0.35], [0.4, 0.1]])
    got = label_attention.label_shift(before, after, torch.tensor([0, 1, 1]))
    close(got, torch.tensor([[-0.2, 0.15], [0.15, -0.2], [-0.3, 0.0]]), scale=0.5)


def test_layer_range():
    assert in_context_heads.layer_range([(5, 0), (2, 1), (9, 3)]) == (2, 9)


def test_top_heads_table_names_heads_and_scores():
    head = torch.tensor([[[0.5, 2.0], [1.0, -1.0]]])  # [N=1, L=2, H=2]
    loc = LocateResult(head, torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, dtype=torch.long))
    table = in_context_heads.top_heads_table({"a": loc}, k=3)
    assert table["a"].tolist() == ["0-1 (2.00)", "1-0 (1.00)", "0-0 (0.50)"] and table.index.tolist() == [1, 2, 3]
    every = in_context_heads.top_heads_table({"a": loc}, k=20)  # a model with fewer heads than k: all of them
    assert every["a"].tolist()[-1] == "1-1 (-1.00)" and every.index.tolist() == [1, 2, 3, 4]


# --- the results cache: never a stale or damaged result, never a lost one ---------------------
@pytest.fixture
def fresh(gpt2_tokenizer, tmp_path, monkeypatch):
    """A model of its own (its weights get changed) and an empty cache."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    m = ICLModel(small_model("gpt2"), gpt2_tokenizer, name="same-name")
    return m, runner.prompt_set(m, "animal_country", n=3)


def test_cache_is_keyed_by_the_weights_not_the_name(fresh):
    m, ps = fresh
    before = in_context_heads.located(m, ps)
    with torch.no_grad():
        m.arch.attn_out(1).weight.zero_()  # same name, other weights
    after = in_context_heads.located(m, ps)
    exact(after.head, locate(m, ps.texts).head)  # locate's batches and scoring
    assert (after.head[:, 1] - before.head[:, 1]).abs().max() > 1e-2  # far beyond rounding


def test_nothing_is_cached_while_an_intervention_is_active(fresh, tmp_path):
    m, ps = fresh
    plain = in_context_heads.located(m, ps)
    with ablated(m, [(1, 0), (2, 3)]):
        cut = in_context_heads.located(m, ps)
        exact(cut.head, locate(m, ps.texts).head)  # locate's batches and scoring
    assert (cut.head - plain.head).abs().max() > 1e-2  # far beyond rounding
    assert len(list((tmp_path / "results").glob("*.pt"))) == 3  # only the plain pass's results
    assert torch.equal(in_context_heads.located(m, ps).head, plain.head)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "wrong checksum"])
def test_a_damaged_entry_is_rebuilt_with_a_warning(fresh, tmp_path, damage):
    m, ps = fresh
    good = in_context_heads.located(m, ps)
    (path,) = (tmp_path / "results").glob("locate__*.pt")
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"not a cache file")
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":  # same size, one byte of the stored values changed
        at = data.find(torch.load(path, weights_only=True)["tensors"]["head"].numpy().tobytes())
        assert at > 0
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1:])
    else:  # whole, but not the tensors its checksum was taken of
        stored = torch.load(path, weights_only=True)
        stored["tensors"]["head"][0, 0, 0] += 1
        torch.save(stored, path)
    with pytest.warns(UserWarning, match=rf"^Rebuilding the damaged cache file {path}"):
        again = in_context_heads.located(m, ps)
    assert torch.equal(again.head, good.head)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt: read back without a word
        assert torch.equal(in_context_heads.located(m, ps).head, good.head)


def test_an_older_versions_entry_is_rebuilt_without_a_warning(fresh, tmp_path):
    """A bare torch.save of the tensors with its size and checksum in a .sha256 file beside it."""
    m, ps = fresh
    good = in_context_heads.located(m, ps)
    (path,) = (tmp_path / "results").glob("locate__*.pt")
    torch.save(torch.load(path, weights_only=True)["tensors"], path)
    path.with_suffix(".sha256").write_text("1234 0123abcd\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(in_context_heads.located(m, ps).head, good.head)
    assert entries._read(path) is not None and not path.with_suffix(".sha256").exists()


def test_a_label_record_cached_before_a_field_was_added_is_recorded_again(fresh):
    m, ps = fresh
    want = prompt_pass.label_record(m, ps)
    path = results_cache.key("label-record", m, ps)
    old = entries._read(path)
    del old["attn_scale"]  # as a version before Gemma's post-norms wrote it
    path.unlink()
    entries.cached(path, lambda: old)
    got = prompt_pass.label_record(m, ps)
    assert torch.equal(got.attn_scale, want.attn_scale) and torch.equal(got.values, want.values)
    assert "attn_scale" in entries._read(path)


def test_an_unwritable_cache_gives_the_result_and_a_warning(fresh, tmp_path):
    m, ps = fresh
    (tmp_path / "results").write_text("a file where the folder should be")
    with pytest.warns(UserWarning, match=r"^Could not write the cache file .*; this run keeps the results it cannot write to .* in memory"):
        got = in_context_heads.located(m, ps)
    exact(got.head, locate(m, ps.texts).head)  # locate's batches and scoring
    assert not list(tmp_path.glob("**/*.tmp"))


def test_cache_files_take_the_users_umask(fresh, tmp_path):
    m, ps = fresh
    old = os.umask(0o022)
    try:
        in_context_heads.located(m, ps)
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "results").iterdir()} == {0o644}


def test_a_key_too_long_for_a_file_name_is_cut_and_hashed(tmp_path, monkeypatch):
    """A model named by a long local path (a deep HOME) made names over 255 bytes: the OS refused them (errno 36).
    Long keys end with a hash of the whole key; short ones are as they were (no cache entry moves)."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    short = results_cache.cache_file("locate", model="m", n=4)
    assert short.name == "locate__model=m__n=4.pt"
    deep = "/home/" + "a-long-folder/" * 20 + "gpt2-small-random-seed0"
    one, other = (results_cache.cache_file("order-increase", model=deep, weights="0c80767bf0610aa2", seed=s) for s in (0, 1))
    assert one != other and one.name.startswith("order-increase__model=-home-a-long-folder")
    for path in (one, one.with_suffix(".json")):
        assert len(path.name) <= results_cache.NAME_MAX
        assert len(f".{path.name}.4194304.tmp") <= 255 and len(path.name + ".lock") <= 255  # a writer's and the lock's
    want = {"x": torch.arange(3.0)}
    exact(entries.cached(one, lambda: want)["x"], want["x"])
    exact(entries.cached(one, lambda: {"x": torch.zeros(3)})["x"], want["x"])  # read back, not recomputed


def test_an_unknown_variant_is_one_line_naming_the_choices(small):
    with pytest.raises(UsageError, match=r"^Unknown prompt variant 'balance': choose one of balanced, imbalanced, reordered, swapped, "
                                         r"order-ftft, order-fttf, order-tfft, order-tftf\.$"):
        runner.prompt_set(small, "sentiment_number", "balance", n=4)
    with pytest.raises(UsageError, match=r"^Unknown prompt variant 'balance'"):
        label_attention.variant_studies(small, "balance", ["sentiment_number"], [], 4, 1)


def test_a_batch_size_below_one_is_refused_before_any_pass(ps, small):
    with pytest.raises(UsageError, match=r"^batch_size must be at least 1, not 0\.$"):
        next(runner.decomposed(small, ps, batch_size=0))
