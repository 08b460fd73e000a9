"""Verdict rules on constructed inputs (one that must replicate, one that must not, and the
middle where a rule has one), the bootstrap interval, and the report's shape and numbers."""
from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import replace

import pytest
import torch

from icl_helpers.core.heads import top_heads
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.data.setting import MAIN
from icl_helpers.errors import Unjudgeable, UsageError
from icl_helpers.stats import bootstrap_ci, mean_ci
from icl_helpers.studies import ablation, biases, label_attention, mrr, towers
from icl_helpers.studies.ablation import AblationRuns
from icl_helpers.studies.accuracy import Accuracy
from icl_helpers.studies.head_types import input_halves
from icl_helpers.studies.recency import Effects
from icl_helpers.studies.runner import prompt_set
from icl_helpers.verdicts import claims, evidence, findings, rules
from icl_helpers.verdicts.claims.accuracy import judge_table2, judge_table2_control
from icl_helpers.verdicts.claims.appendices import judge_app_e
from icl_helpers.verdicts.claims.attention import judge_fig7, judge_truth_control
from icl_helpers.verdicts.claims.interventions import (
    MAJORITY_BIAS,
    ablated_heads,
    judge_bias,
    judge_bias_cost,
    judge_causal,
    judge_causal_random,
)
from icl_helpers.verdicts.claims.location import judge_fig2, judge_fig3_4, judge_fig12_15
from icl_helpers.verdicts.claims.variants import (
    FIG10,
    FIG11,
    judge_distance_control,
    judge_fig8,
    judge_fig8_9_sentences,
    judge_fig9,
    judge_per_head_drop,
)
from icl_helpers.verdicts.claims.vocabulary import judge_keys, judge_label_values, judge_metric
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
    assert bootstrap_ci([torch.zeros(10)], lambda x: float("nan")) != bootstrap_ci([torch.zeros(10)], lambda x: 0.0)


def test_the_interval_resamples_distinct_inputs_and_needs_enough_of_them():
    """Prompts that share an input are drawn together: 20 inputs repeated 10 times each give the
    interval of 20 values, not of 200; fewer than MIN_CLUSTERS inputs are too few."""
    values = torch.randn(20, generator=g)
    repeated, inputs = values.repeat_interleave(10), torch.arange(20).repeat_interleave(10)
    clustered, alone = mean_ci(repeated, clusters=inputs), mean_ci(values)
    naive = mean_ci(repeated)
    close(torch.tensor(clustered), torch.tensor(alone), scale=float(values.abs().max()))  # the same draws of 20 values
    assert naive[1] - naive[0] < (clustered[1] - clustered[0]) / 2  # about sqrt(10) too narrow without clusters
    with pytest.raises(Unjudgeable, match="too few prompts: 9 distinct inputs"):
        mean_ci(torch.randn(90, generator=g), clusters=torch.arange(9).repeat_interleave(10))
    with pytest.raises(ValueError, match="3 cluster ids for 4 rows"):
        mean_ci(torch.zeros(4), clusters=torch.arange(3))


def test_every_claim_of_the_paper_and_each_control_is_registered_with_a_rule():
    ids = ("table2 table2_control fig2 fig3_4 fig12_15 table1 table3 two_towers metric fig5 fig6 fig6_control fig7 fig8 fig9 "
           "fig9_control fig10 fig11 fig8_9_sentences app_b_mrr app_b_attention app_d app_e causal causal_random causal_top "
           "causal_words majority_bias majority_cost majority_bias_words recency_bias recency_cost recency_bias_words").split()
    assert list(claims.CLAIMS) == ids
    assert all(c.claim and c.paper and c.rule and c.set_on and c.notebooks for c in claims.CLAIMS.values())
    assert all(n in ("01", "02", "03", "04", "05", "06", "07", "08") for c in claims.CLAIMS.values() for n in c.notebooks)
    assert claims.claims_of("05") == ["fig8", "fig10", "fig8_9_sentences"]


def test_every_claim_cites_the_lines_of_the_text_it_rests_on():
    """A claim of the preprint names its lines; the EMNLP abstract's claims say their protocol is our
    reconstruction; our controls and extensions say they are ours and name the claim they stand beside."""
    for c in claims.CLAIMS.values():
        ours = c.claim.startswith(("Our control", "Our extension", "Our row"))
        assert c.source.startswith("ours, beside") == ours, c.id
        if c.source.startswith(claims.V1):
            assert re.search(r"\(l\. \d+", c.source), c.id
        elif not ours:
            assert c.source.startswith(claims.EMNLP) and "our reconstruction" in c.source, c.id
        assert "{" not in c.claim + c.paper + c.rule + c.source, c.id  # every threshold written out
    assert "94/100" in claims.CLAIMS["table2"].paper and "l. 394-403" in claims.CLAIMS["table2"].source
    assert "0.0033" in claims.CLAIMS["fig5"].paper and "21-19" in claims.CLAIMS["fig10"].paper
    found = claims.CLAIMS["fig6"].finding(Judgement(0.1, (0.0, 0.2), 3, PARTLY, "w"))
    assert found.to_dict()["source"] == claims.CLAIMS["fig6"].source


def test_table2_and_its_control():
    cells = lambda hits: {f"cell {i}": torch.tensor(h) for i, h in enumerate(hits)}  # noqa: E731
    assert judge_table2(cells([[1] * 9 + [0]] * 8)).verdict == REPLICATES  # 90% everywhere
    f = judge_table2(cells([[1] * 10] * 7 + [[1] * 5 + [0] * 5]))
    assert f.verdict == PARTLY and f.n == 80 and "cell 7: 50%" in f.why
    close(f.ours, 75 / 80)
    assert judge_table2(cells([[0] * 10] * 8)).verdict == FAILS
    far = judge_table2_control(torch.arange(40) % 4 != 0)  # 75% where a false demonstration is nearest
    assert far.verdict == REPLICATES and far.n == 40 and "top-1 on the 40 recency-family prompts" in far.why
    assert judge_table2_control(torch.arange(40) % 4 == 0).verdict == FAILS  # follows the nearest label
    assert judge_table2_control(torch.arange(40) % 20 < 11).verdict == PARTLY  # 55%, its interval reaches below 50%


def effects(truth: float, distance: float) -> Effects:
    """Recency-family effects with tight intervals around the given values."""
    return Effects(truth, (truth - 0.01, truth + 0.01), distance, (distance - 0.01, distance + 0.01), 50)


def test_fig2():
    N, L = 30, 10
    deep_attention = torch.zeros(N, L)
    deep_attention[:, 7] = 2 + noise(N)
    assert judge_fig2(deep_attention, noise(N, L)).verdict == REPLICATES
    shallow = deep_attention.roll(-6, 1)  # the attention increase in layer 1: attention beats FFN, but not deep
    assert judge_fig2(shallow, noise(N, L)).verdict == PARTLY
    attention = noise(N, L)
    f = judge_fig2(attention, deep_attention)  # the FFN layers carry it
    assert f.verdict == FAILS and f.ci[1] < 0
    close(f.ours, (attention.sum(1) - deep_attention.sum(1)).mean())


def test_fig3_4_and_fig12_15():
    N, L, H, k = 12, 8, 10, 20
    deep = noise(N, L, H)
    deep[:, 5:, :7] += 1  # 21 strong heads, all in the deeper half
    shallow = noise(N, L, H)
    shallow[:, :3, 3:] += 1
    assert judge_fig3_4({"a": deep, "b": deep.flip(0)}, k).verdict == REPLICATES
    assert judge_fig3_4({"a": shallow}, k).verdict == FAILS
    mixed = judge_fig3_4({"a": deep, "b": shallow}, k)
    assert mixed.verdict == PARTLY and mixed.ours == 0.5
    same = judge_fig12_15({"a": deep, "b": deep + noise(N, L, H, scale=0.001)}, k)
    assert same.verdict == REPLICATES and same.ours >= 0.9
    assert judge_fig12_15({"a": deep, "b": shallow}, k).verdict == FAILS


def test_label_values():
    """Tables 1 and 3 over N prompts: the top head's share of prompts whose label values all rank
    their label in the top 10, its interval above one half; partly where another top-5 head's is."""
    heads = [(5, 0), (5, 1), (6, 0), (6, 1), (7, 0)]

    def hits(*shares: float) -> torch.Tensor:
        return torch.stack([torch.arange(40) < 40 * x for x in shares], 1)  # [40, 5]
    f = judge_label_values(hits(0.9, 0, 0, 0, 0), heads, "x", "the example: y")
    assert f.verdict == REPLICATES and f.ours == 0.9 and f.n == 40 and f.ci[0] > 0.5 and "the example: y" in f.why
    f = judge_label_values(hits(0.5, 0.2, 0.95, 0, 0), heads, "x", "")
    assert f.verdict == PARTLY and "6-0: 95%" in f.why and f.ci[0] < 0.5 < f.ci[1]
    assert judge_label_values(hits(0.55, 0.6, 0.5, 0, 0.6), heads, "x", "").verdict == FAILS  # no CI above 0.5


def test_fig5():
    N, S, D = 40, 20, 20
    heads = [(l, 0) for l in range(S)]
    random = (torch.rand(D, N, S, generator=g) * 0.002)
    assert rules.judge_fig5(0.3 + noise(N, S), random, heads).verdict == REPLICATES
    few = noise(N, S, scale=0.0001).abs()
    few[:, :5] = 0.9  # five very strong heads lift the mean, fifteen lie below random
    assert rules.judge_fig5(few, random, heads).verdict == PARTLY
    assert rules.judge_fig5(torch.rand(N, S, generator=g) * 0.002, random, heads).verdict == FAILS
    slight = rules.judge_fig5(0.0015 + noise(N, S, scale=0.0001), random, heads)  # above every draw, but 1.5x their mean
    assert slight.verdict == PARTLY and "1.5x their mean" in slight.why


def test_the_two_towers_keys():
    N, S = 40, 20
    own, others = 0.2 + noise(N, S), 0.02 + noise(N, S).abs()
    f = judge_keys(own, others)
    assert f.verdict == REPLICATES and f.ci[0] > 0
    close(f.ours, (own - others).mean(1).mean(), scale=float(own.abs().max()))
    assert judge_keys(0.03 + noise(N, S).abs(), others).verdict == PARTLY  # above the others, under twice them
    assert judge_keys(others, own).verdict == FAILS


def test_metric():
    N, S, K = 40, 5, 4
    similarity = torch.randn(N, K, generator=g)
    tracks = 0.5 * similarity[:, None] + noise(N, S, K, scale=0.3)
    f = judge_metric(tracks, similarity)
    assert f.verdict == REPLICATES and f.n == N and f.ci[0] > 0.1
    assert judge_metric(torch.randn(N, S, K, generator=g), similarity).verdict == FAILS
    faint = 0.02 * similarity[:, None] + noise(N, S, K, scale=0.3)  # a rise under the minimum, its CI above 0
    assert judge_metric(faint.repeat(10, 1, 1), similarity.repeat(10, 1)).verdict == PARTLY


def test_fig6_and_its_control_and_fig7():
    N, S = 40, 20
    true, false = 0.3 + noise(N, S), 0.1 + noise(N, S)
    f = rules.judge_fig6(true, false)
    assert f.verdict == REPLICATES and "true > false in 20/20 heads" in f.why
    tiny = rules.judge_fig6(false + 0.008, false)  # true above false everywhere, by less than the minimum effect
    assert tiny.verdict == PARTLY and tiny.ci[0] > 0
    assert rules.judge_fig6(false, true).verdict == FAILS
    assert judge_truth_control(effects(0.05, 0.1)).verdict == REPLICATES
    near = judge_truth_control(effects(0.0, 0.1))  # true above false only because it is nearer
    assert near.verdict == PARTLY and "truth effect +0.000 (-0.010 to +0.010)" in near.why
    assert judge_truth_control(effects(-0.05, 0.1)).verdict == FAILS
    assert judge_distance_control(effects(0.05, 0.1)).verdict == REPLICATES
    assert judge_distance_control(effects(0.05, -0.1)).verdict == FAILS
    increase = torch.rand(N, S, 4, generator=g)
    increase[:, :, 3] = torch.nan  # prompts of three labels: the padding is left out
    summed = (true, true + noise(N, S))
    f = judge_fig7(increase * 0.5 + noise(N, S, 4), increase, summed)
    assert f.verdict == REPLICATES and f"over {N * S * 3} (prompt, head, label position)" in f.why
    f = judge_fig7(torch.rand(N, S, 4, generator=g).where(~increase.isnan(), torch.nan), increase, summed)
    assert f.verdict == FAILS and f.ci[0] < 0 < f.ci[1]


def test_fig8_fig9_and_their_sentence_extension():
    N, S = 40, 20
    before = (0.3 + noise(N, S), 0.1 + noise(N, S))
    moved = (0.2 + noise(N, S), 0.2 + noise(N, S))  # true down, false up
    per_label = (before[0] / 2, moved[0])  # two true labels, then one: 0.15 -> 0.2 a label
    f8 = judge_fig8(before, moved, per_label)  # the paper's words: the sums; the per-label rise is described
    assert f8.verdict == REPLICATES
    assert f"per true-label position {per_label[0].mean():.3f} -> {per_label[1].mean():.3f}" in f8.why
    assert judge_fig8(before, (moved[0], before[1] + 0.005 + noise(N, S, scale=0.001)), per_label).verdict == PARTLY
    assert judge_fig8(before, (before[0] + 0.1, before[1] - 0.05), per_label).verdict == FAILS
    f9 = judge_fig9(before, moved)
    assert f9.verdict == REPLICATES and "drops in 20/20 heads" in f9.why
    assert judge_fig9(before, (before[0] - 0.005, before[1])).verdict == PARTLY  # in every head, but by too little
    no = judge_fig9(before, (before[0] + 0.1, before[1]))
    assert no.verdict == FAILS
    assert judge_fig8_9_sentences(f8, f9).verdict == REPLICATES
    assert judge_fig8_9_sentences(f8, no).verdict == PARTLY
    assert judge_fig8_9_sentences(no, no).verdict == FAILS


def test_figs_10_and_11_judge_each_shared_head():
    """Down (CI below 0) in enough of the heads replicates; a mean drop carried by fewer is partly."""
    N, heads = 40, [(18, 0), (19, 11), (20, 11), (21, 19), (22, 0), (24, 13)]
    before = 0.2 + noise(N, 6)
    after = before - 0.05
    after[:, 3] += 0.1  # up in one head, as the paper's 21-19
    f = judge_per_head_drop(before, after, heads, FIG10, "x")
    assert f.verdict == REPLICATES and "down in 5 (18-0, 19-11, 20-11, 22-0, 24-13), up in 1 (21-19)" in f.why
    assert judge_per_head_drop(before, after, heads, FIG11, "x").verdict == PARTLY  # not in every head
    assert judge_per_head_drop(before, before - 0.05, heads, FIG11, "x").verdict == REPLICATES
    assert judge_per_head_drop(before, before + 0.05, heads, FIG10, "x").verdict == FAILS
    close(f.ours, (after - before).mean(), scale=float(after.abs().max()))


def test_together():
    def part(verdict: str) -> Judgement:
        return replace(not_tested("x"), ours=0.5, verdict=verdict, why="because")
    both = rules.judge_together({"sst2": part(REPLICATES), "trec": part(REPLICATES)}, 10, "heads 1-2")
    assert both.verdict == REPLICATES and both.ours == "2 of 2 replicate, 0 partly" and both.n == 10
    assert both.why.startswith("heads 1-2. sst2: 0.5, replicates (because)")
    assert rules.judge_together({"a": part(REPLICATES), "b": part(FAILS)}, 10, "").verdict == PARTLY
    assert rules.judge_together({"a": part(PARTLY), "b": part(FAILS)}, 10, "").verdict == PARTLY
    assert rules.judge_together({"a": part(FAILS), "b": part(FAILS)}, 10, "").verdict == FAILS


def test_app_e_judges_order_insensitivity():
    """Each head's increase alone against added after the heads before it in a random order."""
    N, heads = 60, [(29, 1), (20, 0), (22, 3), (25, 8)]
    alone = torch.randn(N, 4, generator=g)
    same = torch.stack([alone, alone + noise(N, 4), alone + noise(N, 4)], -1)
    f = judge_app_e(same, heads, "where: x")
    assert f.verdict == REPLICATES and f.n == N and f.ci[0] > 0.8 and f.why.endswith("where: x")
    assert "the top 2 by mean increase keep" in f.why
    partial = torch.stack([alone, alone + torch.randn(N, 4, generator=g), alone], -1)  # rho about 0.7
    assert judge_app_e(partial, heads, "").verdict == PARTLY
    unrelated = torch.stack([alone, torch.randn(N, 4, generator=g), alone], -1)
    assert judge_app_e(unrelated, heads, "").verdict == FAILS


def test_bias():
    """The reduction replicates at half the paper's with its CI above 0 and its cost within bounds; a
    cost beyond them leaves it partly; under a quarter of the paper's it fails, its CI above 0 or not."""
    N = 200
    exposed, free = torch.ones(N, dtype=torch.bool), torch.ones(N, 2, dtype=torch.bool)  # no top-1 lost
    plain = torch.arange(N) % 2 == 0  # half biased
    gone = plain & (torch.arange(N) % 4 == 0)  # half of those still biased: a 50% reduction
    f = judge_bias(torch.stack([exposed, plain, gone], 1), free, MAJORITY_BIAS)
    assert f.verdict == REPLICATES and "100/200" in f.why and "its cost on standard prompts: 0.0 points of top-1" in f.why
    close(f.ours, 0.5)
    costly = torch.stack([torch.ones(N, dtype=torch.bool), torch.arange(N) % 10 != 0], 1)  # 10 points lost
    f = judge_bias(torch.stack([exposed, plain, gone], 1), costly, MAJORITY_BIAS)
    assert f.verdict == PARTLY and "10.0 points of top-1" in f.why and "100.0% plain -> 90.0% with the intervention" in f.why
    assert f.why.endswith("the cost rule: does not replicate")
    assert judge_bias(torch.stack([exposed, plain, plain], 1), free, MAJORITY_BIAS).verdict == FAILS
    small = plain.clone()
    small[:20] = False  # ten of the hundred biased prompts freed: 10%, CI above 0, under half the paper's 22%
    assert judge_bias(torch.stack([exposed, plain, small & plain], 1), free, MAJORITY_BIAS).verdict == PARTLY
    tiny = plain.clone()
    tiny[:8] = False  # four freed: 4%, under a quarter of the paper's 22% (5.5%), though its CI is above 0
    f = judge_bias(torch.stack([exposed, plain, tiny & plain], 1), free, MAJORITY_BIAS)
    assert f.verdict == FAILS and f.ci[0] > 0
    close(f.ours, 0.04)


def test_bias_cost():
    N = 200
    plain = torch.ones(N, dtype=torch.bool)
    assert judge_bias_cost(torch.stack([plain, plain], 1)).verdict == REPLICATES
    f = judge_bias_cost(torch.stack([plain, torch.arange(N) % 10 != 0], 1))  # 10 points lost
    assert f.verdict == FAILS and "100.0% plain -> 90.0% with the intervention" in f.why
    close(f.ours, 0.1)
    assert judge_bias_cost(torch.stack([plain, torch.arange(N) % 25 != 0], 1)).verdict == PARTLY  # 4 points


def accuracy_of(hits: torch.Tensor) -> Accuracy:
    """An Accuracy whose top-1 and ranked hits are `hits` [N] bool."""
    n = len(hits)
    return Accuracy(hits.float(), torch.zeros(n), torch.where(hits, 1, 2), torch.ones(n, dtype=torch.long), hits.float() / 2)


N_CAUSAL = 100


def ablated(plain: int, top: int, randoms: list[int]) -> AblationRuns:
    """Runs on N_CAUSAL prompts: the first `plain` right plainly, the first `top` with the top 20
    heads ablated, the first randoms[d] in random draw d."""
    first = lambda count: accuracy_of(torch.arange(N_CAUSAL) < count)  # noqa: E731
    return AblationRuns(first(plain), {20: first(top)}, {20: [first(r) for r in randoms]})


def test_causal():
    """Top-1 lost: replicates where it falls to half the plain with the loss's CI at or above 10 points;
    partly where only the loss holds; a loss whose CI reaches under 10 points fails."""
    randoms = [80 + d % 5 for d in range(20)]  # 80-84%
    f = judge_causal(ablated(90, 20, randoms), 20, "the heads")
    assert f.verdict == REPLICATES and f.n == N_CAUSAL and f.ci[0] < 0.7 < f.ci[1]
    close(f.ours, 0.7)  # 90% -> 20%
    assert "top-1 90.0% plain, 20.0% with the heads; 82.0% with 20 layer-matched random heads" in f.why
    assert judge_causal(ablated(90, 60, randoms), 20, "").verdict == PARTLY  # 30 points, not to half of 90%
    f = judge_causal(ablated(90, 84, [90] * 20), 20, "")  # 6 points lost, under every random draw
    assert f.verdict == FAILS and f.ci[0] > 0
    close(f.ours, 0.06)


def test_causal_random():
    """The random draws' mean top-1 minus ours: replicates below their 5th percentile with a gap whose
    CI is at or above 10 points; partly where the gap holds but some draws fall as low; fails under 10 points."""
    f = judge_causal_random(ablated(90, 20, [80 + d % 5 for d in range(20)]), 20)
    assert f.verdict == REPLICATES and f.n == N_CAUSAL
    close(f.ours, 0.62)  # 82% - 20%
    assert "20.0% with the top 20 in-context heads ablated, 82.0% with 20 layer-matched random heads" in f.why
    spread = [10, 10] + [90] * 18  # mean 82%, 5th percentile 10%
    f = judge_causal_random(ablated(90, 50, spread), 20)
    assert f.verdict == PARTLY and "5th percentile 10.0%" in f.why
    close(f.ours, 0.32)
    assert judge_causal_random(ablated(90, 78, [80 + d % 5 for d in range(20)]), 20).verdict == FAILS  # 4 points


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
    found = findings.report(small, 24, 2, announce=lambda step: None)
    assert [f.id for f in found] == list(claims.CLAIMS)
    assert all(f.verdict in (REPLICATES, PARTLY, FAILS, NOT_TESTED) for f in found)
    by = {f.id: f for f in found}
    assert by["fig8_9_sentences"].verdict == by["table3"].verdict == NOT_TESTED
    assert by["fig12_15"].why.endswith(findings.WORD_ONLY_NOTE) and "sst2" not in by["fig12_15"].why  # fewer than the paper's
    assert not by["fig6"].why.endswith(findings.WORD_ONLY_NOTE)  # a claim on the word datasets alone
    sets = {d: prompt_set(small, d, "balanced", 24) for d in evidence.WORD}
    from icl_helpers.studies.in_context_heads import in_context_heads
    pairs = [label_attention.attention_on_labels(small, ps).at(in_context_heads(small, ps, rules.K)) for ps in sets.values()]
    true, false = (torch.cat(x) for x in zip(*pairs))
    close(by["fig6"].ours, (true - false).mean(), scale=float(torch.cat([true, false]).abs().max()))
    assert by["fig6"].n == 48
    assert by["table2"].n == 96  # 24 prompts, 2 datasets, foo and bar
    assert all(by[id].verdict == NOT_TESTED and by[id].why == evidence.NO_SENTENCE_DATA
               for id in ("causal", "causal_random", "causal_top", "majority_bias", "recency_cost"))
    evaluated = sum(int((~input_halves(MAIN.records(d, 24), 0)).sum()) for d in evidence.WORD)  # the other half's inputs
    assert by["causal_words"].n == evaluated < 48 and "20 draws" in by["causal_words"].why
    assert "with the top 1 in-context heads" in by["causal_words"].why
    assert by["majority_bias_words"].n == 24 and by["majority_bias_words"].held_out.n == int((~input_halves(
        MAIN.records("sentiment_number", 24), 0)).sum())
    json.dumps([f.to_dict() for f in found])
    assert findings.report(small, 24, 2, announce=lambda step: None, ids=["fig6", "fig2"]) == [by["fig6"], by["fig2"]]
    with pytest.raises(UsageError, match="Unknown claim id"):
        findings.report(small, 24, 2, ids=["fig99"])


def test_a_report_on_too_few_prompts_says_so_before_any_study(small, monkeypatch):
    """Fewer word prompts than an interval needs: every claim that reads them is not tested, in words,
    and nothing runs; the sentence claims say what they lack."""
    monkeypatch.setattr(evidence, "sentence_datasets", lambda names, data_dir=None: ["sst2"])
    monkeypatch.setattr(evidence.Evidence, "_prompts", lambda *a, **k: pytest.fail("built prompts"))
    found = {f.id: f for f in findings.report(small, 9, 3, announce=lambda step: None)}
    assert found["fig6"].verdict == NOT_TESTED and found["fig6"].why == (
        "too few prompts: 9 word prompts a dataset; its intervals need at least 10")
    assert found["fig12_15"].why == "too few prompts: 3 sentence prompts a dataset, 9 word prompts a dataset; its " \
                                    "intervals need at least 10"
    assert all(f.verdict == NOT_TESTED for f in found.values())


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)  # the cache does not depend on the family
def test_a_report_run_again_or_resumed_judges_only_what_it_had_not(small, tmp_path, monkeypatch):
    """Findings are kept in the results cache: an interrupted report resumes where it stopped,
    with every finding equal to a fresh run's; other code or sizes judge afresh."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(evidence, "sentence_datasets", lambda names, data_dir=None: [])
    judged = []
    for id, c in list(claims.CLAIMS.items()):
        monkeypatch.setitem(claims.CLAIMS, id, replace(c, find=lambda s, id=id, find=c.find: judged.append(id) or find(s)))
    run = lambda ids, sentence_n=2: findings.report(small, 12, sentence_n, announce=lambda step: None, ids=ids)  # noqa: E731
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
    s = evidence.Evidence(small, 12, 12, 0, None)
    s.__dict__["sentence"] = list(evidence.WORD)
    heads = sorted(set(s.heads("sentiment_number")) & set(s.heads("animal_country")),
                   key=lambda h: -float(s.mean_increase(evidence.WORD)[h]))
    assert s.shared()[0] == heads
    b_mrr, b_attention = (claims.CLAIMS[id].find(s) for id in ("app_b_mrr", "app_b_attention"))
    assert b_mrr.n == b_attention.n == 24
    for d in evidence.WORD:
        ps = s.prompts(d)
        ours, random = mrr.layer_matched_mrr(small, ps, heads, rules.RANDOM_DRAWS, 0)
        assert f"{d} MRR: {ours_text(rules.judge_fig5(ours, random, heads, s.clusters([d])))}" in b_mrr.why
        true, false = label_attention.attention_on_labels(small, ps).at(heads)
        fig6 = rules.judge_fig6(true, false, s.clusters([d]))
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
        assert f"animal_country MRR: {ours_text(rules.judge_fig5(ours, random, [best], s.clusters(['animal_country'])))}" in d.why


def test_report_analyses_the_heads_given(small, tmp_path, monkeypatch):
    """Given heads replace every dataset's top K (in the causal check too), checked before any study runs."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(evidence, "sentence_datasets", lambda names, data_dir=None: [])
    given = [(2, 3), (1, 0), (2, 1)]
    s = evidence.Evidence(small, 12, 2, 0, None, "2-3,1-0,2-1")
    assert s.heads("sentiment_number") == s.heads("animal_country") == given
    assert evidence.Evidence(small, 12, 2, 0, None).heads("sentiment_number") == s.loc("sentiment_number").top_heads(rules.K)
    s.__dict__["sentence"] = list(evidence.WORD)  # Appendices B and D: the given heads, and the best of them
    assert s.shared() == (given, "the heads given") and s.word_shared() == (given, "the heads given")
    best = max(given, key=lambda h: float(s.mean_increase(evidence.WORD)[h]))
    assert s.top_head() == ([best], f"head {best[0]}-{best[1]}, of the heads given, the largest mean increase over "
                                    "sentiment_number, animal_country")
    ids = ["fig5", "fig6", "table1", "causal_words"]
    by = {f.id: f for f in findings.report(small, 12, 2, announce=lambda step: None, ids=ids, heads=given)}
    top = {f.id: f for f in findings.report(small, 12, 2, announce=lambda step: None, ids=ids)}
    pairs = [label_attention.attention_on_labels(small, prompt_set(small, d, "balanced", 12)).at(given)
             for d in evidence.WORD]
    true, false = (torch.cat(x) for x in zip(*pairs))
    close(by["fig6"].ours, (true - false).mean(), scale=float(torch.cat([true, false]).abs().max()))
    assert by["fig6"].ours != top["fig6"].ours
    assert "mean MRR of 3 in-context heads" in by["fig5"].why and "of 12 in-context heads" in top["fig5"].why
    assert "with 1 of the heads given mean-ablated" in by["causal_words"].why and "heads given, not located" in by["causal_words"].why
    assert "with the top 1 in-context heads mean-ablated" in top["causal_words"].why
    assert "located on the prompts of half the inputs of each class" in top["causal_words"].why
    assert "the heads given: " in by["table1"].why and "sentiment_number's top heads" in top["table1"].why


@pytest.mark.parametrize("heads, message", [("3-0", "Head 3-0 is not in this model: it has 3 layers x 4 heads"),
                                            ("0-4", "Head 0-4 is not in this model"), ("1-1,1-1", "Head 1-1 is given twice"),
                                            ("1_1", "heads: '1_1' is not a head")])
def test_bad_heads_stop_the_report_before_any_study(small, monkeypatch, heads, message):
    monkeypatch.setattr(evidence, "prompt_set", lambda *a, **k: pytest.fail("built prompts"))
    monkeypatch.setattr(evidence.Evidence, "_prompts", lambda *a, **k: pytest.fail("built prompts"))
    with pytest.raises(UsageError, match=f"^{message}"):
        findings.report(small, 12, 2, announce=lambda step: pytest.fail(f"started {step}"), heads=heads)


@pytest.mark.parametrize("small", ["llama-gqa"], indirect=True)
def test_the_emnlp_claims_pool_the_sentence_datasets_held_out_by_input(small, tmp_path, monkeypatch):
    """The word datasets stand in for the sentence datasets: causal judges `causal_check`'s runs, pooled,
    on the prompts of the inputs its heads were not located on; a bias claim pools each dataset's bias in
    its own heads, and held out judges the other half's records in heads located on the first half."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 16, 16, 0, None)
    s.__dict__["sentence"] = list(evidence.WORD)
    runs = AblationRuns.cat(list(ablation.causal_check(small, evidence.WORD, 16, n_random=rules.RANDOM_DRAWS).values()))
    halves = {d: input_halves(s.records(d), 0) for d in evidence.WORD}
    clusters = torch.cat([s.inputs(d)[~halves[d]] + i * 16 for i, d in enumerate(evidence.WORD)])
    want = judge_causal(runs, 1, ablated_heads(s, 1), clusters)
    found = claims.CLAIMS["causal"].find(s)
    assert (found.ours, found.ci, found.verdict) == (want.ours, want.ci, want.verdict) and found.n == len(clusters) < 32
    assert found.why == f"{want.why}; on sentiment_number, animal_country"
    held = s.held_out()
    for d in evidence.WORD:
        heads = top_heads(s.loc(d).head[halves[d]].mean(0), rules.K)
        effect = biases.majority_bias(small, [r for r, keep in zip(s.records(d), halves[d].tolist()) if not keep], heads)
        assert torch.equal(held.bias("majority", d).flags, effect.flags)
        assert torch.equal(held.bias("majority", d).standard_hits, effect.standard_hits)
    pooled = {id: claims.CLAIMS[id].find(held) for id in ("majority_bias", "majority_cost")}
    assert pooled["majority_bias"].n == pooled["majority_cost"].n == int(sum((~h).sum() for h in halves.values()))
    assert "the cost rule: " + pooled["majority_cost"].verdict in pooled["majority_bias"].why


def test_correct_only_judges_the_same_rule_on_the_correct_records_in_heads_located_on_them(small, tmp_path, monkeypatch):
    """The correct-only view locates its heads on its rows and judges only those, with the recency
    family pooled over them alone; too few correct prompts say so."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 16, 2, 0, None)
    right = s.loc("sentiment_number").targets == prompt_label_ids(
        small.tokenizer, s.prompts("sentiment_number").prompts)[0]
    if right.sum() >= 2:
        assert torch.equal(s.correct().rows("sentiment_number"), right)
    else:
        with pytest.raises(evidence.Unjudgeable, match="answered correctly"):
            s.correct().rows("sentiment_number")
    keep = torch.arange(16) % 4 != 1
    view = s.correct()
    monkeypatch.setattr(view, "rows", lambda dataset: keep)
    mine = claims.CLAIMS["fig6"].find(view)
    heads = {d: top_heads(s.loc(d).head[keep].mean(0), rules.K) for d in evidence.WORD}
    assert heads["sentiment_number"] == view.heads("sentiment_number") != s.heads("sentiment_number")
    pairs = [label_attention.attention_on_labels(small, s.prompts(d)).at(heads[d]) for d in evidence.WORD]
    true, false = (torch.cat([x[keep] for x in xs]) for xs in zip(*pairs))
    assert mine == rules.judge_fig6(true, false, view.clusters(evidence.WORD)) and mine.n == 24
    assert s.effects(tuple(evidence.WORD)).n == 32 and view.effects(tuple(evidence.WORD)).n == 24  # not shared
    fig2 = claims.CLAIMS["fig2"].find(view)
    loc = s.loc("sentiment_number")
    assert fig2 == judge_fig2(loc.attn[keep], loc.ffn[keep], view.clusters(["sentiment_number"]))

    def too_few(dataset):
        raise evidence.Unjudgeable("1 of 16 sentiment_number prompts answered correctly")
    assert s.correct() is view  # one view: the claims share its effects
    monkeypatch.setattr(view, "rows", too_few)
    f = findings.in_view(claims.CLAIMS["fig2"].find, s.correct)
    assert f.verdict == NOT_TESTED and "1 of 16" in f.why


def test_held_out_judges_half_the_inputs_of_each_class_in_heads_located_on_the_other_half(small, tmp_path, monkeypatch):
    """No head is judged on the prompts, or the inputs, that selected it: the view's heads are the top K
    of the locating half's mean increase; the halves split each class's distinct inputs, drawn with the seed."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 24, 2, 0, None)
    view = s.held_out()
    assert view is s.held_out() and s.view == evidence.ALL and view.view == evidence.HELD_OUT
    assert view.loc is s.loc and view.halves is s.halves and view.heads is not s.heads  # what HELD_OUT.shares says
    judged, locating = view.rows("sentiment_number"), view.locating("sentiment_number")
    assert torch.equal(judged, ~locating)
    records, inputs = s.records("sentiment_number"), s.inputs("sentiment_number")
    assert not set(inputs[judged].tolist()) & set(inputs[locating].tolist())  # an input is on one side only
    for cls in {r.true_class for r in records}:
        mine = torch.tensor([r.true_class == cls for r in records])
        distinct = len(inputs[mine].unique())
        assert len(inputs[mine & locating].unique()) == distinct // 2  # half of each class's inputs locate
    assert not torch.equal(evidence.Evidence(small, 24, 2, 1, None).held_out().rows("sentiment_number"), judged)  # seeded
    loc = s.loc("sentiment_number")
    heads = top_heads(loc.head[locating].mean(0), rules.K)
    assert view.heads("sentiment_number") == heads
    assert s.heads("sentiment_number") == loc.top_heads(rules.K)  # the main view's heads are untouched
    ps = s.prompts("sentiment_number")
    ours, random = mrr.layer_matched_mrr(small, ps, heads, rules.RANDOM_DRAWS, 0)
    assert claims.CLAIMS["fig5"].find(view) == rules.judge_fig5(ours[judged], random[:, judged], heads,
                                                                view.clusters(["sentiment_number"]))
    pairs = [[x[view.rows(d)] for x in label_attention.attention_on_labels(small, s.prompts(d)).at(view.heads(d))]
             for d in evidence.WORD]
    true, false = (torch.cat(xs) for xs in zip(*pairs))
    assert claims.CLAIMS["fig6"].find(view) == rules.judge_fig6(true, false, view.clusters(evidence.WORD))
    with pytest.raises(evidence.Unjudgeable, match="held out needs at least 2 records"):
        evidence.Evidence(small, 2, 2, 0, None).held_out().rows("sentiment_number")
    given = evidence.Evidence(small, 12, 2, 0, None, "2-3,1-0")
    assert "given, not located" in findings.in_view(claims.CLAIMS["fig5"].find, given.held_out).why


def test_the_views_in_the_tables_and_the_json():
    f = claims.CLAIMS["fig6"].finding(rules.judge_fig6(torch.rand(10, 3), torch.rand(10, 3)))
    c = rules.judge_fig6(torch.rand(14, 3), torch.rand(14, 3))
    h = rules.judge_fig6(torch.rand(15, 3), torch.rand(15, 3))
    both = replace(f, correct_only=c, held_out=h)
    correct, held = claims.VIEWS.values()
    assert correct not in claims.table([f]).columns and held not in claims.table([f]).columns
    assert claims.table([both]).loc["fig6", correct] == f"{ours_text(c)}, N=14: {c.verdict}"
    assert claims.table([both]).loc["fig6", held] == f"{ours_text(h)}, N=15: {h.verdict}"
    d = json.loads(json.dumps(both.to_dict()))
    assert d["correct_only"] == {"ours": c.ours, "ci": list(c.ci), "n": 14, "verdict": c.verdict, "why": c.why}
    assert d["held_out"] == {"ours": h.ours, "ci": list(h.ci), "n": 15, "verdict": h.verdict, "why": h.why}
    assert claims.Finding.from_dict(d) == both
    md = claims.markdown([both])
    assert f"N=14: {c.verdict} | {ours_text(h)}, N=15: {h.verdict} |" in md
    assert "Correct prompts only" in md and f"Held out ({h.verdict}): {h.why}" in md


def test_figs_10_and_11_and_the_two_towers_judge_their_studies(small, tmp_path, monkeypatch):
    """Figs. 10 and 11: the rule on the attention a true label gets in both word datasets' shared heads;
    the two towers: the keys part on the label keys' own and other words, a query part a dataset."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 2, 0, None)
    heads, which = s.word_shared()
    first = evidence.FIRST
    for id, variant, rule in (("fig10", "imbalanced", FIG10), ("fig11", "reordered", FIG11)):
        weight = [label_attention.true_label_weight(small, prompt_set(small, first, v, 12), heads) for v in ("balanced", variant)]
        assert claims.CLAIMS[id].find(s) == judge_per_head_drop(*weight, heads, rule, f"{which}, balanced -> {variant}",
                                                                      s.clusters([first]))
    f = claims.CLAIMS["two_towers"].find(s)
    own, others = [], []
    for d in evidence.WORD:
        layers = sorted({l for l, _ in s.heads(d)})
        pool = [(l, h) for l in layers for h in range(small.arch.n_heads)]
        key = towers.tower_ranks(small, s.prompts(d), pool)["key"].reciprocal()
        diagonal = torch.eye(key.shape[-1], dtype=torch.bool)
        at = [layers.index(l) for l, _ in s.heads(d)]
        own.append(key[..., diagonal].nanmean(-1)[:, at])
        others.append(key[..., ~diagonal].nanmean(-1)[:, at])
    keys = judge_keys(torch.cat(own), torch.cat(others), s.clusters(evidence.WORD))
    assert f.why.startswith(f"the word datasets, each in its top heads. keys: {ours_text(keys)}, {keys.verdict}")
    assert re.fullmatch(r"\d of 3 replicate, \d partly", f.ours) and f.n == 24
    assert "sentiment_number query: " in f.why and "animal_country query: " in f.why


TOY_SECTION = '''"""A toy section: one claim with its thresholds, judge and finder, registered from this file alone."""
import torch

from icl_helpers.stats import mean_ci
from icl_helpers.verdicts.claims import Claim, register
from icl_helpers.verdicts.evidence import FIRST, Evidence
from icl_helpers.verdicts.judgement import FAILS, REPLICATES, Judgement

TOY = {"above": -1e9}


def judge_toy(increase: torch.Tensor, clusters: torch.Tensor) -> Judgement:
    """increase: [N] each prompt's summed head increase."""
    ci = mean_ci(increase, clusters=clusters)
    return Judgement(float(increase.mean()), ci, len(increase), REPLICATES if ci[0] > TOY["above"] else FAILS, "toy")


def toy(s: Evidence) -> Judgement:
    return judge_toy(s.loc(FIRST).head[s.rows(FIRST)].sum((1, 2)), s.clusters([FIRST]))


register(Claim(id="toy", claim="Our extension: a toy", paper="none", unit="toy units", rule="replicates: the CI lies above {above:g}",
               source="ours, beside nothing", set_on="in this test", find=toy, notebooks=("01",), thresholds=TOY))
'''


@pytest.fixture
def toy_section(tmp_path):
    """The toy section imported from its own file, as the package imports its sections; unregistered after."""
    path = tmp_path / "toy_section.py"
    path.write_text(TOY_SECTION)
    spec = importlib.util.spec_from_file_location("toy_section", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    del claims.CLAIMS["toy"]


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_a_claim_added_in_one_file_is_judged_by_the_report(small, toy_section, tmp_path, monkeypatch):
    """Registering a claim, in a file of its own, is the one edit: the report judges it, its notebook
    lists it after the others and the tables write out its rule."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    assert list(claims.CLAIMS)[-1] == "toy" and claims.claims_of("01")[-1] == "toy"
    assert claims.CLAIMS["toy"].rule == "replicates: the CI lies above -1e+09"
    (found,) = findings.report(small, 12, 2, announce=lambda step: None, ids=["toy"])
    s = evidence.Evidence(small, 12, 2, 0, None)
    assert found == claims.CLAIMS["toy"].finding(toy_section.judge_toy(s.loc(evidence.FIRST).head.sum((1, 2)),
                                                                       s.clusters([evidence.FIRST])))
    assert found.verdict == REPLICATES and "Rule: replicates: the CI lies above -1e+09" in claims.markdown([found])
    with pytest.raises(ValueError, match="'toy' is registered twice"):
        claims.register(claims.CLAIMS["toy"])
