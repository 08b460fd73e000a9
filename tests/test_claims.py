"""Verdict rules on constructed inputs (one that must replicate, one that must not, and the
middle where a rule has one), the bootstrap interval, and the report's shape and numbers."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch

from icl_helpers.core.heads import top_heads
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.errors import UsageError
from icl_helpers.stats import bootstrap_ci, mean_ci
from icl_helpers.studies import label_attention, mrr, recency
from icl_helpers.studies.ablation import AblationRuns
from icl_helpers.studies.accuracy import Accuracy
from icl_helpers.studies.recency import Effects
from icl_helpers.studies.runner import prompt_set
from icl_helpers.studies.subvalues import FALSE_LABEL, LAST, OTHER, TRUE_LABEL
from icl_helpers.verdicts import claims, evidence, findings, rules
from icl_helpers.verdicts.judgement import FAILS, NOT_TESTED, PARTLY, REPLICATES, Judgement, not_tested, ours_text
from tests.conftest import close

g = torch.Generator()


@pytest.fixture(autouse=True)
def reseeded():
    """Each test draws the same numbers whatever ran before it (pytest orders this file's
    parametrized tests differently from run to run)."""
    g.manual_seed(0)


def noise(*shape: int, scale: float = 0.01) -> torch.Tensor:
    return torch.randn(*shape, generator=g) * scale


def test_the_bootstrap_interval_covers_the_mean_and_narrows_with_n():
    wide, narrow = mean_ci(torch.randn(50, generator=g) + 3), mean_ci(torch.randn(5000, generator=g) + 3)
    assert wide[0] < 3 < wide[1] and narrow[0] < 3 < narrow[1]
    assert narrow[1] - narrow[0] < (wide[1] - wide[0]) / 5  # about sqrt(100) = 10 times narrower
    assert mean_ci(torch.ones(10)) == (1.0, 1.0)
    assert bootstrap_ci([torch.zeros(3)], lambda x: float("nan")) != bootstrap_ci([torch.zeros(3)], lambda x: 0.0)


def test_every_claim_of_the_issue_is_registered_with_a_rule():
    ids = ("table2 fig2 fig3_4 fig12_15 table1 table3 fig5 fig6 fig7 fig8 fig9 fig10_11 app_b_mrr app_b_attention app_d "
           "app_e causal majority_bias recency_bias").split()
    assert list(claims.CLAIMS) == ids
    assert all(c.claim and c.paper and c.rule for c in claims.CLAIMS.values())


def test_every_claim_names_its_source_and_says_it_is_unchecked():
    """No text of the paper is at hand: a source names the version and where in it, and never
    passes a number off as checked."""
    for c in claims.CLAIMS.values():
        assert c.source.startswith((claims.PREPRINT, claims.EMNLP)), c.id
        assert c.source.endswith(claims.UNCHECKED), c.id
    found = claims.CLAIMS["fig6"].finding(Judgement(0.1, (0.0, 0.2), 3, PARTLY, "w"))
    assert found.to_dict()["source"] == claims.CLAIMS["fig6"].source


def test_table2():
    cells = lambda hits: {f"cell {i}": torch.tensor(h) for i, h in enumerate(hits)}  # noqa: E731
    far = torch.tensor([1, 1, 0, 1])  # 75% where a false demonstration is nearest
    assert rules.judge_table2(cells([[1] * 9 + [0]] * 8), far).verdict == REPLICATES  # 90% everywhere
    f = rules.judge_table2(cells([[1] * 10] * 7 + [[1] * 5 + [0] * 5]), far)
    assert f.verdict == PARTLY and f.n == 80 and "cell 7: 50%" in f.why
    close(f.ours, 75 / 80)
    assert rules.judge_table2(cells([[0] * 10] * 8), far).verdict == FAILS
    recency = rules.judge_table2(cells([[1] * 10] * 8), torch.tensor([0, 0, 1, 0]))  # follows the nearest label
    assert recency.verdict == PARTLY and "top-1 25% on the 4 recency-family prompts" in recency.why


def effects(truth: float, distance: float) -> Effects:
    """Recency-family effects with tight intervals around the given values."""
    return Effects(truth, (truth - 0.01, truth + 0.01), distance, (distance - 0.01, distance + 0.01), 50)


def test_fig2():
    N, L = 30, 10
    deep_attention = torch.zeros(N, L)
    deep_attention[:, 7] = 2 + noise(N)
    assert rules.judge_fig2(deep_attention, noise(N, L)).verdict == REPLICATES
    shallow = deep_attention.roll(-6, 1)  # the attention increase in layer 1: attention beats FFN, but not deep
    assert rules.judge_fig2(shallow, noise(N, L)).verdict == PARTLY
    attention = noise(N, L)
    f = rules.judge_fig2(attention, deep_attention)  # the FFN layers carry it
    assert f.verdict == FAILS and f.ci[1] < 0
    close(f.ours, (attention.sum(1) - deep_attention.sum(1)).mean())


def test_fig3_4_and_fig12_15():
    N, L, H, k = 12, 8, 10, 20
    deep = noise(N, L, H)
    deep[:, 5:, :7] += 1  # 21 strong heads, all in the deeper half
    shallow = noise(N, L, H)
    shallow[:, :3, 3:] += 1
    assert rules.judge_fig3_4({"a": deep, "b": deep.flip(0)}, k).verdict == REPLICATES
    assert rules.judge_fig3_4({"a": shallow}, k).verdict == FAILS
    mixed = rules.judge_fig3_4({"a": deep, "b": shallow}, k)
    assert mixed.verdict == PARTLY and mixed.ours == 0.5
    same = rules.judge_fig12_15({"a": deep, "b": deep + noise(N, L, H, scale=0.001)}, k)
    assert same.verdict == REPLICATES and same.ours >= 0.9
    assert rules.judge_fig12_15({"a": deep, "b": shallow}, k).verdict == FAILS


def test_label_values():
    """Tables 1 and 3 over N prompts: the top head's share of prompts whose label values all rank
    their label in the top 10, its interval above one half; partly where another top-5 head's is."""
    heads = [(5, 0), (5, 1), (6, 0), (6, 1), (7, 0)]

    def hits(*shares: float) -> torch.Tensor:
        return torch.stack([torch.arange(40) < 40 * x for x in shares], 1)  # [40, 5]
    f = rules.judge_label_values(hits(0.9, 0, 0, 0, 0), heads, "x", "the example: y")
    assert f.verdict == REPLICATES and f.ours == 0.9 and f.n == 40 and f.ci[0] > 0.5 and "the example: y" in f.why
    f = rules.judge_label_values(hits(0.5, 0.2, 0.95, 0, 0), heads, "x", "")
    assert f.verdict == PARTLY and "6-0: 95%" in f.why and f.ci[0] < 0.5 < f.ci[1]
    assert rules.judge_label_values(hits(0.55, 0.6, 0.5, 0, 0.6), heads, "x", "").verdict == FAILS  # no CI above 0.5


def test_fig5():
    N, S, D = 40, 20, 20
    heads = [(l, 0) for l in range(S)]
    random = (torch.rand(D, N, S, generator=g) * 0.002)
    assert rules.judge_fig5(0.3 + noise(N, S), random, heads).verdict == REPLICATES
    few = noise(N, S, scale=0.0001).abs()
    few[:, :5] = 0.9  # five very strong heads lift the mean, fifteen lie below random
    assert rules.judge_fig5(few, random, heads).verdict == PARTLY
    assert rules.judge_fig5(torch.rand(N, S, generator=g) * 0.002, random, heads).verdict == FAILS


def test_fig6_and_fig7():
    N, S = 40, 20
    true, false = 0.3 + noise(N, S), 0.1 + noise(N, S)
    assert rules.judge_fig6(true, false, effects(0.05, 0.1)).verdict == REPLICATES
    nearest = rules.judge_fig6(true, false, effects(0.0, 0.1))  # true above false only because it is nearer
    assert nearest.verdict == PARTLY and "truth effect +0.000 (-0.010 to +0.010)" in nearest.why
    assert rules.judge_fig6(false, true, effects(-0.05, 0.1)).verdict == FAILS
    increase = torch.rand(N, S, 4, generator=g)
    increase[:, :, 3] = torch.nan  # prompts of three labels: the padding is left out
    summed = (true, true + noise(N, S))
    f = rules.judge_fig7(increase * 0.5 + noise(N, S, 4), increase, summed)
    assert f.verdict == REPLICATES and f"over {N * S * 3} (prompt, head, label position)" in f.why
    f = rules.judge_fig7(torch.rand(N, S, 4, generator=g).where(~increase.isnan(), torch.nan), increase, summed)
    assert f.verdict == FAILS and f.ci[0] < 0 < f.ci[1]


def test_fig8_fig9_and_fig10_11():
    N, S = 40, 20
    before = (0.3 + noise(N, S), 0.1 + noise(N, S))
    moved = (0.2 + noise(N, S), 0.2 + noise(N, S))  # true down, false up
    per_label = (before[0] / 2, moved[0])  # two true labels, then one: 0.15 -> 0.2 a label
    assert rules.judge_fig8(before, moved, (per_label[1], per_label[0])).verdict == REPLICATES
    rises = rules.judge_fig8(before, moved, per_label)  # the sum drops, each true label gains
    assert rises.verdict == PARTLY  # its text gives both means (about 0.15 and 0.2; the third decimal moves with the noise)
    assert f"per true-label position {per_label[0].mean():.3f} -> {per_label[1].mean():.3f}" in rises.why
    assert rules.judge_fig8(before, (before[0] + 0.1, before[1] - 0.05), per_label).verdict == FAILS
    near = effects(0.0, 0.1)
    f9 = rules.judge_fig9(before, moved, near)
    assert f9.verdict == REPLICATES and "drops in 20/20 heads" in f9.why
    assert rules.judge_fig9(before, moved, effects(0.1, 0.0)).verdict == PARTLY  # no distance effect behind the drop
    assert rules.judge_fig9(before, (before[0] + 0.1, before[1]), effects(0.1, -0.1)).verdict == FAILS
    yes, no = rules.judge_fig8(before, moved, per_label[::-1]), rules.judge_fig9(before, (before[0] + 0.1, before[1]),
                                                                                     effects(0.1, -0.1))
    assert rules.judge_fig10_11(yes, f9).verdict == REPLICATES
    assert rules.judge_fig10_11(yes, no).verdict == PARTLY
    assert rules.judge_fig10_11(no, no).verdict == FAILS


def test_together():
    def part(verdict: str) -> Judgement:
        return replace(not_tested("x"), ours=0.5, verdict=verdict, why="because")
    both = rules.judge_together({"sst2": part(REPLICATES), "trec": part(REPLICATES)}, 10, "heads 1-2")
    assert both.verdict == REPLICATES and both.ours == "2 of 2 replicate, 0 partly" and both.n == 10
    assert both.why.startswith("heads 1-2. sst2: 0.5, replicates (because)")
    assert rules.judge_together({"a": part(REPLICATES), "b": part(FAILS)}, 10, "").verdict == PARTLY
    assert rules.judge_together({"a": part(PARTLY), "b": part(FAILS)}, 10, "").verdict == PARTLY
    assert rules.judge_together({"a": part(FAILS), "b": part(FAILS)}, 10, "").verdict == FAILS


def test_app_e():
    N, heads = 100, [(29, 1), (20, 0), (22, 3), (25, 8), (18, 2), (17, 0)]
    chance = torch.full((N,), 0.08)  # two true labels among some 25 positions

    def kinds(true: int, false: int) -> torch.Tensor:
        """[N, 6]: the top head's largest increase at a true label in `true` prompts, at a false one
        in `false`, elsewhere (other) in the rest; every other head at the last position."""
        top = torch.tensor([TRUE_LABEL] * true + [FALSE_LABEL] * false + [OTHER] * (N - true - false))
        return torch.stack([top] + [torch.full((N,), LAST)] * 5, 1)

    f = rules.judge_app_e(kinds(80, 10), chance, heads, ["27-5: foo bar"])
    assert f.verdict == REPLICATES and f.n == N and f.ci[0] > 0.5
    close(f.ours, 0.8)
    assert "top head (29-1)" in f.why and "false-label one 10.0%" in f.why and "chance (a random position) 8.0%" in f.why
    assert "29-1: true label 80.0%, false label 10.0%, other 10.0%; 20-0: last position 100.0%" in f.why
    assert "18-2" in f.why and "17-0" not in f.why and f.why.endswith("27-5: foo bar")
    assert rules.judge_app_e(kinds(55, 10), chance, heads).verdict == PARTLY  # most, but the CI reaches 0.5
    assert rules.judge_app_e(kinds(30, 10), chance, heads).verdict == PARTLY  # above chance, above false labels
    assert rules.judge_app_e(kinds(30, 50), chance, heads).verdict == FAILS  # false labels more often
    assert rules.judge_app_e(kinds(5, 0), chance, heads).verdict == FAILS  # at chance


def test_bias():
    N = 200
    exposed = torch.ones(N, dtype=torch.bool)
    plain = torch.arange(N) % 2 == 0  # half biased
    gone = plain & (torch.arange(N) % 4 == 0)  # half of those still biased: a 50% reduction
    f = rules.judge_bias(torch.stack([exposed, plain, gone], 1), rules.MAJORITY_BIAS)
    assert f.verdict == REPLICATES and "100/200" in f.why
    close(f.ours, 0.5)
    assert rules.judge_bias(torch.stack([exposed, plain, plain], 1), rules.MAJORITY_BIAS).verdict == FAILS
    small = plain.clone()
    small[:10] = False  # ten of the hundred biased prompts freed: 10%, CI above 0, under half the paper's 22%
    assert rules.judge_bias(torch.stack([exposed, plain, small & plain], 1), rules.MAJORITY_BIAS).verdict == PARTLY


def accuracy_of(hits: torch.Tensor) -> Accuracy:
    """An Accuracy whose top-1 and ranked hits are `hits` [N] bool."""
    n = len(hits)
    return Accuracy(hits.float(), torch.zeros(n), torch.where(hits, 1, 2), torch.ones(n, dtype=torch.long), hits.float() / 2)


def test_causal():
    N = 100
    plain = accuracy_of(torch.arange(N) < 90)
    randoms = [accuracy_of(torch.arange(N) < 80 + d % 5) for d in range(20)]  # 80-84%
    runs = lambda top: AblationRuns(plain, {20: accuracy_of(torch.arange(N) < top)}, {20: randoms})  # noqa: E731
    f = rules.judge_causal(runs(20), 20, "mean")
    assert f.verdict == REPLICATES and f.n == N and f.ci[0] < 0.2 < f.ci[1]
    close(f.ours, 0.2)
    assert "90.0% plain" in f.why and "82.0% with 20 layer-matched random heads" in f.why
    assert rules.judge_causal(runs(60), 20, "mean").verdict == PARTLY
    assert rules.judge_causal(runs(82), 20, "mean").verdict == FAILS


def test_not_tested_and_the_tables():
    f = claims.CLAIMS["app_d"].finding(not_tested("needs a GPU"))
    assert f.verdict == NOT_TESTED and f.ours is None and "needs a GPU" in claims.markdown([f])
    assert json.loads(json.dumps(f.to_dict()))["ci"] is None
    assert claims.table([f]).loc["app_d", "verdict"] == NOT_TESTED


def test_report_covers_every_claim_and_its_numbers_are_the_studies(small, tmp_path, monkeypatch):
    """On a small random model, word datasets only: every claim in order, each number the one
    its study gives."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(evidence, "sentence_datasets", lambda names, data_dir=None: [])
    found = findings.report(small, 6, 2, progress=lambda step: None)
    assert [f.id for f in found] == list(claims.CLAIMS)
    assert all(f.verdict in (REPLICATES, PARTLY, FAILS, NOT_TESTED) for f in found)
    by = {f.id: f for f in found}
    assert by["fig10_11"].verdict == by["table3"].verdict == NOT_TESTED
    sets = {d: prompt_set(small, d, "balanced", 6) for d in evidence.WORD}
    from icl_helpers.studies.in_context_heads import in_context_heads
    pairs = [label_attention.attention_on_labels(small, ps).at(in_context_heads(small, ps, rules.K)) for ps in sets.values()]
    true, false = (torch.cat(x) for x in zip(*pairs))
    close(by["fig6"].ours, (true - false).mean(), scale=float(torch.cat([true, false]).abs().max()))
    assert by["fig6"].n == 12
    assert by["table2"].n == 24  # 6 prompts, 2 datasets, foo and bar
    assert by["causal"].n == 6 and "20 draws" in by["causal"].why  # 3 evaluation prompts a dataset
    json.dumps([f.to_dict() for f in found])
    assert findings.report(small, 6, 2, progress=lambda step: None, ids=["fig6", "fig2"]) == [by["fig6"], by["fig2"]]
    with pytest.raises(UsageError, match="Unknown claim id"):
        findings.report(small, 6, 2, ids=["fig99"])


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)  # the cache does not depend on the family
def test_a_report_run_again_or_resumed_judges_only_what_it_had_not(small, tmp_path, monkeypatch):
    """Findings are kept in the results cache: an interrupted report resumes where it stopped,
    with every finding equal to a fresh run's; other code or sizes judge afresh."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(evidence, "sentence_datasets", lambda names, data_dir=None: [])
    judged = []
    for id, c in list(claims.CLAIMS.items()):
        monkeypatch.setitem(claims.CLAIMS, id, replace(c, find=lambda s, id=id, find=c.find: judged.append(id) or find(s)))
    run = lambda ids, sentence_n=2: findings.report(small, 4, sentence_n, progress=lambda step: None, ids=ids)  # noqa: E731
    first = run(["fig2", "table1"])  # then interrupted
    assert judged == ["fig2", "fig2"] + ["table1"] * 3  # on all prompts, the correct ones, and table1 held out
    judged.clear()
    resumed = run(["fig2", "table1", "fig3_4"])
    assert judged == ["fig3_4", "fig3_4"] and resumed[:2] == first
    judged.clear()
    assert run(["fig2", "table1", "fig3_4"]) == resumed and judged == []
    run(["table1"], sentence_n=1)  # another size
    monkeypatch.setattr(findings, "CODE", "other code")
    run(["table1"])
    assert judged == ["table1"] * 6


def test_appendices_b_and_d_judge_the_fig5_and_fig6_rules_dataset_by_dataset(small, tmp_path, monkeypatch):
    """The word datasets stand in for the sentence datasets: each part is the fig5 or fig6
    judgement of that dataset in the shared heads (B) or the single top head (D, Llama only)."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 6, 4, 0, None)
    s.__dict__["sentence"] = list(evidence.WORD)
    heads = sorted(set(s.heads("sentiment_number")) & set(s.heads("animal_country")),
                   key=lambda h: -float(s.mean_increase(evidence.WORD)[h]))
    assert s.shared()[0] == heads
    b_mrr, b_attention = (claims.CLAIMS[id].find(s) for id in ("app_b_mrr", "app_b_attention"))
    assert b_mrr.n == b_attention.n == 12
    for d in evidence.WORD:
        ps = s.prompts(d)
        ours, random = mrr.layer_matched_mrr(small, ps, heads, rules.RANDOM_DRAWS, 0)
        assert f"{d} MRR: {ours_text(rules.judge_fig5(ours, random, heads))}" in b_mrr.why
        true, false = label_attention.attention_on_labels(small, ps).at(heads)
        cells = recency.recency_family(small, d, heads, 6).cells()
        fig6 = rules.judge_fig6(true, false, recency.effects(cells))
        assert f"{d} attention: {ours_text(fig6)}, {fig6.verdict}" in b_attention.why
    d = claims.CLAIMS["app_d"].find(s)
    if small.arch.family != "llama":
        assert d.verdict == NOT_TESTED and "not a Llama-family model" in d.why
    else:
        best = max(s.heads("sentiment_number"), key=lambda h: float(s.mean_increase(evidence.WORD)[h]))
        assert d.why.startswith(f"run on {small.name} ({small.model.config.model_type}, 3 layers x 4 heads), a stand-in for "
                                f"the paper's LLaMA 7B, 13B and 30B; head {best[0]}-{best[1]}, the largest mean increase")
        assert re.fullmatch(r"\d of 4 replicate, \d partly", d.ours)  # two datasets, the fig5 and fig6 rules
        ours, random = mrr.layer_matched_mrr(small, s.prompts("animal_country"), [best], rules.RANDOM_DRAWS, 0)
        assert f"animal_country MRR: {ours_text(rules.judge_fig5(ours, random, [best]))}" in d.why


def test_report_analyses_the_heads_given(small, tmp_path, monkeypatch):
    """Given heads replace every dataset's top K (in the causal check too), checked before any study runs."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(evidence, "sentence_datasets", lambda names, data_dir=None: [])
    given = [(2, 3), (1, 0), (2, 1)]
    s = evidence.Evidence(small, 6, 2, 0, None, "2-3,1-0,2-1")
    assert s.heads("sentiment_number") == s.heads("animal_country") == given
    assert evidence.Evidence(small, 6, 2, 0, None).heads("sentiment_number") == s.loc("sentiment_number").top_heads(rules.K)
    s.__dict__["sentence"] = list(evidence.WORD)  # Appendices B and D: the given heads, and the best of them
    assert s.shared() == (given, "the heads given")
    best = max(given, key=lambda h: float(s.mean_increase(evidence.WORD)[h]))
    assert s.top_head() == ([best], f"head {best[0]}-{best[1]}, of the heads given, the largest mean increase over "
                                    "sentiment_number, animal_country")
    ids = ["fig5", "fig6", "table1", "causal"]
    by = {f.id: f for f in findings.report(small, 6, 2, progress=lambda step: None, ids=ids, heads=given)}
    top = {f.id: f for f in findings.report(small, 6, 2, progress=lambda step: None, ids=ids)}
    pairs = [label_attention.attention_on_labels(small, prompt_set(small, d, "balanced", 6)).at(given) for d in evidence.WORD]
    true, false = (torch.cat(x) for x in zip(*pairs))
    close(by["fig6"].ours, (true - false).mean(), scale=float(torch.cat([true, false]).abs().max()))
    assert by["fig6"].ours != top["fig6"].ours
    assert "mean MRR of 3 in-context heads" in by["fig5"].why and "of 12 in-context heads" in top["fig5"].why
    assert "with the 3 heads given mean-ablated" in by["causal"].why and "heads given, not located" in by["causal"].why
    assert "with the top 12 in-context heads mean-ablated" in top["causal"].why and "located on other prompts" in top["causal"].why
    assert "the heads given: " in by["table1"].why and "sentiment_number's top heads" in top["table1"].why


@pytest.mark.parametrize("heads, message", [("3-0", "Head 3-0 is not in this model: it has 3 layers x 4 heads"),
                                            ("0-4", "Head 0-4 is not in this model"), ("1-1,1-1", "Head 1-1 is given twice"),
                                            ("1_1", "heads: '1_1' is not a head")])
def test_bad_heads_stop_the_report_before_any_study(small, monkeypatch, heads, message):
    monkeypatch.setattr(evidence, "prompt_set", lambda *a, **k: pytest.fail("built prompts"))
    monkeypatch.setattr(evidence.Evidence, "_prompts", lambda *a, **k: pytest.fail("built prompts"))
    with pytest.raises(UsageError, match=f"^{message}"):
        findings.report(small, 6, 2, progress=lambda step: pytest.fail(f"started {step}"), heads=heads)


def test_correct_only_judges_the_same_rule_on_the_correct_records(small, tmp_path, monkeypatch):
    """The correct-only view judges only its rows, in the heads located on all prompts, with
    the recency family pooled over those rows alone; too few correct prompts say so."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 6, 2, 0, None)
    right = s.loc("sentiment_number").targets == prompt_label_ids(
        small.tokenizer, s.prompts("sentiment_number").prompts)[0]
    if right.sum() >= 2:
        assert torch.equal(s.correct().rows("sentiment_number"), right)
    else:
        with pytest.raises(evidence.Unjudgeable, match="answered correctly"):
            s.correct().rows("sentiment_number")
    keep = torch.tensor([True, False, True, True, False, True])
    view = s.correct()
    monkeypatch.setattr(view, "rows", lambda dataset: keep)
    mine = claims.CLAIMS["fig6"].find(view)
    pairs = [label_attention.attention_on_labels(small, s.prompts(d)).at(s.heads(d)) for d in evidence.WORD]
    true, false = (torch.cat([x[keep] for x in xs]) for xs in zip(*pairs))
    cells = torch.cat([s.family(d).cells()[keep] for d in evidence.WORD])
    assert mine == rules.judge_fig6(true, false, recency.effects(cells)) and mine.n == 8
    assert s.effects(tuple(evidence.WORD)).n == 12 and view.effects(tuple(evidence.WORD)).n == 8  # not shared
    fig2 = claims.CLAIMS["fig2"].find(view)
    loc = s.loc("sentiment_number")
    assert fig2 == rules.judge_fig2(loc.attn[keep], loc.ffn[keep])

    def too_few(dataset):
        raise evidence.Unjudgeable("1 of 6 sentiment_number prompts answered correctly")
    assert s.correct() is view  # one view: the claims share its effects
    monkeypatch.setattr(view, "rows", too_few)
    f = findings.in_view(claims.CLAIMS["fig2"].find, s.correct)
    assert f.verdict == NOT_TESTED and "1 of 6" in f.why


def test_held_out_judges_the_even_records_in_heads_located_on_the_odd_ones(small, tmp_path, monkeypatch):
    """No head is judged on the prompts that selected it: the view's heads are the top K of the
    odd records' mean increase, its rows the even records, its recency families its own."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 6, 2, 0, None)
    view = s.held_out()
    assert view is s.held_out() and s.view == "all"
    even = torch.tensor([True, False, True, False, True, False])
    assert torch.equal(view.rows("sentiment_number"), even) and torch.equal(view.locating("sentiment_number"), ~even)
    loc = s.loc("sentiment_number")
    odd_heads = top_heads(loc.head[~even].mean(0), rules.K)
    assert view.heads("sentiment_number") == odd_heads != top_heads(loc.head.mean(0), rules.K)
    assert s.heads("sentiment_number") == loc.top_heads(rules.K)  # the main view's heads are untouched
    ps = s.prompts("sentiment_number")
    ours, random = mrr.layer_matched_mrr(small, ps, odd_heads, rules.RANDOM_DRAWS, 0)
    assert claims.CLAIMS["fig5"].find(view) == rules.judge_fig5(ours[even], random[:, even], odd_heads)
    pairs = [[x[view.rows(d)] for x in label_attention.attention_on_labels(small, s.prompts(d)).at(view.heads(d))]
             for d in evidence.WORD]
    true, false = (torch.cat(xs) for xs in zip(*pairs))
    cells = torch.cat([recency.recency_family(small, d, view.heads(d), 6).cells()[view.rows(d)] for d in evidence.WORD])
    assert claims.CLAIMS["fig6"].find(view) == rules.judge_fig6(true, false, recency.effects(cells))
    with pytest.raises(evidence.Unjudgeable, match="held out needs at least 4"):
        view.rows("trec")  # 2 sentence prompts
    given = evidence.Evidence(small, 6, 2, 0, None, "2-3,1-0")
    assert "given, not located" in findings.in_view(claims.CLAIMS["fig5"].find, given.held_out).why


def test_the_views_in_the_tables_and_the_json():
    f = claims.CLAIMS["fig6"].finding(rules.judge_fig6(torch.rand(10, 3), torch.rand(10, 3), effects(0.05, 0.1)))
    c = rules.judge_fig6(torch.rand(4, 3), torch.rand(4, 3), effects(0.05, 0.1))
    h = rules.judge_fig6(torch.rand(5, 3), torch.rand(5, 3), effects(0.05, 0.1))
    both = replace(f, correct_only=c, held_out=h)
    correct, held = claims.VIEWS.values()
    assert correct not in claims.table([f]).columns and held not in claims.table([f]).columns
    assert claims.table([both]).loc["fig6", correct] == f"{ours_text(c)}, N=4: {c.verdict}"
    assert claims.table([both]).loc["fig6", held] == f"{ours_text(h)}, N=5: {h.verdict}"
    d = json.loads(json.dumps(both.to_dict()))
    assert d["correct_only"] == {"ours": c.ours, "ci": list(c.ci), "n": 4, "verdict": c.verdict, "why": c.why}
    assert d["held_out"] == {"ours": h.ours, "ci": list(h.ci), "n": 5, "verdict": h.verdict, "why": h.why}
    assert claims.Finding.from_dict(d) == both
    md = claims.markdown([both])
    assert f"N=4: {c.verdict} | {ours_text(h)}, N=5: {h.verdict} |" in md
    assert "Correct prompts only" in md and f"Held out ({h.verdict}): {h.why}" in md
