"""Log-probabilities of target tokens, streamed over vocabulary chunks: logits come a chunk
[..., Vc] at a time, and each entry keeps a running log-sum-exp and its target's logit
(`TargetLogProb`), so no logits over the whole vocabulary are ever held; `TargetColumns`
says where each prompt's target falls in a chunk. The readout's scores (`core.attribution`)
stream this way.
"""
from __future__ import annotations

import torch

from ..model.adapters import softcap_


class TargetLogProb:
    """log softmax(logits)[w] of logits streamed over vocabulary chunks, into a tensor of
    `shape`; the logits soft-capped first where `cap` is given."""

    def __init__(self, shape: tuple[int, ...], device: torch.device | None = None, cap: float | None = None):
        self.lse = torch.full(shape, -torch.inf, device=device)
        self.logit = torch.zeros(shape, device=device)
        self.cap = cap

    def add(self, at: tuple, logits: torch.Tensor, column: torch.Tensor | None) -> None:
        """Take in logits [*Q, Vc] for the entries self[at] (of shape Q); column: the
        target's index in this chunk, broadcastable to Q (outside [0, Vc): not here), or
        None where no entry's target is in this chunk. Overwrites the logits."""
        logits = softcap_(logits, self.cap)
        if column is not None:
            self.logit[at] += _pick(logits, column)
        self.lse[at] = torch.logaddexp(self.lse[at], _logsumexp_(logits))

    @property
    def value(self) -> torch.Tensor:
        return self.logit - self.lse


def _logsumexp_(x: torch.Tensor) -> torch.Tensor:
    """logsumexp over the last dim, computed in place: [...] from x [..., Vc], which it overwrites."""
    top = x.amax(-1, keepdim=True)
    return x.sub_(top).exp_().sum(-1).log_().add_(top.squeeze(-1))


class TargetColumns:
    """Each prompt's target column in a vocabulary chunk, or None where no prompt of a block
    has its target there: most chunks, for the few label tokens of a study, which then pick
    nothing. Which chunks hold a target is read from a copy on the CPU, so a GPU waits for
    nothing."""

    def __init__(self, target: torch.Tensor, device: torch.device):
        self.target, self.on_cpu = target.to(device), target.cpu()

    def at(self, rows: slice, start: int, width: int, dims: int = 0) -> torch.Tensor | None:
        """[b, 1 (dims times)]: target - start of prompts `rows`, or None where none lies in
        [start, start + width)."""
        here = self.on_cpu[rows]
        if not ((here >= start) & (here < start + width)).any():
            return None
        return (self.target[rows] - start).view(-1, *[1] * dims)


def _pick(c: torch.Tensor, column: torch.Tensor) -> torch.Tensor:
    """c[..., column] where 0 <= column < Vc, else 0: [*Q] from c [*Q, Vc], column broadcastable to Q."""
    column = column.to(c.device).expand(c.shape[:-1])
    inside = (column >= 0) & (column < c.shape[-1])
    return c.gather(-1, column.clamp(0, c.shape[-1] - 1).unsqueeze(-1)).squeeze(-1) * inside
