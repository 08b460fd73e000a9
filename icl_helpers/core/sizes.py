"""How scoring cuts its work on one device: vocabulary chunks, prompt blocks, scoring groups,
and how much of the folded readout it may keep.

A CPU wants small logit tiles that stay in its cache (bench/RESULTS.md: on SmolLM2, 1,024 to
8,192 columns a chunk score at the same speed, 2^28-float blocks 45% slower). A GPU wants
few, large kernels: one scoring group a call, so W_O is folded into the readout once, and
8,192-column chunks (on an H200, bench/RESULTS.md: locate 9.1x -> 2.07x its forward pass on GPT-2
small, 11.2x -> 2.75x on a Llama-7B shape, the same scores to 7.6e-6). What a GPU may hold
is read from its free memory when a readout is made.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sizes:
    """The sizes one device's scoring works in, in float32 values."""

    vocab_chunk: int  # vocabulary columns a step
    block_floats: int  # floats the logit tiles of a prompt block may hold
    group_floats: int  # floats of last-position vectors (z, residuals) one scoring pass may hold
    keep_floats: int  # floats of folded readout (W_O G, every head) that may be kept between calls


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
