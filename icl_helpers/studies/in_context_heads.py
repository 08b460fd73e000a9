"""Located in-context heads of a dataset (Section 4, Figs. 3-4 and 12-15): the mean
log-probability increase of every head, the top-k heads, where they lie and how much the
top sets of two datasets overlap."""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch

from ..core.heads import Head, check_heads, head_name, top_heads
from ..core.locate import LocateResult
from ..data.prompts import prompt_label_ids
from ..model.loading import ICLModel
from .prompt_pass import from_pass
from .runner import PromptSet


def located(m: ICLModel, ps: PromptSet, batch_size: int = 32) -> LocateResult:
    """`core.locate.locate` on a prompt set, from its one cached pass (`prompt_pass`), so later
    studies and notebooks reuse 01's work."""
    return LocateResult(**from_pass("locate", m, ps, batch_size))


def answered_correctly(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N] bool: the prompts whose top-1 prediction (the target `located` scored) is the true label."""
    return located(m, ps).targets == prompt_label_ids(m.tokenizer, ps.prompts)[0]


def first_correct(m: ICLModel, ps: PromptSet) -> int | None:
    """The index of the first prompt answered correctly (Appendix C's choice), None if none is."""
    right = answered_correctly(m, ps).nonzero().flatten()
    return int(right[0]) if len(right) else None


def in_context_heads(m: ICLModel, ps: PromptSet, k: int = 20, given: Sequence[Head] | None = None) -> list[Head]:
    """The heads a study analyses: `given` (checked against the model; nothing located), else
    the k heads with the largest mean increase on a prompt set (located and cached), best first."""
    if given is not None:
        return list(check_heads(given, m.arch))
    return located(m, ps).top_heads(k)


def overlap(top: dict[str, Sequence[Head]]) -> torch.Tensor:
    """[D, D]: how many heads the top sets of each pair of datasets share."""
    sets = [set(map(tuple, heads)) for heads in top.values()]
    return torch.tensor([[len(a & b) for b in sets] for a in sets])


def mean_shared(overlap: torch.Tensor) -> float:
    """Mean number of heads two different datasets share, from `overlap` [D, D]."""
    off = ~torch.eye(len(overlap), dtype=torch.bool)
    return float(overlap[off].float().mean()) if off.any() else float("nan")


def shared_heads(tops: dict[str, Sequence[Head]], scores: torch.Tensor) -> tuple[list[Head], str]:
    """Appendix B's heads: those in every dataset's top list, best first by scores [L, H] (e.g.
    the mean increase over the datasets); where none is in all, the top k of scores (k the
    lists' length). With a line saying which."""
    k = max(len(heads) for heads in tops.values())
    every = "both" if len(tops) == 2 else f"all {len(tops)}"
    common = set.intersection(*(set(map(tuple, heads)) for heads in tops.values()))
    ranked = top_heads(scores, scores.numel())
    if common:
        return [h for h in ranked if h in common], f"the {len(common)} heads in {every} datasets' top {k}"
    return ranked[:k], f"no head is in {every} datasets' top {k}: the top {k} of their mean increase instead"


def layer_range(heads: Sequence[Head]) -> tuple[int, int]:
    """(lowest, highest) layer among the heads."""
    layers = [l for l, _ in heads]
    return min(layers), max(layers)


def top_heads_table(located: dict[str, LocateResult], k: int = 20) -> pd.DataFrame:
    """The top-k heads of each dataset, best first, as "layer-head (mean increase)" (every head
    where the model has fewer than k)."""
    columns = {}
    for name, loc in located.items():
        heads = loc.top_heads(k)
        columns[name] = [f"{head_name(h)} ({v:.2f})" for h, v in zip(heads, loc.head_scores(heads).tolist())]
    rows = min([k, *(loc.head_mean.numel() for loc in located.values())])
    return pd.DataFrame(columns, index=pd.RangeIndex(1, rows + 1, name="rank"))
