"""Batches of prompts, and the one walk over them that every pass through the model takes.

A batch is a tensor [b] of prompt indices. `length_batches` puts prompts of similar length
together (little padding), `chunks` takes them in prompt order, a fixed number a batch;
`walk` goes through the batches in turn with a progress bar; `in_prompt_order` puts the
batches' results back in prompt order (scoring joins consecutive batches into groups:
`sizes.scoring_groups`).
"""
from __future__ import annotations

from typing import Iterator, Sequence

import torch

from ..errors import check_count
from ..model.loading import ICLModel
from ..progress import progress_bar

Tensors = dict[str, torch.Tensor]  # a result's parts by name: a batch's [b, ...], a prompt set's [N, ...]

BATCH_TOKENS = 2048  # tokens with padding a batch of long prompts may hold (see bench/RESULTS.md, padding)


def length_batches(m: ICLModel, prompts: Sequence[str], batch_size: int) -> list[torch.Tensor]:
    """`token_batches` of the prompts, by their lengths in this model's tokens."""
    check_count(batch_size, "batch_size")
    return token_batches([len(ids) for ids in m.tokenizer(list(prompts))["input_ids"]], batch_size)


def token_batches(lengths: Sequence[int], batch_size: int) -> list[torch.Tensor]:
    """Batches of prompt indices [b] for prompts of `lengths` tokens, shortest first: at most
    batch_size prompts and BATCH_TOKENS tokens with padding a batch (a longer prompt alone),
    so a batch pads little and its eager attention stays small. Every prompt once."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        if not batches or len(batches[-1]) == batch_size or (len(batches[-1]) + 1) * lengths[i] > BATCH_TOKENS:
            batches.append([])
        batches[-1].append(i)
    return [torch.tensor(b, dtype=torch.long) for b in batches]


def chunks(n: int, size: int) -> list[torch.Tensor]:
    """Batches of prompt indices [b] of n prompts in prompt order, `size` a batch (the last one fewer)."""
    check_count(size, "batch_size")
    return list(torch.arange(n).split(size))


def walk(prompts: Sequence[str], batches: Sequence[torch.Tensor], desc: str = "", progress: bool = True
         ) -> Iterator[tuple[torch.Tensor, list[str]]]:
    """(rows [b], the prompts at rows) for each batch in turn, with a progress bar labelled
    `desc` over the batches (none where progress is False)."""
    bar = progress_bar(len(batches), desc, progress)
    for rows in batches:
        yield rows, [prompts[i] for i in rows]
        bar.update()
    bar.close()


def in_prompt_order(parts: Sequence[Tensors], batches: Sequence[torch.Tensor]) -> Tensors:
    """Tensors [b, ...] of consecutive batches (or groups of them), concatenated: [N, ...] in
    prompt order, for the batches' indices `batches`."""
    restore = prompt_order(batches)
    return {k: torch.cat([p[k] for p in parts])[restore] for k in parts[0]}


def prompt_order(batches: Sequence[torch.Tensor]) -> torch.Tensor:
    """[N]: the indices that put the batches' concatenated results back in prompt order."""
    return torch.cat(list(batches)).argsort()
