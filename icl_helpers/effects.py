"""Dataset-level runs of the interventions for notebook 08 (METHOD.md section 8).

An intervention is given per batch as `Intervene`: a function from the batch's
`LabelPositions` to a context manager (`interventions.ablated`, `balanced_labels`,
`position_free_labels`, or several under `applied`). Accuracy comes from
`accuracy.accuracy`, run one batch at a time inside the batch's intervention.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, fields
from typing import Callable, ContextManager, Sequence

import pandas as pd
import torch

from .accuracy import Accuracy, accuracy, label_token_ids, prompt_label_ids
from .bias import BiasCount, bias_count, relative_reduction
from .interventions import Heads, LabelPositions, ablated, random_heads
from .intervention_plots import IN_CONTEXT, RANDOM
from .models import ICLModel
from .positions import find_positions
from .prompts import Prompt, Record, Variant, build_prompt

Intervene = Callable[[LabelPositions], ContextManager[None]]


def mixed_label_prompts(records: Sequence[Record], variant: Variant = Variant()) -> list[Prompt]:
    """Prompts with the label pair swapped on every other pair of records (rows 2, 3, 6,
    7, ...), so neither label word is always the true one and, as records alternate
    direction, each direction meets both orders."""
    swapped = Variant(variant.k, variant.imbalanced, variant.true_first, variant.labels[::-1])
    return [build_prompt(r, swapped if (i // 2) % 2 else variant) for i, r in enumerate(records)]


def label_positions(m: ICLModel, prompts: Sequence[Prompt]) -> LabelPositions:
    """The batch's true (class 0) and false (class 1) label positions, as `m.encode` pads it."""
    pos = find_positions(m.tokenizer, prompts)
    T = int(pos.last.max()) + 1
    return LabelPositions(torch.stack([pos.mask(T, True), pos.mask(T, False)], 1), pos.last).to(m.device)


@torch.no_grad()
def intervened_accuracy(
    m: ICLModel, prompts: Sequence[Prompt], intervene: Intervene | None = None, batch_size: int = 32
) -> Accuracy:
    """`accuracy` of the prompts, each batch run inside `intervene(its label positions)`."""
    true_ids, false_ids = prompt_label_ids(m.tokenizer, prompts)
    parts = []
    for s in range(0, len(prompts), batch_size):
        batch = slice(s, s + batch_size)
        chunk = prompts[batch]
        with intervene(label_positions(m, chunk)) if intervene else nullcontext():
            parts.append(accuracy(m, [p.text for p in chunk], true_ids[batch], false_ids[batch], batch_size=len(chunk)))
    return Accuracy(*(torch.cat([getattr(a, f.name) for a in parts]) for f in fields(Accuracy)))


def ablation_curves(
    m: ICLModel,
    prompts: Sequence[Prompt],
    top: Heads,
    ks: Sequence[int],
    n_random: int = 3,
    seed: int = 0,
    batch_size: int = 32,
) -> pd.DataFrame:
    """Accuracy with the first k of `top` zeroed, and with k random heads zeroed, for each k
    (and k = 0: the plain model, run once).

    Random heads are drawn from the heads outside `top`, max(ks) at a time in `n_random`
    draws; a draw's first k heads are its k random heads (nested, like the top-k).
    Columns: heads (IN_CONTEXT or RANDOM), draw, k, accuracy (top-1), ranked.
    """
    generator = torch.Generator().manual_seed(seed)
    head_sets = [(IN_CONTEXT, 0, list(top))]
    head_sets += [(RANDOM, d, random_heads(m.arch, max(ks), generator, exclude=top)) for d in range(n_random)]
    plain = intervened_accuracy(m, prompts, batch_size=batch_size)
    rows = []
    for name, draw, heads in head_sets:
        rows.append(dict(heads=name, draw=draw, k=0, accuracy=plain.top1, ranked=plain.ranked))
        for k in ks:
            acc = intervened_accuracy(m, prompts, lambda labels, h=heads[:k]: ablated(m, h), batch_size)
            rows.append(dict(heads=name, draw=draw, k=k, accuracy=acc.top1, ranked=acc.ranked))
    return pd.DataFrame(rows)


def curve_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and k: accuracy with the top-k heads zeroed, and the random draws' mean
    and standard deviation (from `ablation_curves` frames with a dataset column)."""
    top = curves[curves["heads"] == IN_CONTEXT].set_index(["dataset", "k"])["accuracy"]
    rand = curves[curves["heads"] == RANDOM].groupby(["dataset", "k"], sort=False)["accuracy"]
    return pd.DataFrame({"top-k zeroed": top, "random: mean": rand.mean(), "random: sd": rand.std()})


def majority_labels(prompts: Sequence[Prompt]) -> list[str | None]:
    """Each prompt's majority label word (None on a tie)."""
    out = []
    for p in prompts:
        n_true = sum(p.is_true)
        n_false = len(p.is_true) - n_true
        out.append(None if n_true == n_false else p.true_label if n_true > n_false else p.false_label)
    return out


def nearest_labels(prompts: Sequence[Prompt]) -> list[str]:
    """Each prompt's label of the demonstration next to the input."""
    return [p.true_label if p.is_true[-1] else p.false_label for p in prompts]


@dataclass(frozen=True)
class BiasEffect:
    """One intervention against one bias, on N biased and N standard prompts."""

    plain: BiasCount
    intervened: BiasCount
    accuracy_biased: tuple[float, float]  # top-1 on the biased prompts: (plain, intervened)
    accuracy_standard: tuple[float, float]  # top-1 on the standard (balanced) prompts: (plain, intervened)

    @property
    def reduction(self) -> float:
        """Relative reduction of the bias rate (the paper: 0.22 majority, 0.17 recency)."""
        return relative_reduction(self.plain, self.intervened)

    def summary(self, bias: str, paper: float) -> str:
        """One paragraph: the bias before and after with its counts, the relative reduction
        beside the paper's, and the accuracy on biased and standard prompts."""
        p, i = self.plain, self.intervened
        return (
            f"{bias}: {p.biased}/{p.exposed} prompts ({p.rate:.1%}) predicted the biased label plainly, "
            f"{i.biased}/{i.exposed} ({i.rate:.1%}) with the intervention: a relative reduction of "
            f"{self.reduction:.0%} (paper: {paper:.0%}). Wrong predictions: {p.wrong} plain, {i.wrong} intervened "
            f"({p.share_of_wrong:.0%} and {i.share_of_wrong:.0%} of them name the biased label). "
            f"Top-1 accuracy on these prompts {self.accuracy_biased[0]:.1%} -> {self.accuracy_biased[1]:.1%}; "
            f"on standard prompts {self.accuracy_standard[0]:.1%} -> {self.accuracy_standard[1]:.1%} "
            f"({100 * (self.accuracy_standard[1] - self.accuracy_standard[0]):+.1f} points)."
        )

    def table(self, bias: str) -> pd.DataFrame:
        """Long format for `intervention_plots.bias_change`."""
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
    intervene: Intervene,
    batch_size: int = 32,
) -> BiasEffect:
    """The bias on `biased` prompts (against `biased_labels`, one word or None per prompt)
    with and without `intervene`, and the top-1 accuracy it costs on `standard` prompts."""
    target = torch.full((len(biased),), -1)  # -1: no biased label (a tie)
    named = [i for i, w in enumerate(biased_labels) if w is not None]
    target[named] = label_token_ids(m.tokenizer, [biased_labels[i] for i in named])
    runs = {name: intervened_accuracy(m, prompts, cm, batch_size)
            for name, prompts, cm in (("biased", biased, None), ("biased+", biased, intervene),
                                      ("standard", standard, None), ("standard+", standard, intervene))}
    count = {name: bias_count(runs[name].top, runs[name].true_id, target) for name in ("biased", "biased+")}
    return BiasEffect(
        count["biased"], count["biased+"],
        (runs["biased"].top1, runs["biased+"].top1),
        (runs["standard"].top1, runs["standard+"].top1),
    )
