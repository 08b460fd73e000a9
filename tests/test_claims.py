"""Verdict rules on constructed inputs (one that must replicate, one that must not, and the
middle where a rule has one), the bootstrap interval, and the report's shape and numbers."""
from __future__ import annotations

import importlib.util
import json
import math
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from icl_helpers import stats
from icl_helpers.core.heads import at_heads, top_heads
from icl_helpers.data.prompts import prompt_label_ids
from icl_helpers.data.setting import MAIN, Setting
from icl_helpers.data.split import input_halves
from icl_helpers.errors import CannotMeasure, UsageError
from icl_helpers.stats import bootstrap_ci, mean_ci, spearman
from icl_helpers.studies import ablation, biases, label_attention, mrr, towers
from icl_helpers.studies.ablation import AblationRuns
from icl_helpers.studies.accuracy import Accuracy
from icl_helpers.studies.recency import Effects
from icl_helpers.studies.runner import prompt_set, prompt_set_from_texts
from icl_helpers.verdicts import claims, common, evidence, findings, judgement, rules
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
from icl_helpers.verdicts.claims.label_ranks import false_ahead, judge_heads_that, one_label
from icl_helpers.verdicts.claims.location import judge_fig2, judge_fig3_4, judge_fig12_15, judge_fig12_15_largest
from icl_helpers.verdicts.claims.prediction_shift import judge_prediction_shift
from icl_helpers.verdicts.claims.registry import Claim
from icl_helpers.verdicts.claims.towers import judge_adjacent, judge_keys, judge_metric, judge_top
from icl_helpers.verdicts.claims.variants import (
    FIG10,
    FIG11,
    VARIANTS,
    judge_distance_control,
    judge_fig8,
    judge_fig8_9_sentences,
    judge_fig9,
    judge_per_head_drop,
)
from icl_helpers.verdicts.claims.vocabulary import judge_concepts, judge_strict
from icl_helpers.verdicts.judgement import (
    FAILS,
    NOT_TESTED,
    PARTLY,
    REPLICATES,
    Judgement,
    Unjudgeable,
    not_tested,
    ours_text,
)
from icl_helpers.verdicts.whose import LITERATURE, OURS, PAPER
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
    with pytest.raises(CannotMeasure, match="too few prompts: 9 distinct inputs"):
        mean_ci(torch.randn(90, generator=g), clusters=torch.arange(9).repeat_interleave(10))
    with pytest.raises(ValueError, match="3 cluster ids for 4 rows"):
        mean_ci(torch.zeros(4), clusters=torch.arange(3))


def test_a_bootstrap_draws_every_resample_at_once_as_it_would_one_at_a_time():
    """One sample's draws are made in one call of the generator, and a mean's interval is one product of
    the row counts: each gives what drawing clusters one resample at a time gives (the same resamples, to the
    bit; a mean summed in another order, to float64 rounding), and a NaN row no draw takes still counts."""
    x, clusters = torch.randn(60, 2, generator=g), torch.randint(25, (60,), generator=g)
    row_cluster, members = stats._ids(x, clusters)
    draws = torch.Generator().manual_seed(3)
    one_at_a_time = torch.tensor([float(x[stats._draw(row_cluster, members, draws)][:, 1].median()) for _ in range(200)],
                                 dtype=torch.float64)
    assert bootstrap_ci([x], lambda s: s[:, 1].median(), 200, 3, clusters=[clusters]) == stats._percentiles(
        one_at_a_time, stats.LEVEL)
    draws.manual_seed(3)
    means = torch.tensor([float(x[stats._draw(row_cluster, members, draws)].double().mean()) for _ in range(200)],
                         dtype=torch.float64)
    close(torch.tensor(mean_ci(x, 200, 3, clusters)), torch.tensor(stats._percentiles(means, stats.LEVEL)),
          scale=float(x.abs().max()))
    with_nan = x[:, 0].clone()
    with_nan[7] = float("nan")
    assert mean_ci(with_nan, clusters=clusters) == bootstrap_ci([with_nan], lambda s: s.double().mean(), clusters=[clusters])


def test_spearman_gives_tied_values_their_mean_rank_whatever_their_order():
    """x's tied 2s share rank 1.5 (mean ranks [0, 1.5, 1.5, 3], y's [0, 2, 1, 3]): rho = 4.5 / sqrt(4.5 * 5);
    breaking the tie by order would give 0.8. A bootstrap draw's repeated rows, in any order, give one rho."""
    x, y = torch.tensor([1.0, 2.0, 2.0, 3.0]), torch.tensor([1.0, 3.0, 2.0, 4.0])
    assert math.isclose(spearman(x, y), 3 / math.sqrt(10), rel_tol=1e-12)
    assert math.isclose(spearman(x.flip(0), y.flip(0)), 3 / math.sqrt(10), rel_tol=1e-12)
    drawn = torch.randint(40, (400,), generator=g)
    a, b = torch.randn(40, generator=g)[drawn], torch.randn(40, generator=g)[drawn]
    order = torch.randperm(400, generator=g)
    assert math.isclose(spearman(a[order], b[order]), spearman(a, b), rel_tol=0, abs_tol=1e-12)  # float64 sums of 400 ranks


def resampled_and_weighted(x: torch.Tensor, clusters: torch.Tensor, draws: int = 60, seed: int = 3):
    """The same draws two ways: each resample built row by row, as `bootstrap_ci` draws it, and its rows'
    multiplicities [draws, N], as `weighted_ci` weighs them."""
    row_cluster, members = stats._ids(x, clusters)
    counts = stats._counts(len(members), torch.Generator().manual_seed(seed), draws)
    one_at_a_time = torch.Generator().manual_seed(seed)
    return [x[stats._draw(row_cluster, members, one_at_a_time)] for _ in range(draws)], counts[:, row_cluster].double()


def nanmean_by_truth(x: torch.Tensor, is_true: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`by_truth` written as a mean of each head's entries, the resample's rows repeated."""
    def mean(where):
        return x.masked_fill(~where[:, None], torch.nan).transpose(0, 1).flatten(1).nanmean(1)
    return mean(is_true), mean(~is_true)


def test_a_statistic_over_row_weights_gives_each_resample_what_the_resample_itself_gives():
    """fig7's rho and bin gap, the heads that favour the false label or project one label, and the metric's rho are
    computed from each resample's row multiplicities, all draws at once: each draw's value is the one the resample
    built row by row gives (ties, NaN positions, inputs shared by prompts); counts to the bit, the rest to float64
    rounding. The intervals `weighted_ci` draws are `bootstrap_ci`'s."""
    from icl_helpers.verdicts.claims import attention, label_ranks
    N, S, D = 48, 3, 4
    clusters = torch.randint(20, (N,), generator=g)
    weight = (torch.rand(N, S, D, generator=g) * 10).round() / 10  # ties, and weights on the bins' edges
    weight[torch.rand(N, S, D, generator=g) < 0.3] = float("nan")
    points = torch.stack([weight, torch.randn(N, S, D, generator=g)], -1).double()
    resamples, w = resampled_and_weighted(points, clusters)
    rho = torch.tensor([spearman(*r[~r[..., 0].isnan()].unbind(-1)) for r in resamples], dtype=torch.float64)
    torch.testing.assert_close(attention._rho(points, w), rho, rtol=0, atol=1e-12)

    def gap(r):
        weight, increase = r.unbind(-1)
        high, middle = (increase[(weight >= lo) & (weight <= hi)].mean() for lo, hi in attention.BINS.values())
        return float(high - middle)
    torch.testing.assert_close(attention._bin_gap(points, w), torch.tensor([gap(r) for r in resamples],
                                                                             dtype=torch.float64), rtol=0, atol=1e-12)

    is_true = torch.tensor([True, False, True, False]).repeat(N, 1)
    at = torch.where(is_true[:, None], torch.tensor([0.5, 0.9, 0.3])[:, None], torch.tensor([0.1, 0.05, 0.3])[:, None])
    hits = (torch.rand(N, S, D, generator=g) < at).float()  # head 0 on both of one_label's edges: resamples differ
    hits[::5, :, 3] = float("nan")  # past a prompt's labels
    ranks = torch.rand(N, S, D, generator=g) * torch.where(is_true[:, None], 1.0, torch.tensor([1.5, 1.0, 3.0])[:, None])
    for which, measure, ratio in ((label_ranks.false_ahead, ranks, label_ranks.ONE_LABEL["ratio"]),
                                  (label_ranks.one_label, hits, None)):
        pairs = torch.stack([measure, is_true[:, None].expand(N, S, D).float()], -1)
        resamples, w = resampled_and_weighted(pairs, clusters)
        if ratio is None:
            shares = [torch.stack(nanmean_by_truth(r[..., 0], r[:, 0, :, 1].bool())) for r in resamples]
            want = [(s.amax(0) >= label_ranks.ONE_LABEL["projects"]) & (s.amin(0) <= label_ranks.ONE_LABEL["other"])
                    for s in shares]
        else:
            want = [f >= ratio * t for t, f in (nanmean_by_truth(r[..., 0], r[:, 0, :, 1].bool()) for r in resamples)]
        assert torch.equal(which(pairs, w), torch.stack(want)), which.__name__
        assert len({tuple(picked.tolist()) for picked in want}) > 1  # the draws pick different heads
        assert torch.equal(which(pairs), which(pairs, torch.ones(1, N, dtype=torch.float64))[0])  # the sample: once each

    score, similarity = torch.randn(N, S, D, generator=g), (torch.rand(N, D, generator=g) * 4).round()
    pairs = torch.stack([score, similarity[:, None].expand_as(score)], -1)
    got = judge_metric(score, similarity, clusters)
    close(torch.tensor(got.ci), torch.tensor(bootstrap_ci([pairs], lambda p: spearman(p[..., 0], p[..., 1]),
                                                          clusters=[clusters])), scale=1.0)
    assert math.isclose(got.ours, spearman(score, similarity[:, None].expand_as(score)), abs_tol=1e-12)


def test_the_means_shares_and_medians_over_row_weights_give_each_resample_what_it_gives_itself():
    """Fig. 2's shares, Table 1's passing heads, Appendix E's median change and the bias reduction, computed from each
    resample's row multiplicities: each draw's value is the one its resample built row by row gives (to float64
    rounding; the counts and shares of hits to the bit). The recency effects' intervals are the means' of each
    record's own effects, as the fit is linear in the mean table: `bootstrap_ci`'s of the fit."""
    from icl_helpers.studies import recency
    from icl_helpers.verdicts.claims import appendices, interventions, location, vocabulary
    N, S, D = 48, 5, 4
    clusters = torch.randint(20, (N,), generator=g)
    hits = (torch.rand(N, S, D, generator=g) < torch.tensor([0.3, 0.45, 0.5, 0.55, 0.8])[:, None]).float()
    hits[::5, :, 3] = float("nan")
    flags = torch.rand(N, 3, generator=g) < torch.tensor([0.7, 0.5, 0.3])
    pairs = {  # weighted statistic, the same statistic of a resample, the sample
        "fig2": (lambda x, w: location._fig2_shares(x, 5, w)[:, 1],
                 lambda x: float(x[:, 0, 5:].sum() / x.sum()), torch.randn(N, 2, 8, generator=g).double() + 0.5),
        "passing heads": (vocabulary.passing_heads, lambda x: float((x.transpose(0, 1).flatten(1).nanmean(1)
                                                                   >= vocabulary.TABLE1["values"]).double().mean()), hits),
        "app_e": (appendices._relative_change, lambda x: float(torch.quantile(
            ((x.mean(0)[:, 1] - x.mean(0)[:, 0]).abs() / x.mean(0)[:, 0].abs()).double(), 0.5)),
            torch.randn(N, S, 2, generator=g).double() + 1),
    }
    for name, (weighted, each, sample) in pairs.items():
        resamples, w = resampled_and_weighted(sample, clusters)
        torch.testing.assert_close(weighted(sample, w), torch.tensor([each(r) for r in resamples], dtype=torch.float64),
                                   rtol=1e-12, atol=0, msg=name)
    resamples, w = resampled_and_weighted(hits, clusters)
    assert len({float(vocabulary.passing_heads(r, torch.ones(1, len(r), dtype=torch.float64))) for r in resamples}) > 1

    def reduction(f):
        plain, after = float((f[:, 0] & f[:, 1]).sum()), float((f[:, 0] & f[:, 2]).sum())
        return (plain - after) / plain if plain else float("nan")
    got = interventions.judge_bias(flags, torch.rand(N, 2, generator=g) < 0.8, interventions.MAJORITY_BIAS, clusters)
    assert (got.ours, got.ci) == (reduction(flags), bootstrap_ci([flags], reduction, clusters=[clusters]))

    cells = torch.rand(N, 2, D, generator=g)
    effects = recency.effects(cells, clusters)
    for got, i in ((effects.truth_ci, 0), (effects.distance_ci, 1)):
        close(torch.tensor(got), torch.tensor(bootstrap_ci([cells], lambda c, i=i: recency.fit(c)[i], clusters=[clusters])),
              scale=1.0)


def test_every_claim_we_judge_is_registered_once_with_a_rule_and_whose_it_is():
    """The registry's order is the modules': each module's claims together, the paper's sections in the order
    the package imports them, then the literature's (the committed reports hold the ids themselves: test_results).
    A claim of ours begins "Our ", and no other does."""
    sections = ["accuracy", "location", "vocabulary", "towers", "label_ranks", "attention", "variants", "prediction_shift",
                "appendices", "interventions", "induction_fv", "task_heads"]
    modules = [c.find.__module__.rsplit(".", 1)[-1] for c in claims.CLAIMS.values()]
    assert list(dict.fromkeys(modules)) == sections and modules == sorted(modules, key=sections.index)
    assert list(claims.CLAIMS)[:2] == ["table2", "table2_control"]
    assert claims.reported() == [id for id, m in zip(claims.CLAIMS, modules) if m not in sections[-2:]]
    assert all(c.claim and c.paper and c.rule and c.set_on and c.notebooks for c in claims.CLAIMS.values())
    assert all(n in (*(f"0{i}" for i in range(1, 9)),) for id in claims.reported() for n in claims.CLAIMS[id].notebooks)
    assert claims.claims_of("05") == ["fig8", "fig10", "fig10_per_label", "fig8_9_sentences", "prediction_shift",
                                      "prediction_shift_word"]
    assert claims.claims_of("09") == claims.ids_of(LITERATURE)
    for c in claims.CLAIMS.values():
        assert c.claim.startswith("Our ") == (c.whose == OURS), c.id
    assert len(claims.ids_of(OURS)) == 18 and len(claims.ids_of(PAPER)) == 26


def test_a_claim_says_whose_it_is_in_its_words_too():
    """A claim of ours that does not begin "Our ", or one of the paper's that does, is refused at registration."""
    toy = dict(id="toy", paper="p", rule="r", source="s", set_on="2026-12-03", unit="u", find=lambda s: None, notebooks=())
    Claim(claim="Our row: x", whose=OURS, **toy)
    with pytest.raises(ValueError, match="begins 'Our '"):
        Claim(claim="Our row: x", **toy)
    with pytest.raises(ValueError, match="begins 'Our '"):
        Claim(claim="x", whose=OURS, **toy)
    with pytest.raises(ValueError, match="whose is 'mine'"):
        Claim(claim="x", whose="mine", **toy)


def test_every_claim_cites_the_lines_of_the_text_it_rests_on():
    """A claim of the preprint names its lines; the EMNLP abstract's claims say their protocol is our
    reconstruction; our controls and extensions say they are ours and name the claim they stand beside."""
    for c in map(claims.CLAIMS.get, claims.reported()):
        ours = c.claim.startswith(("Our control", "Our extension", "Our row"))
        assert c.source.startswith("ours, beside") == ours, c.id
        assert c.reconstructed == ("our reconstruction" in c.source), c.id
        if c.source.startswith(claims.V1):
            assert re.search(r"\(l\. \d+", c.source), c.id
        elif not ours:
            assert c.source.startswith(claims.EMNLP) and "our reconstruction" in c.source, c.id
        assert "{" not in c.claim + c.paper + c.rule + c.source, c.id  # every threshold written out
    assert "94/100" in claims.CLAIMS["table2"].paper and "l. 394-403" in claims.CLAIMS["table2"].source
    assert "0.0033" in claims.CLAIMS["fig5"].paper and "21-19" in claims.CLAIMS["fig10"].paper
    found = claims.CLAIMS["fig6"].finding(Judgement(0.1, (0.0, 0.2), 3, PARTLY, "w"))
    assert found.to_dict()["source"] == claims.CLAIMS["fig6"].source
    assert found.to_dict()["unit"] == claims.CLAIMS["fig6"].unit == "summed attention, true minus false labels"


def test_a_report_keeps_the_history_of_its_rules_out_of_its_reasons_and_lists_it_after_them():
    """Every rule's `set_on` says when it was set in words a reader can check (dates, commits), never our
    tracker's issue numbers; the reasons carry no history, which the list after them holds, claim by claim."""
    for c in claims.CLAIMS.values():
        assert re.match(r"2026-\d\d-\d\d\b", c.set_on) and not re.search(r"issue \d", c.set_on + c.rule), c.set_on
    shown = [claims.CLAIMS[id].finding(Judgement(0.5, (0.4, 0.6), 12, PARTLY, "w")) for id in ("table2", "fig6")]
    reasons, dates = claims.markdown(shown).split(f"\n\n{judgement.RULE_DATES}:\n\n")
    assert "(set " not in reasons and not any(c.set_on in reasons for c in claims.CLAIMS.values())
    assert dates == "".join(f"- **{id}**: {claims.CLAIMS[id].set_on}.\n" for id in ("table2", "fig6"))
    assert "judged on" not in claims.markdown(shown)  # every headline on all prompts, no other view: no column for it
    shown[1].views["correct_only"] = Judgement(0.4, (0.3, 0.5), 9, PARTLY, "c")
    row = claims.markdown(shown).splitlines()[2].split(" | ")
    assert row[6] == evidence.ALL.title and "judged on" in claims.markdown(shown).splitlines()[0]


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


def test_fig2_judges_the_deep_attention_layers_share_of_all_layers_increase():
    """Shares of the summed increase of all layers, pooled over prompts; both at least 80% with CIs above
    50% replicate, both at least 50% is partly, and a total under 1 a prompt shares nothing."""
    N, L = 30, 10  # the deeper half: layers 5-9
    attention, ffn = torch.zeros(N, L), torch.zeros(N, L)
    attention[:, 7], attention[:, 1], ffn[:, 3] = 2.0, 0.5, 0.5  # total 3: attention 2.5 of it, deep attention 2
    f = judge_fig2(attention, ffn)
    assert f.verdict == PARTLY and f.n == N and "the attention layers' share 83% (83% to 83%)" in f.why
    close(f.ours, 2 / 3)
    close(torch.tensor(f.ci), torch.tensor([2 / 3, 2 / 3]))
    assert "(>= 5 of 10)" in f.why and "all layers +3.00 a prompt (attention +2.50, FFN +0.50)" in f.why
    attention[:, 1], ffn[:, 3] = 0.2, 0.1  # total 2.3: attention 96%, deep attention 87%
    assert judge_fig2(attention + noise(N, L), ffn).verdict == REPLICATES
    assert judge_fig2(attention * 0.4, ffn * 0.4).verdict == FAILS  # the same shares of 0.92 a prompt: under the minimum
    assert judge_fig2(attention.roll(-6, 1), ffn).verdict == FAILS  # attention carries it, in layer 1: not deep
    assert judge_fig2(ffn, attention).verdict == FAILS  # the FFN layers carry it
    one = torch.zeros(12, L)
    one[0, 8] = 60.0  # one prompt of twelve carries all the attention increase, the others an FFN increase of 1
    rare = judge_fig2(one, (torch.arange(12) > 0).float()[:, None] * torch.eye(L)[2])
    close(rare.ours, 5 / (5 + 11 / 12))  # 84%, both shares: but the interval reaches 0
    assert rare.verdict == PARTLY and rare.ci[0] < 0.5


def test_fig3_4_and_fig12_15():
    N, L, H, k = 12, 8, 10, 20
    deep = noise(N, L, H)
    deep[:, 5:, :7] += 1  # 21 strong heads, all in the deeper half
    shallow = noise(N, L, H)
    shallow[:, :3, 3:] += 1
    assert judge_fig3_4({"a": deep, "b": deep.flip(0)}, k).verdict == REPLICATES
    assert judge_fig3_4({"a": shallow}, k).verdict == FAILS
    mixed = judge_fig3_4({"a": deep, "b": shallow}, k)
    assert mixed.verdict == FAILS and mixed.ours == 0.5  # as many deep as shallow: chance
    most = noise(N, L, H)
    most[:, 6:, :7] += 1  # 14 strong heads deep, 6 shallow
    most[:, 0, :6] += 1
    f = judge_fig3_4({"a": most}, k)
    assert f.verdict == PARTLY and f.ours == 0.7 and "in layers >= 4 of 8" in f.why
    same = judge_fig12_15({"a": deep, "b": deep + noise(N, L, H, scale=0.001)}, k)
    assert same.verdict == REPLICATES and same.ours >= 0.9
    assert judge_fig12_15({"a": deep, "b": shallow}, k).verdict == FAILS


def test_fig12_15_asks_twice_chance():
    """Four top heads of ten: two random sets share 40%, so 75% shared is under the minimum of 80%."""
    a, b = noise(12, 2, 5), noise(12, 2, 5)
    a[:, 0, :4] += 1
    b[:, 0, :3] += 1
    b[:, 1, 0] += 1
    f = judge_fig12_15({"a": a, "b": b}, 4)
    assert f.verdict == FAILS and f.ours == 0.75 and "chance 40.0%" in f.why
    assert judge_fig12_15({"a": a, "b": a.flip(0)}, 4).verdict == REPLICATES


def largest(*tops: dict[int, float]) -> dict[str, torch.Tensor]:
    """Datasets of 12 prompts, 2 x 3 heads: in each, the heads (numbered 0-5) given their mean increase, the others 0."""
    out = {}
    for i, means in enumerate(tops):
        h = noise(12, 6, scale=0.001)
        for head, x in means.items():
            h[:, head] += x
        out[f"d{i}"] = h.view(12, 2, 3)
    return out


def test_the_largest_head_differs_only_by_a_clear_lead():
    """A pair of datasets differs where each one's largest head leads the other's by 10% of its own increase."""
    own = judge_fig12_15_largest(largest({0: 1.0, 1: 0.5}, {1: 1.0, 0: 0.5}, {2: 1.0}, {3: 1.0}))
    assert own.verdict == REPLICATES and own.ours == 1.0 and own.n == 48
    assert own.why.startswith("largest head by mean increase: d0 0-0 (+1.000), d1 0-1 (+1.000), d2 0-2 (+1.000), d3 1-0 ")
    assert "6 of 6 pairs of datasets differ clearly" in own.why
    one = {0: 1.0, 1: 0.5}
    assert judge_fig12_15_largest(largest(one, one, one, one)).verdict == FAILS
    ties = largest({0: 1.0, 1: 0.95}, {1: 1.0, 0: 0.95}, {0: 1.0, 1: 0.95}, {1: 1.0, 0: 0.95})  # 5% leads
    assert judge_fig12_15_largest(ties).ours == 0 and judge_fig12_15_largest(ties).verdict == FAILS
    few = judge_fig12_15_largest(largest(one, {1: 1.0, 0: 0.5}, {0: 1.0, 1: 0.95}, {0: 1.0, 1: 0.95}))
    assert few.verdict == PARTLY and "1 of 6 pairs" in few.why
    close(few.ours, 1 / 6)
    three = judge_fig12_15_largest(largest(one, one, one, {1: 1.0, 0: 0.5}))  # three pairs of six
    assert three.verdict == REPLICATES and three.ours == 0.5


def test_label_values():
    """Tables 1 and 3 across the in-context heads: a head passes where at least half its label values
    (every prompt and label position, padding left out) show a related concept in their top 10;
    replicates where half the heads pass and the best head's interval lies above one half."""
    heads = [(5, 0), (5, 1), (6, 0), (6, 1)]
    N, odd = 40, torch.arange(40) % 2 == 1
    hits = torch.zeros(N, 4, 3, dtype=torch.float64)
    hits[:, 1] = 1  # every value
    hits[:20, 2] = 1  # 50 of its 100 values: 40 of the first two positions, 10 of the third
    hits[:10, 3] = 1  # 25 of 100
    hits[~odd, :, 2] = torch.nan  # the even prompts have two labels
    f = judge_concepts(hits, heads, "x", "the example: y")
    assert f.verdict == REPLICATES and f.ours == 0.5 and f.n == N and "the example: y" in f.why
    assert "2 of 4 heads show" in f.why and "the best, 5-1, of 100% (100% to 100%)" in f.why
    assert "5-0: 0%, 5-1: 100%, 6-0: 50%, 6-1: 25%" in f.why
    lone = torch.zeros(N, 4, 2, dtype=torch.float64)
    lone[:, 2] = 1  # the top head at 0%, another at 100%: ours is 1 head of 4, not 0
    f = judge_concepts(lone, heads, "x", "")
    assert f.verdict == PARTLY and f.ours == 0.25 and "6-0, of 100%" in f.why
    near = torch.zeros(N, 4, 2, dtype=torch.float64)
    near[:18] = 1  # every head at 45%
    f = judge_concepts(near, heads, "x", "")
    assert f.verdict == FAILS and f.ours == 0 and f.ci[0] == 0 and "0 of 4 heads" in f.why


def test_label_values_strictly():
    """Our row: the top head's share of prompts whose label values all rank their own token in the
    top 10, its interval above one half; partly where another top-5 head's is."""
    heads = [(5, 0), (5, 1), (6, 0), (6, 1), (7, 0)]

    def hits(*shares: float) -> torch.Tensor:
        return torch.stack([torch.arange(40) < 40 * x for x in shares], 1)  # [40, 5]
    f = judge_strict(hits(0.9, 0, 0, 0, 0), heads, "x")
    assert f.verdict == REPLICATES and f.ours == 0.9 and f.n == 40 and f.ci[0] > 0.5
    f = judge_strict(hits(0.5, 0.2, 0.95, 0, 0), heads, "x")
    assert f.verdict == PARTLY and "6-0: 95%" in f.why and f.ci[0] < 0.5 < f.ci[1]
    assert judge_strict(hits(0.55, 0.6, 0.5, 0, 0.6), heads, "x").verdict == FAILS  # no CI above 0.5


def test_one_label_heads_and_the_false_label_ahead():
    """Fig. 5 per label (l. 458, 666): bar, bar, foo, foo a prompt, foo the true label. Ahead: the false
    label's MRR at least 1.5x the true's (2x, 1.2x, exactly 1.5x); one label only: one label's values
    show it in at least half, the other's in at most a tenth (1 / 0, 0.5 / 0.1 exactly, 0.5 / 0.2,
    0.05 / 0.6)."""
    N, heads = 20, [(5, 0), (5, 1), (6, 0), (6, 1)]
    is_true = torch.tensor([0.0, 0, 1, 1]).expand(N, 4, 4)  # [N, S, D]

    def pairs(x: torch.Tensor) -> torch.Tensor:
        return torch.stack([x, is_true], -1)
    rr = torch.tensor([[0.5, 0.5, 0.25, 0.25], [0.3, 0.3, 0.25, 0.25], [0.375, 0.375, 0.25, 0.25], [0.1, 0.1, 0.5, 0.5]])
    assert false_ahead(pairs(rr.expand(N, 4, 4))).tolist() == [True, False, True, False]
    shown = torch.zeros(N, 4, 4, dtype=torch.float64)
    shown[:, 0, 2:] = 1
    shown[:10, 1, 2:], shown[:2, 1, :2] = 1, 1
    shown[:10, 2, 2:], shown[:4, 2, :2] = 1, 1
    shown[:1, 3, 2:], shown[:12, 3, :2] = 1, 1
    assert one_label(pairs(shown)).tolist() == [True, True, False, True]
    f = judge_heads_that(one_label, pairs(shown), heads, "one label")
    assert f.verdict == REPLICATES and f.ours == 3 and f.n == N and f.ci[0] >= 1
    assert f.why == "one label in 3 of 4 heads (5-0, 5-1, 6-1)"
    f = judge_heads_that(false_ahead, pairs(rr[[1, 0, 3, 3]].expand(N, 4, 4)), heads, "ahead")
    assert f.verdict == PARTLY and f.ours == 1 and f.why == "ahead in 1 of 4 heads (5-1)"
    f = judge_heads_that(false_ahead, pairs(rr[[1, 1, 3, 3]].expand(N, 4, 4)), heads, "ahead")
    assert f.verdict == FAILS and f.ours == 0 and f.why == "ahead in 0 of 4 heads"


def fake_ranks(N: int, S: int, D: int, first: torch.Tensor) -> torch.Tensor:
    """[N, S, D] ranks: 1 (in the top 10) in heads 0-2 everywhere and in head 3 on the rows `first` [N]
    picks, 50 elsewhere; the last label position padding (nan)."""
    ranks = torch.full((N, S, D), 50.0)
    ranks[:, :3], ranks[first, 3] = 1, 1
    ranks[:, :, -1] = torch.nan
    return ranks


def test_tables_judge_every_in_context_head_and_table3_the_correct_prompts(small, tmp_path, monkeypatch):
    """Table 1 counts the heads of all 12 that pass (four: three everywhere, one on half its prompts);
    Table 3 is headlined on the AG News prompts predicted correctly (here a word dataset stands in for
    AG News, and the first 30 of its 40 prompts are said to be correct), all prompts beside."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 40, 40, 0, None)
    s.common.__dict__["sentence"] = ["agnews"]
    for name in ("prompts", "records"):
        real = getattr(s.common, name)
        setattr(s.common, name, lambda d, real=real: real("sentiment_number" if d == "agnews" else d))
    monkeypatch.setattr(mrr, "concept_ranks", lambda m, ps, heads: fake_ranks(len(ps), len(heads), 4,
                                                                              torch.arange(len(ps)) % 2 == 0))
    f = claims.CLAIMS["table1"].find(s)
    assert f.ours == 4 / 12 and f.n == 40 and "4 of 12 heads show" in f.why and f.verdict == PARTLY
    correct = torch.arange(40) < 30
    monkeypatch.setattr(evidence, "answered_correctly", lambda m, ps: correct)
    monkeypatch.setattr(mrr, "concept_ranks", lambda m, ps, heads: fake_ranks(len(ps), len(heads), 4, correct))
    assert claims.CLAIMS["table3"].headline == claims.CLAIMS["table3_strict"].headline == evidence.CORRECT
    right = s.in_view(evidence.CORRECT)
    f = claims.CLAIMS["table3"].find(right)
    assert f.n == 30 and f.ours == 4 / 12 and f.why.startswith("30 AG News prompts, AG News's top heads: 4 of 12")
    l, h = right.heads("agnews")[3]
    assert f"{l}-{h}: 100%" in f.why  # its 10 wrong rows left out
    every = claims.CLAIMS["table3"].find(s)
    assert every.n == 40 and f"{s.heads('agnews')[3][0]}-{s.heads('agnews')[3][1]}: 75%" in every.why
    assert claims.CLAIMS["table3_strict"].find(right).n == 30
    monkeypatch.setattr(common.Common, "prompts", lambda *a, **k: pytest.fail("built prompts"))
    none = evidence.Evidence(small, 40, 40, 0, None)
    none.common.__dict__["sentence"] = []
    with pytest.raises(Unjudgeable, match="^no copy of AG News here"):  # said before any prompt is built
        claims.CLAIMS["table3"].find(none)


def test_fig5_labels_counts_the_heads_from_the_ranks(small, tmp_path, monkeypatch):
    """Each part's count, head by head from the label ranks of the heads alone (not Fig. 5's pool) and
    the concept ranks: the false label (bar) ahead of the true (foo), one label only."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 2, 0, None)
    ps, heads = s.prompts("sentiment_number"), s.heads("sentiment_number")
    own, concepts = mrr.label_ranks(small, ps, heads), mrr.concept_ranks(small, ps, heads)
    true = ps.positions.is_true & ps.positions.valid
    false = ~ps.positions.is_true & ps.positions.valid
    ahead = one = 0
    for h in range(len(heads)):
        mrr_true, mrr_false = own[:, h][true].reciprocal().mean(), own[:, h][false].reciprocal().mean()
        ahead += int(mrr_false >= 1.5 * mrr_true)
        shares = sorted([float((concepts[:, h][true] <= 10).double().mean()),
                         float((concepts[:, h][false] <= 10).double().mean())])
        one += int(shares[1] >= 0.5 and shares[0] <= 0.1)
    f = claims.CLAIMS["fig5_labels"].find(s)
    assert f"false label ahead (l. 458): {ahead:.3g} (" in f.why and f"one label only (l. 666): {one:.3g} (" in f.why
    assert f.n == 12 and f"in {ahead} of 12 heads" in f.why


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
    assert slight.verdict == FAILS and "1.5x their mean" in slight.why  # and no head at 2x its layer's random mean
    assert "0/20 heads at least 2x their layer's random mean" in slight.why


def test_the_two_towers_keys_and_what_a_reader_sees():
    N, S = 40, 20
    own, others = 0.2 + noise(N, S), 0.02 + noise(N, S).abs()
    f = judge_keys(own, others)
    assert f.verdict == REPLICATES and f.ci[0] > 0
    close(f.ours, (own - others).mean(1).mean(), scale=float(own.abs().max()))
    assert judge_keys(0.03 + noise(N, S).abs(), others).verdict == FAILS  # above the others, under twice them
    assert judge_keys(others, own).verdict == FAILS
    # the share of a prompt's vectors whose word ranks in the top 15: 3 of 4 (prompts 0-19), 1 of 4, none known (40)
    ranks = torch.tensor([[1.0, 15, 9, 16]] * 20 + [[16, 2, 300, 5000]] * 20 + [[torch.nan] * 4])
    f = judge_top(ranks, "keys whose word is")
    assert f.n == 40 and f.verdict == FAILS and "median rank 15" in f.why and "among the top 15 tokens" in f.why
    close(f.ours, 0.5)
    assert judge_top(ranks[:20], "keys whose word is").verdict == REPLICATES  # 75%
    assert judge_top(torch.tensor([[1.0, 16]]).repeat(40, 1), "x").verdict == FAILS  # half exactly: not above it


def test_the_adjacent_words_against_the_farther_ones():
    """Two keys a prompt with an adjacent text and one farther (the key has four texts, all in one
    head); the third key has neither. The adjacent words at rank 2 (MRR 0.5), the farther at 5 (0.2)."""
    N = 40
    ranks = torch.tensor([[2.0, 5, 1, 9], [3, 2, 5, 1], [2, 2, 2, 2]]).expand(N, 1, 3, 4).clone()
    adjacent = torch.tensor([[True, False, False, False], [False, True, False, False], [False] * 4]).expand(N, 3, 4)
    farther = torch.tensor([[False, True, False, False], [False, False, True, False], [False] * 4]).expand(N, 3, 4)
    f = judge_adjacent(ranks, adjacent, farther, "the adjacent word")
    assert f.verdict == REPLICATES and "0.5000 against" in f.why and "0.2000 in the same key (2.5x)" in f.why
    close(f.ours, 0.3)
    near = ranks.clone()
    near[:, :, 0, 1], near[:, :, 1, 2] = 3.0, 3.0  # farther at rank 3: 2 against 3 is 1.5x
    assert judge_adjacent(near, adjacent, farther, "x").verdict == FAILS
    assert judge_adjacent(ranks, farther, adjacent, "x").verdict == FAILS


def test_metric():
    N, S, K = 40, 5, 4
    similarity = torch.randn(N, K, generator=g)
    tracks = 0.5 * similarity[:, None] + noise(N, S, K, scale=0.3)
    f = judge_metric(tracks, similarity)
    assert f.verdict == REPLICATES and f.n == N and f.ci[0] > 0.1
    assert judge_metric(torch.randn(N, S, K, generator=g), similarity).verdict == FAILS
    faint = 0.02 * similarity[:, None] + noise(N, S, K, scale=0.3)  # a rise under the minimum, its CI above 0
    assert judge_metric(faint.repeat(10, 1, 1), similarity.repeat(10, 1)).verdict == PARTLY


def test_fig6_and_its_control():
    N, S = 40, 20
    true, false = 0.3 + noise(N, S), 0.1 + noise(N, S)
    f = rules.judge_fig6(true, false)
    assert f.verdict == REPLICATES and "true at least 0.05 above false in 20/20 heads" in f.why
    tiny = rules.judge_fig6(false + 0.008, false)  # true above false everywhere, by less than the minimum effect
    assert tiny.verdict == FAILS and tiny.ci[0] > 0
    few = false.clone()
    few[:, :5] += 0.3  # five heads far above, fifteen not: the mean clears 0.05, too few heads do
    f = rules.judge_fig6(few, false)
    assert f.verdict == PARTLY and "in 5/20 heads" in f.why
    assert rules.judge_fig6(false, true).verdict == FAILS
    assert judge_truth_control(effects(0.05, 0.1)).verdict == REPLICATES
    assert judge_truth_control(effects(0.02, 0.1)).verdict == FAILS  # its CI above 0, under the minimum of 0.025
    unsure = judge_truth_control(Effects(0.03, (-0.01, 0.07), 0.1, (0.09, 0.11), 50))
    assert unsure.verdict == PARTLY and "truth effect +0.030 (-0.010 to +0.070)" in unsure.why
    assert judge_truth_control(effects(0.0, 0.1)).verdict == FAILS  # true above false only because it is nearer
    assert judge_truth_control(effects(-0.05, 0.1)).verdict == FAILS
    assert judge_distance_control(effects(0.05, 0.1)).verdict == REPLICATES
    assert judge_distance_control(effects(0.05, -0.1)).verdict == FAILS
    assert judge_distance_control(Effects(0.05, (0.04, 0.06), 0.02, (-0.01, 0.05), 50)).verdict == PARTLY  # CI reaches 0
    sure_but_tiny = judge_distance_control(Effects(0.05, (0.04, 0.06), 0.005, (0.003, 0.007), 50))
    assert sure_but_tiny.verdict == FAILS and sure_but_tiny.ours == 0.005  # CI above 0, below the minimum effect


def true_points(high: float, middle: float, increases: tuple[float, float], N: int = 40, S: int = 3
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """Fig. 7's inputs [N, S, 4]: label positions 0 and 1 true, weighted about `high` and `middle`, their
    increases `increases`; positions 2 and 3 false (NaN weight), their increase 5 (which must not count)."""
    weight = torch.full((N, S, 4), torch.nan)
    weight[..., 0], weight[..., 1] = high + noise(N, S), middle + noise(N, S)
    increase = torch.full((N, S, 4), 5.0)
    increase[..., 0], increase[..., 1] = increases
    return weight, increase


def test_fig7_judges_the_trend_and_the_paper_s_bins_on_true_labels():
    N, S = 40, 3
    summed = (torch.rand(N, S, generator=g), torch.rand(N, S, generator=g))
    f = judge_fig7(*true_points(0.95, 0.5, (0.8, 0.3)), summed)
    assert f.verdict == REPLICATES and f.ours > 0.5 and f"Spearman over {N * S * 2} (prompt, head, position)" in f.why
    assert "weights 0.9-1: mean increase +0.800 (120 positions); weights 0.4-0.6: mean increase +0.300 (120 positions); " \
           "high minus middle +0.500 (CI +0.500 to +0.500)" in f.why
    assert judge_fig7(*true_points(0.95, 0.5, (0.35, 0.3)), summed).verdict == PARTLY  # the rise under the minimum of 0.1
    empty = judge_fig7(*true_points(0.8, 0.5, (0.8, 0.3)), summed)  # no weight reaches 0.9: the bins cannot be compared
    assert empty.verdict == PARTLY and "weights 0.9-1: none (0 positions)" in empty.why and "high minus middle not comparable;" in empty.why
    weight, increase = true_points(0.95, 0.5, (0.3, 0.8))  # falls
    assert judge_fig7(weight, increase, summed).verdict == FAILS
    unrelated = torch.rand(N, S, 4, generator=g).where(~weight.isnan(), torch.nan)
    f = judge_fig7(unrelated, torch.rand(N, S, 4, generator=g), summed)
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
    assert f9.verdict == REPLICATES and "drops by at least 0.01 in 20/20 heads" in f9.why
    assert judge_fig9(before, (before[0] - 0.005, before[1])).verdict == FAILS  # in every head, by too little in each
    uneven = before[0] - torch.tensor([0.03] * 10 + [0.005] * 10)  # a mean drop of 0.0175, by 0.01 in only 10 heads
    few = judge_fig9(before, (uneven, before[1]))
    assert few.verdict == PARTLY and "drops by at least 0.01 in 10/20 heads" in few.why
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
    slight = judge_per_head_drop(before, before - 0.005, heads, FIG11, "x")  # down in every head, CI below 0, too little
    assert slight.ci[1] < 0 and slight.verdict == FAILS and "down in 0 (none)" in slight.why
    partly = before - torch.tensor([0.05, 0.05, 0.05, 0.0, 0.0, 0.0])  # a mean drop of 0.025, in half the heads
    assert judge_per_head_drop(before, partly, heads, FIG10, "x").verdict == PARTLY
    close(f.ours, (after - before).mean(), scale=float(after.abs().max()))


def test_the_prediction_shift_judges_the_moved_pairs_with_the_unmoved_beside():
    """Where the prediction moved, the attention on the label it left must fall and on the label it moved
    to rise, each by the minimum effect; the unmoved pairs' change toward the other label is the contrast."""
    moved = torch.arange(40) < 20
    change = torch.tensor([[-0.1, 0.05]] * 20 + [[-0.02, -0.02]] * 20)  # [left, other] a pair
    f = judge_prediction_shift(change, moved, which="w")
    assert f.verdict == REPLICATES and f.n == 20 and f.why.startswith("ours: w. Where the prediction moved (20 of 40 pairs)")
    close(f.ours, -0.1)
    close(torch.tensor(f.ci), torch.tensor([-0.1, -0.1]))
    assert ("on the label it left changed by -0.100, on the label it moved to by +0.050 (CI +0.050 to +0.050); where it did "
            "not move, on the predicted label -0.020, on the other -0.020; the change toward the other label, moved minus "
            "unmoved pairs, +0.150 (CI +0.150 to +0.150)") in f.why
    weak = change.clone()
    weak[:20, 1] = 0.005  # rises, CI above 0, by less than the minimum effect
    assert judge_prediction_shift(weak, moved).verdict == PARTLY
    assert judge_prediction_shift(change.flip(1), moved).verdict == FAILS  # the moved pairs' attention follows the old label
    with pytest.raises(Unjudgeable, match=r"9 distinct inputs, .* \(of 40 pairs, 9 moved\)"):
        judge_prediction_shift(change, torch.arange(40) < 9)


def test_together():
    def part(verdict: str) -> Judgement:
        return replace(not_tested("x"), ours=0.5, verdict=verdict, why="because")
    both = rules.judge_together({"sst2": part(REPLICATES), "trec": part(REPLICATES)}, 10, "heads 1-2")
    assert both.verdict == REPLICATES and both.ours == "2 of 2 replicate, 0 partly" and both.n == 10
    assert both.why.startswith("heads 1-2. sst2: 0.5, replicates (because)")
    assert rules.judge_together({"a": part(REPLICATES), "b": part(FAILS)}, 10, "").verdict == PARTLY
    assert rules.judge_together({"a": part(PARTLY), "b": part(FAILS)}, 10, "").verdict == PARTLY
    assert rules.judge_together({"a": part(FAILS), "b": part(FAILS)}, 10, "").verdict == FAILS


def test_app_e_judges_each_head_s_value_alone_against_added_last():
    """The median over heads of how far a head's mean increase moves from alone to last, relative to it."""
    N, heads = 60, [(29, 1), (20, 0), (22, 3), (25, 8)]
    alone = torch.tensor([1.0, 2.0, -0.5, 1.0]).expand(N, 4)
    moved = lambda *changes: torch.stack([alone, alone, alone * (1 + torch.tensor(changes))], -1)  # noqa: E731
    f = judge_app_e(moved(0.0, 0.1, -0.2, 0.6), heads, "where: x")  # moves 0%, 10%, 20%, 60%: median 15%
    assert f.verdict == REPLICATES and f.n == N and f.why.endswith("where: x")
    close(f.ours, 0.15)
    close(torch.tensor(f.ci), torch.tensor([0.15, 0.15]))
    assert "the head moving most, 25-8, +1.000 alone, +1.600 last" in f.why and "random order of its layer instead of last, 0.0%" in f.why
    assert "the top 2 by mean increase keep 2 of 2" in f.why
    close(judge_app_e(moved(0.2, 0.3, 0.5, -0.6), heads, "").ours, 0.4)
    assert judge_app_e(moved(0.2, 0.3, 0.5, -0.6), heads, "").verdict == PARTLY
    assert judge_app_e(moved(0.5, 0.6, 0.8, 1.0), heads, "").verdict == FAILS
    noisy = moved(0.0, 0.1, -0.2, 0.6) + torch.stack([torch.zeros(N, 4)] * 2 + [noise(N, 4, scale=0.2)], -1)
    unsure = judge_app_e(noisy, heads, "")
    assert unsure.verdict == PARTLY and unsure.ours <= 0.2 < unsure.ci[1]  # the median within 20%, its CI not


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
    monkeypatch.setattr(common, "sentence_datasets", lambda names, data_dir=None: [])
    found = findings.report(small, 24, 2, announce=lambda step: None)
    assert [f.id for f in found] == claims.reported()
    assert all(f.verdict in (REPLICATES, PARTLY, FAILS, NOT_TESTED) for f in found)
    by = {f.id: f for f in found}
    assert by["fig8_9_sentences"].verdict == by["table3"].verdict == by["two_towers_agnews"].verdict == NOT_TESTED
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
    assert by["majority_bias_words"].n == 24 and by["majority_bias_words"].views["held_out"].n == int((~input_halves(
        MAIN.records("sentiment_number", 24), 0)).sum())
    json.dumps([f.to_dict() for f in found])
    assert findings.report(small, 24, 2, announce=lambda step: None, ids=["fig6", "fig2"]) == [by["fig6"], by["fig2"]]
    with pytest.raises(UsageError, match="Unknown claim id"):
        findings.report(small, 24, 2, ids=["fig99"])


def test_a_report_on_too_few_prompts_says_so_before_any_study(small, monkeypatch):
    """Fewer word prompts than an interval needs: every claim that reads them is not tested, in words,
    and nothing runs; the sentence claims say what they lack."""
    monkeypatch.setattr(common, "sentence_datasets", lambda names, data_dir=None: ["sst2"])
    monkeypatch.setattr(common.Common, "prompts", lambda *a, **k: pytest.fail("built prompts"))
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
    monkeypatch.setattr(common, "sentence_datasets", lambda names, data_dir=None: [])
    judged = []
    for id, c in list(claims.CLAIMS.items()):
        monkeypatch.setitem(claims.CLAIMS, id, replace(c, find=lambda s, id=id, find=c.find: judged.append(id) or find(s)))
    run = lambda ids, sentence_n=2: findings.report(small, 12, sentence_n, announce=lambda step: None, ids=ids)  # noqa: E731
    first = run(["fig2", "table1"])  # then interrupted
    # on all prompts, the correct ones and the paper's share of heads, and table1 held out
    assert judged == ["fig2"] * 3 + ["table1"] * 4
    judged.clear()
    resumed = run(["fig2", "table1", "fig3_4"])
    assert judged == ["fig3_4"] * 3 and resumed[:2] == first
    judged.clear()
    assert run(["fig2", "table1", "fig3_4"]) == resumed and judged == []
    run(["table1"], sentence_n=1)  # another size
    monkeypatch.setattr(findings, "CODE", "other code")
    run(["table1"])
    assert judged == ["table1"] * 8


def test_appendices_b_and_d_judge_the_fig5_and_fig6_rules_dataset_by_dataset(small, tmp_path, monkeypatch):
    """The word datasets stand in for the sentence datasets: each part is the fig5 or fig6
    judgement of that dataset in the shared heads (B) or the single top head (D, Llama only)."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 12, 0, None)
    s.common.__dict__["sentence"] = list(evidence.WORD)
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


def test_fig7_reads_the_true_labels_in_the_top_3_heads_and_appendix_a_each_sentence_dataset_s_largest_head(
        small, tmp_path, monkeypatch):
    """Fig. 7: each word dataset's top 3 heads, false labels left out; the largest heads: each sentence
    dataset's located increases (the word datasets stand in), two datasets or more."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 12, 0, None)
    parts = []
    for d in evidence.WORD:
        ps, top = s.prompts(d), s.heads(d)[:3]
        weight = label_attention.attention_on_labels(small, ps).per_label_at(top)
        weight[~ps.positions.is_true[:, None].expand_as(weight)] = torch.nan
        true, _ = label_attention.attention_on_labels(small, ps).at(top)
        parts.append((weight, label_attention.label_increases(small, ps, top), true, at_heads(s.loc(d).head, top)))
    weight, increase, true, head = (torch.cat(x) for x in zip(*parts))
    assert int((~weight.isnan()).sum()) == 24 * 3 * 2  # two true labels a prompt
    assert claims.CLAIMS["fig7"].find(s) == judge_fig7(weight, increase, (true, head), s.clusters(evidence.WORD))
    s.common.__dict__["sentence"] = list(evidence.WORD)
    found = claims.CLAIMS["fig12_15_largest"].find(s)
    assert found == judge_fig12_15_largest({d: s.loc(d).head for d in evidence.WORD},
                                           {d: s.clusters([d]) for d in evidence.WORD})
    s.common.__dict__["sentence"] = ["sst2"]
    alone = claims.CLAIMS["fig12_15_largest"].find(s)
    assert alone.verdict == NOT_TESTED and alone.why.startswith("1 sentence dataset(s) at hand")


def test_report_analyses_the_heads_given(small, tmp_path, monkeypatch):
    """Given heads replace every dataset's top K (in the causal check too), checked before any study runs."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(common, "sentence_datasets", lambda names, data_dir=None: [])
    given = [(2, 3), (1, 0), (2, 1)]
    s = evidence.Evidence(small, 12, 2, 0, None, "2-3,1-0,2-1")
    assert s.heads("sentiment_number") == s.heads("animal_country") == given
    assert evidence.Evidence(small, 12, 2, 0, None).heads("sentiment_number") == s.loc("sentiment_number").top_heads(rules.K)
    s.common.__dict__["sentence"] = list(evidence.WORD)  # Appendices B and D: the given heads, and the best of them
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
    monkeypatch.setattr(common, "prompt_set", lambda *a, **k: pytest.fail("built prompts"))
    monkeypatch.setattr(common.Common, "prompts", lambda *a, **k: pytest.fail("built prompts"))
    with pytest.raises(UsageError, match=f"^{message}"):
        findings.report(small, 12, 2, announce=lambda step: pytest.fail(f"started {step}"), heads=heads)


@pytest.mark.parametrize("small", ["llama-gqa"], indirect=True)
def test_the_emnlp_claims_pool_the_sentence_datasets_held_out_by_input(small, tmp_path, monkeypatch):
    """The word datasets stand in for the sentence datasets: causal judges `causal_check`'s runs, pooled,
    on the prompts of the inputs its heads were not located on; a bias claim pools each dataset's bias in
    its own heads, and held out judges the other half's records in heads located on the first half."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 16, 16, 0, None)
    s.common.__dict__["sentence"] = list(evidence.WORD)
    runs = AblationRuns.cat(list(ablation.causal_check(small, evidence.WORD, 16, n_random=rules.RANDOM_DRAWS).values()))
    halves = {d: input_halves(s.records(d), 0) for d in evidence.WORD}
    clusters = torch.cat([s.inputs(d)[~halves[d]] + i * 16 for i, d in enumerate(evidence.WORD)])
    want = judge_causal(runs, 1, ablated_heads(s, 1), clusters)
    found = claims.CLAIMS["causal"].find(s)
    assert (found.ours, found.ci, found.verdict) == (want.ours, want.ci, want.verdict) and found.n == len(clusters) < 32
    assert found.why == f"{want.why}; on sentiment_number, animal_country"
    held = s.in_view(evidence.HELD_OUT)
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
        assert torch.equal(s.in_view(evidence.CORRECT).rows("sentiment_number"), right)
    else:
        with pytest.raises(evidence.Unjudgeable, match="answered correctly"):
            s.in_view(evidence.CORRECT).rows("sentiment_number")
    keep = torch.arange(16) % 4 != 1
    view = s.in_view(evidence.CORRECT)
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
    assert s.in_view(evidence.CORRECT) is view  # one view: the claims share its effects
    monkeypatch.setattr(view, "rows", too_few)
    f = findings.in_view(claims.CLAIMS["fig2"].find, lambda: s.in_view(evidence.CORRECT))
    assert f.verdict == NOT_TESTED and "1 of 16" in f.why


def test_held_out_judges_half_the_inputs_of_each_class_in_heads_located_on_the_other_half(small, tmp_path, monkeypatch):
    """No head is judged on the prompts, or the inputs, that selected it: the view's heads are the top K
    of the locating half's mean increase; the halves split each class's distinct inputs, drawn with the seed."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 24, 2, 0, None)
    view = s.in_view(evidence.HELD_OUT)
    assert view is s.in_view(evidence.HELD_OUT) and s.view == evidence.ALL and view.view == evidence.HELD_OUT
    assert view.common is s.common and view.built is not s.built  # its records and pass shared, its heads its own
    judged, locating = view.rows("sentiment_number"), view.locating("sentiment_number")
    assert torch.equal(judged, ~locating)
    records, inputs = s.records("sentiment_number"), s.inputs("sentiment_number")
    assert not set(inputs[judged].tolist()) & set(inputs[locating].tolist())  # an input is on one side only
    for cls in {r.true_class for r in records}:
        mine = torch.tensor([r.true_class == cls for r in records])
        distinct = len(inputs[mine].unique())
        assert len(inputs[mine & locating].unique()) == distinct // 2  # half of each class's inputs locate
    assert not torch.equal(evidence.Evidence(small, 24, 2, 1, None).in_view(evidence.HELD_OUT).rows("sentiment_number"), judged)  # seeded
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
        evidence.Evidence(small, 2, 2, 0, None).in_view(evidence.HELD_OUT).rows("sentiment_number")
    given = evidence.Evidence(small, 12, 2, 0, None, "2-3,1-0")
    assert "given, not located" in findings.in_view(claims.CLAIMS["fig5"].find, lambda: given.in_view(evidence.HELD_OUT)).why


def test_the_views_in_the_tables_and_the_json():
    f = claims.CLAIMS["fig6"].finding(rules.judge_fig6(torch.rand(10, 3), torch.rand(10, 3)))
    c = rules.judge_fig6(torch.rand(14, 3), torch.rand(14, 3))
    h = rules.judge_fig6(torch.rand(15, 3), torch.rand(15, 3))
    both = replace(f, views={"correct_only": c, "held_out": h})
    correct, held = evidence.CORRECT.title, evidence.HELD_OUT.title
    assert correct not in claims.table([f]).columns and held not in claims.table([f]).columns
    assert claims.table([both]).loc["fig6", correct] == f"{ours_text(c)}, N=14: {c.verdict}"
    assert claims.table([both]).loc["fig6", held] == f"{ours_text(h)}, N=15: {h.verdict}"
    d = json.loads(json.dumps(both.to_dict()))
    assert d["view"] == "all"
    assert d["views"]["correct_only"] == {"ours": c.ours, "ci": list(c.ci), "n": 14, "verdict": c.verdict, "why": c.why}
    assert d["views"]["held_out"] == {"ours": h.ours, "ci": list(h.ci), "n": 15, "verdict": h.verdict, "why": h.why}
    assert claims.Finding.from_dict(d) == both
    md = claims.markdown([both])
    assert f"N=14: {c.verdict} | {ours_text(h)}, N=15: {h.verdict} |" in md
    assert f"Correct prompts only ({c.verdict}): {c.why}" in md and f"Held out ({h.verdict}): {h.why}" in md
    # A sentence claim's headline is its correct-only view: its "all prompts" column holds the other judgement.
    app_b = claims.CLAIMS["app_b_mrr"].finding(c, {"all": h})
    assert app_b.view == "correct_only" and claims.CLAIMS["app_b_mrr"].others[0] == evidence.ALL
    row = claims.table([app_b, both]).loc["app_b_mrr"]
    assert (row[correct], row[evidence.ALL.title]) == (claims.tables.HEADLINE, f"{ours_text(h)}, N=15: {h.verdict}")
    assert claims.table([app_b, both]).loc["fig6", evidence.ALL.title] == claims.tables.HEADLINE


def test_a_claim_is_headlined_on_the_correct_prompts_where_it_reads_the_sentence_datasets_alone():
    """The paper's Appendix A judges "all the cases predicting the correct labels" (l. 1141)."""
    flows = (claims.sources.LOCATED, claims.sources.FLOW)
    for claim in claims.CLAIMS.values():
        assert claim.views in ((evidence.ALL,), claims.sources.WITH_HELD_OUT, *flows), claim.id
        sentence_flow = claim.views in flows and claim.reads == {"sentence"}
        assert claim.headline == (evidence.CORRECT if sentence_flow else evidence.ALL), claim.id
        assert claim.others == tuple(v for v in claim.views if v != claim.headline)
    assert [v.key for v in claims.CLAIMS["app_b_mrr"].others] == ["all", "paper_share", "held_out"]  # the JSON's order
    assert [v.key for v in claims.CLAIMS["fig6"].others] == ["correct_only", "paper_share", "held_out"]


def test_a_headline_on_the_correct_prompts_that_cannot_be_judged_still_shows_all_prompts(small, monkeypatch):
    def find(s):
        if s.view == evidence.CORRECT:
            raise Unjudgeable("1 of 12 sst2 prompts answered correctly")
        return Judgement(0.5, (0.4, 0.6), 12, REPLICATES, f"in view {s.view.key}")
    monkeypatch.setitem(claims.CLAIMS, "app_b_mrr", replace(claims.CLAIMS["app_b_mrr"], find=find))
    monkeypatch.setattr(common, "sentence_datasets", lambda names, data_dir=None: [])
    f = findings.judged("app_b_mrr", evidence.Evidence(small, 12, 12, 0, None))
    assert (f.view, f.verdict, f.why) == ("correct_only", NOT_TESTED, "1 of 12 sst2 prompts answered correctly")
    assert f.views["all"] == Judgement(0.5, (0.4, 0.6), 12, REPLICATES, "in view all")
    assert f.views["paper_share"].why == "in view paper_share"


@pytest.mark.parametrize(("layers", "heads", "share"), [(36, 20, 20), (30, 9, 8), (24, 14, 9), (18, 4, 2), (2, 4, 2)])
def test_the_paper_share_of_heads_is_twenty_of_seven_hundred_and_twenty_at_least_two(layers, heads, share):
    arch = SimpleNamespace(n_layers=layers, n_heads=heads)
    assert evidence.paper_share_heads(arch) == share


def test_the_paper_share_view_judges_every_record_in_the_top_heads_at_that_share(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 2, 0, None)
    view = s.in_view(evidence.PAPER_SHARE)
    k = evidence.paper_share_heads(small.arch)
    assert view.setting.heads == k != s.setting.heads and s.setting == evidence.MAIN
    assert view.common is s.common and view.loc("sentiment_number") is s.loc("sentiment_number")  # the pass shared
    assert view.heads("sentiment_number") == s.loc("sentiment_number").top_heads(k)
    assert torch.equal(view.rows("sentiment_number"), s.rows("sentiment_number"))
    pairs = [label_attention.attention_on_labels(small, s.prompts(d)).at(view.heads(d)) for d in evidence.WORD]
    true, false = (torch.cat(xs) for xs in zip(*pairs))
    assert claims.CLAIMS["fig6"].find(view) == rules.judge_fig6(true, false, s.clusters(evidence.WORD))
    found = findings.judged("fig6", s)
    assert found.views["paper_share"] == claims.CLAIMS["fig6"].find(view) and found.view == "all"
    assert list(found.views) == ["correct_only", "paper_share", "held_out"]
    given = evidence.Evidence(small, 12, 2, 0, None, "2-3,1-0")
    for other, why in ((given, "given, not located"), (evidence.Evidence(small, 12, 2, 0, None, setting=Setting(heads=5)),
                                                        "main setting only")):
        assert why in findings.in_view(claims.CLAIMS["fig6"].find, lambda: other.in_view(evidence.PAPER_SHARE)).why


def test_figs_10_and_11_and_the_two_towers_judge_their_studies(small, tmp_path, monkeypatch):
    """Figs. 10 and 11: the rule on the summed attention on the true labels (and our row, each true label's) in both
    word datasets' shared heads; the two towers: the keys parts on the label keys' own and other words (the share of
    keys whose own word ranks in the top 15, by prompt, written out here), two query parts a dataset; the rows beside."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    s = evidence.Evidence(small, 12, 2, 0, None)
    heads, which = s.word_shared()
    first, layers, hs = evidence.FIRST, *map(list, zip(*heads))
    for id, variant, rule, per_label in (("fig10", "imbalanced", FIG10, False), ("fig10_per_label", "imbalanced", FIG10, True),
                                         ("fig11", "reordered", FIG11, False)):
        weight = []
        for v in ("balanced", variant):
            ps = prompt_set(small, first, v, 12)
            att = label_attention.attention_on_labels(small, ps).per_label[:, layers, hs]  # [N, S, D]: each label position
            is_true = ps.positions.is_true[:, None].expand_as(att)
            on_true = att.where(is_true, 0.0)  # Fig. 8's sum over the true labels, or their mean a label position
            weight.append(on_true.sum(-1) / is_true.sum(-1) if per_label else on_true.sum(-1))
        what = "the attention a true-label position gets" if per_label else "the summed attention on the true labels"
        found = claims.CLAIMS[id].find(s)
        want = judge_per_head_drop(*weight, heads, rule, f"{what} ({which}, balanced -> {variant})", s.clusters([first]))
        assert (found.verdict, found.n, found.why) == (want.verdict, want.n, want.why), id
        close(torch.tensor([found.ours, *found.ci]), torch.tensor([want.ours, *want.ci]))
    f = claims.CLAIMS["two_towers"].find(s)
    keys = []
    for d in evidence.WORD:
        layers = sorted({l for l, _ in s.heads(d)})
        pool = [(l, h) for l in layers for h in range(small.arch.n_heads)]
        key = towers.tower_ranks(small, s.prompts(d), pool)["key"][..., :-1]  # [N, F, D, D]: the demonstrations' words
        keys.append(key[:, [layers.index(l) for l, _ in s.heads(d)]])  # at each head's layer
    key = torch.cat(keys)  # [N, S, D, D]
    own = key.diagonal(dim1=-2, dim2=-1)  # [N, S, D]
    share = (own <= 15).sum((1, 2)) / own.isfinite().sum((1, 2))
    diagonal = torch.eye(key.shape[-1], dtype=torch.bool)
    contrast = judge_keys(key.reciprocal()[..., diagonal].nanmean(-1), key.reciprocal()[..., ~diagonal].nanmean(-1),
                          s.clusters(evidence.WORD))
    assert f.why.startswith(f"the word datasets, each in its top heads. keys, seen: {float(share.mean()):.3g} (")
    assert f"keys against the other demonstrations: {ours_text(contrast)}, {contrast.verdict}" in f.why
    assert re.fullmatch(r"\d of 6 replicate, \d partly", f.ours) and f.n == 24
    for d in evidence.WORD:
        assert f"{d} query, seen: " in f.why and f"{d} query against random heads: " in f.why
    for id, parts in (("two_towers_attention_key", 2), ("two_towers_unrotated", 4), ("label_keys_adjacent", 2)):
        row = claims.CLAIMS[id].find(s)
        assert re.fullmatch(rf"\d of {parts} replicate, \d partly", row.ours) and row.n == 24, id
    assert "before: " in row.why and "; after: " in row.why


SPORTS = ["Liverpool signs a striker", "Chelsea wins the cup", "Arsenal beats Leeds at home", "Federer reaches the final"]
BUSINESS = ["Stocks fall in Tokyo", "Oil prices climb again", "Profit rises at the bank", "Investors sell tech shares"]


@pytest.mark.parametrize("small", ["gpt2", "qwen2"], indirect=True)  # no rotation, and a rotary family
def test_table3s_towers_judge_the_ag_news_prompts_answered_correctly(small, tmp_path, monkeypatch):
    """Table 3's keys and query: the two_towers parts on the AG News prompts the view judges (here every
    other one, as the correct-only headline would judge those answered correctly), a text's tokens its
    content tokens; short prompts of sports and business news stand in for AG News's, which a small
    model's 64 positions cannot hold."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    texts = [f"{BUSINESS[i % 4]} : bar {SPORTS[i % 3]} : foo {BUSINESS[(i + 1) % 4]} : bar {SPORTS[(i + 1) % 4]} : foo "
             f"{SPORTS[(i + 2) % 4]} today {i} :" for i in range(24)]
    ps = prompt_set_from_texts(small, texts, name="agnews")
    s = evidence.Evidence(small, 12, 24, 0, None)
    s.common.__dict__["sentence"] = ["agnews"]
    s.prompts, s.inputs = lambda d: ps, lambda d: torch.arange(24)
    s.rows = lambda d: torch.arange(24) % 2 == 0
    f = claims.CLAIMS["two_towers_agnews"].find(s)
    heads = s.heads("agnews")
    layers = sorted({l for l, _ in heads})
    pool = [(l, h) for l in layers for h in range(small.arch.n_heads)]
    key = towers.tower_ranks(small, ps, pool)["key"][::2, [layers.index(l) for l, _ in heads], :, :-1]
    own = key.diagonal(dim1=-2, dim2=-1)  # [12, S, D]
    share = (own <= 15).sum((1, 2)) / own.isfinite().sum((1, 2))
    assert f.n == 12 and re.fullmatch(r"\d of 4 replicate, \d partly", f.ours)
    where = "12 AG News prompts, AG News's top heads"
    assert f.why.startswith(f"{where}. keys, seen: {float(share.mean()):.3g}")
    assert "agnews query, seen: " in f.why and "agnews query against random heads: " in f.why
    s.rows = lambda d: torch.arange(24) == 0
    assert claims.CLAIMS["two_towers_agnews"].find(s).verdict == NOT_TESTED


def test_the_prediction_shift_reads_each_records_two_prompts_in_its_datasets_heads(small, tmp_path, monkeypatch):
    """The word row: a record and prompt variant whose two predictions both name a label is a pair; it moved where
    they differ; its change is read on the label the balanced prompt predicts, then the other, in the dataset's heads
    (predictions stubbed: a random model names no label)."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    stub = {"balanced": lambda i: i % 2, "imbalanced": lambda i: -1 if i % 6 == 5 else 1, "reordered": lambda i: 0}
    monkeypatch.setattr(label_attention, "predicted_labels",
                        lambda m, ps: torch.tensor([stub[ps.variant](i) for i in range(len(ps))]))
    n = 24
    s = evidence.Evidence(small, n, 2, 0, None)
    change, moved, clusters = [], [], []
    for v in VARIANTS:
        for at, d in enumerate(evidence.WORD):
            layers, hs = map(list, zip(*s.heads(d)))
            summed = [torch.stack([label_attention.attention_on_labels(small, prompt_set(small, d, p, n)).true[:, layers, hs],
                                   label_attention.attention_on_labels(small, prompt_set(small, d, p, n)).false[:, layers, hs]
                                   ], -1).mean(1) for p in ("balanced", v)]  # [N, 2]: true, false
            for i in range(n):
                before, after = stub["balanced"](i), stub[v](i)
                if after < 0:
                    continue
                change.append([float(summed[1][i, label] - summed[0][i, label]) for label in (before, 1 - before)])
                moved.append(before != after)
                clusters.append(int(s.clusters(evidence.WORD)[at * n + i]))
    # imbalanced: the even records moved (0 -> 1), the odd unmoved but i % 6 == 5 left out; re-ordered: the odd moved
    assert sum(moved) == 12 * 2 + 12 * 2 and len(moved) == 20 * 2 + 24 * 2
    found = claims.CLAIMS["prediction_shift_word"].find(s)
    want = judge_prediction_shift(torch.tensor(change), torch.tensor(moved), torch.tensor(clusters), "w")
    assert (found.verdict, found.n) == (want.verdict, want.n) == (want.verdict, 48)
    close(torch.tensor([found.ours, *found.ci]), torch.tensor([want.ours, *want.ci]))
    assert found.why.startswith("ours: sentiment_number, animal_country, each in its in-context heads; pairs whose two "
                                "prompts both predict a label: imbalanced: 24 of 40 moved, reordered: 24 of 48 moved. ")
    assert found.why.split(". ", 1)[1][:80] == want.why.split(". ", 1)[1][:80]


TOY_SECTION = '''"""A toy section: one claim with its thresholds, judge and finder, registered from this file alone."""
import torch

from icl_helpers.stats import mean_ci
from icl_helpers.verdicts.claims import Claim, register
from icl_helpers.verdicts.evidence import FIRST, Evidence
from icl_helpers.verdicts.judgement import FAILS, REPLICATES, Judgement
from icl_helpers.verdicts.whose import OURS

TOY = {"above": -1e9}


def judge_toy(increase: torch.Tensor, clusters: torch.Tensor) -> Judgement:
    """increase: [N] each prompt's summed head increase."""
    ci = mean_ci(increase, clusters=clusters)
    return Judgement(float(increase.mean()), ci, len(increase), REPLICATES if ci[0] > TOY["above"] else FAILS, "toy")


def toy(s: Evidence) -> Judgement:
    return judge_toy(s.loc(FIRST).head[s.rows(FIRST)].sum((1, 2)), s.clusters([FIRST]))


register(Claim(id="toy", whose=OURS, claim="Our extension: a toy", paper="none", unit="toy units", rule="replicates: the CI lies above {above:g}",
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
