"""Heads as (layer, head) pairs: the one type every module uses, with selection and sampling.

A list of S heads is `[(layer, head), ...]`; scores travel beside it as a tensor [S] (or
[N, S] over prompts), never inside the pairs.
"""
from __future__ import annotations

import random
from typing import Sequence

import torch

Head = tuple[int, int]


def head_name(head: Head) -> str:
    """"22-0": the paper's layer-head notation."""
    return f"{head[0]}-{head[1]}"


def head_mask(n_layers: int, n_heads: int, heads: Sequence[Head]) -> torch.Tensor:
    """[L, H] bool: True at the given heads."""
    mask = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    if len(heads):
        layers, hs = torch.tensor(list(heads)).T
        mask[layers, hs] = True
    return mask


def at_heads(values: torch.Tensor, heads: Sequence[Head]) -> torch.Tensor:
    """[..., S] from per-head values [..., L, H]."""
    layers, hs = zip(*heads)
    return values[..., list(layers), list(hs)]


def top_heads(scores: torch.Tensor, k: int) -> list[Head]:
    """The k heads with the largest scores [L, H], best first."""
    top = scores.flatten().topk(min(k, scores.numel())).indices.tolist()
    H = scores.shape[1]
    return [(i // H, i % H) for i in top]


def same_layer_random_heads(heads: Sequence[Head], n_heads: int, seed: int = 0) -> list[Head]:
    """For each head, a random other head of the same layer: outside `heads` where possible,
    and no head drawn twice while its layer has others left (Figs. 5's and the causal
    check's layer-matched baseline)."""
    rng = random.Random(seed)
    taken = set(map(tuple, heads))
    picks: list[Head] = []
    for l, h in heads:
        others = [g for g in range(n_heads) if g != h]
        fresh = [g for g in others if (l, g) not in picks]
        free = [g for g in fresh if (l, g) not in taken] or fresh or others
        picks.append((l, rng.choice(free)))
    return picks

