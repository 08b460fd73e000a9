"""Heads as (layer, head) pairs: the one type every module uses, with selection and sampling,
and the heads a user names ("19-11,20-11"), read and checked against a model.

A list of S heads is `[(layer, head), ...]`; scores travel beside it as a tensor [S] (or
[N, S] over prompts), never inside the pairs. torch is imported only where a tensor is
built, so the command line reads --heads before torch loads.
"""
from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING, NamedTuple, Sequence

from ..errors import UsageError, check_count

if TYPE_CHECKING:
    import torch

    from ..model.adapters import Arch

Head = tuple[int, int]
HEADS_SYNTAX = "write layer-head pairs separated by commas, e.g. 19-11,20-11"


def head_name(head: Head) -> str:
    """"22-0": the paper's layer-head notation."""
    return f"{head[0]}-{head[1]}"


def heads_text(heads: Sequence[Head]) -> str:
    """"19-11,20-11": the heads as `parse_heads` reads them."""
    return ",".join(map(head_name, heads))


def parse_heads(value: str | Sequence[Head | str] | None, source: str = "heads") -> tuple[Head, ...] | None:
    """Heads given as "19-11,20-11" or as (layer, head) pairs (or "19-11" strings); None where
    none is given, else a UsageError saying what to write (`source` names the setting)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    if not items or items == [""]:
        raise UsageError(f"{source}: no heads given: {HEADS_SYNTAX}.")
    return tuple(_head(item, source) for item in items)


def _head(item: Head | str, source: str) -> Head:
    """One head of `parse_heads`."""
    if isinstance(item, str):
        match = re.fullmatch(r"\s*(\d+)-(\d+)\s*", item)
        if match:
            return int(match[1]), int(match[2])
    elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(i, int) and not isinstance(i, bool) for i in item):
        return int(item[0]), int(item[1])
    raise UsageError(f"{source}: {item!r} is not a head: {HEADS_SYNTAX}.")


class Shape(NamedTuple):
    """A model's layers and heads a layer, as `check_heads` reads them (an `Arch` has both too)."""

    n_layers: int
    n_heads: int


def check_heads(heads: Sequence[Head] | None, arch: Arch | Shape, distinct: bool = True) -> tuple[Head, ...] | None:
    """The heads, if each is a head of the model and (where `distinct`) none is given twice;
    else a UsageError naming the first bad one and the model's shape. None passes through."""
    if heads is None:
        return None
    seen: set[Head] = set()
    for l, h in heads:
        if not (0 <= l < arch.n_layers and 0 <= h < arch.n_heads):
            raise UsageError(f"Head {head_name((l, h))} is not in this model: it has {arch.n_layers} layers x "
                             f"{arch.n_heads} heads (layer-head from 0-0 to {arch.n_layers - 1}-{arch.n_heads - 1}).")
        if distinct and (l, h) in seen:
            raise UsageError(f"Head {head_name((l, h))} is given twice: give each head once.")
        seen.add((l, h))
    return tuple(heads)


def model_heads(heads: str | Sequence[Head | str] | None, arch: Arch | Shape, distinct: bool = True) -> tuple[Head, ...]:
    """Heads an API function is given, read as `parse_heads` reads them and checked against the
    model as `check_heads` does: the command line's messages. None (no heads) is a UsageError too."""
    return check_heads(parse_heads(() if heads is None else heads), arch, distinct)


def head_mask(n_layers: int, n_heads: int, heads: Sequence[Head]) -> torch.Tensor:
    """[L, H] bool: True at the given heads."""
    import torch

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
    """The k heads with the largest scores [L, H], best first (all of them, where fewer)."""
    top = scores.flatten().topk(min(check_count(k, "k"), scores.numel())).indices.tolist()
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

