"""Head sets ablated (`head_sets`): the accuracy each set of heads costs when mean-ablated at the last
position, against layer-matched random heads and the floors.

Each set's heads have their z at the last position set to their mean
there over every SCORE prompt pooled (both label mappings and both word datasets: a mean that
carries no mapping, `last_position_means`); nothing before the last position changes, so every
set, size and random draw is a one-token pass over each prompt's kept keys and values
(`core.passes.last_token_passes`), the sets on the batch axis. The control of a set draws, for each
of its heads, another head of its layer (`core.heads.same_layer_random_heads`), seeded draw by
draw; the floors are the zero-shot prompt (the input alone) and the prompt with its labels re-dealt
so that no mapping is left (`function_vectors.corrupted_prompts`). Each run is read three ways
(`READOUTS`): top-1 (the argmax is the gold label), ranked (the gold label above the other) and the
TR ratio (the argmax is one of the prompt's two labels, Yang et al.'s readout).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import pandas as pd
import torch

from ..cache import stored
from ..core.heads import Head, head_mask, same_layer_random_heads
from ..core.interventions import ablated_rows, first_layer
from ..core.passes import Accuracy, LastRun, label_values, last_token_passes
from ..data.prompts import Prompt, prompt_label_ids
from ..errors import CannotMeasure, UsageError
from ..model.loading import ICLModel
from ..stats import mean_ci
from .function_vectors import corrupted_prompts, last_outputs
from .runner import PromptSet

ROWS = 512  # one-token rows a pass of `set_ablations` holds at most (prompts x sets)
TOP1, RANKED, TR_RATIO = "top-1", "ranked", "TR ratio"
READOUTS = (TOP1, RANKED, TR_RATIO)  # what a run is read by (`SetAblations.hits`)


def last_position_means(m: ICLModel, score_sets: Sequence[PromptSet], batch_size: int = 32) -> torch.Tensor:
    """[L, H, dh]: every head's z at the last position averaged over every prompt of the sets
    pooled (both label mappings, every dataset: no mapping survives the mean), each set's sum cached."""
    def summed(ps: PromptSet) -> dict[str, torch.Tensor]:
        z, _ = last_outputs(m, ps.texts, batch_size, f"head sets: {ps.title}, the heads' outputs")
        return {"sum": z.double().sum(0)}
    sums = [stored("last-position-sums", m, ps, lambda ps=ps: summed(ps))["sum"] for ps in score_sets]
    return (torch.stack(sums).sum(0) / sum(len(ps) for ps in score_sets)).float()


def zero_shot(prompt: Prompt) -> str:
    """The prompt's input alone, with its separator: "one :"."""
    return prompt.text[prompt.labels[-1][1] + 1:] if prompt.labels else prompt.text


@dataclass(frozen=True)
class Ablation:
    """One run: the first k heads of a set ablated (draw None), or of its d-th layer-matched draw."""

    set: str
    k: int
    draw: int | None
    heads: tuple[Head, ...]


@dataclass
class SetAblations:
    """Per-prompt results at the last position of N EVAL prompts of one dataset (or several, `cat`):
    plain, under each `Ablation`, and the two floors."""

    dataset: str
    runs: list[Ablation]
    plain: Accuracy
    ablated: list[Accuracy]  # one a run
    zero_shot: Accuracy  # the input alone
    shuffled: Accuracy  # labels re-dealt so that no mapping is left; the gold label the clean prompt's
    inputs: torch.Tensor  # [N] long: each prompt's distinct input (numbered apart across datasets)
    false_ids: torch.Tensor  # [N] long: each prompt's other label (its first token; the gold one is `Accuracy.true_id`)

    @classmethod
    def cat(cls, parts: Sequence[SetAblations], name: str) -> SetAblations:
        """The prompts of several datasets' runs (the same runs), in order, their inputs numbered apart."""
        base = torch.tensor([0, *(int(p.inputs.max()) + 1 for p in parts[:-1])]).cumsum(0)
        return cls(name, parts[0].runs, Accuracy.cat([p.plain for p in parts]),
                   [Accuracy.cat([p.ablated[i] for p in parts]) for i in range(len(parts[0].runs))],
                   Accuracy.cat([p.zero_shot for p in parts]), Accuracy.cat([p.shuffled for p in parts]),
                   torch.cat([p.inputs + b for p, b in zip(parts, base.tolist())]), torch.cat([p.false_ids for p in parts]))

    def hits(self, acc: Accuracy, readout: str = TOP1) -> torch.Tensor:
        """[N] bool: each prompt's hit by a readout of `READOUTS`: top-1 (the argmax is the gold label),
        ranked (the gold label's logit above the other's) or TR ratio (the argmax is either label)."""
        if readout == TR_RATIO:
            return (acc.predictions == acc.true_id) | (acc.predictions == self.false_ids)
        if readout not in READOUTS:
            raise UsageError(f"Unknown readout {readout!r}: choose one of {', '.join(READOUTS)}.")
        return acc.top1_hits if readout == TOP1 else acc.ranked_hits

    def tr_ratio(self, acc: Accuracy) -> float:
        """Yang et al.'s TR ratio of a run: the share of prompts whose argmax is one of their two labels."""
        return self.hits(acc, TR_RATIO).double().mean().item()

    def at(self, name: str, k: int) -> tuple[Accuracy, list[Accuracy]]:
        """(the set's first k heads ablated, each layer-matched draw of k ablated)."""
        chosen = {r.draw: acc for r, acc in zip(self.runs, self.ablated) if r.set == name and r.k == k}
        if None not in chosen:
            raise UsageError(f"No run ablates the first {k} heads of {name!r}.")
        return chosen[None], [chosen[d] for d in sorted(d for d in chosen if d is not None)]

    def effect(self, name: str, k: int, readout: str = TOP1) -> torch.Tensor:
        """[N]: each prompt's hit (`hits` by the readout) with the set's first k heads ablated minus its
        mean over the random draws (what the set costs beyond random heads, negative where it hurts)."""
        top, draws = self.at(name, k)
        return self.hits(top, readout).double() - torch.stack([self.hits(d, readout).double() for d in draws]).mean(0)

    def curves(self) -> pd.DataFrame:
        """Columns dataset, set, heads ("set" or "random"), draw, k (0: the plain model), accuracy
        (top-1), ranked (true above false), tr_ratio (the argmax either label), true_prob."""
        def row(name: str, heads: str, draw: int, k: int, acc: Accuracy) -> dict:
            return dict(dataset=self.dataset, set=name, heads=heads, draw=draw, k=k, accuracy=acc.top1,
                        ranked=acc.ranked, tr_ratio=self.tr_ratio(acc), true_prob=float(acc.true_prob.mean()))
        names = list(dict.fromkeys(r.set for r in self.runs))
        draws = sorted({r.draw for r in self.runs if r.draw is not None})
        rows = [row(n, "set", 0, 0, self.plain) for n in names] + [row(n, "random", d, 0, self.plain) for n in names for d in draws]
        rows += [row(r.set, "set" if r.draw is None else "random", r.draw or 0, r.k, acc) for r, acc in zip(self.runs, self.ablated)]
        return pd.DataFrame(rows)

    def effect_table(self, names: Sequence[str], ks: Sequence[int]) -> pd.DataFrame:
        """One row a named set and size it was ablated at: top-1 with its first k heads ablated, the
        layer-matched draws' mean, and the difference (`effect`) with its 95% interval over distinct inputs;
        then the TR ratio with the set ablated, its draws' mean and the difference."""
        rows = []
        for name in names:
            for k in ks:
                if not any(r.set == name and r.k == k for r in self.runs):
                    continue
                top, draws = self.at(name, k)
                effect = self.effect(name, k)
                try:
                    lo, hi = mean_ci(effect, clusters=self.inputs)
                    ci = f"{lo:+.3f} to {hi:+.3f}"
                except CannotMeasure:
                    ci = "too few inputs"
                rows.append({"set": name, "k": k, "top-1 ablated": top.top1,
                             "random: mean": float(torch.tensor([d.top1 for d in draws]).mean()),
                             "beyond random": float(effect.mean()), "95% CI": ci, "TR ratio ablated": self.tr_ratio(top),
                             "TR ratio random": float(torch.tensor([self.tr_ratio(d) for d in draws]).mean()),
                             "TR ratio beyond random": float(self.effect(name, k, TR_RATIO).mean())})
        return pd.DataFrame(rows).set_index(["set", "k"])

    def floors(self) -> dict[str, float]:
        """Top-1 accuracy plainly, zero-shot and with shuffled labels."""
        return {"few-shot": self.plain.top1, "zero-shot": self.zero_shot.top1, "shuffled labels": self.shuffled.top1}


def ablation_plan(ranked: dict[str, list[Head]], ks: dict[str, Sequence[int]], n_heads: int, n_random: int,
                  seed: int = 0) -> list[Ablation]:
    """Every run of `set_ablations`: for each ranking and each k of ks[name] it holds, its first k
    heads, and the first k of each of n_random layer-matched draws for its first max(ks) heads (seed + d)."""
    runs = []
    for name, heads in ranked.items():
        sizes = [k for k in sorted(set(ks.get(name, ()))) if 1 <= k <= len(heads)]
        if not sizes:
            continue
        draws = [same_layer_random_heads(heads[:max(sizes)], n_heads, seed + d) for d in range(n_random)]
        for k in sizes:
            runs += [Ablation(name, k, None, tuple(heads[:k]))] + [Ablation(name, k, d, tuple(h[:k])) for d, h in enumerate(draws)]
    return runs


def set_ablations(m: ICLModel, ps: PromptSet, runs: Sequence[Ablation], means: torch.Tensor, seed: int = 0,
                  batch_size: int = 32, cache: bool = True) -> SetAblations:
    """`SetAblations` of an EVAL prompt set under `runs` (`ablation_plan`), each set mean-ablated
    (means [L, H, dh], `last_position_means`) at the last position; cached under the runs, the
    means' bytes and the shuffling seed."""
    arch = m.arch
    true_ids, false_ids = prompt_label_ids(m.tokenizer, ps.prompts)
    digest = hashlib.sha256(means.float().contiguous().numpy().tobytes()).hexdigest()[:16]
    read = label_values(true_ids, false_ids)

    def compute() -> dict[str, torch.Tensor]:
        drop = torch.stack([head_mask(arch.n_layers, arch.n_heads, r.heads) for r in runs]) if runs else None
        order = sorted(range(len(runs)), key=lambda i: first_layer(runs[i].heads))  # runs of one start share a pass
        chunks = [order[i:i + max(1, ROWS // batch_size)] for i in range(0, len(order), max(1, ROWS // batch_size))]

        def run(chunk: list[int]) -> LastRun:
            return LastRun(len(chunk), min(first_layer(runs[i].heads) for i in chunk),
                           lambda rows: ablated_rows(m, drop[chunk].repeat(len(rows), 1, 1), means))
        plain, parts = last_token_passes(m, ps.texts, [run(c) for c in chunks], read, batch_size, f"head sets: {ps.title}")
        ablated = torch.empty(len(runs), len(ps), 4)
        for chunk, part in zip(chunks, parts):
            ablated[chunk] = part.transpose(0, 1)
        floors = {}
        shuffled = [p.text for p in corrupted_prompts(ps.prompts, seed)]
        for name, texts, what in (("zero_shot", [zero_shot(p) for p in ps.prompts], "zero-shot"),
                                  ("shuffled", shuffled, "shuffled labels")):
            floors[name], _ = last_token_passes(m, texts, [], read, batch_size, f"head sets: {ps.title}, {what}")
        return {"plain": plain, "ablated": ablated, **floors}

    plan = [(r.set, r.k, r.draw, r.heads) for r in runs]
    got = stored("head-set-ablations", m, ps, compute, cache, runs=plan, means=digest, shuffle_seed=seed)
    numbers: dict[str, int] = {}
    inputs = torch.tensor([numbers.setdefault(zero_shot(p), len(numbers)) for p in ps.prompts])
    return SetAblations(ps.dataset, list(runs), Accuracy.of_values(got["plain"], true_ids),
                        [Accuracy.of_values(a, true_ids) for a in got["ablated"]], Accuracy.of_values(got["zero_shot"], true_ids),
                        Accuracy.of_values(got["shuffled"], true_ids), inputs, false_ids)
