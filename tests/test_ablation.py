"""Label mixing, accuracy under a per-batch intervention, and the causal check: its ablations, prompts, protocol and curves."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.cache import stored_accuracies
from icl_helpers.core.heads import same_layer_random_heads, top_heads
from icl_helpers.core.interventions import Intervention
from icl_helpers.core.passes import intervened_accuracies, intervened_accuracy
from icl_helpers.data.datasets import dataset_records
from icl_helpers.data.prompts import (
    VARIANTS,
    Record,
    mixed_label_prompts,
    prompt_label_ids,
)
from icl_helpers.data.setting import Setting
from icl_helpers.data.split import input_halves
from icl_helpers.errors import UsageError
from icl_helpers.studies import ablation
from icl_helpers.studies.ablation import (
    AblationRuns,
    ablation_means,
    ablation_runs,
    causal_check,
    curve_ends,
    curve_table,
    evaluation_prompts,
    one_percent,
)
from icl_helpers.studies.accuracy import accuracy
from icl_helpers.studies.in_context_heads import located
from icl_helpers.studies.runner import prompt_set
from icl_helpers.verdicts.evidence import WORD, Evidence
from icl_helpers.verdicts.rules import RANDOM_DRAWS
from tests.conftest import close, logprob_scale, small_model

RECORDS = [
    Record("one", "number", "sentiment", ("eight", "two"), ("love", "like")),
    Record("happy", "sentiment", "number", ("glad", "fine"), ("six", "ten")),
    Record("nine", "number", "sentiment", ("four", "five"), ("sad", "good")),
    Record("calm", "sentiment", "number", ("joy", "kind"), ("three", "seven")),
]


def test_mixed_labels_swap_every_other_pair():
    prompts = mixed_label_prompts(RECORDS, VARIANTS["reordered"])
    assert [p.true_label for p in prompts] == ["foo", "foo", "bar", "bar"]
    assert prompts[2].text == "four : bar five : bar sad : foo good : foo nine :"


@pytest.fixture(scope="module")
def llama(gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model("llama-gqa"), gpt2_tokenizer, name="llama-gqa")


def test_accuracy_under_an_identity_intervention_is_the_plain_accuracy(llama):
    prompts = mixed_label_prompts(RECORDS)
    plain = accuracy(llama, [p.text for p in prompts], *prompt_label_ids(llama.tokenizer, prompts))
    heads = [(2, 1), (1, 3)]
    edited = intervened_accuracy(llama, prompts, Intervention.balanced_labels(llama, heads), batch_size=3)
    close(edited.true_logit, plain.true_logit)  # batched in threes, not in one batch
    assert torch.equal(edited.predictions, plain.predictions)


@pytest.mark.parametrize("edit", [Intervention.balanced_labels, Intervention.position_free_labels],
                         ids=["balanced_labels", "position_free_labels"])
def test_label_edits_in_a_batch_equal_one_prompt_at_a_time(llama, edit):
    """Each batch's label positions must be those of the prompts the model runs in it,
    whatever order the batch is run in (accuracy sorts prompts by length)."""
    records = RECORDS + [Record("a rather long input", "number", "sentiment", ("x y z w", "v"), ("a b c d e", "f g"))]
    prompts = mixed_label_prompts(records, VARIANTS["imbalanced"])
    heads = [(2, 1), (1, 3), (0, 0)]
    batched = intervened_accuracy(llama, prompts, edit(llama, heads), batch_size=5)
    alone = intervened_accuracy(llama, prompts, edit(llama, heads), batch_size=1)
    close(batched.true_logit, alone.true_logit)
    plain = intervened_accuracy(llama, prompts)
    assert (batched.true_logit - plain.true_logit).abs().max() > 1e-3  # the edit does change something


def test_ablation_runs_are_the_ablated_model(llama):
    prompts = mixed_label_prompts(RECORDS)
    top = [(2, 1), (1, 3), (2, 0)]
    means = ablation_means(llama, [p.text for p in prompts[:2]])
    runs = ablation_runs(llama, prompts, top, ks=[1, 3], n_random=4, seed=5, means=means, batch_size=3)
    direct = intervened_accuracy(llama, prompts, Intervention.ablated(llama, top, means), batch_size=3)
    # the same batches through the same blocks (a run resumed from a shared prefix runs the same operations): exact
    assert torch.equal(runs.top[3].true_logit, direct.true_logit)
    assert torch.equal(runs.plain.true_logit, intervened_accuracy(llama, prompts, batch_size=3).true_logit)
    zeroed = intervened_accuracy(llama, prompts, Intervention.ablated(llama, top), batch_size=3)
    assert (zeroed.true_logit - direct.true_logit).abs().max() > 1e-4  # mean and zero ablation differ
    draw = same_layer_random_heads(top, llama.arch.n_heads, seed=5 + 2)  # draw 2: layer-matched to the top heads
    assert [l for l, _ in draw] == [2, 1, 2] and not set(draw) & set(top)
    assert torch.equal(runs.random[1][2].true_logit,
                       intervened_accuracy(llama, prompts, Intervention.ablated(llama, draw[:1], means), 3).true_logit)
    twice = AblationRuns.cat([runs, runs])  # pooled datasets: the prompts of each, in order (copies: exact)
    assert torch.equal(twice.random[3][1].true_logit, runs.random[3][1].true_logit.repeat(2)) and len(twice.random[1]) == 4
    curves = runs.curves()
    assert len(curves) == 5 + 2 + 2 * 4 and set(curves["k"]) == {0, 1, 3}
    assert curves.groupby("k")["accuracy"].nunique()[0] == 1  # k = 0 is the plain model for every set
    with pytest.raises(UsageError, match="between 1 and the 3 heads"):
        ablation_runs(llama, prompts, top, ks=[4])
    with pytest.raises(UsageError, match="choose one of mean, zero"):
        ablation_means(llama, [prompts[0].text], "resample")


def test_evaluation_prompts_are_the_records_of_the_other_inputs():
    """The records the heads are not located on, label words swapped on every other pair: no input
    is in both halves, though a word dataset's inputs repeat."""
    records = dataset_records("sentiment_number", 40)
    locate = input_halves(records, 0)
    evaluated = evaluation_prompts(records, locate)
    others = [r for r, keep in zip(records, locate.tolist()) if not keep]
    assert len({r.input for r in records}) < 40 and len(evaluated) == len(others) == int((~locate).sum())
    assert [p.text for p in evaluated] == [p.text for p in mixed_label_prompts(others)]
    assert [p.true_label for p in evaluated[:4]] == ["foo", "foo", "bar", "bar"]
    assert not {r.input for r in others} & {r.input for r, keep in zip(records, locate.tolist()) if keep}


def test_true_prob_is_the_softmax_of_the_true_label(llama):
    prompts = mixed_label_prompts(RECORDS[:2])
    acc = intervened_accuracy(llama, prompts)
    enc = llama.encode([prompts[0].text])
    with torch.no_grad():
        logits = llama.model(**enc).logits[0, -1].float()
    want = logits.softmax(-1)[acc.true_id[0]]
    close(acc.true_prob[0], want, scale=float(want) * logprob_scale(logits))  # p = exp(log p): its log's rounding, times p


def test_one_percent_of_the_heads_is_rounded_up_and_at_most_the_heads_given():
    def model(layers: int, heads: int) -> SimpleNamespace:
        return SimpleNamespace(arch=SimpleNamespace(n_layers=layers, n_heads=heads))
    assert one_percent(model(36, 20)) == 8 and one_percent(model(30, 9)) == 3  # GPT-2 large: 7.2; SmolLM2: 2.7
    assert one_percent(model(3, 4)) == 1 and one_percent(model(30, 9), [(1, 2), (3, 4)]) == 2


FOUR = Setting(heads=4)  # the small models have 12 heads


def test_the_causal_check_locates_on_one_half_of_the_inputs_and_ablates_on_the_other(llama, tmp_path, monkeypatch):
    """Its heads are the top of the mean increase over the prompts of the locating half of the inputs
    (`input_halves`), ablated on prompts of the other half's records by their means over the
    locating prompts; more numbers of heads leave the others' runs as they are (the same batches and
    blocks), so a curve shows the very numbers the report judges. Each number of heads is kept on its own:
    a call asking for numbers an earlier call ran runs none of them, one asking for a new number runs it alone."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    n, d = 12, "sentiment_number"
    runs = causal_check(llama, [d], n, setting=FOUR, more_ks=[2, 9], n_random=3)[d]
    records, ps = FOUR.records(d, n), prompt_set(llama, d, "balanced", n, setting=FOUR)
    locate = input_halves(records, 0)
    heads = top_heads(located(llama, ps).head[locate].mean(0), 4)
    evaluated, means = evaluation_prompts(records, locate, FOUR), ablation_means(
        llama, [t for t, keep in zip(ps.texts, locate.tolist()) if keep])
    want = ablation_runs(llama, evaluated, heads, [1, 2, 3, 4], 3, 0, means)
    curve = want.curves()
    pd.testing.assert_frame_equal(runs.curves(), curve[curve["k"] != 3].reset_index(drop=True), check_exact=True)
    asked, run = [], ablation.ablation_accuracies
    monkeypatch.setattr(ablation, "ablation_accuracies", lambda m, p, top, ks, *a, **k: asked.append(list(ks)) or run(
        m, p, top, ks, *a, **k))
    judged = causal_check(llama, [d], n, setting=FOUR, n_random=3)[d]
    assert list(judged.top) == [1, 4] and asked == []  # the 1% of 12 heads, and all 4: both read from the cache
    pd.testing.assert_frame_equal(judged.curves(), curve[curve["k"].isin([0, 1, 4])].reset_index(drop=True),
                                  check_exact=True)
    more = causal_check(llama, [d], n, setting=FOUR, more_ks=[3], n_random=3)[d]
    assert asked == [[3]]  # the new number of heads alone
    pd.testing.assert_frame_equal(more.curves(), curve[curve["k"] != 2].reset_index(drop=True), check_exact=True)


def test_the_report_judges_the_causal_check_notebook_08_plots(llama, tmp_path, monkeypatch):
    """One protocol: the report's runs are `causal_check`'s on the word datasets, pooled."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    runs = causal_check(llama, WORD, 8, setting=FOUR, n_random=RANDOM_DRAWS)
    pooled = Evidence(llama, 8, 2, 0, None, setting=FOUR).ablations("word")
    pd.testing.assert_frame_equal(pooled.curves(), AblationRuns.cat(list(runs.values())).curves(), check_exact=True)


def test_accuracies_are_kept_under_their_prompts_and_key(llama, tmp_path, monkeypatch):
    """The passes of prompts that are not a prompt set are read again under the same prompts and key, and
    run again under another key, or the same texts with the other label true (a text does not say which)."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    prompts, calls = mixed_label_prompts(RECORDS), []

    def compute() -> list:
        calls.append(1)
        return intervened_accuracies(llama, prompts, [None, Intervention.ablated(llama, [(1, 2)])])
    first = stored_accuracies("test", llama, prompts, compute, heads=[(1, 2)])
    again = stored_accuracies("test", llama, prompts, compute, heads=[(1, 2)])
    assert len(calls) == 1 and len(again) == 2 and all(torch.equal(a.true_logit, b.true_logit) for a, b in zip(first, again))
    assert torch.equal(again[1].predictions, first[1].predictions) and again[0].true_prob is not None
    stored_accuracies("test", llama, prompts, compute, heads=[(1, 3)])
    swapped = [replace(p, true_label=p.false_label, false_label=p.true_label) for p in prompts]
    assert [p.text for p in swapped] == [p.text for p in prompts]
    stored_accuracies("test", llama, swapped, compute, heads=[(1, 2)])
    assert len(calls) == 3


def test_curve_table_and_ends():
    rows = [dict(dataset="d", heads="top in-context heads", draw=0, k=k, accuracy=a) for k, a in ((0, 0.9), (2, 0.1))]
    rows += [dict(dataset="d", heads="random heads", draw=d, k=k, accuracy=a)
             for d, (a0, a2) in enumerate(((0.9, 0.8), (0.9, 0.6), (0.9, 0.1))) for k, a in ((0, a0), (2, a2))]
    table = curve_table(pd.DataFrame(rows))
    ends = curve_ends(table, 2).loc["d"]
    close(ends["plain"], 0.9)
    close(ends["top-k ablated"], 0.1)
    close(ends["random: mean"], 0.5)  # a mean, not the median 0.6
    close(ends["random: sd"], 0.13**0.5)  # the sample sd of 0.8, 0.6 and 0.1


