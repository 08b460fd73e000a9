"""What the literature's claims share: the papers they cite, when their rules were set, the two set sizes
every claim reads, and what every rule reads of a `studies.head_sets.HeadSetStudy` (`hits`, `at_sizes`)."""
from __future__ import annotations

from typing import Callable

import torch

from ....model.adapters.base import Arch
from ....studies.head_sets import HeadSetStudy
from ...evidence import paper_share_heads
from ...judgement import Judgement, all_hold
from ...rules import K
from ...whose import LITERATURE
from ..registry import EVAL_POOLED, Claim

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


def literature_claim(**fields) -> Claim:
    """A claim of the literature (`LITERATURE`'s): a `Claim` judged on a `HeadSetStudy`, its intervals over the
    word EVAL prompts pooled, its verdict in notebook 09, its rule set on RULES_SET unless `fields` say otherwise."""
    return Claim(**{"whose": LITERATURE, "notebooks": ("09",), "clusters": EVAL_POOLED, "set_on": RULES_SET, **fields})
