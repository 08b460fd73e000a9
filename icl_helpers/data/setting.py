"""The choices the paper fixed without a principled reason, as one `Setting` the whole report
can run under (`verdicts.findings.report`, `verdicts.robustness`): how many in-context heads a
claim analyses, the label words, the separator and the demonstrations a class. `MAIN` is the
paper's and the main run's (20 heads, foo/bar, " : ", two a class): under it every record,
prompt and cached result is what it was before settings existed. The seed is the report's own
argument: it draws the sentence prompts, the word records (`data.words.word_records`) and the
random heads.

Demonstrations a class: a setting of p keeps each class's p demonstrations nearest the input.
One a class drops the first demonstration of each class; three a class put one more of each
class in front, drawn (per record, seeded by the seed and the record's row) from the class's
words (word datasets) or texts (sentence datasets: the split `sentence_records` draws from, cut
as it cuts them), never the input or a demonstration the record holds: a prompt of fewer
demonstrations is a prompt of more, cut at its start. The recency control runs every order of p
true and p false demonstrations (`prompts.orders`: 2 of one a class, 20 of three). An
imbalanced prompt drops one true demonstration, so one a class cannot build it: the claims
that need it are not tested there (`CannotMeasure`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from ..errors import CannotMeasure, UsageError
from .datasets import dataset_records
from .prompts import LABELS, SEP, Record, Variant, named_variant, variants
from .sentences import load_sentences, truncate
from .tasks import TASKS, check_task, drawn
from .words import WORD_DATASETS, read_word_list


@dataclass(frozen=True)
class Setting:
    """What a report's prompts and heads are; the default is the main run's."""

    heads: int = 20  # in-context heads a claim analyses (the verdicts' K)
    labels: tuple[str, str] = LABELS  # (true label, false label) of the balanced prompt
    sep: str = SEP  # between a demonstration and its label (`prompts.split_separator`)
    per_class: int = 2  # demonstrations of each class in the balanced prompt

    def __post_init__(self) -> None:
        if self.heads < 1 or self.per_class < 1:
            raise UsageError(f"A setting analyses at least 1 head with at least 1 demonstration a class, not "
                             f"{self.heads} heads and {self.per_class} a class.")
        Variant(2 * self.per_class, labels=self.labels, sep=self.sep)  # checks the labels and the separator

    def variant(self, name: str) -> Variant:
        """The prompt variant `name` (of `prompts.variants`) in this setting's labels, separator and
        demonstrations; CannotMeasure where it cannot be built (imbalanced, from one a class)."""
        if name == "imbalanced" and self.per_class < 2:
            raise CannotMeasure("one demonstration a class: an imbalanced prompt drops a true demonstration, "
                              "which would leave none")
        return named_variant(name, variants(self.per_class, self.labels, self.sep))

    def records(self, dataset: str, n: int, seed: int = 0, data_dir: str | Path | None = None) -> list[Record]:
        """`dataset_records` (a task's `tasks.drawn`, for a task added by `tasks.add_task`), each with per_class
        demonstrations of each class (see the module)."""
        if dataset in TASKS:
            task = TASKS[dataset]
            check_task(task, self.per_class)
            return self.fit(drawn(task, n, seed), task.pools, seed)
        return self.fit(dataset_records(dataset, n, seed, data_dir), lambda: class_pools(dataset, data_dir), seed)

    def fit(self, records: Sequence[Record], pools: Callable[[], dict[str, list[str]]], seed: int = 0) -> list[Record]:
        """The records with per_class demonstrations of each class: more drawn in front from pools()
        (`more_demonstrations`; pools is called only then), then each `cut`."""
        if any(min(len(r.true_demos), len(r.false_demos)) < self.per_class for r in records):
            records = more_demonstrations(records, self.per_class, pools(), seed)
        return [self.cut(r) for r in records]

    def cut(self, record: Record) -> Record:
        """The record with only its per_class demonstrations of each class nearest the input (its last)."""
        p = self.per_class
        if min(len(record.true_demos), len(record.false_demos)) < p:
            raise UsageError(f"{p} demonstrations a class, but the record of {record.input!r} holds "
                             f"{len(record.true_demos)} true and {len(record.false_demos)} false ones.")
        return replace(record, true_demos=record.true_demos[-p:], false_demos=record.false_demos[-p:])


MAIN = Setting()


def class_pools(dataset: str, data_dir: str | Path | None = None) -> dict[str, list[str]]:
    """Each class's texts a dataset's demonstrations come from: a word dataset's word lists, a
    sentence dataset's train split (its test split where it has none), cut as `sentence_records` cuts."""
    if dataset in WORD_DATASETS:
        return {c: read_word_list(c) for c in WORD_DATASETS[dataset]}
    data = load_sentences(dataset, data_dir)
    pool = data.train if data.train is not None else data.test
    return {c: [truncate(e.text) for e in pool if e.label == c] for c in data.classes}


def more_demonstrations(records: Sequence[Record], per_class: int, pools: dict[str, list[str]], seed: int = 0
                        ) -> list[Record]:
    """Each record with new demonstrations in front of its own, up to per_class of each class:
    drawn from pools[class] with random.Random(f"{seed} {row}"), never the record's input or a
    demonstration it holds. A record's draw depends on its row and seed alone."""
    distinct = {c: set(texts) for c, texts in pools.items()}
    out = []
    for row, r in enumerate(records):
        rng = random.Random(f"{seed} {row}")
        held = {r.input, *r.true_demos, *r.false_demos}
        true = _draw(rng, pools[r.true_class], distinct[r.true_class], held, per_class - len(r.true_demos))
        false = _draw(rng, pools[r.false_class], distinct[r.false_class], held | set(true),
                      per_class - len(r.false_demos))
        out.append(replace(r, true_demos=true + r.true_demos, false_demos=false + r.false_demos))
    return out


def _draw(rng: random.Random, pool: list[str], distinct: set[str], held: set[str], count: int) -> tuple[str, ...]:
    """count texts of `pool` (its set `distinct`) not in `held`, drawn one at a time."""
    if len(distinct) - len(distinct & held) < count:
        raise UsageError(f"Too few examples of a class ({len(distinct)}) for {count} more demonstrations a record.")
    chosen: list[str] = []
    while len(chosen) < count:
        text = pool[rng.randrange(len(pool))]
        if text not in held and text not in chosen:
            chosen.append(text)
    return tuple(chosen)
