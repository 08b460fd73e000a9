"""Interactive pickers for the notebooks: controls that redraw a figure or a table.

Every builder returns an `Explorer`: a widget whose controls (sliders, dropdowns) call its
`redraw()`, which calls `draw(**values)` and shows the result (a Figure or a DataFrame)
in its output area. `explorer.shown` holds the last result, so a test can move a control
and check what was drawn. Builders take the results of studies and never run the model.
"""
from __future__ import annotations

import base64
import html
import io
from typing import Any, Callable, Sequence

import ipywidgets as widgets
import pandas as pd
import torch
from matplotlib.figure import Figure
from pandas.io.formats.style import Styler

from ..core.heads import Head, head_name
from ..core.locate import LocateResult
from ..studies.label_attention import LabelAttention, PromptAttention
from ..studies.projection import Projections
from . import figures


class Explorer(widgets.VBox):
    """Controls, an optional caption (e.g. the chosen prompt's text) and an output area; any
    control change redraws.

    Displayed, an explorer offers front ends its current view twice over: as the live
    widget, and as a static copy (image/png for a figure, text/html for a table). A live
    kernel shows the widget; GitHub, nbviewer and an untrusted JupyterLab, which cannot,
    show the copy. So each view shows one figure, and a committed notebook shows one too.
    """

    def __init__(self, draw: Callable[..., Any], controls: dict[str, widgets.ValueWidget],
                 caption: Callable[..., str] | None = None):
        self.draw = draw
        self.controls = controls
        self.caption = caption
        self.label = widgets.HTML()
        self.out = widgets.Output()
        self.shown: Any = None
        super().__init__([widgets.HBox(list(controls.values())), self.label, self.out])
        for control in controls.values():
            control.observe(lambda _: self.redraw(), names="value")
        self.redraw()

    @property
    def values(self) -> dict[str, Any]:
        """The current choice, by the draw function's argument names."""
        return {name: control.value for name, control in self.controls.items()}

    def redraw(self) -> None:
        """Draw the current choice into the output area (set directly: no display message,
        so nothing lands in the cell's own outputs)."""
        self.shown = self.draw(**self.values)
        self.label.value = html.escape(self.caption(**self.values)) if self.caption else ""
        self.out.outputs = ({"output_type": "display_data", "data": static_copy(self.shown), "metadata": {}},)

    def _repr_mimebundle_(self, **kwargs) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs)
        chosen = ", ".join(f"{k} {v}" for k, v in self.values.items())
        named = " and ".join(self.controls)
        note = f"Interactive when the notebook runs: move its {named} control{'s' * (len(self.controls) > 1)} (here: {chosen})."
        return static_copy(self.shown, note) | bundle | {"text/plain": f"Explorer ({chosen}): run the notebook to move its controls"}


def static_copy(shown: Any, caption: str | None = None) -> dict[str, str]:
    """A figure as {"image/png": base64}; a table (DataFrame or Styler) as {"text/html"} and,
    for front ends that show no HTML, {"image/png"} of the same table; caption, where given,
    under either."""
    if isinstance(shown, Figure):
        return {"image/png": _png(shown, caption)}
    if isinstance(shown, (Styler, pd.DataFrame)):
        table, title = (shown.data, shown.caption or "") if isinstance(shown, Styler) else (shown, "")
        under = f'<p style="font-style: italic">{html.escape(caption)}</p>' if caption else ""
        return {"text/html": shown.to_html() + under, "image/png": _png(figures.table_image(table, title), caption)}
    return {"text/plain": repr(shown)}


def _png(fig: Figure, caption: str | None = None) -> str:
    """A figure as base64 PNG, as %matplotlib inline draws it, with caption (if any) in italics
    under it (the figure itself is left as it was)."""
    under = fig.text(0.5, 0, caption, ha="center", va="top", fontsize=9, style="italic", color="#444444") if caption else None
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", bbox_inches="tight")
    finally:
        if under is not None:
            under.remove()
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def layer_head_sliders(n_layers: int, n_heads: int, start: Head = (0, 0)) -> dict[str, widgets.IntSlider]:
    """Sliders `layer` and `head` over every head of a model, starting at `start`."""
    return {
        "layer": widgets.IntSlider(value=start[0], min=0, max=n_layers - 1, description="layer"),
        "head": widgets.IntSlider(value=start[1], min=0, max=n_heads - 1, description="head"),
    }


def head_dropdown(heads: Sequence[Head], description: str = "head") -> dict[str, widgets.Dropdown]:
    """A dropdown `head` over a list of (layer, head) pairs, labelled layer-head."""
    options = [(head_name(h), tuple(h)) for h in heads]
    return {"head": widgets.Dropdown(options=options, value=tuple(heads[0]), description=description)}


def prompt_slider(n_prompts: int) -> dict[str, widgets.IntSlider]:
    """A slider `prompt` over prompt indices 0 .. n_prompts-1."""
    return {"prompt": widgets.IntSlider(value=0, min=0, max=n_prompts - 1, description="prompt")}


def prompt_caption(texts: Sequence[str]) -> Callable[..., str]:
    """A caption naming the chosen prompt and its text."""
    return lambda prompt, **_: f"prompt {prompt}: {texts[prompt]}"


def any_head(draw: Callable[..., Any], n_layers: int, n_heads: int, start: Head = (0, 0),
             texts: Sequence[str] | None = None) -> Explorer:
    """Pick any head with layer/head sliders (and a prompt, its text shown, if texts are
    given); draw(layer=, head=[, prompt=])."""
    controls = layer_head_sliders(n_layers, n_heads, start)
    if texts is None:
        return Explorer(draw, controls)
    return Explorer(draw, controls | prompt_slider(len(texts)), prompt_caption(texts))


def listed_head(draw: Callable[..., Any], heads: Sequence[Head]) -> Explorer:
    """Pick one of the listed heads (e.g. the in-context heads) from a dropdown;
    draw(head=(layer, head))."""
    return Explorer(draw, head_dropdown(heads))


def attention_explorer(att: LabelAttention, start: Head, title: str) -> Explorer:
    """Fig. 6 for any head: its summed attention on true vs false labels over the prompts."""
    def draw(layer: int, head: int):
        return figures.head_attention_hist(att.true[:, layer, head], att.false[:, layer, head], (layer, head), title)

    return any_head(draw, att.true.shape[1], att.true.shape[2], start)


def prompt_attention_explorer(rows: PromptAttention, start: Head, texts: Sequence[str], title: str) -> Explorer:
    """The last position's attention over one prompt's tokens, any head and prompt; texts:
    the prompts (shown under the controls), title: model, dataset and N."""
    def draw(layer: int, head: int, prompt: int):
        tokens = rows.tokens[prompt]
        T = len(tokens)
        return figures.prompt_attention(tokens, rows.pattern[prompt, layer, head, :T], rows.true[prompt, :T],
                                        rows.false[prompt, :T], (layer, head), f"{title}, prompt {prompt}")

    L, H = rows.pattern.shape[1:3]
    return any_head(draw, L, H, start, texts)


def projection_explorer(projections: Projections, start: Head, title: str, k: int = 10) -> Explorer:
    """Table 1 for any head and recorded prompt: label values, label keys and the last query;
    title: model, dataset and N."""
    def draw(layer: int, head: int, prompt: int):
        return figures.token_table(projections.table(prompt, (layer, head), k), f"{title}, prompt {prompt}, head {layer}-{head}")

    arch = projections.dec.arch
    return any_head(draw, arch.n_layers, arch.n_heads, start, projections.ps.texts)


def rank_explorer(heads: Sequence[Head], ranks: torch.Tensor, random: Sequence[Head],
                  random_ranks: torch.Tensor, title: str) -> Explorer:
    """Fig. 5 per head: label-value ranks [N, S, D] of an in-context head beside its random
    head; title: model, dataset and N."""
    def draw(head: Head):
        s = list(heads).index(head)
        got, base = ranks[:, s].flatten(), random_ranks[:, s].flatten()
        return figures.rank_hist(got[~got.isnan()], base[~base.isnan()], head, random[s], title)

    return listed_head(draw, heads)


def variant_explorer(variants: dict[str, LabelAttention], start: Head, title: str) -> Explorer:
    """Figs. 8-11 for any head: mean summed attention on true and false labels per variant."""
    def draw(layer: int, head: int):
        head_only = [(layer, head)]
        return figures.variant_attention(head_only, {k: a.at(head_only) for k, a in variants.items()}, title)

    first = next(iter(variants.values()))
    return any_head(draw, first.true.shape[1], first.true.shape[2], start)


def layer_explorer(loc: LocateResult, texts: Sequence[str], title: str) -> Explorer:
    """Fig. 2 for any prompt of a located dataset (texts: its prompts, shown under the
    slider): each layer's attention and FFN increase."""
    def draw(prompt: int):
        return figures.layer_increase(loc.attn[prompt], loc.ffn[prompt], f"{title}, prompt {prompt}")

    return Explorer(draw, prompt_slider(len(texts)), prompt_caption(texts))


def head_type_explorer(scores: dict[str, torch.Tensor], percentiles: dict[str, torch.Tensor], rows: PromptAttention,
                       start: Head, texts: Sequence[str], title: str) -> Explorer:
    """Any head: its score and percentile among all heads in each head type's score (scores,
    percentiles: name -> [L, H]), and its attention from the last position over a prompt (rows: the
    prompts' attention rows, texts their texts); title: model and prompts."""
    def draw(layer: int, head: int, prompt: int):
        T = len(rows.tokens[prompt])
        values = {name: (float(s[layer, head]), float(percentiles[name][layer, head])) for name, s in scores.items()}
        return figures.head_profile(values, rows.tokens[prompt], rows.pattern[prompt, layer, head, :T],
                                    rows.true[prompt, :T], rows.false[prompt, :T], (layer, head), f"{title}, prompt {prompt}")

    L, H = rows.pattern.shape[1:3]
    return any_head(draw, L, H, start, texts)
