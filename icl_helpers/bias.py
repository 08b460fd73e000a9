"""Label biases of in-context predictions (METHOD.md section 8, after Zhao et al. 2021).

A bias is measured against one *biased* label per prompt: the majority label of an
imbalanced prompt, or the label of the demonstration next to the input in a re-ordered
prompt. The bias rate is how often the model predicts the biased label among the prompts
where that label is wrong. With two labels in a prompt, every wrong answer that is a label
is the biased one, so the share of wrong predictions naming it is reported beside the
rate: it counts how many wrong answers are some other token.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BiasCount:
    """Counts over N prompts."""

    exposed: int  # prompts whose biased label is wrong
    biased: int  # of those, predicted as the biased label
    wrong: int  # of those, predicted wrongly (the biased label, another label or no label)

    @property
    def rate(self) -> float:
        """Share of exposed prompts predicted as the biased label."""
        return self.biased / self.exposed if self.exposed else float("nan")

    @property
    def share_of_wrong(self) -> float:
        """Share of the wrong predictions that name the biased label."""
        return self.biased / self.wrong if self.wrong else float("nan")


def bias_count(predicted: torch.Tensor, truth: torch.Tensor, biased: torch.Tensor) -> BiasCount:
    """predicted, truth, biased: [N] token ids; biased -1 where a prompt has no biased label."""
    exposed = (biased >= 0) & (biased != truth)
    return BiasCount(
        exposed=int(exposed.sum()),
        biased=int((exposed & (predicted == biased)).sum()),
        wrong=int((exposed & (predicted != truth)).sum()),
    )


def relative_reduction(before: BiasCount, after: BiasCount) -> float:
    """(rate before - rate after) / rate before: 0.22 is the paper's 22% reduction."""
    return (before.rate - after.rate) / before.rate
