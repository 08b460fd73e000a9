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


class LabelEdit:
    """Edits one attention module's last-position row for the heads `heads` [H] bool.

    `scores` acts on the scaled scores q.k * scaling, before any soft cap and the mask,
    `weights` after the softmax; both get and return [B, H, T, T], and are given the
    model's additive attention mask [B, 1, T, T] (or None: no mask).
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

    def _classes(self, mask: torch.Tensor | None, T: int, device: torch.device) -> torch.Tensor:
        """[B, C, T] bool: each class's label positions that the last position may attend to
        under the additive attention mask [B, 1, T, T] (causal, padding, sliding window)."""
        classes = self.labels.to(device).class_masks(T)
        if mask is None:
            return classes
        rows = torch.arange(len(classes), device=device)
        row = mask.expand(len(classes), *mask.shape[1:])[rows, 0, self.labels.last.to(device)]  # [B, T]
        allowed = row if row.dtype == torch.bool else row > torch.finfo(row.dtype).min / 2
        return classes & allowed[:, None]

    def _set_last_row(self, full: torch.Tensor, row: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        """full [B, H, T, T] with its last-position row replaced by `row` [B, H, T] where
        `where` [B, H, T] and the edited heads; a new tensor."""
        rows = torch.arange(full.shape[0], device=full.device)
        last = self.labels.last.to(full.device)
        where = where & self.heads.to(full.device)[None, :, None]
        out = full.clone()
        out[rows, :, last] = torch.where(where, row, full[rows, :, last])
        return out


class BalanceLabels(LabelEdit):
    """Weights on label positions divided by their class's count, rescaled to their old total."""

    def weights(self, weights: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        rows = torch.arange(weights.shape[0], device=weights.device)
        classes = self._classes(mask, weights.shape[-1], weights.device)  # [B, C, T]
        counts = classes.sum(-1, keepdim=True).clamp(min=1)  # [B, C, 1]
        per_position = (classes / counts).sum(1).to(weights.dtype)  # [B, T]: 1/count, 0 off labels
        row = weights[rows, :, self.labels.last.to(weights.device)]  # [B, H, T]
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
        q = query[rows, :, self.labels.last.to(query.device)]  # [B, H, dh]
        free = self.keys(key).repeat_interleave(query.shape[1] // key.shape[1], 1)  # [B, H, T, dh]
        row = torch.einsum("bhd,bhtd->bht", q, free) * scaling
        is_label = self._classes(mask, row.shape[-1], query.device).any(1)  # [B, T]
        return self._set_last_row(scores, row, is_label[:, None].expand_as(row))


IMPLEMENTATION = "icl_helpers_edited"  # the name of `edited_attention` among transformers' attention functions
_EDITS: WeakKeyDictionary[nn.Module, list[LabelEdit]] = WeakKeyDictionary()  # attention module -> its active edits


def edited_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, softcap=None, **kwargs):
    """Eager attention (as in LlamaAttention / Gemma2Attention), with the `scaling` the module
    passes (Gemma 2 and 3: query_pre_attn_scalar**-0.5), its `softcap` (Gemma 2:
    cap * tanh(s / cap) of the scaled scores s, before the mask, as the model's own eager
    attention does) and the module's active `LabelEdit`s applied to the scaled scores before
    the cap. query [B, H, T, dh], key and value [B, H_kv, T, dh]; returns the output [B, T,
    H, dh] and the (edited) weights [B, H, T, T]."""
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
