"""The numbers a notebook prints beside the paper's: small reductions of sweep results.

Attention tensors are [N, S] (prompts x heads) unless noted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch

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
