"""The label edits inside attention: `edited_attention`, the eager attention that transformers
calls (as `IMPLEMENTATION`) for the attention modules an edit is active on, applies each module's
`LabelEdit`s to the last position's row: `BalanceLabels` to its weights, `PositionFreeLabels` to
its scores. `core.interventions` makes them active (`balanced_labels`, `position_free_labels`).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator
from weakref import WeakKeyDictionary

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask

from ..data.positions import LabelPositions
from ..errors import UsageError


class LabelEdit:
    """Edits one attention module's last-position row for the heads `heads` [H] bool.

    `scores` acts on the scaled scores q.k * scaling, before any soft cap and the mask,
    `weights` after the softmax; both get and return [B, H, Q, T], and are given the
    model's additive attention mask [B, 1, Q, T] (or None: no mask): Q = T in a pass of the
    whole prompt, Q = 1 in a one-token pass of the last token over its kept keys and values.
    labels: the batch's label positions (true labels are one class, false labels the other).
    """

    def __init__(self, heads: torch.Tensor, labels: LabelPositions):
        self.heads = heads
        self.labels = labels

    def scores(self, query: torch.Tensor, key: torch.Tensor, scores: torch.Tensor, scaling: float,
               mask: torch.Tensor | None) -> torch.Tensor:
        return scores

    def weights(self, weights: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return weights

    def _last(self, scores: torch.Tensor) -> torch.Tensor:
        """[B] long: each prompt's last position among the Q query rows of scores [B, H, Q, T]: its last
        token's in a pass of the whole prompt (Q = T), the one row of a one-token pass over kept keys (Q
        = 1, its key appended after them); a UsageError where the batch is not these labels' prompts."""
        Q, T = scores.shape[-2:]
        last = self.labels.last.to(scores.device)
        if len(last) != scores.shape[0] or int(last.max()) >= T:
            raise UsageError(f"The label positions are of {len(last)} prompts, the last token at "
                             f"{int(self.labels.last.max())}, but the pass has {scores.shape[0]} prompts of {T} tokens: "
                             "give each batch its own positions, row for row.")
        return last if Q == T else torch.zeros_like(last)

    def _classes(self, mask: torch.Tensor | None, scores: torch.Tensor) -> torch.Tensor:
        """[B, C, T] bool: each class's label positions that the last position may attend to
        under the additive attention mask [B, 1, Q, T] (causal, padding, sliding window), for
        scores [B, H, Q, T]."""
        last = self._last(scores)  # checked before any position is read
        classes = self.labels.to(scores.device).class_masks(scores.shape[-1])
        if mask is None:
            return classes
        rows = torch.arange(len(classes), device=scores.device)
        row = mask.expand(len(classes), *mask.shape[1:])[rows, 0, last]  # [B, T]
        allowed = row if row.dtype == torch.bool else row > torch.finfo(row.dtype).min / 2
        return classes & allowed[:, None]

    def _set_last_row(self, full: torch.Tensor, row: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """full [B, H, Q, T] with its last-position row replaced by `row` [B, H, T] where
        `where` [B, H, T] and the edited heads; a new tensor."""
        rows = torch.arange(full.shape[0], device=full.device)
        last = self._last(full)
        where = where & self.heads.to(full.device)[None, :, None]
        out = full.clone()
        out[rows, :, last] = torch.where(where, row, full[rows, :, last])
        return out


class BalanceLabels(LabelEdit):
    """Weights on label positions divided by their class's count, rescaled to their old total."""

    def weights(self, weights: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        rows = torch.arange(weights.shape[0], device=weights.device)
        classes = self._classes(mask, weights)  # [B, C, T]
        counts = classes.sum(-1, keepdim=True).clamp(min=1)  # [B, C, 1]
        per_position = (classes / counts).sum(1).to(weights.dtype)  # [B, T]: 1/count, 0 off labels
        row = weights[rows, :, self._last(weights)]  # [B, H, T]
        scaled = row * per_position[:, None]
        old_total = (row * classes.any(1)[:, None]).sum(-1, keepdim=True)
        new_total = scaled.sum(-1, keepdim=True)
        rescaled = scaled * old_total / new_total.clamp(min=torch.finfo(weights.dtype).tiny)
        return self._set_last_row(weights, rescaled, classes.any(1)[:, None].expand_as(row))


class PositionFreeLabels(LabelEdit):
    """Scores of the last query to label keys with the keys' position term removed.

    keys(key [B, H_kv, T, dh]) -> [B, H_kv, T, dh] gives the position-free keys.
    """

    def __init__(self, heads: torch.Tensor, labels: LabelPositions, keys: Callable[[torch.Tensor], torch.Tensor]):
        super().__init__(heads, labels)
        self.keys = keys

    def scores(self, query: torch.Tensor, key: torch.Tensor, scores: torch.Tensor, scaling: float,
               mask: torch.Tensor | None) -> torch.Tensor:
        rows = torch.arange(query.shape[0], device=query.device)
        q = query[rows, :, self._last(scores)]  # [B, H, dh]
        free = self.keys(key).repeat_interleave(query.shape[1] // key.shape[1], 1)  # [B, H, T, dh]
        row = torch.einsum("bhd,bhtd->bht", q, free) * scaling
        is_label = self._classes(mask, scores).any(1)  # [B, T]
        return self._set_last_row(scores, row, is_label[:, None].expand_as(row))


IMPLEMENTATION = "icl_helpers_edited"  # the name of `edited_attention` among transformers' attention functions
_EDITS: WeakKeyDictionary[nn.Module, list[LabelEdit]] = WeakKeyDictionary()  # attention module -> its active edits


def edited_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, softcap=None, **kwargs):
    """Eager attention (as in LlamaAttention / Gemma2Attention), with the `scaling` the module
    passes (Gemma 2 and 3: query_pre_attn_scalar**-0.5), its `softcap` (Gemma 2:
    cap * tanh(s / cap) of the scaled scores s, before the mask, as the model's own eager
    attention does) and the module's active `LabelEdit`s applied to the scaled scores before
    the cap. query [B, H, Q, dh], key and value [B, H_kv, T, dh] (Q = T, or 1 over kept keys and
    values); returns the output [B, Q, H, dh] and the (edited) weights [B, H, Q, T]."""
    groups = query.shape[1] // key.shape[1]
    scores = query @ key.repeat_interleave(groups, 1).transpose(2, 3) * scaling
    edits = _EDITS.get(module, [])
    for edit in edits:
        scores = edit.scores(query, key, scores, scaling, attention_mask)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    for edit in edits:
        weights = edit.weights(weights, attention_mask)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    out = weights @ value.repeat_interleave(groups, 1)
    return out.transpose(1, 2).contiguous(), weights


AttentionInterface.register(IMPLEMENTATION, edited_attention)
AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)


@contextmanager
def editing(edits: dict[nn.Module, LabelEdit]) -> Iterator[None]:
    """Inside, each attention module's `edited_attention` applies its edit (after any active already)."""
    for module, edit in edits.items():
        _EDITS.setdefault(module, []).append(edit)
    try:
        yield
    finally:
        for module, edit in edits.items():
            _EDITS[module].remove(edit)
