"""Locate: score every layer and head of many prompts."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import UsageError, check_prompts, warn_without_demonstration
from ..model.loading import ICLModel, check_model
from .attribution import Readout, layer_head_increase, readout_of
from .batching import Tensors, in_prompt_order, length_batches, walk
from .decompose import Decomposition, decompose
from .heads import Head, Shape, at_heads, model_heads, top_heads


@dataclass
class LocateResult:
    """Per-prompt scores for N prompts, L layers, H heads (on the CPU)."""

    head: torch.Tensor  # [N, L, H]: I(head_{l,h} | x_l)
    attn: torch.Tensor  # [N, L]: I(ATTN_l | x_l)
    ffn: torch.Tensor  # [N, L]: I(FFN_l | m_l)
    targets: torch.Tensor  # [N]: the token w each prompt was scored for

    @property
    def head_mean(self) -> torch.Tensor:
        """[L, H]: mean over prompts of the head scores."""
        return self.head.mean(0)

    def top_heads(self, k: int = 20) -> list[Head]:
        """The k heads with the largest mean score, best first."""
        return top_heads(self.head_mean, k)

    def head_scores(self, heads: list[Head]) -> torch.Tensor:
        """[S]: the mean score of each listed head (`model_heads`: pairs, or "19-11,20-11")."""
        return at_heads(self.head_mean, model_heads(heads, Shape(*self.head.shape[1:]), distinct=False))


@torch.no_grad()
def locate(
    m: ICLModel,
    prompts: list[str],
    targets: torch.Tensor | None = None,
    batch_size: int = 32,
    progress: bool = True,
) -> LocateResult:
    """Score every attention layer, FFN layer and head of every prompt.

    targets: [N] token ids to score; default, each prompt's predicted token.
    The prompts run through the model in batches of `batch_size` prompts of similar length
    (the results are in prompt order). Their last-position vectors are then scored a group
    at a time, as many prompts as the device's `Sizes.group_floats` allows (all of them, for a
    few thousand prompts of a small model), in one pass over the vocabulary that folds W_O
    into the readout once (or reuses the kept fold): memory stays bounded for any number of
    prompts.
    """
    check_model(m)
    prompts = check_prompts(prompts)
    warn_without_demonstration(prompts)
    targets = None if targets is None else check_targets(targets, len(prompts), m.arch.W_U().shape[0])
    batches = length_batches(m, prompts, batch_size)  # similar lengths together; results back in prompt order
    scoring = Scoring(readout_of(m), batches, batch_size, targets)
    for _, texts in walk(prompts, batches, "locate", progress):
        scoring.add(decompose(m, texts))
    return scoring.result()


def check_targets(targets: torch.Tensor | list[int], n: int, vocab: int) -> torch.Tensor:
    """targets as [n] long token ids in [0, vocab), or a UsageError saying what is wrong."""
    try:
        t = torch.as_tensor(targets)
    except (TypeError, ValueError, RuntimeError):
        raise UsageError(f"Targets must be integer token ids, not {targets!r}.") from None
    if t.shape != (n,):  # first: [] is a float32 tensor
        raise UsageError(f"{n} prompts but targets of shape {tuple(t.shape)}: give one token id per prompt.")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise UsageError(f"Targets must be integer token ids, not {t.dtype} values.")
    t = t.long()  # before comparing with vocab, which a small dtype (uint8, int16) cannot hold
    outside = (t < 0) | (t >= vocab)
    if outside.any():
        raise UsageError(f"Target {int(t[outside][0])} is not a token id of this model's vocabulary [0, {vocab}).")
    return t


class Scoring:
    """The located scores of the decompositions of `batches` (batch_size prompts at most a
    batch), given a batch at a time in their order (`add`) and scored a group at a time (the
    groups of the readout's plan, `Sizes.groups`), each group's vectors written in place into
    one buffer: no second copy while concatenating. targets: [N] token ids to score,
    default each prompt's prediction."""

    def __init__(self, readout: Readout, batches: list[torch.Tensor], batch_size: int,
                 targets: torch.Tensor | None = None):
        self.readout, self.batches, self.targets = readout, batches, targets
        self.groups = readout.sizes.groups(batches, readout.arch, batch_size)
        self.parts: list[Tensors] = []  # per group: LocateResult's fields, [n, ...] each, on the CPU
        self._next_group()

    def _next_group(self) -> None:
        self.rows = torch.cat(next(self.groups, [torch.empty(0, dtype=torch.long)]))  # [n]: the group's prompts
        self.held: Tensors = {}
        self.start = 0

    def add(self, dec: Decomposition) -> None:
        """Hold the decomposition of the next batch; score its group once it is complete."""
        n = len(self.rows)
        for key, value in (("z", dec.z), ("resid", dec.resid), ("scale", dec.scale), ("attn_scale", dec.attn_scale),
                           ("w", dec.predictions)):
            if key not in self.held:
                self.held[key] = value.new_empty((n, *value.shape[1:]))
            self.held[key][self.start : self.start + len(value)] = value
        self.start += len(dec.z)
        if self.start == n:
            self._score()
            self._next_group()

    def _score(self) -> None:
        z, resid, scale, attn_scale, w = self.held.values()
        if self.targets is not None:
            w = self.targets[self.rows.to(self.targets.device)].to(w.device)
        head, attn, ffn = layer_head_increase(self.readout, z, resid, w, scale, attn_scale)
        self.parts.append({"head": head.cpu(), "attn": attn.cpu(), "ffn": ffn.cpu(), "targets": w.cpu()})

    def result(self) -> LocateResult:
        """The scores of every prompt, in prompt order (once every batch is added)."""
        return LocateResult(**in_prompt_order(self.parts, self.batches))
