"""Notebook 09's figures: the head types of the literature beside the in-context heads, their
sets of equal size side by side (`studies.head_sets`)."""
from __future__ import annotations

import itertools
import textwrap
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

from ...core.heads import Head, head_name
from ...studies.ablation import RANDOM
from .paper import prompt_attention_on
from .style import MAX_WIDTH, PALETTE, figure

SET_COLOURS = ("#d62728", "#1f77b4", "#17becf", "#2ca02c", "#9467bd", "#ff7f0e", "#bcbd22", "#8c564b", "#e377c2")  # a set each


def score_scatter(scores: dict[str, torch.Tensor], x: str, title: str) -> Figure:
    """Every head as a point, score `x` (e.g. in-context) against each other score, one panel each (at
    most 4 a row), coloured by layer; scores maps a name to [L, H]."""
    others = [name for name in scores if name != x]
    L = scores[x].shape[0]
    ncols = min(4, len(others))
    rows = -(-len(others) // ncols)
    fig = Figure(figsize=(min(3.2 * ncols + 1, MAX_WIDTH), 3.2 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, ncols, squeeze=False).flatten()
    for ax in axes[len(others):]:
        ax.remove()  # the last row's spare panels
    axes = axes[:len(others)]
    layers = np.repeat(np.arange(L), scores[x].shape[1])
    for ax, name in zip(axes, others):
        points = ax.scatter(scores[x].flatten().numpy(), scores[name].flatten().numpy(), c=layers, cmap="viridis",
                            vmin=0, vmax=L - 1, s=10, alpha=0.8)
        ax.set(xlabel=f"{x} score", ylabel=f"{name} score")
    fig.colorbar(points, ax=axes, label="layer")
    fig.suptitle(f"{title}: every head, one point each")
    return fig


def overlap_diagram(shared: torch.Tensor, rho: torch.Tensor, names: Sequence[str], k: int, n_heads: int) -> Figure:
    """How alike the head types are: left, heads two top-k sets share (shared [S, S], chance k^2/N in
    the title); right, Spearman's rho of their scores over all N heads (rho [S, S])."""
    S = len(names)
    fig, (left, right) = figure(min(2.6 * S + 2, MAX_WIDTH), 1.4 + 0.75 * S, ncols=2)
    wrapped = [textwrap.fill(n, 12) for n in names]
    sns.heatmap(shared.numpy(), ax=left, annot=True, fmt="d", cmap="Greens", vmin=0, vmax=k, xticklabels=wrapped,
                yticklabels=wrapped, cbar_kws={"label": "shared heads"})
    left.set_title(f"heads shared by the top-{k} sets\n(chance: {k * k / n_heads:.1f} of {k})")
    sns.heatmap(rho.numpy(), ax=right, annot=True, fmt=".2f", cmap="RdBu_r", vmin=-1, vmax=1, xticklabels=wrapped,
                yticklabels=wrapped, cbar_kws={"label": "Spearman's rho"})
    right.set_title(f"rank correlation of the scores\n(all {n_heads} heads)")
    for ax in (left, right):
        ax.tick_params(axis="x", rotation=90 if S > 5 else 45)  # upright where many sets narrow the columns
        ax.tick_params(axis="y", rotation=0)
        ax.set(xlabel="score", ylabel="score")
    return fig


def layer_spread(counts: torch.Tensor, names: Sequence[str]) -> Figure:
    """Where each set lies: heads of each set (rows) in each layer (columns), counts [S, L]."""
    fig, ax = figure(min(2.5 + 0.35 * counts.shape[1], MAX_WIDTH), 1 + 0.45 * len(names))
    sns.heatmap(counts.numpy(), ax=ax, annot=True, fmt="d", cmap="Blues", yticklabels=list(names), cbar=False)
    ax.set(xlabel="layer", ylabel="set", title="heads of each set in each layer")
    return fig


def set_ablation_curves(curves: pd.DataFrame, floors: dict[str, float], title: str) -> Figure:
    """Top-1 accuracy against the number k of heads ablated, one panel a set: the set's first k heads
    (coloured) and its layer-matched random draws (grey, mean with a +-1 sd band); the zero-shot and
    shuffled-label floors dashed. curves: columns set, heads ("set" or "random"), draw, k, accuracy."""
    names = list(dict.fromkeys(curves["set"]))
    fig = Figure(figsize=(min(2.6 * len(names) + 0.6, MAX_WIDTH), 3.4), layout="constrained")
    axes = fig.subplots(1, len(names), sharey=True, squeeze=False)[0]
    for ax, name, colour in zip(axes, names, itertools.cycle(SET_COLOURS)):
        part = curves[curves["set"] == name]
        sns.lineplot(data=part, x="k", y="accuracy", hue="heads", palette={"set": colour, "random": PALETTE[RANDOM]},
                     errorbar="sd", marker="o", markersize=4, ax=ax, legend=False)
        for (floor, value), style in zip(floors.items(), ("--", ":")):
            ax.axhline(value, color="black", lw=0.8, ls=style, label=f"{floor} ({value:.0%})")
        ax.set(title=textwrap.fill(name, 22), xlabel="heads ablated (k)", ylabel="top-1 accuracy", ylim=(-0.02, 1.02))
    handles = [Line2D([], [], color="black", marker="o", label="the set's first k"),
               Line2D([], [], color=PALETTE[RANDOM], marker="o", label="layer-matched random (+-1 sd)"),
               *axes[0].get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    fig.suptitle(title)
    return fig


def signature_bars(table: pd.DataFrame, title: str) -> Figure:
    """The two towers per set (rows of `studies.head_sets.signature_table`): label-value MRR (log) and
    the truth effect at equal distance, each beside its layer-matched random draws (mean bar, 95th
    percentile tick)."""
    fig, (left, right) = figure(min(3 + 1.6 * len(table), MAX_WIDTH), 4.4, ncols=2)
    x = np.arange(len(table))
    for ax, (ours, mean, p95) in zip((left, right), (("MRR", "random MRR", "random MRR p95"),
                                                     ("truth effect", "random truth", "random truth p95"))):
        ax.bar(x - 0.2, table[ours], width=0.4, color=[SET_COLOURS[i % len(SET_COLOURS)] for i in range(len(table))])
        ax.bar(x + 0.2, table[mean], width=0.4, color=PALETTE[RANDOM])
        ax.scatter(x + 0.2, table[p95], marker="_", s=300, color="black", zorder=3)
        ax.set_xticks(x, [textwrap.fill(n, 14) for n in table.index], rotation=90 if len(table) > 5 else 45,
                      ha="center" if len(table) > 5 else "right")
        ax.set_xlabel("set")
    left.set_yscale("log")
    left.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    left.yaxis.set_minor_formatter(NullFormatter())
    left.set(ylabel="MRR of the label's own token\n(1 = ranked first; log scale)",
             title="value tower: label values rank their label")
    right.axhline(0, color="black", lw=0.5)
    right.set(ylabel="attention on a true minus a false label\nat equal distance (truth effect)",
              title="query-key tower: true labels preferred")
    handles = [Patch(color=SET_COLOURS[0], label="the set (colour as in the curves)"),
               Patch(color=PALETTE[RANDOM], label="layer-matched random draws: mean"),
               Line2D([], [], color="black", marker="_", ls="", markersize=15, label="random draws: 95th percentile")]
    fig.legend(handles=handles, loc="outside lower center", ncols=3)
    fig.suptitle(title)
    return fig


def head_profile(values: dict[str, tuple[float, float]], tokens: Sequence[str], alpha: torch.Tensor, true: torch.Tensor,
                 false: torch.Tensor, head: Head, title: str) -> Figure:
    """One head: left, its percentile among all heads in each score (values: name -> (score,
    percentile)), its raw score at each bar's end; right, its attention from the last position over
    one prompt (alpha [T], label masks [T])."""
    fig = Figure(figsize=(min(4.5 + 0.25 * len(tokens), MAX_WIDTH), 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1, max(1.5, 0.07 * len(tokens))])
    names = list(values)
    bars = left.barh(names, [p for _, p in values.values()], color=SET_COLOURS[: len(names)])
    left.bar_label(bars, labels=[f"{v:.3g}" for v, _ in values.values()], padding=3)
    left.set(xlim=(0, 1.5), xticks=[0, 0.5, 1], xlabel="percentile among all heads\n(its score at the bar's end)",
             ylabel="score", title="its scores")
    left.invert_yaxis()
    prompt_attention_on(right, tokens, alpha, true, false)
    right.set_title("its attention from the last position")
    fig.suptitle(f"{title}: head {head_name(head)}")
    return fig
