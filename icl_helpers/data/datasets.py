"""Any of the paper's datasets by name: the word datasets (`words`) and the sentence
datasets (`sentences`) as prompt records."""
from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from .prompts import Record, check_size
from .sentences import SOURCES, sentence_records
from .words import WORD_DATASETS, word_records


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
