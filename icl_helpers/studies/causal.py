"""The causal check and the two bias reductions of notebook 08.

The causal check ablates the top-k in-context heads (mean ablation by default: each head's
output set to its mean over the prompts the heads were located on; zero as an option) and,
as a baseline, k random heads matched to them layer by layer in 20 draws, on prompts of
records other than those the heads were located on (`evaluation_prompts`); it measures
top-1, ranked (true above false) and the true label's probability.

An intervention is given per batch as `Intervene`: a function from the batch's
`LabelPositions` to a context manager (`core.interventions.ablated`, `balanced_labels`,
`position_free_labels`, or several under `applied`). Accuracy comes from
`studies.accuracy.accuracies`, a batch at a time, each run inside the batch's intervention:
the blocks below an intervention's lowest layer (`first_layer`) are computed once a batch
for all the runs (`model.prefix`), so ablating heads of layers 23-29 costs a quarter of a pass.

A bias is measured against one *biased* label per prompt (after Zhao et al. 2021): the
majority label of an imbalanced prompt, or the label of the demonstration next to the
input in a re-ordered prompt. The bias rate is how often the model predicts the biased
label among the prompts where that label is wrong. With two labels in a prompt, every
wrong answer that is a label is the biased one, so the share of wrong predictions naming
it is reported beside the rate: it counts how many wrong answers are some other token.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Sequence

import pandas as pd
import torch

from ..core.heads import Head, same_layer_random_heads
from ..core.interventions import ablated, balanced_labels, head_means, position_free_labels
from ..data.datasets import dataset_records
from ..data.positions import LabelPositions, find_positions
from ..data.prompts import (
    VARIANTS,
    Prompt,
    Record,
    build_prompts,
    label_token_ids,
    majority_labels,
    mixed_label_prompts,
    nearest_labels,
    prompt_label_ids,
)
from ..errors import UsageError
from ..model.loading import ICLModel
from .accuracy import Accuracy, Run, Within, accuracies

Intervene = Callable[[LabelPositions], ContextManager[None]]
IN_CONTEXT, RANDOM = "top in-context heads", "random heads"  # the `heads` column of `AblationRuns.curves`
ABLATIONS = ("mean", "zero")  # what an ablated head's output is set to


def intervened_accuracy(
    m: ICLModel, prompts: Sequence[Prompt], intervene: Intervene | None = None, batch_size: int = 32
) -> Accuracy:
    """`accuracy` of the prompts, each batch run inside `intervene(its label positions)`."""
    return intervened_accuracies(m, prompts, [(intervene, 0)], batch_size)[0]


def intervened_accuracies(m: ICLModel, prompts: Sequence[Prompt], runs: Sequence[tuple[Intervene | None, int]],
                          batch_size: int = 32, progress: str | None = None) -> list[Accuracy]:
    """`accuracies` of the prompts under each (intervene, first layer it changes) of `runs`
    (None: the plain model), each batch run inside `intervene(its label positions)`; the
    blocks before an intervention's first layer run once a batch for all the runs.
    progress: a bar's label (None: no bar)."""
    def within(intervene: Intervene) -> Within:
        return lambda rows: intervene(find_positions(m.tokenizer, [prompts[i] for i in rows]))

    true_ids, false_ids = prompt_label_ids(m.tokenizer, prompts)
    return accuracies(m, [p.text for p in prompts], true_ids, false_ids,
                      [Run(within(i), start) if i else Run() for i, start in runs], batch_size, progress)


def first_layer(heads: Sequence[Head]) -> int:
    """The first layer an intervention on `heads` changes (their lowest; 0 for none)."""
    return min((l for l, _ in heads), default=0)


def check_ablation(ablation: str) -> None:
    """A UsageError unless `ablation` names one of ABLATIONS."""
    if ablation not in ABLATIONS:
        raise UsageError(f"Unknown ablation {ablation!r}: choose one of {', '.join(ABLATIONS)}.")


def ablation_means(m: ICLModel, texts: list[str], ablation: str = "mean") -> torch.Tensor | None:
    """What `ablated` sets a head's output to: its mean [L, H, dh] over `texts` (the prompts
    the heads were located on) for mean ablation, None (zero) for zero ablation."""
    check_ablation(ablation)
    return head_means(m, texts) if ablation == "mean" else None


def evaluation_prompts(dataset: str, n_locate: int, n: int, seed: int = 0,
                       data_dir: str | Path | None = None) -> list[Prompt]:
    """n prompts of the records after the first n_locate (those the heads are located on),
    label words swapped on every other pair (`mixed_label_prompts`). The prompts differ from
    the locating ones; a word dataset repeats inputs (174 and 227 distinct words in 1,000
    records), so a word can be an input of both, with other demonstrations."""
    return mixed_label_prompts(dataset_records(dataset, n_locate + n, seed, data_dir)[n_locate:])


@dataclass
class AblationRuns:
    """Per-prompt accuracy of N prompts with the top-k in-context heads ablated, and with k
    layer-matched random heads ablated in each of D draws, for each k."""

    plain: Accuracy
    top: dict[int, Accuracy]  # k -> the first k in-context heads ablated
    random: dict[int, list[Accuracy]]  # k -> per draw, its first k heads ablated

    @classmethod
    def cat(cls, parts: Sequence["AblationRuns"]) -> "AblationRuns":
        """The prompts of several runs with the same ks and draws (e.g. datasets), in order."""
        first = parts[0]
        return cls(Accuracy.cat([p.plain for p in parts]), {k: Accuracy.cat([p.top[k] for p in parts]) for k in first.top},
                   {k: [Accuracy.cat([p.random[k][d] for p in parts]) for d in range(len(draws))]
                    for k, draws in first.random.items()})

    def curves(self) -> pd.DataFrame:
        """Columns heads (IN_CONTEXT or RANDOM), draw, k (0: the plain model), accuracy (top-1),
        ranked, true_prob (the true label's mean probability)."""
        def row(heads: str, draw: int, k: int, acc: Accuracy) -> dict:
            return dict(heads=heads, draw=draw, k=k, accuracy=acc.top1, ranked=acc.ranked,
                        true_prob=float(acc.true_prob.mean()))

        draws = len(next(iter(self.random.values())))
        rows = [row(name, d, 0, self.plain) for name, d in [(IN_CONTEXT, 0), *((RANDOM, d) for d in range(draws))]]
        rows += [row(IN_CONTEXT, 0, k, acc) for k, acc in self.top.items()]
        rows += [row(RANDOM, d, k, acc) for k, accs in self.random.items() for d, acc in enumerate(accs)]
        return pd.DataFrame(rows)


def ablation_runs(
    m: ICLModel,
    prompts: Sequence[Prompt],
    top: Sequence[Head],
    ks: Sequence[int],
    n_random: int = 20,
    seed: int = 0,
    means: torch.Tensor | None = None,
    batch_size: int = 32,
) -> AblationRuns:
    """Accuracy with the first k of `top` ablated, and with k random heads ablated, for each
    k; the plain model once. means: [L, H, dh] (`ablation_means`), None to zero the heads.

    A random draw takes, for each head of `top`, another head of its layer
    (`same_layer_random_heads`, seed + draw): its first k heads match the top k layer by layer.
    """
    if not ks or min(ks) < 1 or max(ks) > len(top):
        raise UsageError(f"Numbers of heads to ablate must lie between 1 and the {len(top)} heads given, not {list(ks)}.")
    draws = [same_layer_random_heads(top, m.arch.n_heads, seed + d) for d in range(n_random)]
    sets = [top[:k] for k in ks] + [d[:k] for k in ks for d in draws]

    def ablate(heads: Sequence[Head]) -> Intervene:
        return lambda labels: ablated(m, heads, means)

    accs = intervened_accuracies(m, prompts, [(None, 0)] + [(ablate(h), first_layer(h)) for h in sets], batch_size,
                                 f"ablation ({len(prompts)} prompts)")
    plain, top_k, random = accs[0], accs[1 : 1 + len(ks)], iter(accs[1 + len(ks) :])
    return AblationRuns(plain, dict(zip(ks, top_k)), {k: [next(random) for _ in draws] for k in ks})


@dataclass(frozen=True)
class CausalPlan:
    """Sample sizes of the causal check, scaled to the prompts a bias measurement uses."""

    n_locate: int  # balanced prompts each dataset's heads are located on
    n_ablation: int  # prompts a word dataset in the causal check (a sentence dataset: half)
    ks: list[int]  # numbers of heads ablated
    n_random: int = 20  # draws of layer-matched random heads

    @classmethod
    def for_prompts(cls, n: int, k: int = 20) -> "CausalPlan":
        """The plan for n bias prompts and k heads: up to 100 to locate, n/4 (8 to 64) to ablate,
        the full range of k from 32 ablation prompts up, else 1, 5, k; 20 random draws."""
        n_ablation = max(8, min(64, n // 4))
        ks = [1, 2, 4, 6, 8, 10, 15] if n_ablation >= 32 else [1, 5]
        return cls(min(n, 100), n_ablation, [i for i in ks if i < k] + [k])


def causal_check(m: ICLModel, top: dict[str, list[Head]], plan: CausalPlan, word: Sequence[str], seed: int = 0,
                 data_dir: str | Path | None = None, ablation: str = "mean") -> dict[str, AblationRuns]:
    """`ablation_runs` on each dataset of `top` (its in-context heads, located on its first
    plan.n_locate balanced prompts): plan.n_ablation prompts of the records after those a word
    dataset, half as many a sentence dataset (`evaluation_prompts`); mean ablation by the
    heads' means over the locating prompts, or zero. Keyed by dataset."""
    check_ablation(ablation)
    runs = {}
    for d, heads in top.items():
        n = plan.n_ablation if d in word else plan.n_ablation // 2
        locating = build_prompts(dataset_records(d, plan.n_locate, seed, data_dir))
        means = ablation_means(m, [p.text for p in locating], ablation)
        runs[d] = ablation_runs(m, evaluation_prompts(d, plan.n_locate, n, seed, data_dir), heads, plan.ks,
                                             plan.n_random, seed, means)
    return runs


def curves(runs: dict[str, AblationRuns]) -> pd.DataFrame:
    """`AblationRuns.curves` of each dataset's runs, with a `dataset` column: its name and N."""
    return pd.concat([r.curves().assign(dataset=f"{d} (N={len(r.plain.predictions)})") for d, r in runs.items()],
                     ignore_index=True)


def curve_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and k: accuracy with the top-k heads ablated, and the random draws' mean
    and standard deviation (from `AblationRuns.curves` frames with a dataset column)."""
    top = curves[curves["heads"] == IN_CONTEXT].set_index(["dataset", "k"])["accuracy"]
    rand = curves[curves["heads"] == RANDOM].groupby(["dataset", "k"], sort=False)["accuracy"]
    return pd.DataFrame({"top-k ablated": top, "random: mean": rand.mean(), "random: sd": rand.std()})


def curve_ends(table: pd.DataFrame, k: int) -> pd.DataFrame:
    """Per dataset of a `curve_table`: the plain accuracy, and at k heads ablated the top-k
    accuracy and the random draws' mean and sd."""
    at_k = table.xs(k, level="k")
    return at_k.assign(plain=table.xs(0, level="k")["top-k ablated"])


# --- biases ----------------------------------------------------------------------------
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
    """(rate before - rate after) / rate before: 0.22 is the paper's 22% reduction; NaN
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

    @property
    def reduction(self) -> float:
        """Relative reduction of the bias rate (the paper: 0.22 majority, 0.17 recency)."""
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
    intervene: Intervene,
    start: int = 0,
    batch_size: int = 32,
) -> BiasEffect:
    """The bias on `biased` prompts (against `biased_labels`, one word or None per prompt)
    with and without `intervene`, and the top-1 accuracy it costs on `standard` prompts.
    start: the first layer `intervene` changes (the blocks before run once a batch for both)."""
    target = torch.full((len(biased),), -1)  # -1: no biased label (a tie)
    named = [i for i, w in enumerate(biased_labels) if w is not None]
    target[named] = label_token_ids(m.tokenizer, [biased_labels[i] for i in named])
    runs = {}
    for name, prompts in (("biased", biased), ("standard", standard)):
        runs[name], runs[name + "+"] = intervened_accuracies(m, prompts, [(None, 0), (intervene, start)], batch_size)
    count = {name: bias_count(runs[name].predictions, runs[name].true_id, target) for name in ("biased", "biased+")}
    exposed = exposed_to_bias(runs["biased"].true_id, target)
    flags = torch.stack([exposed, *(exposed & (runs[name].predictions == target) for name in ("biased", "biased+"))], 1)
    return BiasEffect(
        count["biased"], count["biased+"],
        (runs["biased"].top1, runs["biased+"].top1),
        (runs["standard"].top1, runs["standard+"].top1),
        flags,
    )


def majority_bias(m: ICLModel, records: Sequence[Record], heads: Sequence[Head]) -> BiasEffect:
    """Majority-label bias on imbalanced prompts of `records`, plainly and with the label
    attention of `heads` balanced (`balanced_labels`); accuracy cost on balanced prompts."""
    standard, imbalanced = (mixed_label_prompts(records, VARIANTS[v]) for v in ("balanced", "imbalanced"))
    return bias_effect(m, imbalanced, majority_labels(imbalanced), standard, lambda labels: balanced_labels(m, heads, labels),
                       first_layer(heads))


def recency_bias(m: ICLModel, records: Sequence[Record], heads: Sequence[Head]) -> BiasEffect:
    """Recency bias on re-ordered prompts of `records`, plainly and with position-free label
    keys in `heads` (`position_free_labels`); accuracy cost on balanced prompts."""
    standard, reordered = (mixed_label_prompts(records, VARIANTS[v]) for v in ("balanced", "reordered"))
    return bias_effect(m, reordered, nearest_labels(reordered), standard,
                       lambda labels: position_free_labels(m, heads, labels), first_layer(heads))
