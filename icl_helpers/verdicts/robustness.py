"""Robustness: does a verdict survive the choices the paper fixed without a principled reason?

Each `Variation` changes one of them from the main run (`data.setting`): the in-context heads a
claim analyses (5, 10, 40 beside 20), the label words (two other semantically unrelated pairs
beside foo/bar), the separator (a newline beside " : "), the demonstrations a class (one and
three beside two) and the seed (the next two). `robustness` judges the claims in each, by the
report's own code in each claim's headline view (the verdict the table shows; the other views
would cost more than the headline and go unread), at one size; the main run at that size comes
first, the baseline the others are read against (at another size a verdict may differ for the
size alone). `markdown` marks where a verdict differs from it.

The label pairs, pen/sky and cup/door: each word is one token after a space and after a newline
in the GPT-2, LLaMA (SentencePiece and byte-level BPE), SmolLM2, Gemma 3 and Qwen 2.5
tokenizers, so its label position and label token are the whole word as foo and bar are; no
word is in a word dataset's classes, names a sentence dataset's class or relates to its pair.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from ..core.heads import Head
from ..data.setting import MAIN, Setting
from ..model.loading import ICLModel
from .claims import Finding
from .compare import VERDICT_MARK
from .findings import report
from .judgement import NOT_TESTED

HEAD_COUNTS = (5, 10, 40)
LABEL_PAIRS = (("pen", "sky"), ("cup", "door"))
SEPARATORS = {"newline": "\n"}
PER_CLASS = (1, 3)
MORE_SEEDS = 2


@dataclass(frozen=True)
class Variation:
    """One column of the robustness table: a setting and seed, and what it changes."""

    factor: str  # "main", "heads", "labels", "separator", "demonstrations" or "seed"
    value: str  # the changed choice, as the column names it: "5", "pen/sky", "newline", "1", ...
    setting: Setting = MAIN
    seed: int = 0

    @property
    def name(self) -> str:
        return self.factor if self.factor == "main" else f"{self.factor} {self.value}"


def variations(seed: int = 0) -> list[Variation]:
    """The main run (its setting at `seed`), then one variation a changed choice."""
    return [Variation("main", f"{MAIN.heads} heads, {'/'.join(MAIN.labels)}, {MAIN.sep!r}, {MAIN.per_class} a class, "
                              f"seed {seed}", MAIN, seed),
            *(Variation("heads", str(k), replace(MAIN, heads=k), seed) for k in HEAD_COUNTS),
            *(Variation("labels", "/".join(pair), replace(MAIN, labels=pair), seed) for pair in LABEL_PAIRS),
            *(Variation("separator", name, replace(MAIN, sep=sep), seed) for name, sep in SEPARATORS.items()),
            *(Variation("demonstrations", str(p), replace(MAIN, per_class=p), seed) for p in PER_CLASS),
            *(Variation("seed", str(seed + i), MAIN, seed + i) for i in range(1, MORE_SEEDS + 1))]


def entry(variation: Variation, found: Sequence[Finding]) -> dict:
    """A variation's JSON entry: factor, value, each claim's verdict, and why each untested one is."""
    return {"factor": variation.factor, "value": variation.value, "verdicts": {f.id: f.verdict for f in found},
            "not_tested": {f.id: f.why for f in found if f.verdict == NOT_TESTED}}


def robustness(m: ICLModel, n: int, sentence_n: int, seed: int = 0, data_dir: str | Path | None = None,
               announce: Callable[[str], None] = print, ids: Sequence[str] | None = None,
               heads: str | Sequence[Head] | None = None) -> list[dict]:
    """`entry` of each of `variations(seed)`, the main run first: the claims `ids` (default `claims.reported`) judged by
    `report` in their headline views on n prompts a word dataset and sentence_n a sentence
    dataset (the heads given, if any, in every variation)."""
    entries = []
    for v in variations(seed):
        found = report(m, n, sentence_n, v.seed, data_dir, lambda step, v=v: announce(f"[{v.name}] {step}"), ids, heads,
                       v.setting, headline_only=True)
        entries.append(entry(v, found))
    return entries


def cell(verdict: str, main: str) -> str:
    """"=" where a verdict is the main run's, else "≠" and the verdict in short (yes, partly, no, not tested)."""
    return "=" if verdict == main else f"≠ {VERDICT_MARK.get(verdict, verdict)}"


def markdown(entries: Sequence[dict], n: int, sentence_n: int) -> str:
    """The robustness section: one row a claim, one column a variation (the main run's verdict
    first), "=" where a verdict is the main run's and "≠ verdict" where it differs; then why each
    claim that the main run tests is not tested in a variation, and the differences in a line."""
    main, others = entries[0], entries[1:]
    names = [Variation(e["factor"], e["value"]).name for e in others]
    rows = ["| claim | main | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(others)]
    rows += [f"| {id} | {VERDICT_MARK.get(verdict, verdict)} | " + " | ".join(cell(e["verdicts"][id], verdict) for e in others)
             + " |" for id, verdict in main["verdicts"].items()]
    untested = [f"- {name}, {id}: {why}" for name, e in zip(names, others) for id, why in e["not_tested"].items()
                if main["verdicts"][id] != NOT_TESTED]
    differ = [f"{name} ({', '.join(ids)})" for name, e in zip(names, others)
              if (ids := [id for id, v in e["verdicts"].items() if v != main["verdicts"][id]])]
    intro = (f"## Robustness\n\nEvery claim judged again in its headline view with one choice the paper fixed changed, "
             f"at {n} prompts a word dataset and {sentence_n} a sentence dataset; the column main is the main setting ({main['value']}) "
             "at this size, the baseline of the others. A cell is = where the verdict is main's, else ≠ and the "
             "verdict (yes: replicates; no: does not replicate). Heads: the top K analysed; labels: the label words "
             "(true/false); separator: between a demonstration and its label (newline: `love\\nbar like\\nbar one\\n`); "
             "demonstrations: a class, those nearest the input kept (one) or one more in front (three); seed: the word "
             "records, sentence prompts and random heads drawn.")
    tail = ["", "Not tested in a variation, where main tests it:", "", *untested] if untested else []
    summary = ("Verdicts that differ from main: " + "; ".join(differ) + "." if differ
               else "Every verdict is main's in every variation.")
    return "\n".join([intro, "", *rows, *tail, "", summary]) + "\n"
