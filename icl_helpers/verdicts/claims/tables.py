"""Findings shown: `table` (a DataFrame, one row a claim) and `markdown` (the table, then each tested
claim's why and rule), with the correct-only and held-out judgements beside ours."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...stats import DRAWS, LEVEL, MIN_CLUSTERS
from ..evidence import CORRECT, HELD_OUT
from ..judgement import Judgement, ours_text
from .claim import CLAIMS, Finding

VIEWS = {"correct_only": "correct prompts only: ours, N, verdict", "held_out": "held out: ours, N, verdict"}
VIEW_OF = {"correct_only": CORRECT, "held_out": HELD_OUT}  # the view each column judges in (`evidence.View`)


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row a claim: claim, paper, ours (CI), N, verdict, and where any finding has one,
    the correct-only and the held-out judgement."""
    rows = [{"claim": f.claim, "paper": f.paper, "ours (95% CI)": ours_text(f), "N": f.n, "verdict": f.verdict}
            for f in findings]
    for key, column in VIEWS.items():
        if any(getattr(f, key) is not None for f in findings):
            for row, f in zip(rows, findings):
                row[column] = view_text(getattr(f, key))
    return pd.DataFrame(rows, index=[f.id for f in findings])


def view_text(j: Judgement | None) -> str:
    """A view's judgement as a table cell: ours, N and verdict, "- (why)" where not tested, "-" where none."""
    return "-" if j is None else f"{ours_text(j)}, N={j.n}: {j.verdict}" if j.ours is not None else f"- ({j.why})"


def intro(n: int, sentence_n: int | None, seed: int) -> str:
    """What a report's table holds, written from the code that makes it: the sizes, the bootstrap
    (`stats`) and, for each view's column, what its view judges (`View.about`)."""
    data = f"{sentence_n} a sentence dataset" if sentence_n else "no sentence dataset (none could be had)"
    views = "; ".join(f"*{VIEWS[key].split(':')[0]}*: {view.about}" for key, view in VIEW_OF.items())
    return (f"{n} prompts a word dataset, {data}, seed {seed}. Intervals: {LEVEL:.0%} percentile bootstrap, "
            f"{DRAWS:,} draws over the distinct inputs, each drawn with all its prompts (a word dataset's prompts share "
            f"inputs); a claim on fewer than {MIN_CLUSTERS} distinct inputs is not tested. The last two columns judge "
            f"the label-flow claims again ({len(VIEW_OF)} views): {views}.")


def markdown(findings: Sequence[Finding]) -> str:
    """The findings as one markdown table (claim, paper, ours (CI), N, verdict, the correct-only
    and held-out judgements), then each tested claim's why and rule."""
    rows = [f"| id | claim | paper | ours (95% CI) | N | verdict | {' | '.join(VIEWS.values())} |",
            "|---|---|---|---|---|---|---|---|"]
    rows += [f"| {f.id} | {f.claim} | {f.paper} | {ours_text(f)} | {f.n if f.n is not None else '-'} | {f.verdict} | "
             + " | ".join(view_text(getattr(f, key)) for key in VIEWS) + " |" for f in findings]
    why = [f"- **{f.id}** ({f.verdict}): {f.why}. Rule: {CLAIMS[f.id].rule} (set {CLAIMS[f.id].set_on}). Paper: {f.source}."
           + (f" Correct prompts only ({f.correct_only.verdict}): {f.correct_only.why}." if f.correct_only else "")
           + (f" Held out ({f.held_out.verdict}): {f.held_out.why}." if f.held_out else "")
           for f in findings if f.ours is not None]
    return "\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why) + "\n"
