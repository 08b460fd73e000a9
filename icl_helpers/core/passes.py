"""Passes that read the last position's logits of many prompts, plainly and under interventions.

The engine of the accuracy studies, the ablations and the bias reductions: prompts run in
batches of similar length (`length_batches`), each batch encoded once and run once a given
`Intervention` (None: the plain model); the blocks below an intervention's first layer are
computed once a batch for all of them (`model.prefix`), so ablating heads of layers 23-29
costs a quarter of a pass. A label's token id is the first token of " " + the label word
(`data.prompts.label_token_ids`).
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, fields
from typing import Callable, Sequence

import torch

from ..data.positions import LabelPositions, find_positions
from ..data.prompts import Prompt, prompt_label_ids
from ..errors import UsageError, check_prompts
from ..model.loading import ICLModel, runs_model
from ..model.prefix import block_inputs, resumed
from .batching import length_batches, walk
from .interventions import Intervention


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


@runs_model
def accuracies(
    m: ICLModel,
    prompts: Sequence[str],
    true_ids: torch.Tensor | int,
    false_ids: torch.Tensor | int,
    interventions: Sequence[Intervention | None],
    batch_size: int = 32,
    bar: str | None = "accuracy",
    labels: Callable[[list[int]], LabelPositions] | None = None,
) -> list[Accuracy]:
    """The prompts' `Accuracy` under each of `interventions` (None: the plain model), a batch
    at a time: each batch is encoded once, and the blocks before an intervention's `start` are
    computed once for all of them (recorded on the batch's first pass that leaves them
    unchanged, the plain one first, `model.prefix`); a pass then computes only blocks
    start..L-1. Only the last position of each prompt is projected to the vocabulary.

    true_ids, false_ids: [N] label token ids (or one id for all prompts), e.g. from
    `prompt_label_ids`. labels(rows): the label positions of the prompts `rows` [b] (in the
    order the batch holds them), which each batch's interventions are given (None: they get
    None). bar: the label of a bar over batches (None: no bar).
    """
    prompts = check_prompts(prompts)
    n = len(prompts)
    ids = torch.stack([torch.as_tensor(i, dtype=torch.long).expand(n) for i in (true_ids, false_ids)], 1)  # [N, 2]
    if (ids[:, 0] == ids[:, 1]).any():
        raise UsageError("A prompt's true and false labels share their first token: choose label words that start differently.")
    L = m.arch.n_layers
    starts = [L if i is None else min(max(i.start, 0), L) for i in interventions]  # the plain model changes nothing
    shared = sorted({s for s in starts if 0 < s < L})  # block inputs worth keeping
    batches = length_batches(m, prompts, batch_size)  # similar lengths share a batch: little padding
    out = [(torch.empty(n, dtype=torch.long), torch.empty(n, 2), torch.empty(n)) for _ in interventions]  # predictions, pair, prob
    for batch, texts in walk(prompts, batches, bar or "", bar is not None):
        rows = batch.tolist()
        enc = m.encode(texts)
        last = enc["attention_mask"].sum(1) - 1  # [b]
        inputs: dict[int, torch.Tensor] = {}  # block inputs x_s [b, T, d] of this batch, unchanged by the passes so far
        for intervention, start, (predictions, pair, prob) in zip(interventions, starts, out):
            pass_from = (resumed(m, start, inputs[start]) if start in inputs
                         else block_inputs(m, [s for s in shared if s <= start and s not in inputs], inputs))
            within = nullcontext() if intervention is None else intervention.edit(labels(rows) if labels else None)
            with within, pass_from:
                logits = m.model(**enc, logits_to_keep=last[:, None]).logits[:, 0].float()  # [b, V]
            predictions[rows] = logits.argmax(-1).cpu()
            pair[rows] = logits.gather(1, ids[rows].to(logits.device)).cpu()  # [b, 2]
            prob[rows] = (pair[rows, 0] - logits.logsumexp(-1).cpu()).exp()
    return [Accuracy(pair[:, 0], pair[:, 1], predictions, ids[:, 0].clone(), prob) for predictions, pair, prob in out]


def intervened_accuracies(m: ICLModel, prompts: Sequence[Prompt], interventions: Sequence[Intervention | None],
                          batch_size: int = 32, bar: str | None = None) -> list[Accuracy]:
    """`accuracies` of the prompts (true label against false label) under each of
    `interventions`, each batch's given its prompts' label positions. bar: a bar's label
    (None: no bar)."""
    true_ids, false_ids = prompt_label_ids(m.tokenizer, prompts)
    return accuracies(m, [p.text for p in prompts], true_ids, false_ids, interventions, batch_size, bar,
                      lambda rows: find_positions(m.tokenizer, [prompts[i] for i in rows]))


def intervened_accuracy(m: ICLModel, prompts: Sequence[Prompt], intervention: Intervention | None = None,
                        batch_size: int = 32) -> Accuracy:
    """`intervened_accuracies` under one intervention (None: the plain model)."""
    return intervened_accuracies(m, prompts, [intervention], batch_size)[0]
