"""Any of the paper's datasets by name: the word datasets (`words`) and the sentence
datasets (`sentences`) as prompt records."""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .prompts import Record, check_size
from .sentences import load_sentences, resolve_data_dir, sentence_records
from .sources import SOURCES
from .words import STORED, WORD_DATASETS, word_records


def dataset_records(name: str, n: int, seed: int = 0, data_dir: str | Path | None = None) -> list[Record]:
    """The first n records of a word dataset (both directions alternate; the stored ones for
    seed 0, else drawn as they were with `seed`), or n records of a sentence dataset drawn
    with `seed` from `data_dir`."""
    if name not in WORD_DATASETS and name not in SOURCES:
        raise UsageError(f"Unknown dataset {name!r}; choose one of {', '.join([*WORD_DATASETS, *SOURCES])}.")
    if name in WORD_DATASETS:
        records = word_records(name, seed)
        check_size(name, n, len(records), "records")
        return records[:n]
    return sentence_records(name, n=n, seed=seed, data_dir=data_dir)


def check_sizes(n: int, sentence_n: int | None, data_dir: str | Path | None = None) -> None:
    """A UsageError where n prompts are more than a word dataset holds, or sentence_n more than
    a sentence dataset's test inputs in the copy a report will read (a local one is read and
    checked now, in a second or two: a bad copy stops a run before it starts; the hub's has
    the standard counts its copies are checked against). sentence_n None: none is read."""
    for name in WORD_DATASETS:
        check_size(name, n, STORED, "records")
    if sentence_n is None:
        return
    root = resolve_data_dir(data_dir)
    for name, source in SOURCES.items():
        size = sum(source.counts["test"]) if root is None else len(load_sentences(name, root).test)
        check_size(name, sentence_n, size, "test inputs")
