"""Every claim we judge, the paper's, ours and the literature's, in one registry: a `Claim` holds the
statement, whose it is, the paper's number and its source, the verdict rule (its prose reads the same
thresholds as its judge), when the rule was set (`set_on`) and the finder that applies the rule;
`register` adds it to `CLAIMS`. A `Finding` is a claim with our judgement of it, as a report's JSON
holds it (`to_dict`). The paper's claims and ours are judged on an `evidence.Evidence` (`findings.report`),
the literature's on a `studies.head_sets.HeadSetStudy` (`head_report`)."""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from ...data.setting import MAIN, Setting
from ...data.split import input_halves, records_in
from ...data.tasks import TASKS
from ...errors import UsageError
from ...stats import MIN_CLUSTERS
from .. import rules
from ..common import WORD
from ..evidence import ALL, CORRECT, View
from ..judgement import Judgement
from ..whose import BLOCKS, OURS, PAPER

OUR_WORDS = "Our "  # how the statement of a claim of ours begins ("Our control: ...", "Our row: ...")
WORD_ONLY, SENTENCE_ONLY, BOTH = frozenset({"word"}), frozenset({"sentence"}), frozenset({"word", "sentence"})
NO_PROMPTS = frozenset()  # a claim judged on no prompts (the attention scores on random sequences)
# Where a claim's interval finds its MIN_CLUSTERS distinct inputs (`fewest_prompts`).
EACH_DATASET, EACH_CLASS, EVAL_POOLED = "each dataset", "each class of input of each dataset", "the EVAL halves pooled"


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim and how we judge it. `claim`, `paper`, `rule` and `source` may name the rule's thresholds
    ("{heads:.0%}") and the protocol's K, RANDOM_DRAWS and TOP: they are written out from the same numbers
    the judge reads."""

    id: str
    claim: str  # the paper's statement, or "Our control: ..." / "Our row: ..." / "Our extension: ..."
    paper: str  # the paper's number, heads and layers, as it gives them (another paper's by name)
    rule: str  # the verdict rule
    source: str  # the version and the line(s) of its text it rests on; what of another paper we hold
    set_on: str  # when the rule was set, and whether the data it judges had been read then
    unit: str  # what our number is, e.g. "share of prompts, top-1", "MRR", "Spearman's rho"
    find: Callable[..., Judgement] = field(repr=False)  # the rule on an `Evidence`, or a `HeadSetStudy` (LITERATURE's)
    notebooks: tuple[str, ...]  # the notebooks that end with its verdict ("01" ... "09")
    whose: str = PAPER  # PAPER, OURS or LITERATURE (`verdicts.whose`)
    reconstructed: bool = False  # our measure is rebuilt from a description, not the paper's own text or code
    reads: frozenset[str] = WORD_ONLY  # the datasets its judgement needs prompts of ("word", "sentence")
    clusters: str = EACH_DATASET  # where its interval's distinct inputs are counted: EACH_DATASET, EACH_CLASS, EVAL_POOLED
    thresholds: dict[str, float] = field(default_factory=dict)
    views: tuple[View, ...] = (ALL,)  # the views it is judged in (`evidence.VIEWS`)

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
        if self.whose not in BLOCKS:
            raise ValueError(f"claim {self.id!r}: whose is {self.whose!r}, not one of {', '.join(BLOCKS)}")
        if self.claim.startswith(OUR_WORDS) != (self.whose == OURS):
            raise ValueError(f"claim {self.id!r}: a claim of ours (whose=OURS), and only one, begins {OUR_WORDS!r}")
        numbers = {**self.thresholds, "K": rules.K, "RANDOM_DRAWS": rules.RANDOM_DRAWS, "TOP": rules.TOP}
        for text in ("claim", "paper", "rule", "source"):
            object.__setattr__(self, text, getattr(self, text).format(**numbers))

    def finding(self, ours: Judgement, views: dict[str, Judgement] | None = None) -> Finding:
        """The finding of judgement `ours` in the claim's headline view, with its other views' judgements."""
        return Finding(self.id, self.whose, self.claim, self.paper, self.source, self.unit, ours.ours, ours.ci, ours.n,
                       ours.verdict, ours.why, self.headline.key, views or {})


CLAIMS: dict[str, Claim] = {}  # id -> claim, in the order `register` saw them (`verdicts.claims` sets it)


def register(claim: Claim) -> Claim:
    """Add `claim` to CLAIMS, after every claim registered before it (its id must be new)."""
    if claim.id in CLAIMS:
        raise ValueError(f"claim {claim.id!r} is registered twice")
    CLAIMS[claim.id] = claim
    return claim


TASK_NOTEBOOK = "10"  # the notebook that judges a task of one's own: it ends with every claim `on_task`


def on_task(claim: Claim) -> bool:
    """Whether a task's report judges the claim: it reads the word datasets alone (a task stands in for them)."""
    return claim.reads == WORD_ONLY


def claims_of(notebook: str) -> list[str]:
    """The ids of the claims notebook `notebook` ("01" ... "10") ends with, in registry order: those that name it,
    or for TASK_NOTEBOOK the paper's claims and ours that a task's report judges."""
    if notebook == TASK_NOTEBOOK:
        return [id for id in reported() if on_task(CLAIMS[id])]
    return [c.id for c in CLAIMS.values() if notebook in c.notebooks]


def ids_of(*whose: str) -> list[str]:
    """The ids of the claims that are whose's (`verdicts.whose`: PAPER, OURS, LITERATURE), in registry order."""
    return [c.id for c in CLAIMS.values() if c.whose in whose]


def reported() -> list[str]:
    """The ids `findings.report` judges by default: the paper's claims and ours, in registry order."""
    return ids_of(PAPER, OURS)


MOST_PROMPTS = 1000  # the paper's prompts a dataset: the fewest sought no further


def fewest_prompts(id: str, seed: int = 0, setting: Setting = MAIN, word: Sequence[str] = tuple(WORD)) -> dict[str, int]:
    """The fewest prompts a dataset at which claim `id` can be judged on all its prompts, for each kind of
    dataset it reads ("word", "sentence"): an interval needs MIN_CLUSTERS distinct inputs (`stats.bootstrap_ci`)
    where its `clusters` says. A word dataset's inputs repeat, so its fewest is counted on the records the
    seed draws from `word` (the word datasets, or a task); a sentence dataset's is MIN_CLUSTERS. Its
    correct-only and held-out views judge fewer records and may need more."""
    claim = CLAIMS[id]
    need = {kind: MIN_CLUSTERS for kind in claim.reads}
    if "word" in need:
        digests = tuple(TASKS[d].digest for d in word if d in TASKS)
        need["word"] = _fewest_word_prompts(claim.clusters, seed, setting, tuple(word), digests)
    return need


@functools.cache
def _fewest_word_prompts(clusters: str, seed: int, setting: Setting, word: tuple[str, ...], digests: tuple[str, ...]
                         ) -> int:
    """The fewest n at which the n records of each dataset of `word` hold MIN_CLUSTERS distinct inputs where
    `clusters` says. digests: the tasks' among them, so that a task added again under its name is counted again."""
    def enough(n: int) -> bool:
        inputs: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (dataset, class) or one pool -> its distinct inputs
        for dataset in word:
            try:
                records = setting.records(dataset, n, seed)
            except UsageError:  # a task drawn as the sentence datasets are holds fewer than n inputs
                return False
            if clusters == EVAL_POOLED:
                records = records_in(records, ~input_halves(records, seed))
            for r in records:
                part = ("", "") if clusters == EVAL_POOLED else (dataset, r.true_class if clusters == EACH_CLASS else "")
                inputs.setdefault(part, set()).add((dataset, r.input))
        return bool(inputs) and min(map(len, inputs.values())) >= MIN_CLUSTERS
    return next((n for n in range(2, MOST_PROMPTS) if enough(n)), MOST_PROMPTS)


@dataclass
class Finding:
    """Our result for one claim: the claim's words and our judgement (`Judgement`'s fields) in its
    headline view (`view`, an `evidence.VIEWS` key), and its judgements in its other views."""

    id: str
    whose: str  # the claim's `whose`
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
        """The finding as a report's JSON entry."""
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
