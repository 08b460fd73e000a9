"""Head sets of equal size by each head type's score, side by side: their overlaps and layers, the
accuracy lost when each is ablated against layer-matched random heads, and the two-tower signature
in each.

Every head of the model is scored seven ways (`head_scores`), [L, H] each:

* in-context: the paper's mean log-probability increase at the last position (`in_context_heads`),
  over the SCORE half's prompts the model answers correctly (all of them where it answers none);
* induction, prefix-matching and previous-token: attention on repeated random token sequences
  (`head_types`), with the induction score's null on sequences whose copies share no id;
* function-vector: Todd et al.'s average indirect effect in probability (`function_vectors`), on
  the same SCORE prompts (the correct ones, where any);
* task-recognition and task-learning (Yang, Cho & Inoue 2025; `label_subspace`): the norm of a head's
  normed output at the last position projected onto the plane of the prompt's two labels'
  unembeddings, and its gold-minus-other direct logit over that norm, on the same prompts.

Scores read the SCORE half of each word dataset's records, split by distinct input
(`head_types.score_and_eval`), averaged over the datasets; everything causal reads the EVAL half
(and the sentence datasets' EVAL halves, tasks the scores never saw, as Yin & Steinhardt's held-out
tasks). A score's set of size k is its first k heads (`rankings`); an exclusive set "A, not B" is
A's ranking without B's top `exclude` heads, so that it shares no head with any set of B's up to
that size (Yin & Steinhardt's ablation with exclusion).

Ablation: `set_ablations` (each set mean-ablated at the last position against layer-matched random
draws, read three ways).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from ..core.heads import Head, head_name, same_layer_random_heads, top_heads
from ..data.setting import MAIN, Setting
from ..data.split import input_halves, input_ids
from ..errors import CannotMeasure
from ..model.loading import ICLModel
from ..stats import mean_ranks, spearman
from . import recency
from .function_vectors import function_vector_scores
from .head_types import (
    eval_half,
    induction_scores,
    prefix_matching_scores,
    repeated_sequence_scores,
    score_and_eval,
)
from .in_context_heads import answered_correctly, located
from .label_subspace import label_subspace_scores
from .mrr import layer_matched_mrr
from .runner import PromptSet
from .set_ablations import SetAblations, ablation_plan, last_position_means, set_ablations

IN_CONTEXT, INDUCTION, PREFIX, PREVIOUS, FV = "in-context", "induction", "prefix-matching", "previous-token", "function-vector"
TR, TL = "task-recognition", "task-learning"
SCORES = (IN_CONTEXT, INDUCTION, PREFIX, PREVIOUS, FV, TR, TL)
EXCLUSIONS = ((IN_CONTEXT, FV), (FV, IN_CONTEXT), (INDUCTION, FV), (FV, INDUCTION))  # (A, B): "A, not B"
GIVEN = "heads given"  # the set of the heads a user names, beside the scored ones


def exclusive(a: str, b: str) -> str:
    """The name of set a without b's top heads: "in-context, not function-vector"."""
    return f"{a}, not {b}"


# --- scores -----------------------------------------------------------------------------------


@dataclass
class HeadScores:
    """Every head scored each way of SCORES ([L, H] each), the induction score's null, and the SCORE
    prompts the scores that read the gold label averaged, a word dataset."""

    scores: dict[str, torch.Tensor]  # name -> [L, H]
    null: torch.Tensor  # [L, H]: the induction score on P + R + R'
    scored: dict[str, int]  # dataset -> SCORE prompts averaged (those answered correctly, or all where none is)
    total: dict[str, int]  # dataset -> SCORE prompts


def head_scores(m: ICLModel, score_sets: dict[str, PromptSet], n_sequences: int = 200, length: int = 50,
                seed: int = 0, batch_size: int = 32) -> HeadScores:
    """Each head's seven scores (see the module) on the SCORE prompt sets given (dataset -> its
    SCORE half) and on n_sequences random sequences of `length` ids; each part cached by its study."""
    increase, effect, recognition, learning, scored = [], [], [], [], {}
    for d, ps in score_sets.items():
        right = answered_correctly(m, ps)
        rows = right if right.any() else torch.ones_like(right)
        increase.append(located(m, ps, batch_size).head[rows].mean(0))
        effect.append(function_vector_scores(m, ps, seed, bool(right.any()), batch_size).prob)
        subspace = label_subspace_scores(m, ps, batch_size)
        recognition.append(subspace.tr[rows].mean(0))
        learning.append(subspace.tl[rows].mean(0))
        scored[d] = int(rows.sum())
    repeated = repeated_sequence_scores(m, n_sequences, length, 2, seed, batch_size=batch_size)
    scores = {IN_CONTEXT: torch.stack(increase).mean(0), INDUCTION: repeated["repeat"],
              PREFIX: prefix_matching_scores(m, n_sequences, length, seed, batch_size=batch_size),
              PREVIOUS: repeated["previous"], FV: torch.stack(effect).mean(0),
              TR: torch.stack(recognition).mean(0), TL: torch.stack(learning).mean(0)}
    null = induction_scores(m, n_sequences, length, seed, null=True, batch_size=batch_size)
    return HeadScores(scores, null, scored, {d: len(ps) for d, ps in score_sets.items()})


def rankings(scores: dict[str, torch.Tensor], exclude: int, given: Sequence[Head] | None = None) -> dict[str, list[Head]]:
    """Name -> every head, best first: each score's ranking, each exclusive set's of EXCLUSIONS (A's
    ranking without B's top `exclude` heads) and, where heads are given, GIVEN (in their order). The
    set of size k is a ranking's first k."""
    ranked = {name: top_heads(s, s.numel()) for name, s in scores.items()}
    for a, b in EXCLUSIONS:
        if a in ranked and b in ranked:
            excluded = set(ranked[b][:exclude])
            ranked[exclusive(a, b)] = [h for h in ranked[a] if h not in excluded]
    return ranked | ({GIVEN: list(given)} if given else {})


def heads_at(ranked: dict[str, list[Head]], k: int, names: Sequence[str] = SCORES) -> dict[str, list[Head]]:
    """The sets of size k (each ranking's first k) of the rankings named."""
    return {name: ranked[name][:k] for name in names if name in ranked}


# --- overlaps and layers ----------------------------------------------------------------------


def chance_overlap(shared: int, k: int, n: int) -> float:
    """The hypergeometric probability that two sets of k of n heads drawn at random share at
    least `shared` heads (a permutation test's exact p-value)."""
    total = math.comb(n, k)
    return sum(math.comb(k, x) * math.comb(n - k, k - x) for x in range(shared, k + 1)) / total


def overlap_table(scores: dict[str, torch.Tensor], k: int) -> pd.DataFrame:
    """One row a pair of scores: the heads their top-k sets share, Jaccard, the share expected by
    chance (k^2 / N heads), the chance of sharing as many (`chance_overlap`), and Spearman's rho of
    the two scores over all N heads."""
    names = list(scores)
    n = next(iter(scores.values())).numel()
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            top_a, top_b = set(top_heads(scores[a], k)), set(top_heads(scores[b], k))
            shared = len(top_a & top_b)
            rows.append({"scores": f"{a} / {b}", "shared": shared, "jaccard": shared / len(top_a | top_b),
                         "chance": k * k / n, "p (chance)": chance_overlap(shared, k, n),
                         "spearman": spearman(scores[a], scores[b])})
    return pd.DataFrame(rows).set_index("scores")


def rank_correlations(scores: dict[str, torch.Tensor]) -> torch.Tensor:
    """[S, S]: Spearman's rho of each pair of scores over all heads."""
    values = list(scores.values())
    return torch.tensor([[spearman(a, b) for b in values] for a in values])


def layer_counts(sets: dict[str, Sequence[Head]], n_layers: int) -> torch.Tensor:
    """[S, L] long: how many heads of each set lie in each layer."""
    return torch.stack([torch.bincount(torch.tensor([l for l, _ in heads], dtype=torch.long), minlength=n_layers)
                        for heads in sets.values()])


def set_table(sets: dict[str, Sequence[Head]]) -> pd.DataFrame:
    """One row a set: its heads (layer-head), lowest, median and highest layer."""
    rows = []
    for name, heads in sets.items():
        layers = torch.tensor([l for l, _ in heads], dtype=torch.float)
        rows.append({"set": name, "heads": len(heads), "lowest layer": int(layers.min()),
                     "median layer": float(layers.median()), "highest layer": int(layers.max()),
                     "members": ", ".join(map(head_name, heads))})
    return pd.DataFrame(rows).set_index("set")


def percentiles(scores: torch.Tensor) -> torch.Tensor:
    """[L, H]: the share of the other heads each head outscores (1: the top head), tied heads their
    mean rank's (`stats.mean_ranks`: a sort's tie order would differ between machines)."""
    return mean_ranks(scores).view(scores.shape) / max(scores.numel() - 1, 1)


def membership(scores: dict[str, torch.Tensor], k: int) -> pd.DataFrame:
    """The top-k in-context heads, one row each, best first: their percentile in every score, and
    whether each is also in another score's top k."""
    heads = top_heads(scores[IN_CONTEXT], k)
    ranked = {name: percentiles(s) for name, s in scores.items()}
    tops = {name: set(top_heads(s, k)) for name, s in scores.items() if name != IN_CONTEXT}
    rows = []
    for h in heads:
        row = {"head": head_name(h), **{f"{name} percentile": float(p[h]) for name, p in ranked.items()},
               **{f"{name} head": h in top for name, top in tops.items()}}
        rows.append(row)
    return pd.DataFrame(rows).set_index("head")


# --- the study ---------------------------------------------------------------------------------


@dataclass
class HeadSetStudy:
    """Scores, rankings and ablations of one model: sizes (the set sizes the claims read, e.g. the
    paper's share of heads and K), ks (every size ablated, a curve), the ablations a dataset."""

    model: str
    n_layers: int
    n_heads: int
    scores: HeadScores
    ranked: dict[str, list[Head]]
    sizes: tuple[int, ...]
    ks: list[int]
    n_random: int
    ablations: dict[str, SetAblations]
    word: list[str]
    sentence: list[str]

    def sets(self, k: int, names: Sequence[str] = SCORES) -> dict[str, list[Head]]:
        """The sets of size k of the rankings named (`heads_at`)."""
        return heads_at(self.ranked, k, names)

    def pooled(self, datasets: Sequence[str] | None = None) -> SetAblations:
        """The ablations of the datasets (default: the word datasets) pooled, inputs numbered apart."""
        chosen = list(datasets or self.word)
        return SetAblations.cat([self.ablations[d] for d in chosen], " + ".join(chosen))

    def curves(self) -> pd.DataFrame:
        """Every dataset's `SetAblations.curves`, with N in its name."""
        return pd.concat([a.curves().assign(dataset=f"{d} (N={len(a.inputs)})") for d, a in self.ablations.items()],
                         ignore_index=True)


def head_set_study(m: ICLModel, word: Sequence[str], n: int, sizes: Sequence[int], ks: Sequence[int] = (),
                   sentence: Sequence[str] = (), sentence_n: int = 0, n_sequences: int = 200, length: int = 50,
                   n_random: int = 20, seed: int = 0, data_dir: str | Path | None = None, given: Sequence[Head] | None = None,
                   setting: Setting = MAIN, batch_size: int = 32) -> HeadSetStudy:
    """Every head scored on the SCORE halves of n records of each word dataset, the rankings (exclusive
    sets without the other score's top max(sizes)), and the ablations of each score's (and the given
    heads') first k heads, k in sizes and ks, and of each exclusive set's at the sizes, with n_random
    layer-matched draws each, on each word dataset's EVAL half and each sentence dataset's
    (sentence_n records, split alike)."""
    halves = {d: score_and_eval(m, d, n, seed, data_dir, setting) for d in word}
    scores = head_scores(m, {d: s for d, (s, _) in halves.items()}, n_sequences, length, seed, batch_size)
    ranked = rankings(scores.scores, max(sizes), given)
    all_ks = sorted({*sizes, *ks})
    curve = {name: all_ks if name in (*SCORES, GIVEN) else sizes for name in ranked}  # exclusive sets: at the sizes
    runs = ablation_plan(ranked, curve, m.arch.n_heads, n_random, seed)
    means = last_position_means(m, [s for s, _ in halves.values()], batch_size)
    evaluated = {d: e for d, (_, e) in halves.items()} | {d: eval_half(m, d, sentence_n, seed, data_dir, setting)
                                                          for d in sentence}
    ablations = {d: set_ablations(m, ps, runs, means, seed, batch_size) for d, ps in evaluated.items()}
    return HeadSetStudy(m.name, m.arch.n_layers, m.arch.n_heads, scores, ranked, tuple(sizes), all_ks, n_random,
                        ablations, list(word), list(sentence))


# --- the two-tower signature ------------------------------------------------------------------


@dataclass
class Signature:
    """One set's two-tower signature on the EVAL prompts: label-value MRR against layer-matched random
    heads, and the truth effect over the recency orders (attention on true minus false labels at equal
    distance) against the same draws."""

    mrr: torch.Tensor  # [N, S]: reciprocal rank a prompt (mean over its labels), in the S heads
    random_mrr: torch.Tensor  # [D, N, S]: the same in D layer-matched draws
    truth: recency.Effects | None  # the set's truth effect with its interval (None: too few inputs for one)
    truth_value: float  # the truth effect (also where no interval can be drawn)
    random_truth: torch.Tensor  # [D]: each draw's truth effect

    def carries(self) -> bool:
        """Both towers above random: the mean MRR and the truth effect above their draws' 95th percentiles."""
        p95 = lambda t: float(torch.quantile(t.double(), 0.95))  # noqa: E731
        return float(self.mrr.mean()) > p95(self.random_mrr.mean((1, 2))) and self.truth_value > p95(self.random_truth)


def set_cells(orders: recency.RecencyOrders, heads: Sequence[Head], index: dict[Head, int], rows: torch.Tensor) -> torch.Tensor:
    """[n, 2, D]: `RecencyOrders.cells` in `heads` (of the orders' heads, `index`), on `rows` [N] bool."""
    picked = replace(orders, heads=list(heads), attention=orders.attention[:, :, [index[tuple(h)] for h in heads]])
    return picked.cells()[rows]


def signatures(m: ICLModel, study: HeadSetStudy, k: int, n: int, names: Sequence[str] = SCORES, draws: int | None = None,
               seed: int = 0, data_dir: str | Path | None = None, setting: Setting = MAIN) -> dict[str, Signature]:
    """Each named set of size k: its `Signature` on the word datasets' EVAL halves (n records a
    dataset, as the study's), pooled; draws: layer-matched draws (default the study's)."""
    draws = study.n_random if draws is None else draws
    every = [(l, h) for l in range(m.arch.n_layers) for h in range(m.arch.n_heads)]
    index = {h: i for i, h in enumerate(every)}
    evals, orders, rows, clusters = {}, {}, {}, []
    for d in study.word:
        records = setting.records(d, n, seed, data_dir)
        evals[d] = eval_half(m, d, n, seed, data_dir, setting)
        orders[d] = recency.recency_orders(m, d, every, n, seed, data_dir, setting)
        rows[d] = ~input_halves(records, seed)
        ids = input_ids(records)[rows[d]]
        clusters.append(ids + sum(int(c.max()) + 1 for c in clusters))
    out = {}
    for name, heads in study.sets(k, names).items():
        ranks = [layer_matched_mrr(m, evals[d], heads, draws, seed) for d in study.word]
        random_heads = [same_layer_random_heads(heads, m.arch.n_heads, seed + i) for i in range(draws)]
        cells = torch.cat([set_cells(orders[d], heads, index, rows[d]) for d in study.word])
        random_truth = torch.tensor([recency.fit(torch.cat([set_cells(orders[d], r, index, rows[d]) for d in study.word]))[0]
                                     for r in random_heads])
        try:
            truth = recency.effects(cells, torch.cat(clusters))
        except CannotMeasure:
            truth = None
        out[name] = Signature(torch.cat([r for r, _ in ranks]), torch.cat([r for _, r in ranks], 1), truth,
                              recency.fit(cells)[0], random_truth)
    return out


def signature_table(signs: dict[str, Signature]) -> pd.DataFrame:
    """One row a set: its mean MRR, its draws' mean and 95th percentile, its truth effect (interval),
    the draws' mean and 95th percentile, and whether it carries both towers (`Signature.carries`)."""
    rows = []
    for name, s in signs.items():
        draws_mrr = s.random_mrr.mean((1, 2))
        ci = "too few inputs" if s.truth is None else f"{s.truth.truth_ci[0]:+.3f} to {s.truth.truth_ci[1]:+.3f}"
        rows.append({"set": name, "MRR": float(s.mrr.mean()), "random MRR": float(draws_mrr.mean()),
                     "random MRR p95": float(torch.quantile(draws_mrr.double(), 0.95)), "truth effect": s.truth_value,
                     "truth CI": ci, "random truth": float(s.random_truth.mean()),
                     "random truth p95": float(torch.quantile(s.random_truth.double(), 0.95)), "both towers": s.carries()})
    return pd.DataFrame(rows).set_index("set")
