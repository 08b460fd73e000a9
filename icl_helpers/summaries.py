"""The numbers a notebook prints beside the paper's: small reductions of sweep results.

Attention tensors are [N, S] (prompts x heads) unless noted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch

from .locate import LocateResult
from .sweeps import VariantStudy

Head = tuple[int, int]


@dataclass
class TrueVsFalse:
    """Mean summed attention on true and false labels over prompts and heads."""

    true: float
    false: float
    heads_true_above: int  # heads whose mean true-label attention exceeds the false-label one
    heads: int


def true_vs_false(true: torch.Tensor, false: torch.Tensor) -> TrueVsFalse:
    """Compare the attention on true and false labels, [N, S] each."""
    above = int((true.mean(0) > false.mean(0)).sum())
    return TrueVsFalse(float(true.mean()), float(false.mean()), above, true.shape[1])


@dataclass
class VariantChange:
    """How a prompt variant moves the summed label attention of each head."""

    true_before: float
    true_after: float
    false_before: float
    false_after: float
    heads_true_down: int  # heads whose mean true-label attention drops
    heads_false_up: int  # heads whose mean false-label attention rises
    heads: int


def variant_change(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor]) -> VariantChange:
    """(true, false) attention of the base prompts against a variant's, [N, S] each."""
    (t0, f0), (t1, f1) = before, after
    return VariantChange(
        float(t0.mean()), float(t1.mean()), float(f0.mean()), float(f1.mean()),
        int((t1.mean(0) < t0.mean(0)).sum()), int((f1.mean(0) > f0.mean(0)).sum()), t0.shape[1],
    )


def layer_range(heads: Sequence[Head]) -> tuple[int, int]:
    """(lowest, highest) layer among the heads."""
    layers = [l for l, _ in heads]
    return min(layers), max(layers)


def mean_shared(overlap: torch.Tensor) -> float:
    """Mean number of heads two different datasets share, from `sweeps.overlap` [D, D]."""
    off = ~torch.eye(len(overlap), dtype=torch.bool)
    return float(overlap[off].float().mean()) if off.any() else float("nan")


def correlation(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(Pearson, Spearman) correlation of two flattened tensors of equal size."""
    x, y = x.flatten().double(), y.flatten().double()
    rank = lambda v: v.argsort().argsort().double()  # noqa: E731 (ties broken by order)
    pearson = torch.corrcoef(torch.stack([x, y]))[0, 1]
    spearman = torch.corrcoef(torch.stack([rank(x), rank(y)]))[0, 1]
    return float(pearson), float(spearman)


def label_value_hits(table: pd.DataFrame) -> float:
    """Share of a projection table's label-value rows whose top tokens include the label
    word itself (any case), as the paper's Table 1 shows for GPT-2 large."""
    values = table[table["vector"] == "label value"]
    hits = [tok.strip().lower() in [t.lower() for t in top.split(", ")] for tok, top in zip(values["token"], values["top tokens"])]
    return sum(hits) / max(len(hits), 1)


def top_heads_table(located: dict[str, LocateResult], k: int = 20) -> pd.DataFrame:
    """The top-k heads of each dataset, best first, as "layer-head (mean increase)"."""
    return pd.DataFrame({name: [f"{l}-{h} ({v:.2f})" for l, h, v in loc.top_heads(k)] for name, loc in located.items()},
                        index=pd.RangeIndex(1, k + 1, name="rank"))


@dataclass
class MRRSummary:
    """Fig. 5 in numbers."""

    mean: float  # over in-context heads
    random_mean: float  # over their random heads
    weakest: Head  # the in-context head with the lowest MRR
    weakest_mrr: float
    heads_above_random: int  # in-context heads scoring above their random head
    heads: int


def mrr_summary(heads: Sequence[Head], mrr: torch.Tensor, random_mrr: torch.Tensor) -> MRRSummary:
    """Compare the MRR [S] of in-context heads with that of their random heads [S]."""
    weakest = int(mrr.argmin())
    return MRRSummary(float(mrr.mean()), float(random_mrr.mean()), tuple(heads[weakest]), float(mrr[weakest]),
                      int((mrr > random_mrr).sum()), len(heads))


def variant_table(studies: Sequence[VariantStudy], variant: str) -> pd.DataFrame:
    """One row per dataset: mean true/false label attention in its in-context heads, balanced
    and under the variant, how many heads move as the paper reports, and the accuracy."""
    rows = []
    for st in studies:
        c = variant_change(*(st.at_heads()[v] for v in ("balanced", variant)))
        rows.append({"dataset": st.dataset, "true, balanced": c.true_before, f"true, {variant}": c.true_after,
                     "false, balanced": c.false_before, f"false, {variant}": c.false_after,
                     "heads: true down": f"{c.heads_true_down}/{c.heads}", "heads: false up": f"{c.heads_false_up}/{c.heads}",
                     "accuracy, balanced": st.accuracy["balanced"], f"accuracy, {variant}": st.accuracy[variant]})
    return pd.DataFrame(rows).set_index("dataset")
