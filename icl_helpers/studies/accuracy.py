"""In-context classification accuracy (Table 2), batched.

A label's token id is the first token of " " + the label word (`data.prompts.label_token_ids`).
Three measures over N prompts: ranked, the share whose next-token logit of the true label
beats the false label's; top-1, the share whose overall argmax is the true label; and the
true label's mean next-token probability.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, fields
from typing import Callable, ContextManager, Sequence

import pandas as pd
import torch

from ..core.batching import length_batches, walk
from ..data.prompts import prompt_label_ids
from ..data.setting import MAIN, Setting
from ..errors import UsageError, check_prompts
from ..model.loading import ICLModel
from ..model.prefix import block_inputs, resumed
from .runner import PromptSet, prompt_set, study_result


@dataclass(frozen=True)
class Accuracy:
    """Per-prompt results at the last position, for N prompts (on the CPU)."""

    true_logit: torch.Tensor  # [N]
    false_logit: torch.Tensor  # [N]
    predictions: torch.Tensor  # [N] long: the argmax token
    true_id: torch.Tensor  # [N] long
    true_prob: torch.Tensor | None = None  # [N]: the true label's next-token probability

    @classmethod
    def cat(cls, parts: Sequence["Accuracy"]) -> "Accuracy":
        """The prompts of several results, in order (each with its true_prob)."""
        return cls(*(torch.cat([getattr(a, f.name) for a in parts]) for f in fields(cls)))

    @property
    def top1_hits(self) -> torch.Tensor:
        """[N] bool: the argmax is the true label."""
        return self.predictions == self.true_id

    @property
    def ranked_hits(self) -> torch.Tensor:
        """[N] bool: the true label outscores the false one (a tie does not)."""
        return self.true_logit > self.false_logit

    @property
    def ranked(self) -> float:
        """Share of prompts ranking the true label above the false one."""
        return self.ranked_hits.double().mean().item()

    @property
    def top1(self) -> float:
        """Share of prompts whose argmax is the true label."""
        return self.top1_hits.double().mean().item()


Within = Callable[[list[int]], ContextManager]  # a context a batch runs in, given its prompts' indices


@dataclass(frozen=True)
class Run:
    """One way to run every batch: inside within(rows) (None: the plain model), given the
    indices of the batch's prompts in the order it holds them (e.g. an intervention that
    needs their label positions). start: the first block the run may change (0, any).
    Runs of one batch that change only blocks start.. share the blocks before, run once."""

    within: Within | None = None
    start: int = 0


def accuracy(
    m: ICLModel,
    prompts: Sequence[str],
    true_ids: torch.Tensor | int,
    false_ids: torch.Tensor | int,
    batch_size: int = 32,
    within: Within | None = None,
    progress: bool = True,
) -> Accuracy:
    """Run the prompts in batches of similar length (`length_batches`) and read the logits at
    each one's last real position.

    true_ids, false_ids: [N] label token ids (or one id for all prompts), e.g. from
    `prompt_label_ids`. Only the last position of each prompt is projected to the vocabulary.
    within(rows): a context each batch runs in (see `Run`).
    progress: a bar for a long run (off where a caller shows its own).
    """
    return accuracies(m, prompts, true_ids, false_ids, [Run(within)], batch_size, "accuracy" if progress else None)[0]


@torch.no_grad()
def accuracies(
    m: ICLModel,
    prompts: Sequence[str],
    true_ids: torch.Tensor | int,
    false_ids: torch.Tensor | int,
    runs: Sequence[Run],
    batch_size: int = 32,
    progress: str | None = "accuracy",
) -> list[Accuracy]:
    """`accuracy` of the prompts under each of `runs`, a batch at a time: each batch is
    encoded once, and the blocks before a run's `start` are computed once for all the runs
    (recorded on the batch's first run that leaves them unchanged, the plain one first,
    `model.prefix`); a run then computes only blocks start..L-1. progress: the label of a
    bar over batches (None: no bar)."""
    prompts = check_prompts(prompts)
    n = len(prompts)
    ids = torch.stack([torch.as_tensor(i, dtype=torch.long).expand(n) for i in (true_ids, false_ids)], 1)  # [N, 2]
    if (ids[:, 0] == ids[:, 1]).any():
        raise UsageError("A prompt's true and false labels share their first token: choose label words that start differently.")
    L = m.arch.n_layers
    starts = [L if run.within is None else min(max(run.start, 0), L) for run in runs]  # the plain model changes nothing
    shared = sorted({s for s in starts if 0 < s < L})  # block inputs worth keeping
    batches = length_batches(m, prompts, batch_size)  # similar lengths share a batch: little padding
    out = [(torch.empty(n, dtype=torch.long), torch.empty(n, 2), torch.empty(n)) for _ in runs]  # predictions, pair, prob
    for batch, texts in walk(prompts, batches, progress or "", progress is not None):
        rows = batch.tolist()
        enc = m.encode(texts)
        last = enc["attention_mask"].sum(1) - 1  # [b]
        inputs: dict[int, torch.Tensor] = {}  # block inputs x_s [b, T, d] of this batch, unchanged by the runs so far
        for run, start, (predictions, pair, prob) in zip(runs, starts, out):
            pass_from = (resumed(m, start, inputs[start]) if start in inputs
                         else block_inputs(m, [s for s in shared if s <= start and s not in inputs], inputs))
            with run.within(rows) if run.within else nullcontext(), pass_from:
                logits = m.model(**enc, logits_to_keep=last[:, None]).logits[:, 0].float()  # [b, V]
            predictions[rows] = logits.argmax(-1).cpu()
            pair[rows] = logits.gather(1, ids[rows].to(logits.device)).cpu()  # [b, 2]
            prob[rows] = (pair[rows, 0] - logits.logsumexp(-1).cpu()).exp()
    return [Accuracy(pair[:, 0], pair[:, 1], predictions, ids[:, 0].clone(), prob) for predictions, pair, prob in out]


def prompt_accuracy(m: ICLModel, ps: PromptSet, batch_size: int = 32) -> Accuracy:
    """Accuracy of the model on a prompt set (true label against false label), cached on disk
    as every study's result is (`runner.study_result`): a notebook's Table 2, its accuracy
    lines and its verdicts run each prompt set once."""
    def compute() -> dict[str, torch.Tensor]:
        (acc,) = accuracies(m, ps.texts, *prompt_label_ids(m.tokenizer, ps.prompts), [Run()], batch_size,
                            f"accuracy, {ps.title}")
        return {f.name: getattr(acc, f.name) for f in fields(Accuracy)}
    return Accuracy(**study_result("accuracy", m, ps, compute))


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
