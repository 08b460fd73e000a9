"""What every figure shares: its size bounds, the colours of true and false labels and of the
ablation curves, and a new figure that pyplot does not hold."""
from __future__ import annotations

from matplotlib.figure import Figure

from ...studies.ablation import IN_CONTEXT, RANDOM

MAX_HEIGHT = 6.8  # inches: 680 px at 100 dpi, a laptop screen's height whole
MAX_WIDTH = 12.5  # inches: 1,250 px at 100 dpi, shown unshrunk (text at full size) on a page 1,290 px wide
TRUE, FALSE = "#1f77b4", "#d62728"  # true labels blue, false labels red, in every figure
PALETTE = {IN_CONTEXT: "#d62728", RANDOM: "#7f7f7f"}  # ablation curves


def figure(width: float = 7.0, height: float = 4.0, ncols: int = 1, nrows: int = 1,
           width_ratios: list[float] | None = None) -> tuple[Figure, object]:
    """A new figure, not attached to pyplot, of `width` x `height` inches, and its axes: ncols side by side
    (their widths in `width_ratios`, else equal), in nrows rows."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, width_ratios=width_ratios)
    return fig, axes
