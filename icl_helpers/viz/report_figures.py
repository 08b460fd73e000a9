"""The README's two pictures, drawn from the paper-scale reports: the verdict grid (the paper's claims by model, each
cell its headline verdict) and the label attention (what draws the in-context heads' attention to a label):

    python -m icl_helpers.viz.report_figures results/report-*-n1000.json --verdicts V.png --attention A.png

Each PNG holds a digest of what it shows (`shown`), so a test tells a picture its reports no longer match.
Reads the reports as `compare` does (`verdicts.compare.read_reports`): checked, one model each.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Callable

from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from ..errors import UsageError
from ..paths import write_atomically
from ..verdicts.compare import read_reports
from ..verdicts.whose import PAPER
from .figures.style import TRUE, figure

COLOURS = {"replicates": "#1a9850", "partly": "#fdae61", "does not replicate": "#d73027", "not tested": "#d9d9d9"}
LABEL_WIDTH = 58  # characters of a claim's label on its line
# The label attention picture's bars: each a claim's headline number; what it measures, and its colour.
ATTENTION = {"fig6": ("summed attention, true minus false labels", TRUE),
             "fig6_control": ("for being true, at equal distance (our control)", "#9ecae1"),
             "fig9_control": ("for being nearest the input, at equal truth (our control)", "#7f7f7f")}


def shown(reports: list[dict], picture: str = "verdicts") -> dict:
    """What a picture shows: the models and sizes, and each claim it draws with its verdict a model (the verdict
    grid: every claim of the paper's, not ours; the label attention: `ATTENTION`'s, with their numbers too)."""
    by_model = [{f["id"]: f for f in r["claims"]} for r in reports]
    if picture == "verdicts":
        ids = [f["id"] for f in reports[0]["claims"] if f["whose"] == PAPER]
    else:
        ids = list(ATTENTION)
    return {"models": [r["model"] for r in reports], "n": reports[0]["n"], "sentence_n": reports[0]["sentence_n"],
            "claims": [{"id": i, "claim": next((found[i]["claim"] for found in by_model if i in found), i),
                        "verdicts": [found[i]["verdict"] if i in found else "not tested" for found in by_model],
                        **({} if picture == "verdicts" else
                           {"found": [{k: found[i].get(k) for k in ("ours", "ci")} if i in found else None
                                      for found in by_model]})}
                       for i in ids]}


def digest(reports: list[dict], picture: str = "verdicts") -> str:
    """The SHA-256 of `shown(reports, picture)`, as the picture's PNG Description holds it."""
    return hashlib.sha256(json.dumps(shown(reports, picture), sort_keys=True).encode()).hexdigest()


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


def label_attention(reports: list[dict]) -> Figure:
    """Two panels, a group of bars a model: left, Fig. 6's measure (the in-context heads' summed attention on the
    true labels minus the false); right, our control's split of a label position's attention into what it gets for
    being true and for being nearest the input. Each bar the claim's headline number with its 95% interval, its
    verdict above it."""
    data = shown(reports, "attention")
    models, claims = data["models"], data["claims"]
    fig, (paper, ours) = figure(11.0, 4.8, ncols=2, width_ratios=[1.2, 1.6])
    for ax, group in ((paper, claims[:1]), (ours, claims[1:])):
        width = 0.9 / len(group)
        for j, claim in enumerate(group):
            colour = ATTENTION[claim["id"]][1]
            for i, (found, verdict) in enumerate(zip(claim["found"], claim["verdicts"])):
                x, said = i + (j - (len(group) - 1) / 2) * width, textwrap.fill(verdict, 10)
                if found is None or found["ours"] is None:
                    ax.text(x, 0, said, ha="center", va="bottom", fontsize=10)
                    continue
                lo, hi = found["ci"] or (found["ours"], found["ours"])
                ax.bar(x, found["ours"], width * 0.9, color=colour, yerr=[[found["ours"] - lo], [hi - found["ours"]]],
                       capsize=3, ecolor="black")
                ax.text(x, max(hi, 0), said, ha="center", va="bottom", fontsize=10)
        ax.set_xticks(range(len(models)), models, fontsize=10)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.margins(y=0.2)
    paper.set(title="The paper's Fig. 6: more on the true labels", ylabel=ATTENTION["fig6"][0])
    ours.set(title="Our control: for being true, or for being nearest the input?",
             ylabel="attention a label position gets")
    ours.legend(handles=[Patch(color=ATTENTION[c["id"]][1], label=ATTENTION[c["id"]][0]) for c in claims[1:]],
                fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    fig.suptitle(f"What draws the in-context heads' attention to a label ({data['n']:,} prompts per word dataset; bars: "
                 "95% intervals, above each its verdict)", fontsize=11)
    return fig


PICTURES: dict[str, Callable[[list[dict]], Figure]] = {"verdicts": verdict_grid, "attention": label_attention}


def _cell(col: int, row: int, colour: str) -> Rectangle:
    return Rectangle((col, row), 1, 1, facecolor=colour, edgecolor="white", linewidth=2)


def _short(claim: str) -> str:
    """A claim's text cut to one line of LABEL_WIDTH characters, at a word."""
    return textwrap.shorten(claim, LABEL_WIDTH, placeholder=" ...")


def write_png(reports: list[dict], path: Path, picture: str = "verdicts") -> None:
    """The picture (a key of `PICTURES`) saved as a PNG at `path`, its Description the reports' `digest`."""
    fig = PICTURES[picture](reports)
    write_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight",
                                                    metadata={"Description": digest(reports, picture)}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl_helpers.viz.report_figures", description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="JSON files `report --json` wrote, one a model, of one size and seed")
    for picture in PICTURES:
        parser.add_argument(f"--{picture}", type=Path, metavar="PNG", help=f"write the {picture} picture here")
    args = parser.parse_args(argv)
    wanted = {picture: getattr(args, picture) for picture in PICTURES if getattr(args, picture)}
    if not wanted:
        parser.error("say where to write a picture: " + " or ".join(f"--{p} PNG" for p in PICTURES))
    try:
        reports = read_reports(args.reports)
        for picture, path in wanted.items():
            write_png(reports, path, picture)
            print(f"wrote {path}")
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
