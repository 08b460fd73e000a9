"""A claim and the registry of claims: a `Claim` holds the statement, the paper's number and its
source, the verdict rule (its prose reads the same thresholds as its judge), when the rule was set
(`set_on`) and the finder that runs the studies and applies the rule; `register` adds it to
`CLAIMS`, in the order the section modules register their claims (`verdicts.claims`). A `Finding`
is a claim with our judgement of it; the sources and dates the claims cite are named here."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

from .. import rules
from ..evidence import ALL, CORRECT, HELD_OUT, PAPER_SHARE, Evidence, View
from ..judgement import Judgement

V1 = "arXiv 2402.02872v1"  # the preprint; "l. N": line N of its text as extracted from the PDF
EMNLP = "the EMNLP 2024 version (arXiv 2402.02872v3)"
ABSTRACT_ONLY = ("only its abstract is at hand: the heads, the ablation and the bias measures are our reconstruction "
                 "(METHOD, Section 8)")
# When each rule was set, and whether the data it judges had been read then (git history).
FIRST_RULES = ("2026-11-23 (7261f91), before the first report (22d7730) was made, but after the committed notebooks "
               "had shown the bundled model's numbers (from a9d4783, ten hours before; notebook 08's bias reductions "
               "and causal check in 2a4f1e8)")
RECENCY_CONTROL = "2026-11-23 (2d54f5d), before the recency family's data were seen"
CAUSAL_REBUILT = (f"{FIRST_RULES}; the protocol it judges (mean ablation, {rules.RANDOM_DRAWS} layer-matched random draws) was "
                  "rebuilt after the first report (a414400)")
OVER_N = "2026-11-25 (d919c15): over every prompt where it read one, before those data were seen"
OUR_THRESHOLDS = ("2026-11-26, after the reports at 64 and 1,000 prompts of the earlier rules had been read: "
            "its thresholds are ours, not tuned to pass")
# The rules restated in the paper's words; each claim set then appends whether the data it judges had been seen.
RESTATED = "2026-11-27, when the rules were restated in the paper's words, after the reports of the earlier rules had been read"
WORD_ONLY, SENTENCE_ONLY, BOTH = frozenset({"word"}), frozenset({"sentence"}), frozenset({"word", "sentence"})
# The views a claim on the label flow in located heads is judged in: again on the correct prompts and in the paper's
# share of heads (LOCATED); where it measures those heads on prompts, again in heads located on other inputs (FLOW).
# A claim on located heads that is no label flow (the bias runs) is judged again held out alone (WITH_HELD_OUT).
LOCATED = (ALL, CORRECT, PAPER_SHARE)
FLOW = (*LOCATED, HELD_OUT)
WITH_HELD_OUT = (ALL, HELD_OUT)


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of the paper (or one control or extension of ours, which says so) and how we judge
    it. `paper`, `rule` and `source` may name the rule's thresholds ("{heads:.0%}") and the
    protocol's K, RANDOM_DRAWS and TOP: they are written out from the same numbers the judge reads."""

    id: str
    claim: str  # the paper's statement, or "Our control: ..." / "Our extension: ..."
    paper: str  # the paper's number, heads and layers, as it gives them
    rule: str  # the verdict rule
    source: str  # the version and the line(s) of its text the statement and number rest on
    set_on: str  # when the rule was set, and whether the data it judges had been read then
    unit: str  # what our number is, e.g. "share of prompts, top-1", "MRR", "Spearman's rho"
    find: Callable[[Evidence], Judgement] = field(repr=False)  # the studies and the rule, on the evidence given
    notebooks: tuple[str, ...]  # the notebooks that end with its verdict ("01" ... "08")
    reads: frozenset[str] = WORD_ONLY  # the datasets its judgement needs prompts of ("word", "sentence")
    thresholds: dict[str, float] = field(default_factory=dict)
    views: tuple[View, ...] = (ALL,)  # the views it is judged in (`evidence.VIEWS`): LOCATED, FLOW or all prompts

    @property
    def headline(self) -> View:
        """The view its headline is judged in: the correctly predicted prompts for a claim judged there
        that reads the sentence datasets alone, the paper's protocol there ("We do experiments on all the
        cases predicting the correct labels", l. 1141); its first view for every other."""
        return CORRECT if CORRECT in self.views and self.reads == SENTENCE_ONLY else self.views[0]

    @property
    def others(self) -> tuple[View, ...]:
        """The views it is judged again in besides its headline's, in the order it lists them."""
        return tuple(view for view in self.views if view != self.headline)

    def __post_init__(self):
        numbers = {**self.thresholds, "K": rules.K, "RANDOM_DRAWS": rules.RANDOM_DRAWS, "TOP": rules.TOP}
        for text in ("claim", "paper", "rule", "source"):
            object.__setattr__(self, text, getattr(self, text).format(**numbers))

    def finding(self, ours: Judgement, views: dict[str, Judgement] | None = None) -> Finding:
        """The finding of judgement `ours` in the claim's headline view, with its other views' judgements."""
        return Finding(self.id, self.claim, self.paper, self.source, self.unit, ours.ours, ours.ci, ours.n, ours.verdict,
                       ours.why, self.headline.key, views or {})


CLAIMS: dict[str, Claim] = {}  # id -> claim, in the report's order: the order `register` saw them


def register(claim: Claim) -> Claim:
    """Add `claim` to CLAIMS, after every claim registered before it (its id must be new)."""
    if claim.id in CLAIMS:
        raise ValueError(f"claim {claim.id!r} is registered twice")
    CLAIMS[claim.id] = claim
    return claim


def claims_of(notebook: str) -> list[str]:
    """The ids of the claims notebook `notebook` ("01" ... "08") ends with, in registry order."""
    return [c.id for c in CLAIMS.values() if notebook in c.notebooks]


@dataclass
class Finding:
    """Our result for one claim: the claim's words and our judgement (`Judgement`'s fields) in its
    headline view (`view`, an `evidence.VIEWS` key), and its judgements in its other views."""

    id: str
    claim: str
    paper: str
    source: str
    unit: str  # what our number is (the claim's `unit`)
    ours: float | str | None
    ci: tuple[float, float] | None
    n: int | None
    verdict: str
    why: str
    view: str = "all"  # the view the headline is judged in
    views: dict[str, Judgement] = field(default_factory=dict)  # the same rule in the claim's other views, by key

    def to_dict(self) -> dict:
        d = asdict(self)
        for part in (d, *d["views"].values()):  # JSON has lists, not tuples
            if part["ci"] is not None:
                part["ci"] = list(part["ci"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        """The finding `to_dict` gave `d` for (a report's JSON entry)."""
        def ci(fields: dict) -> tuple[float, float] | None:
            return None if fields["ci"] is None else tuple(fields["ci"])
        return cls(**{**d, "ci": ci(d), "views": {key: Judgement(**{**j, "ci": ci(j)}) for key, j in d["views"].items()}})
