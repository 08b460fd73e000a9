"""The literature's claims as a registry of their own (`LITERATURE`, apart from the paper's `claims.CLAIMS`):
a `LiteratureClaim` and its `LiteratureFinding`, the sources they cite, when their rules were set, and
what every rule reads of a `studies.head_sets.HeadSetStudy` (`hits`, `at_sizes`); `judged` and `markdown`."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ...data.setting import MAIN, Setting
from ...data.split import input_halves
from ...model.adapters.base import Arch
from ...stats import MIN_CLUSTERS
from ...studies.head_sets import HeadSetStudy
from ..evidence import WORD, paper_share_heads
from ..judgement import Judgement, all_hold, judged_or_not, ours_text, rule_dates
from ..rules import K

RULES_SET = ("2026-11-27, after one 32-prompt trial run of the head sets on the bundled model had been "
             "seen (its scores, overlaps and ablation curves), before any run at the committed sizes or on another model")
OLSSON = "Olsson et al. 2022, \"In-context learning and induction heads\" (arXiv 2209.11895)"
CROSBIE = ("Crosbie & Shutova 2025, \"Induction heads as an essential mechanism for pattern matching in in-context "
           "learning\" (arXiv 2407.07011)")
YIN = "Yin & Steinhardt 2025, \"Which attention heads matter for in-context learning?\" (ICML 2025, arXiv 2502.14010)"
YANG = "Yang, Cho & Inoue 2025 (ICLR 2026, arXiv 2509.24164), task-recognition and task-learning heads"
TR_TL_RULES_SET = ("2026-11-27, with the task-recognition and task-learning scores, before any of their "
                   "numbers or any ablation of their sets had been seen, on any model or size")


def set_sizes(arch: Arch) -> tuple[int, int]:
    """The two set sizes every claim reads: the paper's share of the model's heads (20 of GPT-2 large's
    720, `evidence.paper_share_heads`), then K (20)."""
    return paper_share_heads(arch), K


@dataclass(frozen=True, kw_only=True)
class LiteratureClaim:
    """One claim of a paper other than Yu & Ananiadou's, and how we judge it on our head sets."""

    id: str
    claim: str  # the claim, in the paper's sense
    paper: str  # the paper by name and its number, as it gives it
    holds: str  # what of the paper is at hand, and whether our measure is theirs or a reconstruction
    reconstructed: bool  # our measure is rebuilt from a description, not the paper's own code or text
    rule: str  # the verdict rule, written from `thresholds`
    unit: str  # what our number is
    judge: Callable[[HeadSetStudy], Judgement] = field(repr=False)
    thresholds: dict[str, float] = field(default_factory=dict)
    reads_prompts: bool = True  # judged on the EVAL prompts (with an interval that needs MIN_CLUSTERS inputs)
    set_on: str = RULES_SET
    notebooks: tuple[str, ...] = ("09",)  # the notebooks that end with its verdict

    def __post_init__(self):
        object.__setattr__(self, "rule", self.rule.format(**self.thresholds))


LITERATURE: dict[str, LiteratureClaim] = {}  # id -> claim, in the order they are registered


def register(claim: LiteratureClaim) -> LiteratureClaim:
    """Add `claim` to LITERATURE (its id must be new, and none of the paper's `CLAIMS`)."""
    if claim.id in LITERATURE:
        raise ValueError(f"claim {claim.id!r} is registered twice")
    LITERATURE[claim.id] = claim
    return claim


@dataclass(frozen=True)
class LiteratureFinding:
    """A claim of the literature with our judgement of it."""

    claim: LiteratureClaim
    judgement: Judgement

    @property
    def id(self) -> str:
        return self.claim.id

    @property
    def verdict(self) -> str:
        return self.judgement.verdict


def claims_of(notebook: str) -> list[str]:
    """The ids of the literature's claims notebook `notebook` ("09") ends with, in registry order."""
    return [c.id for c in LITERATURE.values() if notebook in c.notebooks]


def judged(study: HeadSetStudy, ids: Sequence[str] | None = None) -> list[LiteratureFinding]:
    """Each claim (all of LITERATURE, or those of `ids`) judged on the study; "not tested" with the
    reason where its data cannot judge it (too few distinct inputs)."""
    return [LiteratureFinding(LITERATURE[id], judged_or_not(lambda id=id: LITERATURE[id].judge(study)))
            for id in ids or list(LITERATURE)]


def markdown(findings: Sequence[LiteratureFinding]) -> str:
    """The findings as one markdown table, each claim's why, rule and what of its paper we hold, then
    when each rule was set (`LiteratureClaim.set_on`)."""
    rows = ["| id | claim of the literature | paper | ours (95% CI) | N | verdict |", "|---|---|---|---|---|---|"]
    rows += [f"| {f.id} | {f.claim.claim} | {f.claim.paper} | {ours_text(f.judgement)} | "
             f"{f.judgement.n if f.judgement.n is not None else '-'} | {f.verdict} |" for f in findings]
    why = [f"- **{f.id}** ({f.verdict}): {f.judgement.why}. Rule: {f.claim.rule}. Source: {f.claim.holds}."
           for f in findings]
    return ("\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why)
            + "\n\n" + rule_dates([(f.id, f.claim.set_on) for f in findings]))


@functools.cache
def fewest_prompts(seed: int = 0, setting: Setting = MAIN, most: int = 1000) -> int:
    """The fewest word prompts a dataset at which the word datasets' EVAL halves pooled (`input_halves`)
    hold MIN_CLUSTERS distinct inputs, which the claims' intervals need."""
    def enough(n: int) -> bool:
        inputs = set()
        for d in WORD:
            records = setting.records(d, n, seed)
            held = ~input_halves(records, seed)
            inputs |= {(d, r.input) for r, h in zip(records, held.tolist()) if h}
        return len(inputs) >= MIN_CLUSTERS
    return next((n for n in range(2, most) if enough(n)), most)




def hits(study: HeadSetStudy, name: str, k: int) -> torch.Tensor:
    """[N] float: top-1 hits of the pooled word EVAL prompts with the set's first k heads ablated."""
    return study.pooled().at(name, k)[0].top1_hits.double()


def at_sizes(study: HeadSetStudy, part: Callable[[int], tuple[float, tuple[float, float] | None, bool, str]],
              n: int | None, what: str) -> Judgement:
    """A claim judged at each of the study's sizes by part(k) -> (ours, ci, holds, why): replicates where
    it holds at every size, partly at some, does not replicate at none; the first size's number headlines."""
    parts = {k: part(k) for k in study.sizes}
    first = parts[study.sizes[0]]
    why = "; ".join(f"k = {k}: {w} ({'holds' if h else 'does not hold'})" for k, (_, _, h, w) in parts.items())
    return Judgement(first[0], first[1], n, all_hold(*(h for _, _, h, _ in parts.values())), f"{what}; {why}")
