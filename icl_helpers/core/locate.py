"""Locate: score every layer and head of many prompts."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
from tqdm.auto import tqdm

from ..errors import UsageError, check_batch_size, check_prompts, warn_without_demonstration
from ..model.adapters import Arch
from ..model.loading import ICLModel
from ..progress import progress_bar
from .attribution import Readout, layer_head_increase
from .decompose import Decomposition, decompose, length_batches
from .heads import Head, at_heads, top_heads

GROUP_FLOATS = 2**27  # floats of last-position vectors (z, residuals) one scoring pass may hold


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
        """[S]: the mean score of each listed head."""
        return at_heads(self.head_mean, heads)


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
    at a time, as many prompts as GROUP_FLOATS allows (all of them, for a few thousand
    prompts of a small model), in one pass over the vocabulary that folds W_O into the
    readout once: memory stays bounded for any number of prompts.
    """
    prompts = check_prompts(prompts)
    warn_without_demonstration(prompts)
    targets = None if targets is None else check_targets(targets, len(prompts), m.arch.W_U().shape[0])
    check_batch_size(batch_size)
    readout = Readout(m.arch)
    batches = length_batches(m, prompts, batch_size)  # similar lengths together; results back in prompt order
    bar = progress_bar(len(batches), "locate", progress)
    parts = []
    for group in scoring_groups(batches, group_size(m.arch, batch_size)):
        rows = torch.cat(group)
        parts.append(score_decompositions(readout, m.arch, _decompositions(m, prompts, group, bar), len(rows),
                                          None if targets is None else targets[rows.to(targets.device)]))
    bar.close()
    restore = torch.cat(batches).argsort()
    return LocateResult(*(torch.cat(p)[restore] for p in zip(*parts)))


def check_targets(targets: torch.Tensor | list[int], n: int, vocab: int) -> torch.Tensor:
    """targets as [n] long token ids in [0, vocab), or a UsageError saying what is wrong."""
    try:
        t = torch.as_tensor(targets)
    except (TypeError, ValueError, RuntimeError):
        raise UsageError(f"Targets must be integer token ids, not {targets!r}.") from None
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise UsageError(f"Targets must be integer token ids, not {t.dtype} values.")
    if t.shape != (n,):
        raise UsageError(f"{n} prompts but targets of shape {tuple(t.shape)}: give one token id per prompt.")
    outside = (t < 0) | (t >= vocab)
    if outside.any():
        raise UsageError(f"Target {int(t[outside][0])} is not a token id of this model's vocabulary [0, {vocab}).")
    return t.long()


def group_size(arch: Arch, batch_size: int) -> int:
    """How many prompts one scoring pass takes (at least batch_size): as many as whose
    last-position vectors (z, residuals) fit in GROUP_FLOATS."""
    per_prompt = arch.n_layers * arch.n_heads * arch.d_head + (arch.n_layers + 1) * arch.d_model
    return max(1, GROUP_FLOATS // per_prompt // batch_size) * batch_size


def score_decompositions(readout: Readout, arch: Arch, decs: Iterator[Decomposition], n: int,
                         targets: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    """(head [n, L, H], attn [n, L], ffn [n, L], targets [n]) on the CPU for the n prompts of
    consecutive decompositions; targets: [n] token ids, default each prompt's prediction."""
    held: dict[str, torch.Tensor] = {}  # each batch written in place: no second copy while concatenating
    start = 0
    for dec in decs:
        for key, value in (("z", dec.z), ("resid", dec.resid), ("scale", dec.scale), ("attn_scale", dec.attn_scale),
                           ("w", dec.predictions)):
            if key not in held:
                held[key] = value.new_empty((n, *value.shape[1:]))
            held[key][start : start + len(value)] = value
        start += len(dec.z)
    z, resid, scale, attn_scale, w = held.values()
    if targets is not None:
        w = targets.to(w.device)
    head, attn, ffn = layer_head_increase(readout, arch, z, resid, w, scale, attn_scale)
    return head.cpu(), attn.cpu(), ffn.cpu(), w.cpu()


def scoring_groups(batches: list[torch.Tensor], size: int) -> Iterator[list[torch.Tensor]]:
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


def _decompositions(m: ICLModel, prompts: list[str], batches: list[torch.Tensor], bar: tqdm) -> Iterator[Decomposition]:
    """The decomposition of each batch of prompts, in turn."""
    for rows in batches:
        yield decompose(m, [prompts[i] for i in rows])
        bar.update(1)
