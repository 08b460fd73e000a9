"""Token positions of labels, demonstrations and the last position.

Found from each prompt's character spans (`prompts.Prompt`) and the tokenizer's
character offsets, never by assuming one token per word: a span starts at the first
token that ends after its first character, and stops after the last non-empty token
that starts before its end. A label's position is its first token (with " foo" after
" : ", the token " foo", whose offsets may or may not include the space; after a newline
separator, "foo").
Shapes: B prompts, T tokens (right-padded), D demonstrations (the most in the batch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

from ..errors import UsageError
from .prompts import Prompt


@dataclass(frozen=True, eq=False)
class LabelPositions:
    """Token indices into the right-padded [B, T] encoding; -1 past a prompt's D demonstrations.

    The one label-positions type of the package: prompt sets hold it for all N prompts
    ([N, D]; a row slice `positions[rows]` is a batch's), and every mask over tokens is
    derived from it.
    """

    labels: torch.Tensor  # [B, D] long: each label's first token, prompt order
    is_true: torch.Tensor  # [B, D] bool: the label is the true one (False on padding)
    demos: torch.Tensor  # [B, D, 2] long: each demonstration's tokens [start, stop)
    last: torch.Tensor  # [B] long: the last real token (the final ":")

    def __len__(self) -> int:
        return self.labels.shape[0]

    def __getitem__(self, rows: slice) -> "LabelPositions":
        """The positions of prompts `rows`."""
        return LabelPositions(self.labels[rows], self.is_true[rows], self.demos[rows], self.last[rows])

    def to(self, device: torch.device | str) -> "LabelPositions":
        """The same positions with every tensor on `device`."""
        return LabelPositions(*(t.to(device) for t in (self.labels, self.is_true, self.demos, self.last)))

    @property
    def valid(self) -> torch.Tensor:
        """[B, D] bool: a demonstration (and label) is there."""
        return self.labels >= 0

    @property
    def last_label(self) -> torch.Tensor:
        """[B] long: each prompt's last label position."""
        return self.labels.amax(-1)

    def chosen(self, true: bool) -> torch.Tensor:
        """[B, D] bool: the true (or false) labels."""
        return self.valid & (self.is_true == true)

    def mask(self, length: int, true: bool) -> torch.Tensor:
        """[B, length] bool, True at the true (or false) label positions."""
        index = torch.where(self.chosen(true), self.labels, length)  # unchosen -> a spare column
        mask = torch.zeros(self.labels.shape[0], length + 1, dtype=torch.bool, device=self.labels.device)
        return mask.scatter_(1, index, True)[:, :length]

    def class_masks(self, length: int) -> torch.Tensor:
        """[B, 2, length] bool: the true label positions, then the false ones."""
        return torch.stack([self.mask(length, True), self.mask(length, False)], 1)


def _pad_pairs(rows: Sequence[Sequence[tuple[int, int]]], value: int) -> torch.Tensor:
    """[B, D, 2] long from B lists of pairs, padded with `value`."""
    return pad_sequence([torch.tensor(r, dtype=torch.long).view(-1, 2) for r in rows], batch_first=True, padding_value=value)


def from_offsets(prompts: Sequence[Prompt], offsets: torch.Tensor, attention_mask: torch.Tensor) -> LabelPositions:
    """Label positions from a right-padded encoding of the prompts' texts.

    offsets: [B, T, 2] character offsets of each token; attention_mask: [B, T].
    """
    if offsets.shape[0] != len(prompts):
        raise UsageError(f"{len(prompts)} prompts but an encoding of {offsets.shape[0]}: encode exactly these prompts.")
    device = offsets.device
    labels = _pad_pairs([p.labels for p in prompts], -1).to(device)  # [B, D, 2] character spans
    demos = _pad_pairs([p.demos for p in prompts], -1).to(device)
    is_true = pad_sequence([torch.tensor(p.is_true, dtype=torch.bool) for p in prompts], batch_first=True).to(device)
    real = attention_mask.bool()[:, None, :]  # [B, 1, T]
    tok_start, tok_end = offsets[..., 0][:, None, :], offsets[..., 1][:, None, :]  # [B, 1, T]
    T = offsets.shape[1]

    def first_token(chars: torch.Tensor) -> torch.Tensor:
        """[B, D]: the first real token ending after character chars [B, D]."""
        return (real & (tok_end > chars[..., None])).int().argmax(-1)

    def stop_token(chars: torch.Tensor) -> torch.Tensor:
        """[B, D]: one past the last real, non-empty token starting before character chars."""
        hit = real & (tok_start < chars[..., None]) & (tok_end > tok_start)
        return (hit * torch.arange(1, T + 1, device=device)).amax(-1)

    valid = labels[..., 0] >= 0
    spans = torch.stack([first_token(demos[..., 0]), stop_token(demos[..., 1])], -1)
    return LabelPositions(
        labels=torch.where(valid, first_token(labels[..., 0]), -1),
        is_true=is_true,
        demos=torch.where(valid[..., None], spans, -1),
        last=attention_mask.sum(1) - 1,
    )


def from_encoding(prompts: Sequence[Prompt], enc) -> LabelPositions:
    """Label positions from `ICLModel.encode([p.text for p in prompts], offsets=True)`."""
    if "offset_mapping" not in enc:
        raise UsageError("The encoding has no character offsets: encode with offsets=True.")
    return from_offsets(prompts, enc["offset_mapping"], enc["attention_mask"])


def find_positions(tokenizer, prompts: Sequence[Prompt]) -> LabelPositions:
    """Label positions of the prompts for `tokenizer` (a fast tokenizer), in one batched call.

    The same indices as in `ICLModel.encode` of the texts (same tokenizer, right padding),
    without needing a pad token.
    """
    if len(prompts) == 0:
        raise UsageError("No prompts given: pass at least one prompt.")
    enc = tokenizer([p.text for p in prompts], return_offsets_mapping=True)
    offsets = _pad_pairs(enc["offset_mapping"], 0)
    mask = pad_sequence([torch.ones(len(ids), dtype=torch.long) for ids in enc["input_ids"]], batch_first=True)
    return from_offsets(prompts, offsets, mask)
