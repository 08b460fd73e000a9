"""Appendix E: a part's log-probability increase hardly depends on what was added before it.

The paper (Appendix E) locates by increase because "the sequence of subvalues do not affect
the log probability increase score much": I(v | x) is about I(v | x + u) for another part u
added first. For chosen heads, each head's increase toward the model's prediction three ways:
alone on its layer's input x_l (what locate scores), after a random subset of the other heads
of its layer (those before it in a random order, seeded), and after all of them (the head
added last). Shapes: N prompts, S heads, d width.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..cache import stored
from ..core.attribution import readout_of
from ..core.heads import Head
from ..model.loading import ICLModel
from .runner import PromptSet, decomposed

ORDERS = ("alone", "random order", "last")  # what is added before the head


@torch.no_grad()
def order_increases(m: ICLModel, ps: PromptSet, heads: Sequence[Head], seed: int = 0, batch_size: int = 16,
                    cache: bool = True) -> torch.Tensor:
    """[N, S, 3]: each head's increase added alone, in a random order and last (`ORDERS`), in
    prompt order, from one pass of the prompt set (cached on disk). The random order of prompt n
    and head s is drawn from a generator seeded with `seed`, the same whatever the batches."""
    heads = [tuple(h) for h in heads]
    layers, hs = torch.tensor([l for l, _ in heads]), torch.tensor([h for _, h in heads])
    H = m.arch.n_heads
    g = torch.Generator().manual_seed(seed)
    order = torch.rand(len(ps), len(heads), H, generator=g)  # each head's place in its random order
    before = order < order.gather(-1, hs.expand(len(ps), -1)[..., None])  # [N, S, H]: added before the head
    readout = readout_of(m)

    def compute() -> dict[str, torch.Tensor]:
        out = torch.empty(len(ps), len(heads), len(ORDERS))
        for rows, dec in decomposed(m, ps, batch_size):
            parts = dec.heads()[:, layers].float()  # [b, S, H, d]: every head of each head's layer
            own = parts[:, torch.arange(len(heads)), hs]  # [b, S, d]
            others = torch.stack([torch.zeros_like(own), (parts * before[rows, ..., None].to(parts)).sum(2),
                                  parts.sum(2) - own], 2)  # [b, S, 3, d]: what is added first
            base = dec.resid[:, layers].float().unsqueeze(2) + others  # [b, S, 3, d]
            scaled = own / dec.scale.float()[:, None, None]

            def contrib(G_c: torch.Tensor, b: slice) -> torch.Tensor:  # [b, S, 3, 1, Vc]
                return (scaled[b] @ G_c).unsqueeze(2).expand(-1, -1, len(ORDERS), -1).unsqueeze(-2).clone()
            out[rows] = readout.increase(base, contrib, 1, dec.predictions, dec.scale)[..., 0].cpu()
        return {"increase": out}

    return stored("order-increase", m, ps, compute, cache, heads=heads, order_seed=seed)["increase"]
