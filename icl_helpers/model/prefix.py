"""Forward passes that share the blocks before a layer.

An intervention on the heads of layers l >= s (ablation, an attention edit) changes
nothing in blocks 0..s-1, so several runs of one batch can compute those blocks once:
`block_inputs` records block s's input x_s [B, T, d] during a full pass, and inside
`resumed` a pass of the same batch runs only blocks s..L-1 from it. The result is the full
pass's to the bit: block s gets the same tensor, mask and positions. The causal check's
ablations (`studies.ablation`) run this way: an ablation of heads in layers 23-29 of a
30-layer model costs a quarter of a pass.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import ContextManager, Iterable, Iterator

import torch
from torch import nn

from .hooks import attached
from .loading import ICLModel


def block_inputs(m: ICLModel, layers: Iterable[int], into: dict[int, torch.Tensor]) -> ContextManager[None]:
    """Inside the block, each forward pass stores block l's input x_l [B, T, d] as into[l],
    for each of `layers`, as the block receives it (before any other pre-hook)."""
    blocks = m.arch.blocks()
    return attached([(blocks[l], "pre", lambda module, args, l=l: into.__setitem__(l, args[0])) for l in layers],
                    first=True)


class _Given(nn.Module):
    """Stands in for a skipped block: whatever it is passed, it returns x, the recorded input of
    the first block that runs, as a block of the model returns its output (as (x, None) where
    a block returns a tuple: GPT-J)."""

    def __init__(self, x: torch.Tensor, as_tuple: bool):
        super().__init__()
        self.x = x
        self.as_tuple = as_tuple

    def forward(self, *args, **kwargs) -> torch.Tensor | tuple[torch.Tensor, None]:
        return (self.x, None) if self.as_tuple else self.x


@contextmanager
def resumed(m: ICLModel, start: int, x: torch.Tensor) -> Iterator[None]:
    """Inside the block, a forward pass runs blocks start..L-1 only, block `start` taking x
    [B, T, d] (recorded by `block_inputs` on the same batch) as its input: blocks 0..start-1
    are skipped, and the embeddings computed but not used. Exact where nothing before block
    `start` differs from the pass x was recorded in. Enter interventions before this (the
    blocks list holds stand-ins while it is active)."""
    blocks = m.arch.blocks()
    skipped = [blocks[l] for l in range(start)]
    given = _Given(x, m.arch.block_returns_tuple)
    for l in range(start):  # in place, so that each block keeps its index (and its layer's mask)
        blocks[l] = given
    try:
        yield
    finally:
        for l, block in enumerate(skipped):
            blocks[l] = block

