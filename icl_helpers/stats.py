"""Confidence intervals: the percentile bootstrap over prompts, seeded."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

DRAWS = 1000  # bootstrap resamples
LEVEL = 0.95


def bootstrap_ci(
    samples: Sequence[torch.Tensor],
    statistic: Callable[..., float],
    draws: int = DRAWS,
    seed: int = 0,
    level: float = LEVEL,
) -> tuple[float, float]:
    """Percentile interval of `statistic(*resampled)`: each tensor of `samples` ([N_i, ...],
    one row a prompt) resampled with replacement over its rows, independently of the others;
    tensors of one group that share prompts (paired measurements) should be stacked into one."""
    g = torch.Generator().manual_seed(seed)
    values = torch.tensor([
        float(statistic(*(s[torch.randint(len(s), (len(s),), generator=g)] for s in samples))) for _ in range(draws)
    ], dtype=torch.float64)
    values = values[~values.isnan()]
    if len(values) == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2
    low, high = torch.quantile(values, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low, high


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman correlation of two flattened tensors of equal size (ties broken by order)."""
    rank = lambda v: v.flatten().double().argsort().argsort().double()  # noqa: E731
    return float(torch.corrcoef(torch.stack([rank(x), rank(y)]))[0, 1])


def mean_ci(x: torch.Tensor, draws: int = DRAWS, seed: int = 0) -> tuple[float, float]:
    """The bootstrap interval of the mean of x [N] (or of every entry of x [N, ...], resampling rows)."""
    return bootstrap_ci([x], lambda s: s.double().mean(), draws, seed)
