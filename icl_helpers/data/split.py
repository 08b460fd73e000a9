"""The held-out protocol's split of a dataset's records by distinct input: `input_halves` draws,
with the seed, half the distinct inputs of each class, so that no input is on both sides. The
verdicts' held-out view locates heads on one half and judges them on the other; the causal check
ablates on the other half; the head-type scores read one half (SCORE) and their ablations the
other (EVAL)."""
from __future__ import annotations

from typing import Sequence

import torch

from .prompts import Record


def input_ids(records: Sequence[Record]) -> torch.Tensor:
    """[N] long: each record's distinct input, numbered in order of first appearance."""
    numbers: dict[str, int] = {}
    return torch.tensor([numbers.setdefault(r.input, len(numbers)) for r in records], dtype=torch.long)


def input_halves(records: Sequence[Record], seed: int = 0) -> torch.Tensor:
    """[N] bool: the SCORE half, True on every record of half the distinct inputs of each class
    (rounded down), drawn with the seed; the rest is EVAL. No input is in both."""
    ids = input_ids(records)
    g = torch.Generator().manual_seed(seed)
    chosen = torch.zeros(len(ids), dtype=torch.bool)
    for cls in sorted({r.true_class for r in records}):
        inputs = ids[torch.tensor([r.true_class == cls for r in records])].unique()
        picked = inputs[torch.randperm(len(inputs), generator=g)[: len(inputs) // 2]]
        chosen |= torch.isin(ids, picked)
    return chosen


def records_in(records: Sequence[Record], rows: torch.Tensor) -> list[Record]:
    """The records where rows [N] bool is True (a half of `input_halves`, or its other), in order."""
    return [r for r, keep in zip(records, rows.tolist()) if keep]
