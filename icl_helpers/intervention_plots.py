"""Figures of notebook 08: accuracy under head ablation, and bias before and after an
intervention. Each returns a matplotlib `Figure` not attached to pyplot."""
from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

IN_CONTEXT, RANDOM = "top in-context heads", "random heads"
PALETTE = {IN_CONTEXT: "#d62728", RANDOM: "#7f7f7f"}


def ablation_curves(curves: pd.DataFrame) -> Figure:
    """Accuracy against the number k of zeroed heads, one panel per dataset.

    curves: columns dataset, heads (IN_CONTEXT or RANDOM), draw, k, accuracy; random
    heads are drawn several times and shown as mean with a +-1 sd band.
    """
    datasets = list(dict.fromkeys(curves["dataset"]))
    fig = Figure(figsize=(4 * len(datasets), 3.6), layout="constrained")
    axes = fig.subplots(1, len(datasets), sharey=True, squeeze=False)[0]
    for ax, name in zip(axes, datasets):
        sns.lineplot(data=curves[curves["dataset"] == name], x="k", y="accuracy", hue="heads", palette=PALETTE,
                     errorbar="sd", marker="o", markersize=4, ax=ax, legend=ax is axes[-1])
        ax.set(title=name, xlabel="heads zeroed (k)", ylabel="accuracy", ylim=(-0.02, 1.02))
    fig.suptitle("Zeroing the top-k in-context heads vs k random heads (band: +-1 sd over draws)")
    return fig


def bias_change(effects: pd.DataFrame) -> Figure:
    """Bias rate and accuracy before and after each intervention.

    effects: columns bias, measure ("bias rate", "accuracy, biased prompts", "accuracy,
    standard prompts"), condition ("plain", "intervened"), value.
    """
    biases = list(dict.fromkeys(effects["bias"]))
    fig = Figure(figsize=(5.5 * len(biases), 3.8), layout="constrained")
    axes = fig.subplots(1, len(biases), sharey=True, squeeze=False)[0]
    for ax, name in zip(axes, biases):
        part = effects[effects["bias"] == name]
        sns.barplot(data=part, x="measure", y="value", hue="condition", ax=ax, palette=["#7f7f7f", "#1f77b4"])
        for bars in ax.containers:
            ax.bar_label(bars, fmt="{:.0%}", fontsize=8)
        ax.set(title=name, xlabel="", ylabel="share of prompts", ylim=(0, 1.12))
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("Label biases before and after each intervention")
    return fig
