"""Verdicts across models: the reports `python -m icl_helpers report --json` wrote, one per
model, as tables: the verdict counts first, then the paper's claims, then our rows (a row a claim
with its unit, a column a model, each cell the verdict and the headline number), and the claims
whose verdict differs between the models.

Reads JSON only: no model, no torch.
"""
from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Callable

from ..errors import UsageError
from ..paths import same_file
from .whose import BLOCKS

VERDICT_MARK = {"replicates": "yes", "partly": "partly", "does not replicate": "no", "not tested": "not tested"}
REPORT_KIND = "paper"  # the kind of a `report` file (a `heads` file says its own: `head_report.KIND`)
WROTE = "give files `python -m icl_helpers report --json` wrote"  # what to do about a file that is not a report
JSON_TYPES = {dict: "an object", list: "a list", str: "text", int: "a whole number", float: "a number",
              bool: "true or false", type(None): "null"}  # a JSON value's type, by the Python type `json` reads it as
NUMBER = (int, float)


def counts_row(reports: list[dict], what: str, counted: Callable[[dict], bool]) -> str:
    """The verdict counts of each report's findings that `counted` keeps, as a table row saying `what` they are."""
    counts = [{v: sum(f["verdict"] == v for f in r["claims"] if counted(f)) for v in VERDICT_MARK} for r in reports]
    return table_row([what, *(" / ".join(str(c[v]) for v in VERDICT_MARK) for c in counts)])


def totals(reports: list[dict], ids: dict[str, list[str]]) -> list[str]:
    """The totals table, first: each block's verdict counts (`ids`: a block's name and its claims' ids), and
    the pooled top-1 of the word datasets where a report holds it."""
    rows = [table_row(["verdicts: " + " / ".join(VERDICT_MARK), *(r["model"] for r in reports)]),
            "|---|" + "---|" * len(reports)]
    rows += [counts_row(reports, f"{name} ({len(block)})", lambda f, block=block: f["id"] in block)
             for name, block in ids.items()]
    top1 = [next((f["ours"] for f in r["claims"] if f["id"] == "table2"), None) for r in reports]
    if any(isinstance(t, NUMBER) for t in top1):
        rows.append(table_row(["pooled top-1 on the word datasets (table2)",
                               *(f"{t:.1%}" if isinstance(t, NUMBER) else "-" for t in top1)]))
    return rows


def intro(report: dict) -> str:
    """What the tables hold: the sizes, and what a cell says."""
    if report.get("kind", REPORT_KIND) != REPORT_KIND:
        return (f"{report['n']} records per word dataset, {report['sentence_n']} per sentence dataset, seed "
                f"{report['seed']}: the literature's claims on which heads carry in-context learning. A cell is the "
                "verdict and our headline number, in the unit its row names. Each model's own file gives its interval, "
                "N, why and the tables it rests on.")
    task = report.get("task")
    sizes = (f"{report['n']} prompts of the task {task['name']} ({task['digest']}), in place of the word datasets" if task
             else f"{report['n']} prompts per word dataset, {report['sentence_n']} per sentence dataset")
    return (f"{sizes}, seed {report['seed']}. "
            "A cell is the verdict and our headline number, in the unit its row names. The headline is on the correct "
            "prompts for a claim on located heads that reads the sentence datasets alone (the paper's protocol there), "
            "on all prompts for every other. In brackets: each other view's verdict where it differs ("
            + ", ".join(view["mark"] if view["mark"] == view["title"] else f"{view['mark']}: {view['title']}"
                        for view in report["views"].values())
            + "). Each model's own report gives its interval, N, why and what each view judges.")


def json_type(value: object) -> str:
    """The JSON name of a value's type, as a message says it ("an object", "null", ...)."""
    return JSON_TYPES.get(type(value), type(value).__name__)


def field(path: Path, where: str, holder: dict, key: str, *types: type) -> object:
    """`holder[key]`, where it is one of `types` (true or false is no number), else a UsageError
    naming the file and the field; `where` names `holder` in the report ("claims[3]"; "" for the report)."""
    if key not in holder:
        raise UsageError(f"{path}: {where or 'the report'} has no {key!r}: {WROTE}.")
    got = holder[key]
    if not isinstance(got, types) or (isinstance(got, bool) and bool not in types):
        wanted = " or ".join(JSON_TYPES[t] for t in types if t is not int or float not in types)  # a number covers it
        raise UsageError(f"{path}: {where + '.' if where else ''}{key} is {json_type(got)}, not {wanted}: {WROTE}.")
    return got


def objects(path: Path, where: str, entries: list | dict) -> list[tuple[str, dict]]:
    """Each entry of a list or object of objects with its name ("claims[3]", "views['all']"), or a
    UsageError naming the first that is not an object."""
    items = enumerate(entries) if isinstance(entries, list) else entries.items()
    named = [(f"{where}[{key!r}]", entry) for key, entry in items]
    for name, entry in named:
        if not isinstance(entry, dict):
            raise UsageError(f"{path}: {name} is {json_type(entry)}, not an object: {WROTE}.")
    return named


def check_report(path: Path, report: dict) -> None:
    """A UsageError naming the file and the first field that the table reads and `report` lacks
    or holds as another type: the sizes, seed, model and kind, the views' titles and marks, and
    each claim's id, text, verdict and headline number, and its views' verdicts and numbers."""
    field(path, "", report, "model", str)
    for key in ("n", "sentence_n", "seed"):
        field(path, "", report, key, int)
    for key in ("kind", "weights", "dtype"):
        if key in report:
            field(path, "", report, key, str)
    views = objects(path, "views", field(path, "", report, "views", dict)) if "views" in report else []
    for name, view in views:
        for key in ("title", "mark"):
            field(path, name, view, key, str)
    for name, claim in objects(path, "claims", field(path, "", report, "claims", list)):
        for key in ("id", "whose", "claim", "verdict"):
            field(path, name, claim, key, str)
        if claim["whose"] not in BLOCKS:
            raise UsageError(f"{path}: {name}.whose is {claim['whose']!r}, not one of {', '.join(BLOCKS)}: {WROTE}.")
        if "unit" in claim:  # an older report has none
            field(path, name, claim, "unit", str)
        field(path, name, claim, "ours", *NUMBER, str, type(None))
        for view_name, view in objects(path, f"{name}.views", field(path, name, claim, "views", dict)):
            field(path, view_name, view, "verdict", str)
            field(path, view_name, view, "ours", *NUMBER, str, type(None))
        unknown = next((key for key in claim["views"] if key not in report.get("views", {})), None)
        if unknown is not None:
            raise UsageError(f"{path}: {name}.views holds {unknown!r}, a view the report's views do not describe: "
                             f"{WROTE}.")


def read_reports(paths: list[str | Path]) -> list[dict]:
    """The reports at `paths`, in that order; a UsageError naming a file given twice (the same
    column twice would make every claim agree), the first that is not a report (`check_report`),
    two reports that do not share a size and seed, or a task (their verdicts would not be comparable), or two
    of one model: the same weights' fingerprint, dtype, size and seed (a copy of one report)."""
    for i, path in enumerate(paths):
        again = next((p for p in paths[i + 1:] if same_file(path, p)), None)
        if again is not None:
            also = "" if Path(again) == Path(path) else f" (the second time as {again})"
            raise UsageError(f"{path} is given twice{also}: give each report once.")
    reports = []
    for path in map(Path, paths):
        try:
            r = json.loads(path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError) as err:
            raise UsageError(f"{path} cannot be read as a report ({err}): give files `report --json` wrote.") from None
        if not isinstance(r, dict) or not {"model", "n", "sentence_n", "seed", "claims"} <= r.keys():
            raise UsageError(f"{path} is not a report: {WROTE}.")
        if r.get("kind", REPORT_KIND) == REPORT_KIND and "views" not in r:
            raise UsageError(f"{path} does not describe its views (an older report): run its `report` again (its "
                             "studies are cached) and compare the new file.")
        check_report(path, r)
        reports.append(r)
    if len(reports) < 2:
        raise UsageError("Give two or more reports to compare.")
    kinds = {r.get("kind", REPORT_KIND) for r in reports}
    if len(kinds) > 1:
        raise UsageError("The reports are of different kinds (" + "; ".join(f"{r['model']}: {r.get('kind', REPORT_KIND)}"
                         for r in reports) + "): compare `report` files together, and `heads` files together.")
    sizes = {(r["n"], r["sentence_n"], r["seed"]) for r in reports}
    if len(sizes) > 1:
        raise UsageError("The reports differ in size or seed (" + "; ".join(
            f"{r['model']}: n={r['n']}, sentence_n={r['sentence_n']}, seed={r['seed']}" for r in reports)
            + "): compare reports of one size and seed.")
    if len({(r.get("task") or {}).get("digest") for r in reports}) > 1:
        raise UsageError("The reports judge different data (" + "; ".join(
            f"{r['model']}: " + (f"the task {r['task']['name']} ({r['task']['digest']})" if r.get("task") else
                                 "the paper's datasets") for r in reports) + "): compare reports of one task, or of none.")
    seen: dict[tuple, Path] = {}  # the first file of each model: its weights and dtype (an older report has neither)
    for path, r in zip(map(Path, paths), reports):
        if "weights" in r:
            model = (r["weights"], r.get("dtype"))
            if model in seen:
                raise UsageError(f"{seen[model]} and {path} are one model given twice (weights {r['weights']}, "
                                 f"{r.get('dtype', 'no dtype')}, one size and seed): give each model's report once.")
            seen[model] = path
    return reports


def cell(finding: dict | None, views: dict[str, dict]) -> str:
    """A table cell: the verdict in short and the headline number (or the reason it is untested),
    and in brackets each other view's verdict where it differs from the headline's, by the view's mark
    in `views` (its report's own description of its views, by key: none in a heads file)."""
    if finding is None:
        return "-"
    verdict, ours = finding["verdict"], finding["ours"]
    if ours is None:
        return verdict
    text = f"{verdict}: {ours:.3g}" if isinstance(ours, NUMBER) else f"{verdict}: {ours}"
    flips = [f"{views[key]['mark']}: {j['verdict']}" for key, j in finding["views"].items()
             if j["ours"] is not None and j["verdict"] != verdict]
    return text + (f" ({'; '.join(flips)})" if flips else "")


def differing(reports: list[dict]) -> list[str]:
    """The ids of the claims whose verdict is not the same in every report, in registry order."""
    verdicts: dict[str, set[str]] = {}
    for r in reports:
        for f in r["claims"]:
            verdicts.setdefault(f["id"], set()).add(f["verdict"])
    return [id for id, v in verdicts.items() if len(v) > 1]


def table_row(cells: list[str]) -> str:
    """A markdown table row of `cells`, each escaped (`escaped`)."""
    return "| " + " | ".join(map(escaped, cells)) + " |"


def escaped(text: str) -> str:
    """`text` as one table cell: a `|` as `\\|`, and a newline or other control character as a
    space, so that a model name or claim of any text keeps the table's shape."""
    return "".join(" " if unicodedata.category(c) == "Cc" else c for c in text).replace("|", "\\|")


def claims_table(reports: list[dict], ids: list[str]) -> list[str]:
    """One row a claim of `ids` (its id, its words, the unit of our number), one column a model."""
    by_model = [{f["id"]: f for f in r["claims"]} for r in reports]
    words = {f["id"]: f for r in reports for f in r["claims"]}  # each claim's words and unit, as the last report has them
    rows = [table_row(["claim", "unit", *(r["model"] for r in reports)]), "|---|---|" + "---|" * len(reports)]
    return rows + [table_row([f"{id}: {words[id]['claim']}", words[id].get("unit", "-"),
                              *(cell(found.get(id), r.get("views", {})) for r, found in zip(reports, by_model))])
                   for id in ids]


def markdown(reports: list[dict]) -> str:
    """The verdict counts first; then a table of each block of claims by whose they are (`whose.BLOCKS`: the
    paper's claims and our rows in a report, the literature's claims in a heads file), a row a claim, a column a model, each cell the verdict and our
    headline number; then the claims whose verdict differs."""
    whose = {f["id"]: f["whose"] for r in reports for f in r["claims"]}  # each claim's, in registry order
    blocks = {name: [id for id, w in whose.items() if w == key] for key, name in BLOCKS.items() if key in whose.values()}
    tables = ["\n".join(totals(reports, blocks))]
    tables += [f"{name[0].upper()}{name[1:]}:\n\n" + "\n".join(claims_table(reports, block))
               for name, block in blocks.items()]
    diff = differing(reports)
    tail = ("Verdicts that differ between the models: " + ", ".join(diff) + "." if diff
            else "Every claim has the same verdict on every model.")
    return intro(reports[0]) + "\n\n" + "\n\n".join(tables) + "\n\n" + tail + "\n"
