"""Passes that read the last position's logits of many prompts, plainly and under interventions.

The engine of the accuracy studies, the ablations and the bias reductions: prompts run in
batches of similar length (`length_batches`), each batch encoded once and run once a given
`Intervention` (None: the plain model); the blocks below an intervention's first layer are
computed once a batch for all of them (`model.prefix`), so ablating heads of layers 23-29
costs a quarter of a pass. A label's token id is the first token of " " + the label word
(`data.prompts.label_token_ids`).

Where every run changes the last position alone (a patch or an ablation there), nothing before it
differs from the plain pass: `last_token_passes` keeps each prompt's keys and values once and runs
only the last token under each edit, many rows a prompt on the batch axis (function vectors, the
head sets' ablations, and the label edits of the bias reductions, `Intervention.last_only`).
"""
from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass, fields
from typing import Callable, ContextManager, Sequence

import torch
from transformers import DynamicCache

from ..data.positions import LabelPositions, find_positions
from ..data.prompts import Prompt, prompt_label_ids
from ..errors import UsageError, check_prompts
from ..model.loading import ICLModel, runs_model
from ..model.prefix import block_inputs, resumed
from .batching import length_batches, token_batches, walk
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

    @classmethod
    def of_values(cls, values: torch.Tensor, true_id: torch.Tensor) -> "Accuracy":
        """The accuracy of `label_values`' values [N, 4] of prompts whose true label is true_id [N]."""
        return cls(values[:, 0], values[:, 1], values[:, 2].long(), true_id, values[:, 3].exp())


def check_distinct(true_ids: torch.Tensor, false_ids: torch.Tensor) -> None:
    """A UsageError where a prompt's true and false label ids [N] are one token."""
    if (true_ids == false_ids).any():
        raise UsageError("A prompt's true and false labels share their first token: choose label words that start differently.")


def label_values(true_ids: torch.Tensor, false_ids: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A `last_token_passes` reader: (logits [b, r, V], prompts [b]) -> [b, r, 4], each run's true and
    false label logits, argmax (exact as a float below 2**24 tokens) and the true label's log-probability,
    for prompts whose labels are true_ids and false_ids [N] (`Accuracy.of_values`)."""
    def read(logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        pair = torch.stack([true_ids[rows], false_ids[rows]], 1).to(logits.device)[:, None].expand(-1, logits.shape[1], 2)
        chosen = logits.gather(-1, pair)
        return torch.stack([chosen[..., 0], chosen[..., 1], logits.argmax(-1).float(), chosen[..., 0] - logits.logsumexp(-1)],
                           -1)
    return read


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
    check_distinct(ids[:, 0], ids[:, 1])
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
    `interventions`, each batch's given its prompts' label positions. Where there are edits and each
    changes the last position alone (`Intervention.last_only`), nothing before it differs from the
    plain pass: each, and the plain pass, is a one-token pass over the prompts' kept keys and values
    (`last_token_passes`). bar: a bar's label (None: no bar)."""
    true_ids, false_ids = prompt_label_ids(m.tokenizer, prompts)

    def labels(rows: Sequence[int]) -> LabelPositions:
        return find_positions(m.tokenizer, [prompts[i] for i in rows])
    texts = [p.text for p in prompts]
    edits = [i for i in interventions if i is not None]
    if not edits or not all(i.last_only for i in edits):  # the plain model alone: its whole pass, as `accuracies` runs it
        return accuracies(m, texts, true_ids, false_ids, interventions, batch_size, bar, labels)
    check_distinct(true_ids, false_ids)
    runs = [LastRun(1, i.start, lambda rows, i=i: i.edit(labels(rows.tolist()))) for i in edits]
    plain, edited = last_token_passes(m, texts, runs, label_values(true_ids, false_ids), batch_size, bar)
    results = iter([Accuracy.of_values(values[:, 0], true_ids) for values in edited])
    return [Accuracy.of_values(plain, true_ids) if i is None else next(results) for i in interventions]


def intervened_accuracy(m: ICLModel, prompts: Sequence[Prompt], intervention: Intervention | None = None,
                        batch_size: int = 32) -> Accuracy:
    """`intervened_accuracies` under one intervention (None: the plain model)."""
    return intervened_accuracies(m, prompts, [intervention], batch_size)[0]


@dataclass(frozen=True)
class LastRun:
    """One edited run of `last_token_passes`: `rows` rows a prompt, blocks `start`..L-1 run, under
    edit(prompts [b]), the context a batch of b prompts' b * rows rows runs in (row i * rows + j:
    prompt i's run j; the last token is each row's only position)."""

    rows: int
    start: int
    edit: Callable[[torch.Tensor], ContextManager[None]]


def _fresh(cache):
    """A copy of a transformers cache whose layers a pass can extend without changing `cache`'s
    (each layer's update binds new tensors to its copy)."""
    out = copy.copy(cache)
    out.layers = [copy.copy(layer) for layer in cache.layers]
    return out


def one_token_groups(m: ICLModel, lengths: Sequence[int], batch_size: int) -> list[torch.Tensor]:
    """Batches of prompt indices [b] for `last_token_passes`, prompts of `lengths` tokens: similar
    lengths padded together (`token_batches`) where every prompt is shorter than the model's sliding
    window (a one-token pass counts its window from the batch's longest prompt), one length a batch
    for the longer prompts of a model with one."""
    text = m.model.config.get_text_config()
    types = getattr(text, "layer_types", None)  # None: a config that says no layer's kind, so any may slide
    window = getattr(text, "sliding_window", None) if types is None or "sliding_attention" in types else None
    short = [i for i, n in enumerate(lengths) if window is None or n < window]
    groups = [torch.tensor(short)[b] for b in token_batches([lengths[i] for i in short], batch_size)] if short else []
    long = torch.tensor(sorted(set(range(len(lengths))) - set(short)), dtype=torch.long)
    by_length = torch.tensor(lengths)[long]
    return groups + [rows for n in by_length.unique() for rows in long[by_length == n].split(batch_size)]


@runs_model
def last_token_passes(m: ICLModel, texts: Sequence[str], runs: Sequence[LastRun],
                      read: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], batch_size: int = 32,
                      bar: str | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(plain [N, ...], one [N, rows, ...] a run): read(logits [b, r, V], prompts [b]) -> [b, r, ...]
    at the last position of each prompt, plainly (r = 1) and under each of `runs`. Prompts of similar
    length (`one_token_groups`), right-padded, run once with their last tokens masked and the batch's
    last column dropped (keeping every layer's keys and values, indexed by position as in a pass of the
    whole prompt) and once their last token alone at its own position over the kept keys (keeping each
    block's input there). A run is then a one-token pass of the last token, repeated `rows` times a
    prompt, through its blocks over the kept keys and values: exact where an edit changes nothing before
    the last position. bar: a progress bar's label (None: none)."""
    L = m.arch.n_layers
    lengths = [len(ids) for ids in m.tokenizer(list(texts))["input_ids"]]
    if min(lengths) < 2:
        raise UsageError("A prompt of one token has no positions before its last to keep: give longer prompts.")
    plain: torch.Tensor | None = None
    outs: list[torch.Tensor | None] = [None] * len(runs)

    def store(into: torch.Tensor | None, rows: torch.Tensor, got: torch.Tensor) -> torch.Tensor:
        got = got.cpu()
        into = torch.empty(len(texts), *got.shape[1:], dtype=got.dtype) if into is None else into
        into[rows] = got
        return into

    for rows, batch in walk(list(texts), one_token_groups(m, lengths, batch_size), bar or "", bar is not None):
        enc = m.encode(batch)
        b, last = len(rows), enc["attention_mask"].sum(1) - 1  # [b]
        # [b, T - 1]: each prompt's tokens before its last (the longest prompt's last is the batch's last column)
        before = enc["attention_mask"].scatter(1, last[:, None], 0)[:, :-1]
        # every layer keeps every key (a sliding-window cache would drop those outside the window, which the mask
        # drops anyway), so a key's index is its position, as in a pass of the whole prompt
        keys = m.model.base_model(input_ids=enc["input_ids"][:, :-1], attention_mask=before, past_key_values=DynamicCache(),
                                  use_cache=True).past_key_values
        step = dict(input_ids=enc["input_ids"].gather(1, last[:, None]), position_ids=last[:, None],
                    attention_mask=torch.cat([before, before.new_ones(b, 1)], 1))  # the last token, over the kept keys
        inputs: dict[int, torch.Tensor] = {}
        with block_inputs(m, range(1, L), inputs):
            logits = m.model(**step, past_key_values=_fresh(keys), use_cache=True).logits[:, -1]
        plain = store(plain, rows, read(logits.float()[:, None], rows)[:, 0])
        wide: dict[int, object] = {}  # rows a prompt -> the kept keys and values repeated so
        for i, run in enumerate(runs):
            if run.rows not in wide:
                wide[run.rows] = _fresh(keys)
                wide[run.rows].batch_repeat_interleave(run.rows)
            x = resumed(m, run.start, inputs[run.start].repeat_interleave(run.rows, 0)) if run.start else nullcontext()
            with run.edit(rows), x:
                logits = m.model(**{k: v.repeat_interleave(run.rows, 0) for k, v in step.items()},
                                 past_key_values=_fresh(wide[run.rows]), use_cache=True).logits[:, -1]
            outs[i] = store(outs[i], rows, read(logits.float().view(b, run.rows, -1), rows))
    return plain, outs
