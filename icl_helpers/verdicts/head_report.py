"""The head types of one model, as a file: the head-set study (`studies.head_sets`) at a report's
sizes, the literature's claims judged on it (`claims.literature`), and the tables a reader checks the
verdicts by (the sets, their overlaps, the ablations against layer-matched random heads, the
two-tower signature per set), as JSON (`head_report`) and markdown (`markdown`).

`python -m icl_helpers heads` writes it; `compare` puts several models' side by side (their
"claims" are `Finding.to_dict`'s, as the report's are).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from ..core.heads import Head, head_name
from ..data.setting import MAIN, Setting
from ..data.tasks import Task, add_task
from ..model.loading import ICLModel
from ..studies import head_sets
from .claims import CLAIMS, Finding, ids_of
from .claims import markdown as claims_markdown
from .claims.literature import set_sizes
from .claims.tables import task_intro
from .common import WORD
from .judgement import judged_or_not
from .rules import K
from .whose import LITERATURE

HEADS_ON_TASK = "the literature's claims are judged on it, and no sentence dataset is read"  # a task's heads file says so
KIND = "head-types"  # a report's "kind": what `compare` tells the paper's reports from these by
CURVE = (1, 2, 4)  # more sizes ablated, for the curves


def judged(study: head_sets.HeadSetStudy, ids: Sequence[str] | None = None) -> list[Finding]:
    """Each claim of the literature (all of them, or those of `ids`) judged on the study; "not tested" with
    the reason where its data cannot judge it (too few distinct inputs)."""
    return [CLAIMS[id].finding(judged_or_not(lambda id=id: CLAIMS[id].find(study))) for id in ids or ids_of(LITERATURE)]


def records(table: pd.DataFrame) -> list[dict]:
    """A table's rows as JSON records, its index as columns."""
    return table.reset_index().to_dict("records")


def head_report(m: ICLModel, n: int, sentence: Sequence[str], sentence_n: int, n_sequences: int = 200,
                draws: int = 20, seed: int = 0, data_dir: str | Path | None = None,
                given: Sequence[Head] | None = None, announce: Callable[[str], None] = print,
                task: Task | None = None, setting: Setting = MAIN) -> dict:
    """The study on n records of each word dataset (or of the task, in its place: `tasks.add_task`) and sentence_n
    of each of `sentence`, judged: a JSON-ready dict (kind, sizes, claims, sets, overlaps, ablations, floors,
    signatures). Every prompt is in the setting's label words, separator and demonstrations a class."""
    word = (add_task(task),) if task else tuple(WORD)
    sizes = set_sizes(m.arch)
    announce(f"head sets: scores on {n_sequences} random sequences and the SCORE halves, ablations of sets of "
             f"{', '.join(map(str, sorted({*sizes, *CURVE})))} heads with {draws} layer-matched draws each")
    study = head_sets.head_set_study(m, word, n, sizes, CURVE, sentence, sentence_n, n_sequences, n_random=draws,
                                     seed=seed, data_dir=data_dir, given=given, setting=setting)
    announce("the literature's claims")
    findings = judged(study)
    names = [*head_sets.SCORES, *([head_sets.GIVEN] if given else [])]
    exclusive = [head_sets.exclusive(a, b) for a, b in head_sets.EXCLUSIONS]
    ablated = {"word": study.pooled()} | ({"sentence": study.pooled(sentence)} if sentence else {})
    announce(f"the two-tower signature of each set of {K}")
    signs = head_sets.signatures(m, study, K, n, names, seed=seed, data_dir=data_dir, setting=setting)
    return {"kind": KIND, "sizes": list(sizes), "k": K, "sequences": n_sequences, "draws": draws,
            "claims": [f.to_dict() for f in findings],
            "sets": {name: [head_name(h) for h in heads] for name, heads in study.sets(K, names).items()},
            "overlaps": {k: records(head_sets.overlap_table(study.scores.scores, k)) for k in sizes},
            "floors": {what: {**a.floors(), "N": len(a.inputs)} for what, a in ablated.items()},
            "ablations": {what: records(a.effect_table([*names, *exclusive], sizes)) for what, a in ablated.items()},
            "signatures": records(head_sets.signature_table(signs))}


def table(rows: list[dict]) -> str:
    """JSON records as a markdown table (floats to 3 significant digits; a difference of means below
    float64's resolution, e.g. 7e-18, as 0)."""
    def text(v: object) -> str:
        return ("0" if abs(v) < 1e-12 else f"{v:.3g}") if isinstance(v, float) else str(v)
    cells = lambda r: [text(v) for v in r.values()]  # noqa: E731
    return "\n".join(["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
                     + ["| " + " | ".join(cells(r)) + " |" for r in rows])


def markdown(report: dict) -> str:
    """The report as a page: its claims' table and reasons, then the tables they rest on."""
    findings = [Finding.from_dict(c) for c in report["claims"]]
    sizes = " and ".join(map(str, report["sizes"]))
    task = report.get("task")
    where = f"of the task {task['name']}" if task else "a word dataset"
    sentence = "" if task else (f", {report['sentence_n'] or 0} a sentence dataset (EVAL halves, tasks the scores "
                                "never saw)")
    parts = [f"# {report['model']}: which heads carry in-context learning" + (f" on the task {task['name']}" if task else "")
             + "\n", *([task_intro(task, HEADS_ON_TASK) + "\n"] if task else []),
             f"{report['n']} records {where} (each split by input into SCORE, which the scores read, and EVAL, which "
             f"the ablations read){sentence}, seed {report['seed']}; {report['sequences']} random sequences for the "
             f"attention scores; {report['draws']} layer-matched random draws a set. Sets of {sizes} heads (the "
             "paper's share of the model's heads, then K).\n", claims_markdown(findings),
             f"## The sets of {report['k']}\n", table([{"set": s, "heads": ", ".join(h)} for s, h in report["sets"].items()])]
    for k, rows in report["overlaps"].items():
        parts += [f"\n## Overlaps of the top {k}\n", table(rows)]
    for what, rows in report["ablations"].items():
        floors = ", ".join(f"{name} {v:.1%}" for name, v in report["floors"][what].items() if name != "N")
        parts += [f"\n## Top-1 and the TR ratio with each set mean-ablated at the last position: "
                  f"{'the task' if task else what + ' datasets'} "
                  f"(N={report['floors'][what]['N']}; {floors})\n", table(rows)]
    parts += [f"\n## The two-tower signature of each set of {report['k']} ("
              + ("the task's" if task else "word datasets'") + " EVAL records)\n",
              table(report["signatures"])]
    return "\n".join(parts) + "\n"

