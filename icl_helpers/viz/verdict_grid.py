"""The verdicts of several reports as one picture: the paper's claims (rows) by models (columns), each
cell its headline verdict, in words and in colour; the README's picture, drawn from the paper-scale reports:

    python -m icl_helpers.viz.verdict_grid results/report-smollm2-135m-n1000.json ... --png docs/verdicts.png

The PNG holds a digest of what it shows (`shown`), so a test tells a picture its reports no longer match.
Reads the reports as `compare` does (`verdicts.compare.read_reports`): checked, one model each.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import textwrap
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..errors import UsageError
from ..paths import write_atomically
from ..verdicts.compare import OURS, read_reports
from .figures.style import figure

COLOURS = {"replicates": "#1a9850", "partly": "#fdae61", "does not replicate": "#d73027", "not tested": "#d9d9d9"}
LABEL_WIDTH = 58  # characters of a claim's label on its line


def shown(reports: list[dict]) -> dict:
    """What the picture shows: the models, and each claim of the paper's (not ours) with its verdict a model."""
    by_model = [{f["id"]: f for f in r["claims"]} for r in reports]
    claims = [f for f in reports[0]["claims"] if not f["claim"].startswith(OURS)]
    return {"models": [r["model"] for r in reports], "n": reports[0]["n"], "sentence_n": reports[0]["sentence_n"],
            "claims": [{"id": f["id"], "claim": f["claim"],
                        "verdicts": [found[f["id"]]["verdict"] if f["id"] in found else "not tested" for found in by_model]}
                       for f in claims]}


def digest(reports: list[dict]) -> str:
    """The SHA-256 of `shown(reports)`, as the PNG's Description holds it."""
    return hashlib.sha256(json.dumps(shown(reports), sort_keys=True).encode()).hexdigest()


def verdict_grid(reports: list[dict]) -> Figure:
    """A row a claim of the paper's, a column a model (its counts under its name): each cell the headline
    verdict in the words `compare` and the notebooks write it, on its colour."""
    data = shown(reports)
    claims, models = data["claims"], data["models"]
    fig, ax = figure(5.4 + 1.6 * len(models), 1.0 + 0.3 * len(claims))
    for row, claim in enumerate(claims):
        for col, verdict in enumerate(claim["verdicts"]):
            ax.add_patch(_cell(col, row, COLOURS[verdict]))
            ax.text(col + 0.5, row + 0.5, verdict, ha="center", va="center", fontsize=10)
    counted = [v for v in COLOURS if v != "not tested"]
    counts = [" / ".join(str(sum(c["verdicts"][i] == v for c in claims)) for v in counted) for i in range(len(models))]
    ax.set(xlim=(0, len(models)), ylim=(len(claims), 0), xticks=[i + 0.5 for i in range(len(models))],
           yticks=[i + 0.5 for i in range(len(claims))])
    ax.set_xticklabels([f"{m}\n{c}" for m, c in zip(models, counts)], fontsize=10)
    ax.set_yticklabels([f"{c['id']}: {_short(c['claim'])}" for c in claims], fontsize=10)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel(f"a cell: the claim's verdict on the model above it\nunder each model: {' / '.join(counted)}")
    ax.set_ylabel("the paper's claims, in its order")
    fig.suptitle(f"Does it replicate? The paper's {len(claims)} claims at {data['n']:,} word and {data['sentence_n']:,} "
                 "sentence prompts per dataset", fontsize=11)
    return fig


def _cell(col: int, row: int, colour: str) -> Rectangle:
    return Rectangle((col, row), 1, 1, facecolor=colour, edgecolor="white", linewidth=2)


def _short(claim: str) -> str:
    """A claim's text cut to one line of LABEL_WIDTH characters, at a word."""
    return textwrap.shorten(claim, LABEL_WIDTH, placeholder=" ...")


def write_png(reports: list[dict], path: Path) -> None:
    """The grid saved as a PNG at `path`, its Description the reports' `digest`."""
    fig = verdict_grid(reports)
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight",
                                                    metadata={"Description": digest(reports)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl_helpers.viz.verdict_grid", description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="JSON files `report --json` wrote, one a model, of one size and seed")
    parser.add_argument("--png", type=Path, required=True, help="write the picture here")
    args = parser.parse_args(argv)
    try:
        write_png(read_reports(args.reports), args.png)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
