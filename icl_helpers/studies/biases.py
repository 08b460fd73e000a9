"""The two bias reductions of notebook 08 (EMNLP version): majority-label bias by balanced
label attention, recency bias by position-free label keys.

A bias is measured against one *biased* label per prompt (after Zhao et al. 2021): the
majority label of an imbalanced prompt, or the label of the demonstration next to the
input in a re-ordered prompt. The bias rate is how often the model predicts the biased
label among the prompts where that label is wrong. With two labels in a prompt, every
wrong answer that is a label is the biased one, so the share of wrong predictions naming
it is reported beside the rate: it counts how many wrong answers are some other token.
Each intervention's passes are kept in the results cache (`cache.stored_accuracies`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd
import torch

from ..cache import stored_accuracies
from ..core.heads import Head
from ..core.interventions import Intervention
from ..core.passes import Accuracy, intervened_accuracies
from ..data.prompts import Prompt, Record, majority_labels, mixed_label_prompts, nearest_labels, prompt_label_ids
from ..data.setting import MAIN, Setting
from ..model.loading import ICLModel


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


def exposed_to_bias(truth: torch.Tensor, biased: torch.Tensor) -> torch.Tensor:
    """[N] bool: prompts whose biased label is wrong (truth, biased: [N] token ids; biased -1
    where a prompt has no biased label)."""
    return (biased >= 0) & (biased != truth)


def bias_count(predicted: torch.Tensor, truth: torch.Tensor, biased: torch.Tensor) -> BiasCount:
    """predicted, truth, biased: [N] token ids; biased -1 where a prompt has no biased label."""
    exposed = exposed_to_bias(truth, biased)
    return BiasCount(
        exposed=int(exposed.sum()),
        biased=int((exposed & (predicted == biased)).sum()),
        wrong=int((exposed & (predicted != truth)).sum()),
    )


def relative_reduction(before: BiasCount, after: BiasCount) -> float:
    """(rate before - rate after) / rate before, as the paper states its reductions; NaN
    where no prompt showed the bias before (nothing to reduce)."""
    return (before.rate - after.rate) / before.rate if before.rate else float("nan")


@dataclass(frozen=True)
class BiasEffect:
    """One intervention against one bias, on N biased and N standard prompts."""

    plain: BiasCount
    intervened: BiasCount
    accuracy_biased: tuple[float, float]  # top-1 on the biased prompts: (plain, intervened)
    accuracy_standard: tuple[float, float]  # top-1 on the standard (balanced) prompts: (plain, intervened)
    flags: torch.Tensor | None = None  # [N, 3] bool a biased prompt: exposed, biased plainly, biased intervened
    standard_hits: torch.Tensor | None = None  # [N, 2] bool a standard prompt: top-1 plainly, with the intervention

    @property
    def reduction(self) -> float:
        """Relative reduction of the bias rate (the paper's numbers: `verdicts.rules`)."""
        return relative_reduction(self.plain, self.intervened)

    @property
    def reduction_text(self) -> str:
        """The reduction as a percentage, or why there is none."""
        r = self.reduction
        return f"{r:.0%}" if r == r else "nothing (no prompt showed the bias plainly)"

    def summary(self, bias: str, paper: float) -> str:
        """One paragraph: the bias before and after with its counts, the relative reduction
        beside the paper's, and the accuracy on biased and standard prompts."""
        p, i = self.plain, self.intervened
        return (
            f"{bias}: {p.biased}/{p.exposed} prompts ({p.rate:.1%}) predicted the biased label plainly, "
            f"{i.biased}/{i.exposed} ({i.rate:.1%}) with the intervention: a relative reduction of {self.reduction_text} "
            f"(paper: {paper:.0%}). Wrong predictions: {p.wrong} plain, {i.wrong} intervened "
            f"({p.share_of_wrong:.0%} and {i.share_of_wrong:.0%} of them name the biased label). "
            f"Top-1 accuracy on these prompts {self.accuracy_biased[0]:.1%} -> {self.accuracy_biased[1]:.1%}; "
            f"on standard prompts {self.accuracy_standard[0]:.1%} -> {self.accuracy_standard[1]:.1%} "
            f"({100 * (self.accuracy_standard[1] - self.accuracy_standard[0]):+.1f} points)."
        )

    def table(self, bias: str) -> pd.DataFrame:
        """Long format: columns bias, measure, condition (plain, intervened), value."""
        measures = {
            "bias rate": (self.plain.rate, self.intervened.rate),
            "accuracy, biased prompts": self.accuracy_biased,
            "accuracy, standard prompts": self.accuracy_standard,
        }
        return pd.DataFrame([dict(bias=bias, measure=name, condition=cond, value=v)
                             for name, pair in measures.items() for cond, v in zip(("plain", "intervened"), pair)])


def bias_effect(
    m: ICLModel,
    biased: Sequence[Prompt],
    biased_labels: Sequence[str | None],
    standard: Sequence[Prompt],
    passes: Callable[[Sequence[Prompt]], Sequence[Accuracy]],
) -> BiasEffect:
    """The bias on `biased` prompts (against `biased_labels`, one of each prompt's label words
    or None) with and without an intervention, and the top-1 accuracy it costs on `standard`
    prompts. passes(prompts): their `Accuracy` plainly and with the intervention."""
    true_ids, false_ids = prompt_label_ids(m.tokenizer, biased)
    is_true = torch.tensor([w == p.true_label for w, p in zip(biased_labels, biased)], dtype=torch.bool)
    named = torch.tensor([w is not None for w in biased_labels], dtype=torch.bool)
    target = torch.where(is_true, true_ids, false_ids).masked_fill(~named, -1)  # -1: no biased label (a tie)
    runs = {}
    for name, prompts in (("biased", biased), ("standard", standard)):
        runs[name], runs[name + "+"] = passes(prompts)
    count = {name: bias_count(runs[name].predictions, runs[name].true_id, target) for name in ("biased", "biased+")}
    exposed = exposed_to_bias(runs["biased"].true_id, target)
    flags = torch.stack([exposed, *(exposed & (runs[name].predictions == target) for name in ("biased", "biased+"))], 1)
    return BiasEffect(
        count["biased"], count["biased+"],
        (runs["biased"].top1, runs["biased+"].top1),
        (runs["standard"].top1, runs["standard+"].top1),
        flags,
        torch.stack([runs["standard"].top1_hits, runs["standard+"].top1_hits], 1),
    )


# measure -> the variant that shows the bias, each prompt's biased label, the intervention against it
BIASES = {"majority": ("imbalanced", majority_labels, Intervention.balanced_labels),
          "recency": ("reordered", nearest_labels, Intervention.position_free_labels)}


def measured_bias(m: ICLModel, measure: str, records: Sequence[Record], heads: Sequence[Head], setting: Setting = MAIN,
                  batch_size: int = 32) -> BiasEffect:
    """The bias `measure` ("majority" or "recency", `BIASES`) on its variant's prompts of `records`,
    plainly and with its intervention in `heads`, and the accuracy it costs on balanced prompts; every
    prompt's label words swapped on every other pair (`mixed_label_prompts`), in the setting's label
    words, separator and demonstrations a class. The blocks before the intervention's first layer run
    once a batch for both passes, which are cached under the measure, the prompts and the heads."""
    variant, biased_labels, intervention = BIASES[measure]
    standard, biased = (mixed_label_prompts(records, setting.variant(v)) for v in ("balanced", variant))

    def passes(prompts: Sequence[Prompt]) -> list[Accuracy]:
        return stored_accuracies(f"{measure}-bias", m, prompts, lambda: intervened_accuracies(
            m, prompts, [None, intervention(m, heads)], batch_size), heads=list(heads))
    return bias_effect(m, biased, biased_labels(biased), standard, passes)


def majority_bias(m: ICLModel, records: Sequence[Record], heads: Sequence[Head], setting: Setting = MAIN) -> BiasEffect:
    """Majority-label bias on imbalanced prompts of `records`, plainly and with the label
    attention of `heads` balanced (`balanced_labels`); accuracy cost on balanced prompts
    (`measured_bias`)."""
    return measured_bias(m, "majority", records, heads, setting)


def recency_bias(m: ICLModel, records: Sequence[Record], heads: Sequence[Head], setting: Setting = MAIN) -> BiasEffect:
    """Recency bias on re-ordered prompts of `records`, plainly and with position-free label
    keys in `heads` (`position_free_labels`); accuracy cost on balanced prompts (`measured_bias`)."""
    return measured_bias(m, "recency", records, heads, setting)
