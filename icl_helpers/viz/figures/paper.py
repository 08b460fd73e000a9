"""The paper's figures (Figs. 2-11 and its appendices, notebooks 01-07) and the EMNLP version's
interventions (notebook 08), drawn from what the studies return."""
from __future__ import annotations

import math
import textwrap
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ...core.heads import Head, head_name
from ...studies.ablation import RANDOM
from ...studies.biases import BiasEffect
from ...studies.subvalues import POSITION_KINDS
from .style import FALSE, MAX_HEIGHT, MAX_WIDTH, PALETTE, TRUE, figure
from .tables import visible


def layer_increase(attn: torch.Tensor, ffn: torch.Tensor, title: str) -> Figure:
    """Fig. 2: log-probability increase of each attention and FFN layer, attn/ffn [L]."""
    fig, ax = figure(8, 3.5)
    layers = np.arange(len(attn))
    ax.bar(layers - 0.2, attn.numpy(), width=0.4, label="attention")
    ax.bar(layers + 0.2, ffn.numpy(), width=0.4, label="FFN")
    ax.axhline(0, color="black", lw=0.5)
    ax.set(xlabel="layer", ylabel="log-probability increase", title=title)
    ax.legend()
    return fig


def head_heatmaps(panels: dict[str, tuple[torch.Tensor, Sequence[Head]]], title: str) -> Figure:
    """Figs. 3-4, 12-15: every head's mean log-probability increase, one panel a dataset side by
    side; panels maps a dataset to (its scores [L, H], its top heads, boxed). Each panel has
    its own colour scale, symmetric about 0."""
    L, H = next(iter(panels.values()))[0].shape
    n = len(panels)
    fig, axes = figure(min((2 + 0.3 * H) * n, MAX_WIDTH), min(1.8 + 0.15 * L, MAX_HEIGHT), ncols=n)
    for ax, (name, (scores, top)) in zip(np.atleast_1d(axes), panels.items()):
        _heatmap_on(ax, scores, top, "mean increase" if ax is np.atleast_1d(axes)[-1] else None)
        ax.set_title(name)
    k = len(next(iter(panels.values()))[1])
    fig.suptitle(f"{title}: mean log-probability increase of every head (boxed: top {k})")
    return fig


def _heatmap_on(ax, scores: torch.Tensor, top: Sequence[Head], bar_label: str | None) -> None:
    """Every head's score [L, H] on a scale symmetric about 0, layers upwards, the top heads boxed."""
    lim = float(scores.abs().max())
    sns.heatmap(scores.numpy(), ax=ax, cmap="RdBu_r", center=0, vmin=-lim, vmax=lim,
                cbar_kws={"label": bar_label} if bar_label else {})
    for l, h in top:
        ax.add_patch(Rectangle((h, l), 1, 1, fill=False, edgecolor="black", lw=1.5))
    ax.set(xlabel="head", ylabel="layer")
    ax.invert_yaxis()


def overlap_heatmap(overlap: torch.Tensor, names: Sequence[str], k: int) -> Figure:
    """How many of the top-k heads two datasets share, overlap [D, D]."""
    fig, ax = figure(1.5 + 0.9 * len(names), 1 + 0.8 * len(names))
    sns.heatmap(overlap.numpy(), ax=ax, annot=True, fmt="d", cmap="Greens", vmin=0, vmax=k,
                xticklabels=names, yticklabels=names, cbar_kws={"label": f"shared heads of the top {k}"})
    ax.set(xlabel="dataset", ylabel="dataset", title=f"Top-{k} in-context heads shared between datasets")
    return fig


def log_mrr_axis(ax: Axes) -> None:
    """A log y axis for an MRR (a reciprocal rank, 1 the top), its ticks written as plain decimals
    (0.1, 0.2, 0.5), not powers of ten: the minor ticks labelled too over one decade, at 2 and 5
    over up to three (two decades and a half would name two ticks alone), none over more (their
    labels would print over each other)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda value, _: _minor_label(ax, value)))
    ax.set_ylabel("MRR of the label's own token\n(1 = ranked first; log scale)")


def _minor_label(ax: Axes, value: float) -> str:
    """A log axis's minor tick label (`log_mrr_axis`): by how many decades the axis spans."""
    low, high = sorted(ax.get_ylim())
    decades = math.log10(high / low) if low > 0 else math.inf
    leading = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
    return f"{value:g}" if decades <= 1 or (decades <= 3 and leading in (2, 5)) else ""


def mrr_bars(heads: Sequence[Head], series: dict[str, torch.Tensor], title: str) -> Figure:
    """Fig. 5: label-value MRR [S] of each in-context head, one bar a series (e.g. the head,
    and a random head of its layer; or each label word in either)."""
    names = [head_name(h) for h in heads]
    df = pd.DataFrame([{"head": h, "MRR": float(v), "which": name} for name, mrr in series.items()
                       for h, v in zip(names, mrr)])
    fig, ax = figure(min(12, max(6, 0.15 * len(heads) * len(series) + 2)), 3.8)
    sns.barplot(df, x="head", y="MRR", hue="which", palette="Paired" if len(series) > 2 else None, ax=ax)
    log_mrr_axis(ax)
    sns.move_legend(ax, "upper left", bbox_to_anchor=(1, 1), title=None)  # clear of the bars
    ax.set(xlabel="in-context head (layer-head)", title=title)
    ax.tick_params(axis="x", rotation=90)
    return fig


def head_by_dataset(head: Head, mrr: dict[str, tuple[torch.Tensor, torch.Tensor]],
                    attention: dict[str, tuple[torch.Tensor, torch.Tensor]], title: str) -> Figure:
    """Appendix D: one head on each dataset. Left, its label-value MRR against random heads of
    its layer, mrr[dataset] = (head [N], draws [D, N]) (bar: the draws' mean, line: their 95th
    percentile); right, its summed attention on true and false labels, attention[dataset] =
    (true [N], false [N])."""
    fig, (left, right) = figure(10, 4.4, ncols=2)
    x, names = np.arange(len(mrr)), list(mrr)
    ours = [float(o.mean()) for o, _ in mrr.values()]
    draws = [r.mean(1) for _, r in mrr.values()]
    left.bar(x - 0.2, ours, width=0.4, label=f"head {head_name(head)}")
    left.bar(x + 0.2, [float(d.mean()) for d in draws], width=0.4, color=PALETTE[RANDOM],
             label=f"random head of layer {head[0]} ({len(draws[0])} draws)")
    left.scatter(x + 0.2, [float(torch.quantile(d.double(), 0.95)) for d in draws], marker="_", s=300, color="black",
                 label="95th percentile of the draws", zorder=3)
    log_mrr_axis(left)
    left.set(xticks=x, xticklabels=names, xlabel="dataset", title="label-value MRR")
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=1)  # clear of the bars
    df = pd.DataFrame([{"dataset": d, "attention": float(v), "labels": kind} for d, pair in attention.items()
                       for kind, values in zip(("true labels", "false labels"), pair) for v in values])
    sns.barplot(df, x="dataset", y="attention", hue="labels", palette=[TRUE, FALSE], errorbar="sd", ax=right)
    right.set(xlabel="dataset", ylabel="summed attention weight\n(bars: mean; lines: ±1 SD over prompts)",
              title="attention from the last position")
    sns.move_legend(right, "upper center", bbox_to_anchor=(0.5, -0.2), ncols=2, title=None)
    fig.suptitle(f"{title}: head {head_name(head)}")
    return fig


def rank_hist(ranks: torch.Tensor, random_ranks: torch.Tensor, head: Head, random_head: Head, title: str) -> Figure:
    """Ranks (1 = top) of label values' own tokens in one head and in a random head, [n] each."""
    fig, ax = figure(6, 3.5)
    top = max(float(ranks.max()), float(random_ranks.max()), 2.0)
    bins = np.logspace(0, np.log10(top), 30)
    ax.hist(ranks.numpy(), bins=bins, alpha=0.7, label=f"head {head_name(head)}")
    ax.hist(random_ranks.numpy(), bins=bins, alpha=0.7, label=f"random head {head_name(random_head)}")
    ax.set_xscale("log")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="rank of the label's own token (1 = top)", ylabel="label positions",
           title=f"{title}: label-value ranks, head {head_name(head)}")
    ax.legend()
    return fig


def label_attention_bars(heads: Sequence[Head], true: torch.Tensor, false: torch.Tensor, title: str) -> Figure:
    """Fig. 6: mean attention from the last position to true and false labels, [N, S] each."""
    names = [head_name(h) for h in heads]
    df = pd.concat([_long(true, names, "true labels"), _long(false, names, "false labels")])
    fig, ax = figure(max(6, 0.45 * len(heads) + 2), 3.8)
    sns.barplot(df, x="head", y="attention", hue="labels", palette=[TRUE, FALSE], errorbar="sd", ax=ax)
    ax.set(xlabel="in-context head (layer-head)", ylabel="summed attention weight", title=title)
    ax.tick_params(axis="x", rotation=90)
    return fig


def _long(values: torch.Tensor, names: list[str], labels: str) -> pd.DataFrame:
    """[N, S] -> long table (head, attention, labels)."""
    N = values.shape[0]
    return pd.DataFrame({"head": names * N, "attention": values.flatten().numpy(), "labels": labels})


def head_attention_hist(true: torch.Tensor, false: torch.Tensor, head: Head, title: str) -> Figure:
    """One head's summed attention on true and on false labels over the prompts, [N] each."""
    fig, ax = figure(6, 3.5)
    bins = np.linspace(0, max(float(true.max()), float(false.max()), 1e-3), 30)
    ax.hist(true.numpy(), bins=bins, alpha=0.7, color=TRUE, label=f"true labels (mean {true.mean():.3f})")
    ax.hist(false.numpy(), bins=bins, alpha=0.7, color=FALSE, label=f"false labels (mean {false.mean():.3f})")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="summed attention weight from the last position", ylabel="prompts",
           title=f"{title}: head {head_name(head)}")
    ax.legend()
    return fig


def prompt_attention(tokens: Sequence[str], alpha: torch.Tensor, true: torch.Tensor, false: torch.Tensor,
                     head: Head, title: str) -> Figure:
    """Attention of the last position over one prompt's tokens, alpha [T]; label masks [T]."""
    fig, ax = figure(max(6, 0.25 * len(tokens) + 1), 3.8)
    prompt_attention_on(ax, tokens, alpha, true, false)
    ax.set_title(f"{title}: attention from the last position, head {head_name(head)}")
    return fig


def prompt_attention_on(ax: Axes, tokens: Sequence[str], alpha: torch.Tensor, true: torch.Tensor,
                        false: torch.Tensor) -> None:
    """`prompt_attention`'s bars on one axis: alpha [T] over the tokens, labels coloured (masks [T])."""
    is_label = (true | false).numpy()
    colors = np.where(true.numpy(), TRUE, np.where(false.numpy(), FALSE, "#999999"))
    x = np.arange(len(tokens))
    ax.bar(x, alpha.numpy(), color=colors)
    # a stub under the axis at each label position, so a label shows however little attention it gets
    ax.bar(x[is_label], -0.03 * max(float(alpha.max()), 1e-6), color=colors[is_label])
    ax.set_xticks(x, [visible(t) for t in tokens], rotation=90, fontsize=10, family="monospace")
    for tick, label, color in zip(ax.get_xticklabels(), is_label, colors):
        tick.set_color(color if label else "black")
    ax.set(xlabel="prompt token (blue: true labels, red: false labels, marked under the axis; ␣ a space)",
           ylabel="attention weight")


def attention_vs_increase(weight: torch.Tensor, increase: torch.Tensor, title: str, xlabel: str, ylabel: str,
                          is_true: torch.Tensor | None = None) -> Figure:
    """Fig. 7: attention weight against log-probability increase, [n] each (one point per
    (prompt, head), or per (prompt, head, label position) coloured by is_true [n] bool), with
    the mean increase in weight bins."""
    fig, ax = figure(6, 4)
    if is_true is None:
        ax.scatter(weight.numpy(), increase.numpy(), s=6, alpha=0.4, color=TRUE)
    else:
        for mask, color, name in ((is_true, TRUE, "true label"), (~is_true, FALSE, "false label")):
            ax.scatter(weight[mask].numpy(), increase[mask].numpy(), s=6, alpha=0.4, color=color, label=name)
    edges = np.linspace(0, float(weight.max()) + 1e-9, 11)
    idx = np.digitize(weight.numpy(), edges) - 1
    centres = [(edges[i] + edges[i + 1]) / 2 for i in range(10) if (idx == i).any()]
    means = [increase.numpy()[idx == i].mean() for i in range(10) if (idx == i).any()]
    ax.plot(centres, means, color="black", marker="o", label="bin mean")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend()
    return fig


def variant_attention(heads: Sequence[Head], attention: dict[str, tuple[torch.Tensor, torch.Tensor]],
                      title: str) -> Figure:
    """Figs. 8-11: mean summed attention on true and false labels per head, one bar group per
    prompt variant; attention maps variant -> (true [N, S], false [N, S])."""
    names = [head_name(h) for h in heads]
    fig, axes = figure(min(max(8, 0.7 * len(heads) + 2), MAX_WIDTH), 3.8, ncols=2)
    for ax, which, color in zip(axes, (0, 1), (TRUE, FALSE)):
        df = pd.concat([_long(pair[which], names, variant) for variant, pair in attention.items()])
        sns.barplot(df, x="head", y="attention", hue="labels", errorbar=None, ax=ax,
                    palette=sns.light_palette(color, n_colors=len(attention) + 1)[1:])
        kind = "true" if which == 0 else "false"
        ax.set(xlabel="in-context head (layer-head)", ylabel=f"summed attention on {kind} labels",
               title=f"{kind} labels")
        ax.tick_params(axis="x", rotation=90)
        ax.legend(title=None)
    fig.suptitle(title)
    return fig


def true_label_attention(heads: Sequence[Head], summed: dict[str, torch.Tensor], title: str,
                         per_label: dict[str, torch.Tensor] | None = None) -> Figure:
    """Figs. 10 and 11, head by head, one bar a prompt variant: the summed attention on the true labels,
    the measure the verdict reads, and below it, where given, the attention a true-label position gets
    (our per-label row); each maps variant -> [N, S]."""
    names = [head_name(h) for h in heads]
    panels = [(summed, "summed attention on the true labels\n(the verdict's measure)")]
    if per_label is not None:
        panels.append((per_label, "attention a true label gets\n(each label's: our row)"))
    fig, axes = figure(max(6, 0.6 * len(heads) + 2), 3.6 * len(panels), nrows=len(panels))
    axes = list(axes) if per_label is not None else [axes]
    palette = sns.light_palette(TRUE, n_colors=len(summed) + 1)[1:]
    for ax, (weight, what) in zip(axes, panels):
        df = pd.concat([_long(w, names, variant) for variant, w in weight.items()])
        sns.barplot(df, x="head", y="attention", hue="labels", errorbar=None, ax=ax, palette=palette, legend=ax is axes[0])
        ax.set(xlabel="head in both word datasets' top 20 (layer-head)", ylabel=what)
        ax.tick_params(axis="x", rotation=90)
    axes[0].legend(title=None, loc="upper left", bbox_to_anchor=(1, 1))  # one key for both, beside the bars
    fig.suptitle(title)
    return fig


def order_increase(increase: torch.Tensor, title: str) -> Figure:
    """Appendix E: each (prompt, head)'s increase added alone (x) against added after the heads
    before it in a random order of its layer (y), from increase [N, S, 3] (`studies.order`)."""
    fig, ax = figure(4.6, 4.2)
    alone, random = increase[..., 0].flatten(), increase[..., 1].flatten()
    ax.scatter(alone, random, s=6, alpha=0.4, color=TRUE)
    low, high = float(min(alone.min(), random.min())), float(max(alone.max(), random.max()))
    ax.plot([low, high], [low, high], color="#7f7f7f", lw=1, ls="--")
    ax.set(xlabel="increase added alone on x_l", ylabel="increase after a random subset of its layer", title=title)
    return fig


def accuracy_change(accuracy: dict[str, float], title: str) -> Figure:
    """Accuracy of each prompt variant (e.g. "sst2, imbalanced"), in [0, 1]: one horizontal bar a
    variant, its name beside it on one line and its value at its end, inside the frame."""
    names = [name.replace("\n", ", ") for name in accuracy]
    fig, ax = figure(6, 1 + 0.3 * len(names))
    bars = ax.barh(names, list(accuracy.values()), color="#7f7f7f")
    ax.bar_label(bars, fmt="{:.1%}", padding=3)
    ax.set(xlabel="accuracy", ylabel="prompts", xlim=(0, 1.25), xticks=np.linspace(0, 1, 5), title=title)
    ax.invert_yaxis()  # the first variant on top
    return fig


def top_positions(heads: Sequence[Head], shares: torch.Tensor, title: str) -> Figure:
    """Appendix E: where each head's largest position-level increase lies, shares [S, len(POSITION_KINDS)]
    of the prompts (`studies.subvalues.kind_shares`), one stacked bar a head."""
    fig, ax = figure(max(6, 0.45 * len(heads) + 3), 3.8)
    names, bottom = [head_name(h) for h in heads], np.zeros(len(heads))
    for kind, share, color in zip(POSITION_KINDS, shares.T.numpy(), (TRUE, FALSE, "#ff9896", "#7f7f7f", "#c7c7c7")):
        ax.bar(names, share, bottom=bottom, color=color, label=kind)
        bottom += share
    ax.set(xlabel="in-context head (layer-head)", ylabel="share of prompts", ylim=(0, 1), title=title)
    ax.tick_params(axis="x", rotation=90)
    ax.legend(title="largest increase at", loc="upper left", bbox_to_anchor=(1, 1))
    return fig


def ablation_curves(curves: pd.DataFrame) -> Figure:
    """Accuracy against the number k of ablated heads, one panel per dataset.

    curves: columns dataset, heads (IN_CONTEXT or RANDOM), draw, k, accuracy; random
    heads are drawn several times and shown as mean with a +-1 sd band.
    """
    datasets = list(dict.fromkeys(curves["dataset"]))
    fig = Figure(figsize=(4 * len(datasets), 3.6), layout="constrained")
    axes = fig.subplots(1, len(datasets), sharey=True, squeeze=False)[0]
    for ax, name in zip(axes, datasets):
        sns.lineplot(data=curves[curves["dataset"] == name], x="k", y="accuracy", hue="heads", palette=PALETTE,
                     errorbar="sd", marker="o", markersize=4, ax=ax, legend=ax is axes[-1])
        ax.set(title=name, xlabel="heads ablated (k)", ylabel="accuracy", ylim=(-0.02, 1.02))
    fig.suptitle("Ablating the top-k in-context heads vs k layer-matched random heads (band: +-1 sd over draws)")
    return fig


def bias_change(effects: dict[str, BiasEffect]) -> Figure:
    """Bias rate and accuracy before and after each intervention, one panel per named effect."""
    effects = pd.concat([effect.table(name) for name, effect in effects.items()])
    biases = list(dict.fromkeys(effects["bias"]))
    fig = Figure(figsize=(5.5 * len(biases), 3.8), layout="constrained")
    axes = fig.subplots(1, len(biases), sharey=True, squeeze=False)[0]
    for ax, name in zip(axes, biases):
        part = effects[effects["bias"] == name]
        sns.barplot(data=part, x="measure", y="value", hue="condition", ax=ax, palette=["#7f7f7f", "#1f77b4"])
        for bars in ax.containers:
            ax.bar_label(bars, fmt="{:.0%}")
        ax.set(title=name, xlabel="measure", ylabel="share of prompts", ylim=(0, 1.15))
        ax.set_xticks(ax.get_xticks(), [textwrap.fill(t.get_text(), 16) for t in ax.get_xticklabels()])
    fig.suptitle("Label biases before and after each intervention")
    return fig
