"""Every figure draws, with a title and labelled axes."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from icl_helpers.studies.ablation import IN_CONTEXT, RANDOM
from icl_helpers.studies.biases import BiasCount, BiasEffect
from icl_helpers.viz import figures

g = torch.Generator().manual_seed(0)
HEADS = [(3, 1), (5, 0), (5, 2)]
N, S, L, H = 12, len(HEADS), 6, 4
r = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731

FIGURES = {
    "layer_increase": lambda: figures.layer_increase(r(L) - 0.5, r(L) - 0.5, "t"),
    "head_heatmaps": lambda: figures.head_heatmaps({"a": (r(L, H) - 0.5, HEADS), "b": (r(L, H) - 0.5, HEADS[:1])}, "t"),
    "overlap_heatmap": lambda: figures.overlap_heatmap(torch.tensor([[3, 1], [1, 3]]), ["a", "b"], 3),
    "mrr_bars": lambda: figures.mrr_bars(HEADS, {"head": r(S), "random head": r(S) / 10}, "t"),
    "head_by_dataset": lambda: figures.head_by_dataset((3, 1), {d: (r(N), r(20, N) / 5) for d in ("a", "b")},
                                                      {d: (r(N), r(N) / 2) for d in ("a", "b")}, "t"),
    "rank_hist": lambda: figures.rank_hist(r(40) * 100 + 1, r(40) * 1000 + 1, (3, 1), (3, 0), "t"),
    "label_attention_bars": lambda: figures.label_attention_bars(HEADS, r(N, S), r(N, S) / 3, "t"),
    "head_attention_hist": lambda: figures.head_attention_hist(r(N), r(N), (3, 1), "t"),
    "prompt_attention": lambda: figures.prompt_attention(list("abcd"), r(4), torch.tensor([0, 1, 0, 0]).bool(),
                                                       torch.tensor([1, 0, 0, 0]).bool(), (3, 1), "t"),
    "attention_vs_increase": lambda: figures.attention_vs_increase(r(50), r(50) - 0.2, "t", "x", "y"),
    "attention_vs_increase (labels)": lambda: figures.attention_vs_increase(r(50), r(50) - 0.2, "t", "x", "y", r(50) > 0.5),
    "variant_attention": lambda: figures.variant_attention(HEADS, {"a": (r(N, S), r(N, S)), "b": (r(N, S), r(N, S))}, "t"),
    "top_positions": lambda: figures.top_positions(HEADS, torch.softmax(r(S, 5), 1), "t"),
    "accuracy_change": lambda: figures.accuracy_change({"balanced": 0.9, "imbalanced": 0.7}, "t"),
    "ablation_curves": lambda: figures.ablation_curves(pd.DataFrame(
        [dict(dataset=d, heads=h, draw=0, k=k, accuracy=float(r(1))) for d in "ab" for h in (IN_CONTEXT, RANDOM) for k in (0, 1, 5)])),
    "bias_change": lambda: figures.bias_change({
        name: BiasEffect(BiasCount(10, 8, 9), BiasCount(10, 5, 7), (0.2, 0.4), (0.9, 0.85)) for name in ("a", "b")}),
}


@pytest.mark.parametrize("name", FIGURES)
def test_figure_has_title_and_labelled_axes(name):
    fig = FIGURES[name]()
    assert isinstance(fig, Figure)
    fig.canvas.draw()
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_xlabel() and ax.get_ylabel(), name
        assert ax.get_title() or fig.get_suptitle(), name


@pytest.mark.parametrize("L", [12, 30, 36, 60])
def test_head_heatmaps_fit_a_laptop_screen(L):
    """Four datasets side by side, one screen: at most 700 px high and 1,400 wide."""
    fig = figures.head_heatmaps({d: (torch.rand(L, 20, generator=g) - 0.5, HEADS) for d in "abcd"}, "t")
    width, height = fig.get_size_inches() * fig.dpi
    assert height <= 700 and width <= 1400


def test_head_heatmaps_box_each_panels_own_top_heads():
    fig = figures.head_heatmaps({"a": (torch.zeros(L, H), HEADS), "b": (torch.zeros(L, H), [(0, 2)])}, "t")
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title() for ax in panels] == ["a", "b"]
    assert [sorted((p.get_y(), p.get_x()) for p in ax.patches) for ax in panels] == [sorted(HEADS), [(0, 2)]]


def test_token_table_shows_every_token_with_its_spaces():
    table = pd.DataFrame({"vector": ["label value"], "position": [2], "token": [" bar"],
                          "top tokens": [(" bar", "Bar", " \\xe2\\x80", "\n", " a long token, with a comma")]})
    html = figures.token_table(table, "model, dataset (N=3), prompt 0, head 1-2").to_html()
    assert "␣bar  Bar  ␣\\xe2\\x80  ↵  ␣a␣long␣token,␣with␣a␣comma" in html
    assert "model, dataset (N=3), prompt 0, head 1-2" in html and ">␣bar<" in html


def test_table_image_holds_every_cell_and_the_title():
    table = pd.DataFrame({"vector": ["label value", "last query"], "top tokens": ["␣bar  ␣foo", "\\xe2  ␣:"]})
    fig = figures.table_image(table, "gpt2, toy (N=3), prompt 0, head 1-2")
    ax = fig.axes[0]
    texts = sorted(c.get_text().get_text() for c in ax.tables[0].get_celld().values())
    assert texts == sorted(["vector", "top tokens", "label value", "last query", "␣bar  ␣foo", "\\xe2  ␣:"])
    assert ax.get_title() == "gpt2, toy (N=3), prompt 0, head 1-2"


def test_neuron_table_shows_every_neuron_with_its_tokens_decoded():
    """An HTML table (a browser draws any script), and its static image with an escape where the font lacks a glyph."""
    table = pd.DataFrame({"FFN layer": [27, 27], "neuron": [5, 9], "mean increase": [0.25, -0.5],
                          "top tokens": [(" foo", "Foo"), ("\n", " bar", "的")]})
    styled = figures.token_table(table, "m, d (N=3): top neurons")
    html = styled.to_html()
    for cell in ("27", "9", "0.250", "-0.500", "␣foo  Foo", "↵  ␣bar  的"):
        assert f">{cell}</td>" in html, cell
    assert "<caption>m, d (N=3): top neurons</caption>" in html
    image = figures.table_image(styled.data)
    texts = {c.get_text().get_text() for c in image.axes[0].tables[0].get_celld().values()}
    assert "↵  ␣bar  \\u7684" in texts
