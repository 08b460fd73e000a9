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
    """For each head, a random other head of the same layer, outside `heads` where possible
    (Fig. 5's baseline)."""
    rng = random.Random(seed)
    taken = set(map(tuple, heads))
    picks = []
    for l, h in heads:
        free = [g for g in range(n_heads) if (l, g) not in taken] or [g for g in range(n_heads) if g != h]
        picks.append((l, rng.choice(free)))
    return picks


def random_heads_excluding(
    n_layers: int, n_heads: int, k: int, generator: torch.Generator, exclude: Sequence[Head] = ()
) -> list[Head]:
    """k distinct heads drawn uniformly from all heads of any layer not in `exclude`."""
    pool = (~head_mask(n_layers, n_heads, exclude)).flatten().nonzero().flatten()
    pick = pool[torch.randperm(len(pool), generator=generator)[:k]]
    return [(i // n_heads, i % n_heads) for i in pick.tolist()]
