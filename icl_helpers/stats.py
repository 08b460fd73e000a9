"""Confidence intervals: the percentile bootstrap over prompts, seeded; where prompts share an
input (a word dataset's 1,000 prompts hold a few hundred distinct inputs), over the distinct
inputs (clusters), each drawn with all its prompts."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from .errors import CannotMeasure

DRAWS = 1000  # bootstrap resamples
LEVEL = 0.95
MIN_CLUSTERS = 10  # the fewest distinct inputs an interval is drawn from: fewer are "too few prompts"
WEIGHTS_AT_ONCE = 2**22  # entries of a resample times draws that `weighted_ci` weighs at once: 32 MiB a float64 tensor


def bootstrap_ci(
    samples: Sequence[torch.Tensor],
    statistic: Callable[..., float],
    draws: int = DRAWS,
    seed: int = 0,
    level: float = LEVEL,
    clusters: Sequence[torch.Tensor | None] | None = None,
) -> tuple[float, float]:
    """Percentile interval of `statistic(*resampled)`: each tensor of `samples` ([N_i, ...],
    one row a prompt) resampled with replacement, independently of the others; tensors of one
    group that share prompts (paired measurements) should be stacked into one. clusters: for
    each sample, [N_i] long ids of its rows' distinct inputs (or None: every row its own), so
    that a draw takes whole inputs with all their rows. CannotMeasure where a sample holds fewer
    than MIN_CLUSTERS distinct inputs: an interval from so few says nothing."""
    ids = [_ids(s, c) for s, c in zip(samples, clusters or [None] * len(samples))]
    g = torch.Generator().manual_seed(seed)
    if len(samples) == 1:  # every draw's clusters at once (the same draws as one at a time), each resample as `_draw`'s
        (row_cluster, members), rows = ids[0], torch.arange(len(samples[0]))
        resamples = (samples[0][rows.repeat_interleave(c[row_cluster])] for c in _counts(len(members), g, draws))
        values = torch.tensor([float(statistic(r)) for r in resamples], dtype=torch.float64)
    else:
        values = torch.tensor([
            float(statistic(*(s[_draw(row_cluster, members, g)] for s, (row_cluster, members) in zip(samples, ids))))
            for _ in range(draws)
        ], dtype=torch.float64)
    return _percentiles(values, level)


def weighted_ci(
    sample: torch.Tensor,
    statistic: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    draws: int = DRAWS,
    seed: int = 0,
    level: float = LEVEL,
    clusters: torch.Tensor | None = None,
) -> tuple[float, float]:
    """`bootstrap_ci` of one sample [N, ...] for a statistic written over row weights: statistic(sample, w) [d]
    for w [d, N] float64, each row's multiplicity in d resamples (all ones: the sample itself). The same draws
    as `bootstrap_ci`'s, every resample's statistic from its multiplicities at once, no resample built."""
    row_cluster, members = _ids(sample, clusters)
    counts = _counts(len(members), torch.Generator().manual_seed(seed), draws)  # [draws, C]
    per_draw = max(1, WEIGHTS_AT_ONCE // max(1, sample.numel()))
    values = torch.cat([statistic(sample, c[:, row_cluster].double()) for c in counts.split(per_draw)])
    return _percentiles(values.double(), level)


def weighted_spearman(x: torch.Tensor, y: torch.Tensor, keep: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[d]: `spearman` of the entries of x and y [N, ...] that `keep` [N, ...] marks, each row n counted w[:, n]
    times (w [d, N]): ranks by `mean_ranks` within each weighting, then Pearson's correlation weighted alike."""
    kept = w[:, :, None] * keep.reshape(len(keep), -1)[None].double()  # [d, N, P]: each entry's multiplicity
    kept = kept.flatten(1)  # [d, M]
    total = kept.sum(1, keepdim=True)
    rx, ry = (_weighted_ranks(v.masked_fill(~keep, 0).flatten(), kept) for v in (x, y))
    dx, dy = (r - (kept * r).sum(1, keepdim=True) / total for r in (rx, ry))
    return (kept * dx * dy).sum(1) / ((kept * dx * dx).sum(1) * (kept * dy * dy).sum(1)).sqrt()


def weighted_nanmean(x: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """Each column's mean of x [N, S, ...] over its rows and their entries, NaN left out: [S]; with w [d, N] (each
    row's multiplicity in d resamples) each resample's, [d, S]. Summed in x's dtype, as a mean of x would be."""
    weights = torch.ones(1, len(x), dtype=x.dtype) if w is None else w.to(x.dtype)
    x = x.reshape(*x.shape[:2], -1)  # [N, S, K]
    counted = ~x.isnan()
    means = (torch.einsum("dn,nsk->ds", weights, torch.where(counted, x, 0))
             / torch.einsum("dn,nsk->ds", weights, counted.to(x.dtype)))
    return means[0] if w is None else means


def unweighted(statistic: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], sample: torch.Tensor) -> float:
    """A statistic written over row weights (as `weighted_ci` takes it) of the sample itself: every row once."""
    return float(statistic(sample, torch.ones(1, len(sample), dtype=torch.float64))[0])


def _weighted_ranks(v: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """[d, M]: each of v's M values' 0-based rank among the values counted kept [d, M] times, tied values their
    mean rank: `mean_ranks` of the sample the weights describe (all ones: of v itself)."""
    values, group = torch.unique(v.double(), sorted=True, return_inverse=True)
    count = torch.zeros(len(kept), len(values), dtype=torch.float64).index_add_(1, group, kept)  # [d, G]
    return (count.cumsum(1) - (count + 1) / 2)[:, group]


def _percentiles(values: torch.Tensor, level: float) -> tuple[float, float]:
    """The central `level` interval of the draws' statistics [D] (NaN draws left out; NaN where all are)."""
    values = values[~values.isnan()]
    if len(values) == 0:
        return float("nan"), float("nan")
    tail = (1 - level) / 2
    low, high = torch.quantile(values, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low, high


def _ids(sample: torch.Tensor, clusters: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(each row's cluster index [N] in 0..C-1, the distinct cluster ids [C]); CannotMeasure where there are
    fewer than MIN_CLUSTERS."""
    if clusters is None:
        clusters = torch.arange(len(sample))
    if len(clusters) != len(sample):
        raise ValueError(f"{len(clusters)} cluster ids for {len(sample)} rows")
    members, row_cluster = torch.unique(clusters, return_inverse=True)
    if len(members) < MIN_CLUSTERS:
        raise CannotMeasure(f"too few prompts: {len(members)} distinct inputs, an interval needs at least {MIN_CLUSTERS}")
    return row_cluster, members


def _draw(row_cluster: torch.Tensor, members: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Row indices of one resample: C clusters drawn with replacement, each with all its rows (in row order)."""
    return torch.repeat_interleave(torch.arange(len(row_cluster)), _counts(len(members), g, 1)[0][row_cluster])


def _counts(C: int, g: torch.Generator, draws: int) -> torch.Tensor:
    """[draws, C] long: how often each of C clusters is in each of `draws` resamples, `_draw`'s draws made at
    once (one call of the generator gives the numbers that many calls give, in the same order)."""
    picks = torch.randint(C, (draws, C), generator=g)
    return torch.zeros(draws, C, dtype=torch.long).scatter_add_(1, picks, torch.ones_like(picks))


def spearman(x: torch.Tensor, y: torch.Tensor) -> float:
    """Spearman correlation of two flattened tensors of equal size: Pearson's of their ranks, tied
    values sharing their mean rank (a bootstrap draw repeats rows; breaking ties by a sort's order
    would make rho depend on the sort's implementation)."""
    return float(torch.corrcoef(torch.stack([mean_ranks(x), mean_ranks(y)]))[0, 1])


def mean_ranks(v: torch.Tensor) -> torch.Tensor:
    """[n] float64: each value's rank in flattened v (0-based), tied values their mean rank."""
    return _weighted_ranks(v.flatten(), torch.ones(1, v.numel(), dtype=torch.float64))[0]


def mean_ci(x: torch.Tensor, draws: int = DRAWS, seed: int = 0, clusters: torch.Tensor | None = None
            ) -> tuple[float, float]:
    """The bootstrap interval of the mean of x [N] (or of every entry of x [N, ...], resampling
    rows, or whole inputs where clusters [N] gives each row's): every draw's mean from its cluster counts, the
    clusters' sums and sizes, where x is finite (the same draws as `bootstrap_ci`'s, summed in another order)."""
    x = x.double()
    if not bool(x.isfinite().all()):  # a NaN row no draw takes would still reach a product
        return bootstrap_ci([x], lambda s: s.mean(), draws, seed, clusters=[clusters])
    row_cluster, members = _ids(x, clusters)
    counts = _counts(len(members), torch.Generator().manual_seed(seed), draws).double()  # [draws, C]
    rows = x.reshape(len(x), -1)
    sums = torch.zeros(len(members), dtype=torch.float64).index_add_(0, row_cluster, rows.sum(1))  # [C]
    entries = torch.bincount(row_cluster, minlength=len(members)).double() * rows.shape[1]  # [C]
    return _percentiles(counts @ sums / (counts @ entries), LEVEL)
