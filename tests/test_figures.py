"""Every figure draws, with a title and labelled axes."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import findfont, get_font
from matplotlib.text import Text

from icl_helpers.model.offline import OFFLINE_MODELS
from icl_helpers.paths import REPO_ROOT
from icl_helpers.studies.ablation import IN_CONTEXT, RANDOM
from icl_helpers.studies.biases import BiasCount, BiasEffect
from icl_helpers.verdicts.compare import read_reports
from icl_helpers.viz import figures, report_figures

g = torch.Generator().manual_seed(0)
HEADS = [(3, 1), (5, 0), (5, 2)]
N, S, L, H = 12, len(HEADS), 6, 4
r = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
SETS = ["in-context", "induction", "prefix-matching", "previous-token", "function-vector", "task-recognition",
        "task-learning"]  # notebook 09's head types
NS = len(SETS)

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
    "true_label_attention": lambda: figures.true_label_attention(HEADS, {"a": r(N, S), "b": r(N, S)}, "t"),
    "true_label_attention (per label)": lambda: figures.true_label_attention(HEADS, {"a": r(N, S)}, "t", {"a": r(N, S)}),
    "top_positions": lambda: figures.top_positions(HEADS, torch.softmax(r(S, 5), 1), "t"),
    "accuracy_change": lambda: figures.accuracy_change({"balanced": 0.9, "imbalanced": 0.7}, "t"),
    "ablation_curves": lambda: figures.ablation_curves(pd.DataFrame(
        [dict(dataset=d, heads=h, draw=0, k=k, accuracy=float(r(1))) for d in "ab" for h in (IN_CONTEXT, RANDOM) for k in (0, 1, 5)])),
    "bias_change": lambda: figures.bias_change({
        name: BiasEffect(BiasCount(10, 8, 9), BiasCount(10, 5, 7), (0.2, 0.4), (0.9, 0.85)) for name in ("a", "b")}),
    "score_scatter": lambda: figures.score_scatter({name: r(L, H) for name in SETS}, SETS[0], "t"),
    "overlap_diagram": lambda: figures.overlap_diagram(torch.randint(0, 4, (NS, NS), generator=g), r(NS, NS) * 2 - 1, SETS, 3, L * H),
    "layer_spread": lambda: figures.layer_spread(torch.randint(0, 4, (NS, L), generator=g), SETS),
    "set_ablation_curves": lambda: figures.set_ablation_curves(pd.DataFrame(
        [dict(set=s, heads=h, draw=d, k=k, accuracy=float(r(1))) for s in SETS for h in ("set", "random") for d in (0, 1)
         for k in (0, 1, 5)]), {"zero-shot": 0.1, "shuffled labels": 0.5}, "t"),
    "signature_bars": lambda: figures.signature_bars(pd.DataFrame(
        {c: (r(NS) / 10).tolist() for c in ("MRR", "random MRR", "random MRR p95", "truth effect", "random truth",
                                            "random truth p95")}, index=SETS), "t"),
    "head_profile": lambda: figures.head_profile({s: (float(r(1)), float(r(1))) for s in SETS}, list("abcd"), r(4),
                                                 torch.tensor([0, 1, 0, 0]).bool(), torch.tensor([1, 0, 0, 0]).bool(), (3, 1), "t"),
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


@pytest.mark.parametrize("name", ["mrr_bars", "head_by_dataset"])
def test_an_mrr_log_axis_says_its_unit_and_writes_plain_decimals(name):
    """Issue 60: 07's log axis read 6x10^-1 with no unit; its ticks are decimals, its label says what 1 is."""
    fig = FIGURES[name]()
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels() + ax.get_yticklabels(minor=True) if t.get_text()]
    assert ax.get_yscale() == "log" and "1 = ranked first" in ax.get_ylabel()
    assert ticks and all(float(t) == float(t) and "10^" not in t and "times" not in t for t in ticks), ticks


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


DISPLAY = 1290  # px: the width of the page a notebook's figure is shown on (GitHub, JupyterLab)
MANY = [(layer, head) for layer in range(19, 30) for head in (1, 7)][:20]  # a notebook's 20 in-context heads
VARIANTS = [f"{d}\n{v}" for d in ("sentiment_number", "animal_country", "sst2", "trec", "agnews", "ethos")
            for v in ("balanced", "imbalanced")]
AT_SCALE = {  # the figures as a notebook draws them, at its sizes
    "Fig. 10, 15 heads": lambda: figures.true_label_attention(
        MANY[:15], {v: r(N, 15) for v in ("balanced", "imbalanced")}, "t", {v: r(N, 15) / 2 for v in ("balanced", "imbalanced")}),
    "Fig. 11, 15 heads": lambda: figures.true_label_attention(MANY[:15], {v: r(N, 15) for v in ("balanced", "reordered")}, "t"),
    "the README's verdict grid": lambda: report_figures.verdict_grid(read_reports(
        [REPO_ROOT / "results" / f"report-{model}-n1000.json" for model in OFFLINE_MODELS])),
    "the README's label attention": lambda: report_figures.label_attention(read_reports(
        [REPO_ROOT / "results" / f"report-{model}-n1000.json" for model in OFFLINE_MODELS])),
    "Figs. 8-9, 20 heads": lambda: figures.variant_attention(MANY, {v: (r(N, 20), r(N, 20)) for v in ("balanced", "imbalanced")}, "t"),
    "top-1 accuracy, 12 variants": lambda: figures.accuracy_change(dict(zip(VARIANTS, [1.0, 0.344, 0.875, 0.031] * 3)), "t"),
    "Figs. 12-15, 4 panels": lambda: figures.head_heatmaps({d: (r(30, 9) - 0.5, MANY[:5]) for d in "abcd"}, "t"),
    "ablation, 2 panels": FIGURES["ablation_curves"],
    "09: scores, 6 panels": lambda: figures.score_scatter({name: r(30, 9) for name in SETS}, SETS[0], "t"),
    "09: overlap, 7 sets": FIGURES["overlap_diagram"],
    "09: layers, 7 sets x 30": lambda: figures.layer_spread(torch.randint(0, 6, (NS, 30), generator=g), SETS),
    "09: curves, 8 panels": lambda: figures.set_ablation_curves(pd.DataFrame(
        [dict(set=s, heads=h, draw=d, k=k, accuracy=float(r(1))) for s in [*SETS, "heads given"] for h in ("set", "random")
         for d in (0, 1) for k in (0, 1, 2, 4, 8, 20)]), {"zero-shot": 0.0, "shuffled labels": 0.59}, "t"),
    "09: two towers, 7 sets": FIGURES["signature_bars"],
    "09: a head, 20 tokens": lambda: figures.head_profile({s: (float(r(1)), float(r(1))) for s in SETS}, [" tok"] * 20, r(20),
                                                          torch.arange(20) % 5 == 3, torch.arange(20) % 5 == 1, (3, 1), "t"),
    "biases, 2 panels": FIGURES["bias_change"],
    "03: Fig. 5, MRR over five decades": lambda: figures.mrr_bars(MANY, {"head": 0.3 + r(20) / 2, "random head": 1e-5 + r(20) / 1e4},
                                                                 "t"),
    "07: Appendix D, MRR over five decades": lambda: figures.head_by_dataset(
        (3, 1), {d: (0.3 + r(N) / 2, 1e-5 + r(20, N) / 1e4) for d in ("a", "b")}, {d: (r(N), r(N)) for d in ("a", "b")}, "t"),
}


def digit_height(text: Text) -> float:
    """How many px high a digit of `text` is drawn at its figure's dpi (a 10-point DejaVu Sans "0": 10.1)."""
    font = get_font(findfont(text.get_fontproperties()))
    font.set_size(text.get_fontsize(), text.figure.dpi)
    return font.load_char(ord("0")).height / 64  # FreeType's 26.6 fixed point


def illegible(fig: Figure) -> list[str]:
    """What of `fig` would be hard to read shown DISPLAY px wide (as the inline backend saves it,
    cut to its tight box, at its dpi; a wider one shrunk to fit): text whose digits are under 10 px
    high, tick labels (major or minor) that overlap, value labels outside their frame."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    width = fig.get_tightbbox(renderer).width * fig.dpi
    scale = min(1, DISPLAY / width)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure is fig]
    small = sorted({f"{t.get_text()!r}: {digit_height(t) * scale:.1f} px" for t in texts if digit_height(t) * scale < 10})
    problems = [f"digits under 10 px high at {DISPLAY} px wide (the figure is {width:.0f}): {', '.join(small)}"] if small else []
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            labelled = [*zip(axis.get_majorticklocs(), axis.get_ticklabels()),
                        *zip(axis.get_minorticklocs(), axis.get_ticklabels(minor=True))]
            boxes = [(label.get_text(), label.get_window_extent(renderer)) for loc, label in sorted(labelled, key=lambda t: t[0])
                     if label.get_visible() and label.get_text() and limits[0] <= loc <= limits[1]]
            problems += [f"tick labels {a!r} and {b!r} overlap" for (a, box), (b, other) in zip(boxes, boxes[1:])
                         if box.overlaps(other)]
        frame = ax.get_window_extent(renderer)
        for t in ax.texts:
            box = t.get_window_extent(renderer)
            if t.get_visible() and t.get_text() and not (frame.contains(*box.min) and frame.contains(*box.max)):
                problems.append(f"value label {t.get_text()!r} outside its frame")
    return problems


LOWEST = [0.3, 0.1, 0.03, 0.011, 0.006, 0.003, 0.0012, 1e-4, 1e-5]  # the highest MRR 0.5 to 0.9: 0.2 to 5.4 decades
MRR_AXES = {  # 03's Fig. 5 (20 heads) and 07's Appendix D (four datasets), the random heads' MRR from `lowest` up
    "mrr_bars": lambda lowest: figures.mrr_bars(MANY, {"head": 0.5 + r(20) * 0.4, "random head": lowest * (1 + r(20))}, "t"),
    "head_by_dataset": lambda lowest: figures.head_by_dataset(
        (3, 1), {d: (0.5 + r(N) * 0.4, lowest * (1 + r(20, N))) for d in "abcd"}, {d: (r(N), r(N)) for d in "abcd"}, "t"),
}


def labels_in_view(ax) -> list[str]:
    """The y tick labels (major and minor) drawn inside the axis's limits, lowest first."""
    low, high = sorted(ax.get_ylim())
    ticks = [*zip(ax.yaxis.get_majorticklocs(), ax.get_yticklabels()), *zip(ax.yaxis.get_minorticklocs(),
                                                                          ax.get_yticklabels(minor=True))]
    return [label.get_text() for loc, label in sorted(ticks, key=lambda t: t[0]) if label.get_text() and low <= loc <= high]


@pytest.mark.parametrize("lowest", LOWEST)
@pytest.mark.parametrize("name", MRR_AXES)
def test_an_mrr_log_axis_names_three_ticks_in_view_and_none_overlap(name, lowest):
    """Issue 60's fix labelled every minor tick, which printed over each other across five decades; two to three
    decades then showed two labels alone. At every span: three labels or more in view, none overlapping."""
    fig = MRR_AXES[name](lowest)
    assert not illegible(fig)
    assert len(labels_in_view(fig.axes[0])) >= 3, labels_in_view(fig.axes[0])


@pytest.mark.parametrize("name", AT_SCALE)
def test_a_figure_at_a_notebooks_scale_reads_at_github_width(name):
    """Issue 60: 05 and 06's accuracy chart printed twelve two-line labels over each other and
    "100.0%" on its frame; the Fig. 8/9 two-panel figures were 1,611 px wide, their text shrunk on
    a page. No tick labels overlap, value labels lie inside their frame, and every text is at least
    10 px high shown on a page 1,290 px wide."""
    assert not illegible(AT_SCALE[name]()), name
