"""The EMNLP version's interventions: ablating the in-context heads (the causal check) and the two bias
reductions, each with our control of what it costs on standard prompts."""
from __future__ import annotations

from typing import Callable

import torch

from ...stats import bootstrap_ci, mean_ci
from ...studies.ablation import AblationRuns, one_percent
from ..evidence import FIRST, WORD, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement
from ..rules import Clusters
from .claim import ABSTRACT_ONLY, CAUSAL_REBUILT, EMNLP, FIRST_RULES, ISSUE_44, Claim, register

CAUSAL = {"percentile": 5, "fraction": 0.5}


def judge_causal(runs: AblationRuns, k: int, ablation: str, given: bool = False, clusters: Clusters = None) -> Judgement:
    """N prompts plainly, with the top k in-context heads (or the k heads given) ablated, and
    with k layer-matched random heads ablated in each of D draws (`studies.ablation.ablation_runs`)."""
    plain, top, random = runs.plain, runs.top[k], runs.random[k]
    ours = top.top1
    ci = mean_ci(top.top1_hits.double(), clusters=clusters)
    draws = torch.tensor([r.top1 for r in random], dtype=torch.float64)
    p5 = float(torch.quantile(draws, CAUSAL["percentile"] / 100))
    verdict = (REPLICATES if ours < p5 and ours <= plain.top1 * CAUSAL["fraction"] else
               PARTLY if ours < p5 else FAILS)

    def mean(measure) -> float:
        return sum(measure(r) for r in random) / len(random)

    def prob(a) -> float:
        return float(a.true_prob.mean())
    heads, where = ((f"the {k} heads given", "heads given, not located") if given else
                    (f"the top {k} in-context heads", "heads located on other prompts (other records) of the same datasets"))
    return Judgement(ours, ci, len(top.predictions), verdict,
                     f"top-1 {plain.top1:.1%} plain, {ours:.1%} with {heads} {ablation}-ablated, "
                     f"{mean(lambda r: r.top1):.1%} with {k} layer-matched random heads (mean of {len(random)} draws; "
                     f"{CAUSAL['percentile']}th percentile {p5:.1%}); ranked (true above false) {plain.ranked:.1%} / {top.ranked:.1%} / "
                     f"{mean(lambda r: r.ranked):.1%}; true label's probability {prob(plain):.3f} / {prob(top):.3f} / "
                     f"{mean(prob):.3f}; {where}")


def causal(s: Evidence, k: int | None = None) -> Judgement:
    """The causal check (`Evidence.ablations`) with the first k heads ablated: the EMNLP abstract's
    1% of the model's heads by default."""
    k = one_percent(s.m, s.given) if k is None else k
    runs = s.ablations()
    clusters = torch.cat([s.inputs(d)[s.n // 2:] + i * s.n for i, d in enumerate(WORD)])
    return judge_causal(runs, min(k, max(runs.top)), "mean", given=s.given is not None, clusters=clusters)


register(Claim(id="causal", claim="Intervening in 1% of the heads, the in-context heads, destroys ICL accuracy; random heads "
                                  "do not (EMNLP abstract)",
               paper="87.6% -> 24.4% accuracy with 1% of the heads intervened",
               rule="replicates: with the top 1% of heads (rounded up, at least one) mean-ablated, heads located on other "
                    "prompts, top-1 falls below the {percentile}th percentile of {RANDOM_DRAWS} layer-matched random draws "
                    "and to at most {fraction:.0%} of the plain top-1; partly: below the {percentile}th percentile only; does "
                    "not replicate: otherwise",
               source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", set_on=ISSUE_44, unit="share of prompts, top-1 with the heads ablated", find=causal,
               notebooks=("08",), thresholds=CAUSAL))


def causal_top(s: Evidence) -> Judgement:
    return causal(s, s.setting.heads)


register(Claim(id="causal_top", claim="Our row: the same with the top {K} in-context heads ablated",
               paper="not in the text at hand",
               rule="the causal rule with the top {K} heads", source=f"ours, beside {EMNLP}, abstract; {ABSTRACT_ONLY}",
               set_on=CAUSAL_REBUILT, unit="share of prompts, top-1 with the heads ablated", find=causal_top, notebooks=("08",), thresholds=CAUSAL))


MAJORITY_BIAS = {"paper": 0.22, "at_least": 0.22 / 2}  # the paper's reduction, and half of it

RECENCY_BIAS = {"paper": 0.17, "at_least": 0.17 / 2}


def judge_bias(flags: torch.Tensor, rule: dict[str, float], clusters: Clusters = None) -> Judgement:
    """flags: [N, 3] bool a prompt: exposed (its biased label is wrong), biased plainly,
    biased with the intervention; rule: MAJORITY_BIAS or RECENCY_BIAS."""
    def reduction(f: torch.Tensor) -> float:
        plain, after = float((f[:, 0] & f[:, 1]).sum()), float((f[:, 0] & f[:, 2]).sum())
        return (plain - after) / plain if plain else float("nan")

    ours = reduction(flags)
    ci = bootstrap_ci([flags], reduction, clusters=[clusters])
    exposed, plain = int(flags[:, 0].sum()), int((flags[:, 0] & flags[:, 1]).sum())
    verdict = REPLICATES if ours >= rule["at_least"] and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return Judgement(ours, ci, len(flags), verdict,
                     f"relative reduction of the bias rate; {plain}/{exposed} exposed prompts biased plainly, "
                     f"{int((flags[:, 0] & flags[:, 2]).sum())} with the intervention")


def bias(measure: str, rule: dict[str, float]) -> Callable[[Evidence], Judgement]:
    """A bias claim's finder: the bias `measure` ("majority" or "recency", `Evidence.bias`) in
    FIRST's heads, judged by `rule`."""
    def find(s: Evidence) -> Judgement:
        return judge_bias(s.bias(measure).flags, rule, s.clusters([FIRST]))
    return find


BIAS_COST = {"points": 0.05}  # top-1 on standard prompts an intervention may cost


def judge_bias_cost(hits: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """hits: [N, 2] bool top-1 on standard (balanced) prompts, plainly and with the intervention."""
    drop = (hits[:, 0].double() - hits[:, 1].double())
    ours, ci = float(drop.mean()), mean_ci(drop, clusters=clusters)
    verdict = REPLICATES if ci[1] <= BIAS_COST["points"] else PARTLY if ours <= BIAS_COST["points"] else FAILS
    return Judgement(ours, ci, len(hits), verdict,
                     f"ours: top-1 lost on standard prompts, {float(hits[:, 0].double().mean()):.1%} plain -> "
                     f"{float(hits[:, 1].double().mean()):.1%} with the intervention")


def bias_cost(measure: str) -> Callable[[Evidence], Judgement]:
    """The top-1 the bias intervention `measure` costs on standard prompts."""
    def find(s: Evidence) -> Judgement:
        return judge_bias_cost(s.bias(measure).standard_hits, s.clusters([FIRST]))
    return find


register(Claim(id="majority_bias", claim="Balancing label attention in the in-context heads reduces majority-label bias",
               paper="reduced by {paper:.0%}", rule="replicates: relative reduction >= {at_least:.0%} (half the paper's) with "
               "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
               source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", set_on=FIRST_RULES,
               unit="relative reduction of the bias rate", find=bias("majority", MAJORITY_BIAS),
               notebooks=("08",), thresholds=MAJORITY_BIAS))


register(Claim(id="majority_cost", claim="Our control: balancing label attention costs at most {points:.0%} of top-1 on "
                                         "standard prompts",
               paper="not in the abstract", rule="replicates: the top-1 lost on balanced prompts has its 95% CI at or below "
               "{points:.0%}; partly: its mean is; does not replicate: otherwise",
               source=f"ours, beside {EMNLP}, abstract", set_on=ISSUE_44, unit="share of prompts, top-1 lost", find=bias_cost("majority"),
               notebooks=("08",), thresholds=BIAS_COST))


register(Claim(id="recency_bias", claim="Position-free label keys in the in-context heads reduce recency bias",
               paper="reduced by {paper:.0%}", rule="replicates: relative reduction >= {at_least:.1%} (half the paper's) with "
               "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
               source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", set_on=FIRST_RULES,
               unit="relative reduction of the bias rate", find=bias("recency", RECENCY_BIAS),
               notebooks=("08",), thresholds=RECENCY_BIAS))


register(Claim(id="recency_cost", claim="Our control: position-free label keys cost at most {points:.0%} of top-1 on standard "
                                        "prompts",
               paper="not in the abstract", rule="replicates: the top-1 lost on balanced prompts has its 95% CI at or below "
               "{points:.0%}; partly: its mean is; does not replicate: otherwise",
               source=f"ours, beside {EMNLP}, abstract", set_on=ISSUE_44, unit="share of prompts, top-1 lost", find=bias_cost("recency"),
               notebooks=("08",), thresholds=BIAS_COST))
