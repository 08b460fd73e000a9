"""In-context classification accuracy (Table 2), batched (`core.passes`).

A label's token id is the first token of " " + the label word (`data.prompts.label_token_ids`).
Three measures over N prompts (`Accuracy`): ranked, the share whose next-token logit of the
true label beats the false label's; top-1, the share whose overall argmax is the true label;
and the true label's mean next-token probability.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import pandas as pd
import torch

from ..cache import stored
from ..core.interventions import Intervention
from ..core.passes import Accuracy, accuracies
from ..data.prompts import prompt_label_ids
from ..data.setting import MAIN, Setting
from ..model.loading import ICLModel
from .runner import PromptSet, prompt_set


def accuracy(
    m: ICLModel,
    prompts: Sequence[str],
    true_ids: torch.Tensor | int,
    false_ids: torch.Tensor | int,
    batch_size: int = 32,
    intervention: Intervention | None = None,
    progress: bool = True,
) -> Accuracy:
    """Run the prompts in batches of similar length (`length_batches`) and read the logits at
    each one's last real position (`core.passes.accuracies`).

    true_ids, false_ids: [N] label token ids (or one id for all prompts), e.g. from
    `prompt_label_ids`. Only the last position of each prompt is projected to the vocabulary.
    intervention: what each batch runs under (None: the plain model; it is given no label
    positions: `core.passes.intervened_accuracy` gives a prompt's).
    progress: a bar for a long run (off where a caller shows its own).
    """
    return accuracies(m, prompts, true_ids, false_ids, [intervention], batch_size, "accuracy" if progress else None)[0]


def prompt_accuracy(m: ICLModel, ps: PromptSet, batch_size: int = 32) -> Accuracy:
    """Accuracy of the model on a prompt set (true label against false label), cached on disk
    as every study's result is (`cache.stored`): a notebook's Table 2, its accuracy
    lines and its verdicts run each prompt set once."""
    def compute() -> dict[str, torch.Tensor]:
        (acc,) = accuracies(m, ps.texts, *prompt_label_ids(m.tokenizer, ps.prompts), [None], batch_size,
                            f"accuracy, {ps.title}")
        return {f.name: getattr(acc, f.name) for f in fields(Accuracy)}
    return Accuracy(**stored("accuracy", m, ps, compute))


@dataclass
class Table2Cell:
    """One cell of Table 2: the prompts of one direction with one true label."""

    direction: str  # "sentiment/number": the input's (true) class / the false class
    true_label: str  # foo (balanced prompts) or bar (labels swapped)
    top1_hits: torch.Tensor  # [N_cell] bool: the argmax is the true label
    ranked_hits: torch.Tensor  # [N_cell] bool: the true label outscores the false one
    dataset: str = ""
    records: torch.Tensor | None = None  # [n] bool: which of the dataset's n records the cell holds


def table2_cells(m: ICLModel, datasets: Sequence[str], n: int, seed: int = 0, batch_size: int = 32,
                 setting: Setting = MAIN) -> list[Table2Cell]:
    """Per word dataset, direction and true label (foo: balanced prompts; bar: labels swapped; or
    the setting's label words), the per-prompt hits of n prompts a dataset and label, half in each direction."""
    cells = []
    for dataset in datasets:
        for variant in ("balanced", "swapped"):
            ps = prompt_set(m, dataset, variant, n, seed, setting=setting)
            acc = prompt_accuracy(m, ps, batch_size)
            top1_hits, ranked_hits = acc.top1_hits, acc.ranked_hits
            for direction in dict.fromkeys(ps.directions):
                keep = torch.tensor([d == direction for d in ps.directions])
                cells.append(Table2Cell(direction, ps.prompts[0].true_label, top1_hits[keep], ranked_hits[keep], dataset, keep))
    return cells


def accuracy_table(m: ICLModel, datasets: Sequence[str], n: int, batch_size: int = 32) -> pd.DataFrame:
    """Table 2: accuracy per direction (true class / false class) of each word dataset, with
    the true label foo (balanced prompts) and bar (labels swapped); n prompts a dataset,
    half in each direction. Top-1: the argmax is the true label; ranked: the true label
    outscores the false one."""
    table = pd.DataFrame([{"direction": c.direction, "true label": c.true_label, "top-1": float(c.top1_hits.float().mean()),
                           "ranked": float(c.ranked_hits.float().mean())}
                          for c in table2_cells(m, datasets, n, batch_size=batch_size)])
    wide = table.pivot(index="direction", columns="true label", values=["top-1", "ranked"])
    return wide.reindex(index=list(dict.fromkeys(table["direction"])), columns=["foo", "bar"], level=1)
