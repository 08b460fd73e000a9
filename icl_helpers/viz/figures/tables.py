"""Tables of tokens: shown whole, spaces visible, as a styled HTML table for notebooks or drawn
as a figure for front ends that show no HTML."""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from pandas.io.formats.style import Styler

from .style import figure


def visible(token: str) -> str:
    """A token with its spaces and line breaks shown (␣, ↵)."""
    return token.replace(" ", "␣").replace("\n", "↵")


def token_table(table: pd.DataFrame, title: str) -> Styler:
    """A table of tokens (a projection table, `studies.projection.Projections.table`; the top
    neurons, `studies.subvalues.top_neurons`) with each token shown whole, spaces visible, its
    numbers to three decimals and `title` as its caption."""
    columns = [c for c in ("token", "top tokens") if c in table]
    shown = table.assign(**{c: table[c].map(lambda t: visible(t) if isinstance(t, str) else "  ".join(map(visible, t)))
                            for c in columns})
    return (shown.style.set_caption(title).hide(axis="index").format(precision=3)
            .set_properties(subset=columns, **{"font-family": "monospace", "text-align": "left"}))


def table_image(table: pd.DataFrame, title: str = "") -> Figure:
    """A table drawn as a figure (monospace, left-aligned, columns as wide as their longest
    cell; a character the font lacks as its escape): the static copy of a table for front
    ends that show no HTML."""
    cells = table.astype(str).map(_drawable).to_numpy()
    widths = np.array([max(len(str(c)), *(len(v) for v in cells[:, j])) for j, c in enumerate(table.columns)], float)
    fig, ax = figure(0.085 * widths.sum() + 0.3 * len(widths), 0.25 * (len(cells) + 1) + 0.4)
    ax.axis("off")
    drawn = ax.table(cellText=cells, colLabels=list(map(str, table.columns)), colWidths=widths / widths.sum(),
                     cellLoc="left", colLoc="left", loc="center")
    drawn.auto_set_font_size(False)
    for cell in drawn.get_celld().values():
        cell.PAD = 0.02 / len(widths)  # a fraction of the cell's width: small, for wide cells
        cell.set_text_props(family="monospace", fontsize=9)
    ax.set_title(title, fontsize=10)
    return fig


def _drawable(text: str) -> str:
    """text with each character the monospace font cannot draw written as an escape, e.g. "\\u7684"."""
    return "".join(c if ord(c) in _monospace_chars() else f"\\u{ord(c):04x}" for c in text)


@functools.cache
def _monospace_chars() -> frozenset[int]:
    """The code points the monospace font that tables use can draw."""
    return frozenset(font_manager.get_font(font_manager.findfont(FontProperties(family="monospace"))).get_charmap())
