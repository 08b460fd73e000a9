"""In-context classification accuracy (Table 2), batched.

A label's token id is the first token of " " + the label word (no special tokens): the
token that follows the final " :" of a prompt. Two measures over N prompts:
ranked, the share whose next-token logit of the true label beats the false label's; and
top-1, the share whose overall argmax is the true label.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from .errors import UsageError
from .models import ICLModel
from .prompts import Prompt


def label_token_ids(tokenizer, words: Sequence[str]) -> torch.Tensor:
    """[len(words)] long: the first token of " " + word for each word."""
    unique = sorted(set(words))
    ids = tokenizer([" " + w for w in unique], add_special_tokens=False)["input_ids"]
    first = {w: i[0] for w, i in zip(unique, ids)}
    return torch.tensor([first[w] for w in words], dtype=torch.long)


def prompt_label_ids(tokenizer, prompts: Sequence[Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
    """([N], [N]): each prompt's true and false label token ids."""
    ids = label_token_ids(tokenizer, [w for p in prompts for w in (p.true_label, p.false_label)])
    return ids[0::2], ids[1::2]


@dataclass(frozen=True)
class Accuracy:
    """Per-prompt results at the last position, for N prompts (on the CPU)."""

    true_logit: torch.Tensor  # [N]
    false_logit: torch.Tensor  # [N]
    top: torch.Tensor  # [N] long: the argmax token
    true_id: torch.Tensor  # [N] long

    @property
    def ranked(self) -> float:
        """Share of prompts ranking the true label above the false one."""
        return (self.true_logit > self.false_logit).double().mean().item()

    @property
    def top1(self) -> float:
        """Share of prompts whose argmax is the true label."""
        return (self.top == self.true_id).double().mean().item()


@torch.no_grad()
def accuracy(
    m: ICLModel,
    prompts: Sequence[str],
    true_ids: torch.Tensor | int,
    false_ids: torch.Tensor | int,
    batch_size: int = 32,
) -> Accuracy:
    """Run the prompts in batches (by length) and read the logits at each one's last real position.

    true_ids, false_ids: [N] label token ids (or one id for all prompts), e.g. from
    `prompt_label_ids`. Only the last position of each prompt is projected to the vocabulary.
    """
    n = len(prompts)
    ids = torch.stack([torch.as_tensor(i, dtype=torch.long).expand(n) for i in (true_ids, false_ids)], 1)  # [N, 2]
    if (ids[:, 0] == ids[:, 1]).any():
        raise UsageError("A prompt's true and false labels share their first token: choose label words that start differently.")
    if batch_size < 1:
        raise UsageError(f"batch_size must be at least 1, not {batch_size}.")
    if n == 0:
        m.encode(prompts)  # raises the empty-list error
    order = sorted(range(n), key=lambda i: len(prompts[i]))  # similar lengths share a batch: little padding
    top, pair = torch.empty(n, dtype=torch.long), torch.empty(n, 2)
    for start in range(0, n, batch_size):
        rows = torch.tensor(order[start : start + batch_size])
        enc = m.encode([prompts[i] for i in rows])
        last = enc["attention_mask"].sum(1) - 1  # [b]
        logits = m.model(**enc, logits_to_keep=last[:, None]).logits[:, 0].float()  # [b, V]
        top[rows] = logits.argmax(-1).cpu()
        pair[rows] = logits.gather(1, ids[rows].to(logits.device)).cpu()  # [b, 2]
    return Accuracy(pair[:, 0], pair[:, 1], top, ids[:, 0].clone())
