"""A notebook's verdicts as one readable table: each claim whole and wrapped, the paper's
number, ours with its interval and unit, N and the verdict, why in short (`short_reason`); then, under the
table, each claim's whole reason and the rule its verdict follows, as prose, and when each rule was set
(folded). `VerdictTable` shows the findings of any claim: the paper's, ours, the literature's."""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Sequence

from ..verdicts.claims import CLAIMS, VIEWS, Finding, markdown
from ..verdicts.claims.tables import JUDGED_ON, RECONSTRUCTED, columns, in_views, view_cell
from ..verdicts.judgement import FAILS, NOT_TESTED, PARTLY, REPLICATES, RULE_DATES, ours_text

COLOURS = {REPLICATES: "#1a7f37", PARTLY: "#9a6700", FAILS: "#cf222e", NOT_TESTED: "#57606a"}
CELL = "text-align: left; vertical-align: top; white-space: normal"


# A measured number: a decimal, a percentage, a count out of a total or a ratio (0.214, 16%, 18/20, 2.5x), not part
# of a name (qwen2.5, 0.5b) or a reference (Fig. 7)
MEASURED = re.compile(r"(?<![\w.])\d+(?:\.\d+(?![\w.])|%|/\d+|(?:\.\d+)?x\b)")
ABBREVIATION = re.compile(r"(?:^|[\s(])(?:Fig|Figs|Tab|Eq|Sec|App|l|ll|cf|e\.g|i\.e|vs|al)$")


def clauses(why: str) -> list[str]:
    """A reason's top-level clauses: split at each "; " and each sentence end (". "), outside
    brackets and not after an abbreviation (Fig., Figs., e.g., i.e., vs., App.)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(why):
        depth += (ch in "([") - (ch in ")]" and depth > 0)
        if depth == 0 and (why.startswith("; ", i) or why.startswith(". ", i) and not ABBREVIATION.search(why[start:i])):
            parts.append(why[start:i])
            start = i + 2
    return [part for part in [*parts, why[start:]] if part] or [why]


def short_reason(why: str) -> str:
    """The reason in short: its first clause (`clauses`) that holds a measured number (`MEASURED`),
    so that a leading clause that only names the metric ("ours: mean (true - false) summed
    attention") or the heads ("the 17 heads in all 4 datasets' top 20") gives way to the numbers;
    the first clause where no clause holds one ("too few prompts: ...")."""
    parts = clauses(why)
    return next((part for part in parts if MEASURED.search(part)), parts[0])


@dataclass(frozen=True)
class VerdictTable:
    """Findings as a notebook shows them (HTML); their markdown (`verdicts.markdown`) elsewhere."""

    findings: Sequence[Finding]

    def __repr__(self) -> str:
        return markdown(self.findings)

    def _repr_html_(self) -> str:
        judged_on = [JUDGED_ON] if in_views(self.findings) else []  # no column where every finding is on all prompts
        views = columns(self.findings)
        head = ["claim", "the paper", "ours (95% CI)", "N", "verdict", *judged_on, "why, in short", *(VIEWS[k].title for k in views)]
        rows = "".join(f"<tr>{_cell(f'<b>{f.id}</b>: ' + html.escape(f.claim))}{_cell(_paper(f))}"
                       f"{_cell(_with_unit(f))}"
                       f"{_cell('-' if f.n is None else str(f.n))}"
                       f"{_cell(f'<b>{html.escape(f.verdict)}</b>', f'color: {COLOURS[f.verdict]}')}"
                       + "".join(_cell(html.escape(VIEWS[f.view].title)) for _ in judged_on)
                       + _cell(html.escape(short_reason(f.why)))
                       + "".join(_cell(html.escape(view_cell(f, k))) for k in views) + "</tr>"
                       for f in self.findings)
        reasons = "".join(f"<li><b>{f.id}</b> ({html.escape(f.verdict)}): {html.escape(f.why)}. "
                          f"<i>Rule</i>: {html.escape(CLAIMS[f.id].rule)}. "
                          f"<i>Paper</i>: {html.escape(f.source)}.</li>" for f in self.findings)
        return _table(head, rows, reasons, [(f.id, CLAIMS[f.id].set_on) for f in self.findings])


def _table(head: Sequence[str], rows: str, reasons: str, dates: Sequence[tuple[str, str]]) -> str:
    """A verdict table's HTML: the header cells `head`, the rows' HTML, the reasons' list items, then
    each claim's (id, when its rule was set), folded under RULE_DATES."""
    header = "".join(f'<th style="{CELL}">{html.escape(h)}</th>' for h in head)
    dated = "".join(f"<li><b>{id}</b>: {html.escape(date)}.</li>" for id, date in dates)
    return (f"<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>"
            f"<p>Why, claim by claim, and the rule each verdict follows:</p><ul>{reasons}</ul>"
            f"<details><summary>{RULE_DATES}</summary><ul>{dated}</ul></details>")


def _with_unit(f: Finding) -> str:
    """Our number, its interval and its unit (in grey under them) as a cell's HTML."""
    if f.ours is None:
        return "-"
    return f'{html.escape(ours_text(f))}<br><span style="color: #57606a">{html.escape(f.unit)}</span>'


def _paper(f: Finding) -> str:
    """The paper's number as a cell's HTML, marked in italics where our measure is our reconstruction."""
    return html.escape(f.paper) + (f" <i>{RECONSTRUCTED}</i>" if CLAIMS[f.id].reconstructed else "")


def _cell(inner: str, style: str = "") -> str:
    """A table cell of HTML `inner`, wrapped, left-aligned, at the top."""
    return f'<td style="{CELL}; {style}">{inner}</td>' if style else f'<td style="{CELL}">{inner}</td>'
