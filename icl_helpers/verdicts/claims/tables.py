"""Findings shown, of any claim (the paper's, ours, the literature's): `table` (a DataFrame, one row a claim),
`side_by_side` (runs of the same claims, a column group each) and `markdown` (the table, each tested claim's why
and rule, then when each rule was set), with the view each headline is judged on in a column of its own and the
judgements in each claim's other views (`evidence.VIEWS`) beside it, where any finding is judged in a view besides
all prompts."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ...data.prompts import CLASS_NAMES
from ...stats import DRAWS, LEVEL, MIN_CLUSTERS
from ..evidence import ALL, VIEWS
from ..judgement import Judgement, ours_text, rule_dates
from .registry import CLAIMS, Finding

RECONSTRUCTED = "(our reconstruction)"  # after the paper's number where our measure rebuilds the paper's
HEADLINE = "(the headline)"  # a view's cell where the claim's headline is judged in that view
JUDGED_ON = "judged on"  # the column naming the view of each claim's headline


def columns(findings: Sequence[Finding]) -> list[str]:
    """The views (`evidence.VIEWS` keys) any finding is judged in besides its headline, in VIEWS's order."""
    return [key for key in VIEWS if any(key in f.views for f in findings)]


def in_views(findings: Sequence[Finding]) -> bool:
    """Whether any finding is judged in a view besides all prompts: then a table names each headline's view (JUDGED_ON)."""
    return any(f.view != ALL.key or f.views for f in findings)


def paper_cell(f: Finding) -> str:
    """The paper's number, marked where our measure of it is our reconstruction (`Claim.reconstructed`)."""
    return f.paper + (f" {RECONSTRUCTED}" if CLAIMS[f.id].reconstructed else "")


def view_cell(f: Finding, key: str) -> str:
    """Finding f's judgement in view `key` as a table cell (`view_text`), or HEADLINE where it is f's headline's view."""
    return HEADLINE if key == f.view else view_text(f.views.get(key))


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row a claim: claim, paper, ours (CI), N, verdict in the claim's headline view, and where any finding
    is judged in another view (`in_views`), the view it is judged on (JUDGED_ON) and a column for each other
    view any finding is judged in (`VIEWS`)."""
    shown = in_views(findings)
    rows = [{"claim": f.claim, "paper": paper_cell(f), "ours (95% CI)": ours_text(f), "N": f.n, "verdict": f.verdict}
            | ({JUDGED_ON: VIEWS[f.view].title} | {VIEWS[key].title: view_cell(f, key) for key in columns(findings)}
               if shown else {})
            for f in findings]
    return pd.DataFrame(rows, index=[f.id for f in findings])


def side_by_side(runs: dict[str, Sequence[Finding]]) -> pd.DataFrame:
    """Runs of the same claims (e.g. a task in two label settings) as one table: a row a claim, and for each run
    (its name a column level) our number with its interval, N and the verdict in the claim's headline view."""
    first = next(iter(runs.values()))
    if any([f.id for f in found] != [f.id for f in first] for found in runs.values()):
        raise ValueError("side_by_side puts runs of the same claims side by side; these differ")
    def cell(f: Finding, column: str) -> str:
        return ours_text(f) if column == "ours (95% CI)" else ("-" if f.n is None else str(f.n)) if column == "N" else f.verdict
    cells = {(name, column): [cell(f, column) for f in found]
             for name, found in runs.items() for column in ("ours (95% CI)", "N", "verdict")}
    return pd.DataFrame({("", "claim"): [f.claim for f in first], **cells}, index=[f.id for f in first])


def view_text(j: Judgement | None) -> str:
    """A view's judgement as a table cell: ours, N and verdict, "- (why)" where not tested, "-" where none."""
    return "-" if j is None else f"{ours_text(j)}, N={j.n}: {j.verdict}" if j.ours is not None else f"- ({j.why})"


def intro(n: int, sentence_n: int | None, seed: int, task: str | None = None) -> str:
    """What a report's table holds, written from the code that makes it: the sizes (n prompts of the task
    `task` where one is judged), the bootstrap (`stats`), which claims are headlined in which view
    (`Claim.views`) and what each view judges (`View.about`)."""
    data = f"{sentence_n} a sentence dataset" if sentence_n else "no sentence dataset (none could be had)"
    sizes = f"{n} prompts of the task {task}" if task else f"{n} prompts a word dataset, {data}"
    views = "; ".join(f"*{view.title}*: {view.about}" for view in VIEWS.values())
    return (f"{sizes}, seed {seed}. Intervals: {LEVEL:.0%} percentile bootstrap, "
            f"{DRAWS:,} draws over the distinct inputs, each drawn with all its prompts (a word dataset's prompts share "
            f"inputs); a claim on fewer than {MIN_CLUSTERS} distinct inputs is not tested. Ours, N and the verdict are "
            f"the headline, judged on the view the *{JUDGED_ON}* column names. That is *{VIEWS['correct_only'].title}* "
            f"for a claim on located heads that reads the sentence datasets alone (the paper's protocol there, l. "
            f"1141), and *{VIEWS['all'].title}* for every other. The last columns judge a claim again in its other "
            f"views, {HEADLINE} marking its headline's. The {len(VIEWS)} views: {views}. Each rule's date, and whether "
            "the data it judges had been read then, is listed after the reasons.")


REPORT_ON_TASK = ("the claims on them are judged on it, and the claims on the sentence datasets, or across datasets, are "
           "not tested")  # what a task's report judges, as `task_intro` says it


def task_intro(task: dict, judged: str = REPORT_ON_TASK) -> str:
    """What a task's file opens with, from its `Task.described`: the task, its size and label words, and what is
    judged on it (`judged`)."""
    notes = "".join(f" {note}" + ("" if note.endswith(".") else ".") for note in task["notes"])
    return (f"The task {task['name']} ({task['digest']}): {len(task['classes'])} classes ({', '.join(task['classes'])}), "
            f"{task['examples']:,} distinct examples, {task['records']}. {label_words_text(task['labels'])}.{notes} "
            f"It stands in for the paper's word datasets: {judged}.")


def label_words_text(labels: Sequence[str]) -> str:
    """A task report's label words in a sentence: "Label words foo/bar", or what `prompts.CLASS_NAMES` stands for."""
    if tuple(labels) == CLASS_NAMES:
        return "Label words: each demonstration's own class name, so the input's class is the true label"
    return f"Label words {'/'.join(labels)}"


def row(cells: Sequence[str]) -> str:
    """A markdown table row of `cells`."""
    return "| " + " | ".join(cells) + " |"


def markdown(findings: Sequence[Finding]) -> str:
    """The findings as one markdown table (claim, paper, ours (CI), N, verdict, and where any finding is judged
    in another view, the view it is judged on and each other view's judgement), each tested claim's why and rule
    with its other views' whys, then when each rule was set (`Claim.set_on`)."""
    keys, shown = columns(findings), in_views(findings)
    views = [JUDGED_ON, *(VIEWS[k].title for k in keys)] if shown else []
    rows = [row(["id", "claim", "paper", "ours (95% CI)", "N", "verdict", *views]), "|---|---|---|---|---|---|" + "---|" * len(views)]
    rows += [row([f.id, f.claim, paper_cell(f), ours_text(f), "-" if f.n is None else str(f.n), f.verdict,
                  *([VIEWS[f.view].title, *(view_cell(f, key) for key in keys)] if shown else [])]) for f in findings]
    why = [f"- **{f.id}** ({f.verdict}{'' if f.view == ALL.key else ', ' + VIEWS[f.view].title}): {f.why}. "
           f"Rule: {CLAIMS[f.id].rule}. Paper: {f.source}."
           + "".join(f" {VIEWS[key].title.capitalize()} ({j.verdict}): {j.why}." for key, j in f.views.items())
           for f in findings if f.ours is not None]
    return ("\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why)
            + "\n\n" + rule_dates([(f.id, CLAIMS[f.id].set_on) for f in findings]))
