"""A rule's judgement on our data: our headline number, its 95% bootstrap interval over
prompts (`stats`), N, the verdict and why; the four verdicts, and how a judgement reads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..errors import CannotMeasure

REPLICATES, PARTLY, FAILS, NOT_TESTED = "replicates", "partly", "does not replicate", "not tested"


class Unjudgeable(CannotMeasure):
    """Evidence a claim cannot be judged on, and why: a view of the records (fewer than 2 correctly
    answered prompts in a dataset, heads given rather than located), a dataset not at hand. A claim's
    judging reads it, and any `CannotMeasure` below it, as not tested (`judged_or_not`)."""


@dataclass(frozen=True)
class Judgement:
    """One rule applied to one set of records."""

    ours: float | str | None
    ci: tuple[float, float] | None
    n: int | None
    verdict: str
    why: str


def not_tested(reason: str) -> Judgement:
    return Judgement(None, None, None, NOT_TESTED, reason)


def judged_or_not(judge: Callable[[], Judgement]) -> Judgement:
    """judge(), or not tested, saying why, where what it measures cannot be had (`CannotMeasure`)."""
    try:
        return judge()
    except CannotMeasure as why:
        return not_tested(str(why))


def all_hold(*conditions: bool) -> str:
    """All conditions hold: replicates; some: partly; none: does not replicate."""
    return REPLICATES if all(conditions) else PARTLY if any(conditions) else FAILS


def together(parts: Sequence[Judgement]) -> str:
    """Replicates if every part replicates; does not replicate if no part replicates even partly; else partly."""
    verdicts = {j.verdict for j in parts}
    return REPLICATES if verdicts == {REPLICATES} else FAILS if verdicts == {FAILS} else PARTLY


def ours_text(j: Judgement) -> str:
    """Our number and interval as a table cell ("- (why)" where not tested)."""
    if j.ours is None:
        return f"- ({j.why})"
    if isinstance(j.ours, str):
        return j.ours
    ci = f" ({j.ci[0]:.3g} to {j.ci[1]:.3g})" if j.ci is not None else ""
    return f"{j.ours:.3g}{ci}"


RULE_DATES = "When each rule was set, and whether the data it judges had been read then"


def rule_dates(dates: Sequence[tuple[str, str]]) -> str:
    """The list that closes a report's reasons (markdown): each claim's id and when its rule was set (its `set_on`)."""
    return f"{RULE_DATES}:\n\n" + "\n".join(f"- **{id}**: {date}." for id, date in dates) + "\n"
