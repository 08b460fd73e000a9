"""The word classification datasets (Section 4) as prompt records.

Word lists in `data/words/`, and 1,000 records a dataset in `data/<name>.jsonl`, generated
with seed 0; regenerate them byte for byte with `python -m icl_helpers.data.words`. Another
seed draws another 1,000 the same way (`word_records`).
Records alternate between the two directions (even rows: input from the first class, odd
rows: from the second).
"""
from __future__ import annotations

import argparse
import functools
import random
from pathlib import Path

from ..errors import UsageError, clean_text
from ..paths import DATA, write_text_atomically
from .prompts import Record, demos_per_class

WORD_DATASETS: dict[str, tuple[str, str]] = {
    "sentiment_number": ("sentiment", "number"),
    "animal_country": ("animal", "country"),
}
WORD_CLASSES = tuple(c for pair in WORD_DATASETS.values() for c in pair)
STORED = 1000  # records a stored dataset


def read_word_list(name: str, directory: Path = DATA / "words") -> list[str]:
    """The words of class `name` (data/words/<name>.txt, one a line, each as `clean_text` reads it),
    checked for duplicates."""
    path = Path(directory) / f"{name}.txt"
    if not path.is_file():
        raise UsageError(f"No word list {path}: the word classes are {', '.join(WORD_CLASSES)}.")
    words = [w for w in (clean_text(line).strip() for line in path.read_text(encoding="utf-8").splitlines()) if w]
    seen: set[str] = set()
    for w in words:
        if w.lower() in seen:
            raise UsageError(f"{path}: {w!r} is listed twice; each word once.")
        seen.add(w.lower())
    return words


def make_word_records(
    classes: tuple[str, str], words: tuple[list[str], list[str]], n: int = 1000, seed: int = 0,
    demonstrations: int = 4
) -> list[Record]:
    """n records from two word lists; row i takes its input from classes[i % 2].

    Each record: an input, demonstrations/2 other words of its class (true demonstrations) and
    demonstrations/2 words of the other class (false ones), drawn with random.Random(seed).
    """
    half = demos_per_class(demonstrations)
    rng = random.Random(seed)
    records = []
    for i in range(n):
        t, f = (0, 1) if i % 2 == 0 else (1, 0)
        x, *true = rng.sample(words[t], half + 1)
        false = rng.sample(words[f], half)
        records.append(Record(x, classes[t], classes[f], tuple(true), tuple(false)))
    return records


def word_dataset_path(name: str, directory: Path = DATA) -> Path:
    """data/<name>.jsonl for a known word dataset."""
    if name not in WORD_DATASETS:
        raise UsageError(f"Unknown word dataset {name!r}; choose one of {', '.join(WORD_DATASETS)}.")
    return Path(directory) / f"{name}.jsonl"


def write_word_datasets(directory: Path = DATA, n: int = STORED, seed: int = 0) -> list[Path]:
    """Regenerate data/<name>.jsonl for every word dataset from data/words/; returns the files."""
    paths = []
    for name, classes in WORD_DATASETS.items():
        records = make_word_records(classes, tuple(read_word_list(c) for c in classes), n, seed)
        path = word_dataset_path(name, directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, "".join(r.to_json() + "\n" for r in records))
        paths.append(path)
    return paths


def load_word_records(name: str, directory: Path = DATA) -> list[Record]:
    """The stored records of word dataset `name` ("sentiment_number" or "animal_country")."""
    path = word_dataset_path(name, directory)
    if not path.is_file():
        raise UsageError(f"No file {path}: regenerate it with `python -m icl_helpers.data.words`.")
    stat = path.stat()
    return list(_parsed(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, mtime_ns: int, size: int) -> tuple[Record, ...]:
    """The records of a word dataset file, parsed once a version of the file (its time and size): a report asks
    for them a hundred times."""
    records = []
    for i, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        try:
            records.append(Record.from_json(line))
        except ValueError as err:
            raise UsageError(f"{path}:{i} is not a prompt record ({err}): regenerate it with `python -m icl_helpers.data.words`.") from None
    return tuple(records)


def word_records(name: str, seed: int = 0) -> list[Record]:
    """A word dataset's STORED records: those in data/ for seed 0 (they were drawn with it),
    else drawn afresh by `make_word_records` with `seed`."""
    if seed == 0:
        return load_word_records(name)
    word_dataset_path(name)  # a UsageError for an unknown name
    classes = WORD_DATASETS[name]
    return make_word_records(classes, (read_word_list(classes[0]), read_word_list(classes[1])), STORED, seed)


def main(argv: list[str] | None = None) -> None:
    """`python -m icl_helpers.data.words [--out DIR]`: regenerate the word datasets."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", type=Path, default=DATA, help="directory for the JSONL files (default: data/)")
    for path in write_word_datasets(parser.parse_args(argv).out):
        print(path)


if __name__ == "__main__":
    main()
