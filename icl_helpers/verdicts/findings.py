"""The findings on one model: every claim of the paper tested: the studies run once (their results cached
on disk, so notebooks and a second report reuse them), each claim judged by its rule, in the
main setting or another (`data.setting`, `robustness`). A notebook ends with
`report(m, ..., ids=[its claims])`: the same code on its own prompts."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from ..cache import prompts_hash, source_hash, stored_json
from ..core.heads import Head
from ..data.setting import MAIN, Setting
from ..data.tasks import Task, add_task, read_task
from ..errors import UsageError
from ..model.loading import ICLModel
from .claims import CLAIMS, Claim, Finding, fewest_prompts, reported
from .claims.registry import on_task
from .evidence import ALL, Evidence
from .judgement import Judgement, judged_or_not, not_tested

CODE = source_hash()  # the package's source as this process loaded it: findings are kept under it


def report(m: ICLModel, n: int, sentence_n: int, seed: int = 0, data_dir: str | Path | None = None,
           announce: Callable[[str], None] = print, ids: Sequence[str] | None = None,
           heads: str | Sequence[Head] | None = None, setting: Setting = MAIN, headline_only: bool = False,
           task: Task | str | Path | None = None) -> list[Finding]:
    """One finding a claim of `ids` (default: the paper's claims and ours, `claims.reported`), in their order: n prompts
    a word dataset, sentence_n a sentence dataset (none where no copy or hub can be had: those
    say why). Only the studies those claims need are run. announce: hears each claim's line
    ("fig2: ...") as its judging starts (a log; default print). heads ("19-11,20-11" or (layer, head)
    pairs): analyse these in every dataset instead of each one's top K located (Figs. 3-4 and
    12-15 still judge the located top K). setting: the heads K, label words, separator and
    demonstrations a class (default: the main run's); a claim it cannot build a prompt for is
    not tested, saying why. headline_only: judge each claim in its headline view alone (no other
    views: what the robustness table reads, at a fraction of the cost). task: a task of one's own
    (`data.tasks.read_task`'s, or its file), n records of it in place of the word datasets, judged by the claims
    that read the word datasets alone (`on_task`); the others are not tested, saying why."""
    judged_here = reported()
    ids = judged_here if ids is None else ids
    unknown = [i for i in ids if i not in judged_here]
    if unknown:
        elsewhere = [i for i in unknown if i in CLAIMS]
        also = f" ({', '.join(elsewhere)}: the literature's, judged by `heads`)" if elsewhere else ""
        raise UsageError(f"Unknown claim id(s) {', '.join(unknown)}{also}: choose from {', '.join(judged_here)}.")
    if isinstance(task, (str, Path)):
        task = read_task(task, setting.per_class)
    s = Evidence(m, n, sentence_n, seed, data_dir, heads, setting, add_task(task) if task else None)
    found = []
    for id in ids:
        if task and not on_task(CLAIMS[id]):
            found.append(CLAIMS[id].finding(not_tested(NOT_ON_TASK)))
            continue
        announce(f"{id}: {CLAIMS[id].claim}")
        found.append(kept_finding(id, s, headline_only, task.digest if task else None))
    return found


NOT_ON_TASK = "it reads the paper's sentence datasets or several datasets; a task stands in for the word datasets alone"


def judged(id: str, s: Evidence, headline_only: bool = False) -> Finding:
    """The claim judged in each of its views (`Claim.views`: its headline's first, e.g. all prompts,
    then where it applies the correct ones only, the paper's share of heads and held-out records in
    heads located on others; the headline alone where headline_only); not tested, saying why, where
    the setting cannot build a prompt it needs."""
    claim = CLAIMS[id]
    short = too_few(claim, s)
    if short:
        return claim.finding(not_tested(short))
    ours = in_view(claim.find, lambda: s.in_view(claim.headline))
    if ours.ours is not None and "sentence" in claim.reads and not s.sentence:
        ours = replace(ours, why=f"{ours.why}; {WORD_ONLY_NOTE}")
    # a view's headline untested leaves all prompts to show
    judge_others = not headline_only and (ours.ours is not None or claim.headline != ALL)
    return claim.finding(ours, {view.key: in_view(claim.find, lambda view=view: s.in_view(view)) for view in claim.others}
                         if judge_others else {})


WORD_ONLY_NOTE = "judged on the word datasets alone: the paper's sentence datasets cannot be had on this machine"


def too_few(claim: Claim, s: Evidence) -> str | None:
    """Why the claim cannot be judged at the report's sizes, before any study runs, or None: fewer prompts
    a dataset than `fewest_prompts` (sentence datasets where any is at hand)."""
    need = fewest_prompts(claim.id, s.seed, s.setting, s.word)
    sizes = {"word": s.n, "sentence": s.sentence_n if s.sentence else need.get("sentence", 0)}
    short = [kind for kind in sorted(need) if sizes[kind] < need[kind]]
    if not short:
        return None
    return (f"too few prompts: {', '.join(f'{sizes[kind]} {kind} prompts a dataset' for kind in short)}; its intervals "
            f"need at least {max(need[kind] for kind in short)}")


def kept_finding(id: str, s: Evidence, headline_only: bool = False, task: str | None = None) -> Finding:
    """`judged(id, s, headline_only)`, kept in the results cache under the model's weights, the sizes,
    seed, heads given, sentence datasets at hand, setting (other than the main one), views (where
    the headline's alone), the task's digest (where a task is judged) and the package's own source: a
    report run again, or resumed after an interruption, judges only the claims it had not finished."""
    on = dict(claim=id, n=s.n, sentence_n=s.sentence_n, seed=s.seed, heads=prompts_hash([repr(s.given)]),
              data=prompts_hash(s.sentence))
    extra = {**({} if s.setting == MAIN else {"setting": s.setting}),  # the main run's names as they were
             **({"views": "headline"} if headline_only else {}), **({"task": task} if task else {})}
    return Finding.from_dict(stored_json("finding", s.m, on, lambda: judged(id, s, headline_only).to_dict(), CODE, **extra))


def in_view(find: Callable[[Evidence], Judgement], view: Callable[[], Evidence]) -> Judgement:
    """A claim's finder on a view of the evidence (`Evidence.in_view`), or not tested, saying why,
    where the view cannot judge it."""
    return judged_or_not(lambda: find(view()))
