"""What every rule shares: the protocol (K, RANDOM_DRAWS, TOP), and the rules several claims apply:
fig5's (a label-value rank against layer-matched random heads: Fig. 5, the two towers' queries,
Appendices B and D), fig6's (true- against false-label attention: Fig. 6, Appendices B and D) and
the verdict of a claim judged part by part (`judge_together`), and an effect judged by its size
(`judge_at_least`).

A judge takes tensors (one row a prompt) and returns a `Judgement`. Each claim's own rule, its
thresholds and its finder sit beside it in its section module (`verdicts.claims`). A difference a
rule claims has a minimum effect ("min_*"): an interval that merely clears 0 on a tiny difference is
not the paper's "much larger". It holds in every verdict short of "does not replicate",
"partly" included, and head by head where a rule counts heads."""
from __future__ import annotations

from typing import Sequence

import torch

from ..core.heads import Head
from ..data.setting import MAIN
from ..stats import mean_ci
from ..studies.label_attention import true_vs_false
from .judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold, ours_text, together

K = MAIN.heads  # in-context heads (20; a robustness setting analyses its own number, `data.setting`)
RANDOM_DRAWS = 20  # layer-matched random-head draws (Fig. 5, the causal check)
TOP = 10  # tokens a projected vector (Tables 1, 3)

FIG5 = {"percentile": 95, "heads": 0.75, "ratio": 2.0}
FIG6 = {"heads": 0.75, "min_attention": 0.05}  # summed attention on two true labels minus two false ones


Clusters = torch.Tensor | None  # [N] long: each row's distinct input, which the intervals resample (`stats`)


def in_top(ranks: torch.Tensor) -> torch.Tensor:
    """ranks [...] (1 = top; nan past a prompt's labels) as float: 1 within the top TOP, 0 below, nan where nan."""
    return (ranks <= TOP).double().masked_fill(ranks.isnan(), torch.nan)


def judge_fig5(mrr: torch.Tensor, random_mrr: torch.Tensor, heads: Sequence[Head], clusters: Clusters = None,
               what: str = "MRR") -> Judgement:
    """mrr: [N, S] reciprocal rank a prompt (mean over its labels) in the S in-context heads;
    random_mrr: [D, N, S] the same for D draws of a random head of each one's layer."""
    ours = float(mrr.mean())
    ci = mean_ci(mrr, clusters=clusters)
    draws = random_mrr.mean((1, 2))  # [D]
    p95 = float(torch.quantile(draws.double(), FIG5["percentile"] / 100))
    above = int((mrr.mean(0) >= FIG5["ratio"] * random_mrr.mean((0, 1))).sum())  # the minimum effect, head by head
    verdict = all_hold(ci[0] > p95 and ours >= FIG5["ratio"] * float(draws.mean()), above >= FIG5["heads"] * len(heads))
    return Judgement(ours, ci, len(mrr), verdict,
                     f"mean {what} of {len(heads)} in-context heads against {len(draws)} layer-matched random draws "
                     f"(mean {float(draws.mean()):.4f}, {FIG5['percentile']}th percentile {p95:.4f}; ours "
                     f"{ours / float(draws.mean()) if float(draws.mean()) else float('inf'):.1f}x their mean); "
                     f"{above}/{len(heads)} heads at least {FIG5['ratio']:g}x their layer's random mean")


def judge_fig6(true: torch.Tensor, false: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """true, false: [N, S] summed attention on true / false labels in S in-context heads."""
    diff = (true - false).mean(1)
    ci = mean_ci(diff, clusters=clusters)
    c = true_vs_false(true, false)
    least = FIG6["min_attention"]
    above = int(((true - false).mean(0) >= least).sum())  # the minimum effect, head by head
    verdict = all_hold(ci[0] > 0 and float(diff.mean()) >= least, above >= FIG6["heads"] * c.heads)
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"ours: mean (true - false) summed attention; true {c.true:.3f}, false {c.false:.3f}; true at least "
                     f"{least:g} above false in {above}/{c.heads} heads; the balanced prompt puts the true labels nearest "
                     "the input, which the control row separates")


def judge_together(parts: dict[str, Judgement], n: int, heads: str) -> Judgement:
    """A claim judged part by part (per dataset, by the fig5 and fig6 rules, in the heads
    `heads` describes): `together` of the parts' verdicts; n prompts in all."""
    count = {v: sum(j.verdict == v for j in parts.values()) for v in (REPLICATES, PARTLY)}
    shown = "; ".join(f"{name}: {ours_text(j)}, {j.verdict} ({j.why})" for name, j in parts.items())
    return Judgement(f"{count[REPLICATES]} of {len(parts)} replicate, {count[PARTLY]} partly", None, n,
                     together(list(parts.values())), f"{heads}. {shown}")


def judge_at_least(effect: float, ci: tuple[float, float], n: int, why: str, least: float) -> Judgement:
    """An effect judged by its size: replicates where it is at least `least` with its 95% CI above 0;
    partly where it is at least `least` but its CI reaches 0; does not replicate where it is smaller."""
    verdict = (REPLICATES if ci[0] > 0 else PARTLY) if effect >= least else FAILS
    return Judgement(effect, ci, n, verdict, why)
