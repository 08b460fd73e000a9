"""Accuracy under an intervention given per batch, shared by the ablations (`ablation`) and
the bias reductions (`biases`).

An intervention is given per batch as `Intervene`: a function from the batch's
`LabelPositions` to a context manager (`core.interventions.ablated`, `balanced_labels`,
`position_free_labels`, or several under `applied`). Accuracy comes from
`studies.accuracy.accuracies`, a batch at a time, each run inside the batch's intervention:
the blocks below an intervention's lowest layer (`first_layer`) are computed once a batch
for all the runs (`model.prefix`), so ablating heads of layers 23-29 costs a quarter of a pass.
"""
from __future__ import annotations

from typing import Callable, ContextManager, Sequence

from ..core.heads import Head
from ..data.positions import LabelPositions, find_positions
from ..data.prompts import Prompt, prompt_label_ids
from ..model.loading import ICLModel
from .accuracy import Accuracy, Run, Within, accuracies

Intervene = Callable[[LabelPositions], ContextManager[None]]


def intervened_accuracy(
    m: ICLModel, prompts: Sequence[Prompt], intervene: Intervene | None = None, batch_size: int = 32
) -> Accuracy:
    """`accuracy` of the prompts, each batch run inside `intervene(its label positions)`."""
    return intervened_accuracies(m, prompts, [(intervene, 0)], batch_size)[0]


def intervened_accuracies(m: ICLModel, prompts: Sequence[Prompt], runs: Sequence[tuple[Intervene | None, int]],
                          batch_size: int = 32, progress: str | None = None) -> list[Accuracy]:
    """`accuracies` of the prompts under each (intervene, first layer it changes) of `runs`
    (None: the plain model), each batch run inside `intervene(its label positions)`; the
    blocks before an intervention's first layer run once a batch for all the runs.
    progress: a bar's label (None: no bar)."""
    def within(intervene: Intervene) -> Within:
        return lambda rows: intervene(find_positions(m.tokenizer, [prompts[i] for i in rows]))

    true_ids, false_ids = prompt_label_ids(m.tokenizer, prompts)
    return accuracies(m, [p.text for p in prompts], true_ids, false_ids,
                      [Run(within(i), start) if i else Run() for i, start in runs], batch_size, progress)


def first_layer(heads: Sequence[Head]) -> int:
    """The first layer an intervention on `heads` changes (their lowest; 0 for none)."""
    return min((l for l, _ in heads), default=0)
