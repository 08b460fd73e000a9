"""The causal check (EMNLP version), one protocol for notebook 08's curves and the report's verdict.

`causal_check` splits each dataset's records by input (`data.split.input_halves`: half the
distinct inputs of each class, drawn with the seed, the held-out view's split), locates the
in-context heads on the balanced prompts of one half and ablates the top k of them (mean ablation
by default: each head's output set to its mean over those prompts; zero as an option) and, as a
baseline, k random heads matched to them layer by layer in 20 draws, on prompts of the other
half's records (`evaluation_prompts`): no input is both located on and evaluated. It measures
top-1, ranked (true above false) and the true label's probability, each run under its ablation
batch by batch (`core.passes`), the runs of each number of heads kept in the results cache
(`cache.stored_accuracy_parts`), so a call asking for a number an earlier call ran (notebook 08's curve,
then the report's 1% and K) runs none of its passes again.

Why every position: the EMNLP abstract intervenes in the heads, and a head's output at the earlier positions
is what the later layers' keys and values read, so an ablation that spared them would keep part of what the head
carries to the last position. Each run therefore computes every position of the blocks from the lowest ablated
layer up (those below it once a batch for all runs, `model.prefix`); it is the one intervention of the report that
cannot run as a one-token pass (`core.passes.last_token_passes`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from ..cache import prompts_hash, stored_accuracy_parts
from ..core.heads import Head, same_layer_random_heads, top_heads
from ..core.interventions import Intervention, head_means
from ..core.passes import Accuracy, intervened_accuracies
from ..data.prompts import Prompt, Record, mixed_label_prompts
from ..data.setting import MAIN, Setting
from ..data.split import input_halves, records_in
from ..errors import UsageError
from ..model.loading import ICLModel
from .in_context_heads import located
from .runner import prompt_set

IN_CONTEXT, RANDOM = "top in-context heads", "random heads"  # the `heads` column of `AblationRuns.curves`
ABLATIONS = ("mean", "zero")  # what an ablated head's output is set to


def check_ablation(ablation: str) -> None:
    """A UsageError unless `ablation` names one of ABLATIONS."""
    if ablation not in ABLATIONS:
        raise UsageError(f"Unknown ablation {ablation!r}: choose one of {', '.join(ABLATIONS)}.")


def ablation_means(m: ICLModel, texts: list[str], ablation: str = "mean") -> torch.Tensor | None:
    """What `ablated` sets a head's output to: its mean [L, H, dh] over `texts` (the prompts
    the heads were located on) for mean ablation, None (zero) for zero ablation."""
    check_ablation(ablation)
    return head_means(m, texts) if ablation == "mean" else None


def evaluation_prompts(records: Sequence[Record], locate: torch.Tensor, setting: Setting = MAIN) -> list[Prompt]:
    """The prompts of the records that `locate` [N] bool leaves out (those the heads are not located
    on), label words swapped on every other pair (`mixed_label_prompts`), in the setting's label
    words, separator and demonstrations a class."""
    return mixed_label_prompts(records_in(records, ~locate), setting.variant("balanced"))


@dataclass
class AblationRuns:
    """Per-prompt accuracy of N prompts with the top-k in-context heads ablated, and with k
    layer-matched random heads ablated in each of D draws, for each k."""

    plain: Accuracy
    top: dict[int, Accuracy]  # k -> the first k in-context heads ablated
    random: dict[int, list[Accuracy]]  # k -> per draw, its first k heads ablated

    @classmethod
    def of(cls, accs: Sequence[Accuracy], ks: Sequence[int], n_random: int) -> "AblationRuns":
        """The runs `ablation_accuracies` gives, in its order: plain, the top k for each k, then each k's draws."""
        random = iter(accs[1 + len(ks):])
        return cls(accs[0], dict(zip(ks, accs[1:1 + len(ks)])), {k: [next(random) for _ in range(n_random)] for k in ks})

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
    if not ks:
        raise UsageError(f"Give at least one number of heads to ablate, between 1 and the {len(top)} heads given.")
    return AblationRuns.of(ablation_accuracies(m, prompts, top, ks, n_random, seed, means, batch_size), ks, n_random)


def ablation_accuracies(m: ICLModel, prompts: Sequence[Prompt], top: Sequence[Head], ks: Sequence[int], n_random: int = 20,
                        seed: int = 0, means: torch.Tensor | None = None, batch_size: int = 32) -> list[Accuracy]:
    """`ablation_runs`'s passes as one list: plain, the top k for each k, then for each k its n_random draws
    (no k: the plain pass alone)."""
    if ks and (min(ks) < 1 or max(ks) > len(top)):
        raise UsageError(f"Numbers of heads to ablate must lie between 1 and the {len(top)} heads given, not {list(ks)}.")
    draws = [same_layer_random_heads(top, m.arch.n_heads, seed + d) for d in range(n_random)]
    sets = [top[:k] for k in ks] + [d[:k] for k in ks for d in draws]
    return intervened_accuracies(m, prompts, [None] + [Intervention.ablated(m, h, means) for h in sets], batch_size,
                                 f"ablation ({len(prompts)} prompts)")


def one_percent(m: ICLModel, given: Sequence[Head] | None = None) -> int:
    """The EMNLP abstract's 1% of the model's heads, rounded up, at least one (at most the heads given)."""
    k = max(1, math.ceil(0.01 * m.arch.n_layers * m.arch.n_heads))
    return min(k, len(given)) if given else k


def causal_check(m: ICLModel, datasets: Sequence[str], n: int, seed: int = 0, data_dir: str | Path | None = None,
                 setting: Setting = MAIN, given: Sequence[Head] | None = None, more_ks: Sequence[int] = (),
                 n_random: int = 20, ablation: str = "mean") -> dict[str, AblationRuns]:
    """The causal check on each dataset's n records (in the setting), split by input (`input_halves`
    with the seed): its top `setting.heads` heads (or the heads given) located on the balanced prompts
    of one half (those rows of `runner.prompt_set`'s), the first 1% of the model's heads (`one_percent`)
    and all of them ablated on prompts of the other half's records (`evaluation_prompts`), beside
    n_random layer-matched random draws (`ablation_runs`). more_ks: other numbers of heads to ablate
    as well (a curve; the other runs' results do not depend on them). Mean ablation by the heads'
    means over the locating prompts, or zero. Keyed by dataset; each dataset's runs are cached a number of
    heads at a time (`cache.stored_accuracy_parts`, the plain pass as 0): a report judged again, or a call
    asking for numbers of heads an earlier one ran, does not run them again."""
    check_ablation(ablation)
    runs = {}
    for d in datasets:
        records = setting.records(d, n, seed, data_dir)
        locate = input_halves(records, seed)
        balanced = prompt_set(m, d, "balanced", n, seed, data_dir, setting)
        heads = list(given) if given else top_heads(located(m, balanced).head[locate].mean(0), setting.heads)
        ks = sorted({one_percent(m, given), len(heads), *(k for k in more_ks if k < len(heads))})
        evaluated = evaluation_prompts(records, locate, setting)
        texts = [t for t, keep in zip(balanced.texts, locate.tolist()) if keep]

        def compute(missing: list[int]) -> dict[int, list[Accuracy]]:
            wanted = [k for k in missing if k]
            ran = AblationRuns.of(ablation_accuracies(m, evaluated, heads, wanted, n_random, seed,
                                                      ablation_means(m, texts, ablation)), wanted, n_random)
            return {0: [ran.plain], **{k: [ran.top[k], *ran.random[k]] for k in wanted}}
        kept = stored_accuracy_parts("causal-check", m, evaluated, [0, *ks], compute, part="k", heads=heads,
                                     n_random=n_random, seed=seed, ablation=ablation, locating=prompts_hash(texts))
        runs[d] = AblationRuns(kept[0][0], {k: kept[k][0] for k in ks}, {k: kept[k][1:] for k in ks})
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
