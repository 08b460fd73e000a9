"""The one plan of scoring on one device: its vocabulary chunks, the prompt blocks of its logit
tiles, its scoring groups, and how much of the folded readout it may keep. A readout decides it
once, when it is made (`sizes_for`), and everything that scores asks the readout's.

A CPU wants small logit tiles that stay in its cache (bench/RESULTS.md: on SmolLM2, 1,024 to
8,192 columns a chunk score at the same speed, 2^28-float blocks 45% slower). A GPU wants
few, large kernels: one scoring group a call, so W_O is folded into the readout once, and
8,192-column chunks (on an H200, bench/RESULTS.md: locate 9.1x -> 2.07x its forward pass on GPT-2
small, 11.2x -> 2.75x on a Llama-7B shape, the same scores to 7.6e-6). What a GPU may hold
is read from its free memory when a readout is made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from ..model.adapters import Arch


@dataclass(frozen=True)
class Sizes:
    """The plan of one device's scoring: the sizes it works in (in float32 values), and the
    tiles and groups they cut its prompts into."""

    vocab_chunk: int  # vocabulary columns a step
    block_floats: int  # floats the logit tiles of a prompt block may hold
    group_floats: int  # floats of last-position vectors (z, residuals) one scoring pass may hold
    keep_floats: int  # floats of folded readout (W_O G, every head) that may be kept between calls

    def block_size(self, floats_per_prompt: int, vocab: int) -> int:
        """How many prompts one logit tile takes (one at least): as many whose floats_per_prompt rows
        of a chunk's logits (vocab_chunk columns, or the whole vocabulary where smaller) fit block_floats."""
        return max(1, self.block_floats // (floats_per_prompt * min(self.vocab_chunk, vocab)))

    def group_size(self, arch: Arch, batch_size: int) -> int:
        """How many prompts one scoring pass takes (at least batch_size): as many as whose
        last-position vectors (z, residuals) fit group_floats."""
        per_prompt = arch.n_layers * arch.n_heads * arch.d_head + (arch.n_layers + 1) * arch.d_model
        return max(1, self.group_floats // per_prompt // batch_size) * batch_size

    def groups(self, batches: Sequence[torch.Tensor], arch: Arch, batch_size: int) -> Iterator[list[torch.Tensor]]:
        """The `scoring_groups` of batches of at most batch_size prompts, `group_size` prompts a group."""
        return scoring_groups(batches, self.group_size(arch, batch_size))


CPU_BLOCK = 2**22  # a 16 MB logit tile: a few MB a layer, in a CPU's cache through its log-sum-exp
CPU_GROUP = 2**27  # 512 MB of held vectors: all prompts of a few thousand, for a small model
GPU_CHUNK = 8192
GPU_BLOCK = 2**28  # a 1 GB logit tile: few kernels, each large


def sizes_for(device: torch.device | str) -> Sizes:
    """The sizes scoring uses on `device`. A CUDA GPU's come from its free memory now, and a
    third of it may keep the fold (a Llama-7B shape's is 16.8 GB: kept on an 80 GB GPU). Any
    other device (CPU, MPS) takes those measured on a CPU, and keeps a fold only within a
    sixteenth of the free memory: on a CPU the fold is a small part of scoring (SmolLM2: about
    4 of 50 s a locate call of 1,024 prompts, for 3.4 GB kept), so memory comes first."""
    device = torch.device(device)
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0] // 4  # floats
        return Sizes(GPU_CHUNK, max(CPU_BLOCK, min(GPU_BLOCK, free // 16)), max(CPU_GROUP, free // 8), free // 3)
    return Sizes(1024, CPU_BLOCK, CPU_GROUP, available_memory() // 4 // 16 if device.type == "cpu" else 0)


def available_memory() -> int:
    """Bytes of memory the system could give now without swapping (Linux's MemAvailable); 0
    where it cannot be read (then no fold is kept)."""
    try:
        with open("/proc/meminfo") as f:
            return int(dict(line.split(":", 1) for line in f)["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0


def scoring_groups(batches: Sequence[torch.Tensor], size: int) -> Iterator[list[torch.Tensor]]:
    """Consecutive batches [b] of prompt indices, as many at a time as hold at most `size`
    prompts together (one batch at least): what one scoring pass takes."""
    group: list[torch.Tensor] = []
    for batch in batches:
        if group and sum(map(len, group)) + len(batch) > size:
            yield group
            group = []
        group.append(batch)
    if group:
        yield group
