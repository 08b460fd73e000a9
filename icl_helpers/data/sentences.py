"""The sentence classification datasets (Appendix A) as prompt records.

SST-2, TREC (coarse), AG News and ETHOS (`data.sources`: their classes, files and checks), read from
a data directory (argument, else $ICL_DATA_DIR, else the copy `python -m icl_helpers data fetch`
downloads into the cache, `fetched_dir()`), or else from the Hugging Face hub with the `datasets`
package; `sentence_datasets` says whether this machine has them. Long texts: every demonstration and
input is cut to at most `max_chars` characters (default 400, at the last space before the limit; 2%
of AG News and 3% of ETHOS texts are cut, no SST-2 or TREC text). The tests check that this keeps
every 4-demonstration prompt that any of the four datasets can give within 1,024 GPT-2 tokens, the
smallest context of the supported models.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import random
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import hub
from ..errors import UsageError
from ..paths import absent, cache_root
from ..progress import library_bars_off
from .prompts import Record, check_size, demos_per_class
from .sources import SOURCES, BadCopy, Example, Source, clean_text, copy_difference, parse_examples

MAX_CHARS = 400


@dataclass(frozen=True)
class SentenceData:
    """A sentence dataset. `train` is None where there is none: demonstrations then come from
    `test` examples other than the input."""

    name: str
    classes: tuple[str, ...]
    test: list[Example]
    train: list[Example] | None


def fetched_dir() -> Path:
    """Where `python -m icl_helpers data fetch` puts the datasets by default:
    ~/.cache/icl_helpers/datasets, or datasets/ in $ICL_HELPERS_CACHE."""
    return cache_root() / "datasets"


def resolve_data_dir(path: str | Path | None = None) -> Path | None:
    """The sentence-dataset directory: `path`, else $ICL_DATA_DIR, else `fetched_dir()`
    where it holds every dataset; None: no local copies (load from the hub)."""
    chosen = path or os.environ.get("ICL_DATA_DIR")
    if chosen:
        chosen = Path(chosen).expanduser()
        if why := absent(chosen, folder=True):
            raise UsageError(
                f"Data directory {chosen} {why}: pass a directory holding "
                f"{', '.join(f'{n}/' for n in SOURCES)} (argument or ICL_DATA_DIR), or unset ICL_DATA_DIR to use the hub."
            )
        return chosen
    fetched = fetched_dir()
    return fetched if all((fetched / name).is_dir() for name in SOURCES) else None


def _read_local(path: Path, name: str) -> tuple[list[Example], str]:
    """The examples of dataset `name`'s local file and its SHA-256, read once a version of the file
    (its time and size, `_parsed`): a report asks for a dataset dozens of times."""
    if not path.is_file():
        raise UsageError(f"Missing file {path}: copy the dataset there (layout: data/README.md), download it with "
                         f"`python -m icl_helpers data fetch --to {path.parent.parent}`, or point ICL_DATA_DIR elsewhere.")
    stat = path.stat()
    examples, digest = _parsed(path, stat.st_mtime_ns, stat.st_size, name)
    return list(examples), digest


@functools.lru_cache(maxsize=16)
def _parsed(path: Path, mtime_ns: int, size: int, name: str) -> tuple[tuple[Example, ...], str]:
    data = path.read_bytes()
    try:
        examples = parse_examples(data, SOURCES[name], str(path))
    except BadCopy as err:
        raise UsageError(f"{err}. Replace the file with a fresh copy.") from None
    return tuple(examples), hashlib.sha256(data).hexdigest()


def unavailable(data_dir: str | Path | None = None) -> str | None:
    """Why the sentence datasets cannot be had on this machine, or None where they can: a
    local copy (`resolve_data_dir`), else the hub through the `datasets` package."""
    if resolve_data_dir(data_dir) is not None:
        return None
    if not _installed("datasets"):
        return "no local copy, and the `datasets` package (which loads them from the Hugging Face hub) is not installed"
    if not hub.offline() and not hub.reachable():
        return "no local copy, and the Hugging Face hub cannot be reached (offline?)"
    return None


def _installed(package: str) -> bool:
    if package in sys.modules:  # imported already (None: blocked)
        return sys.modules[package] is not None
    return importlib.util.find_spec(package) is not None


def sentence_datasets(names: list[str], data_dir: str | Path | None = None) -> list[str]:
    """`names` where the sentence datasets can be had on this machine (a local copy, else the
    hub); else [] and one printed line saying what is skipped and how to get the data, so
    that a notebook's sentence-dataset sections run on nothing and the rest runs as usual."""
    note = missing_note(data_dir)
    if note is None:
        return list(names)
    print(f"Skipping {', '.join(names)}: {note}")
    return []


def missing_note(data_dir: str | Path | None = None) -> str | None:
    """Why no sentence dataset can be had on this machine, and how to get them, in one line; None where they can."""
    reason = unavailable(data_dir)
    if reason is None:
        return None
    return (f"{reason}. For the sections on them, run `python -m icl_helpers data fetch` on a machine with a network, "
            "set ICL_DATA_DIR to local copies (layout: data/README.md), or install `datasets`.")


def _read_hub(name: str, source: Source) -> dict[str, list[Example]]:
    reason = unavailable()
    if reason:
        raise UsageError(f"Cannot load {name}: {reason}. Download the datasets with `python -m icl_helpers data fetch`, "
                         f"set ICL_DATA_DIR to a directory holding {name}/ (layout: data/README.md), "
                         f"or HF_HUB_OFFLINE=1 to use a copy the hub cached earlier.")
    import datasets as hf

    try:
        with library_bars_off():  # in a notebook, datasets' own bars would leave widgets behind
            loaded = hf.load_dataset(**source.hub)
        return {
            split: [Example(clean_text(row["text"]), source.classes[row[source.hub_label]])
                    for row in loaded[hub_split]]
            for split, hub_split in source.hub_splits.items()
        }
    except Exception as err:  # network, hub and schema errors alike: one message
        reason = (str(err).splitlines() or [type(err).__name__])[0]
        raise UsageError(
            f"Could not load {name} from the Hugging Face hub ({source.hub['path']}: {reason}); "
            f"download the datasets with `python -m icl_helpers data fetch`, or set ICL_DATA_DIR to a directory holding {name}/."
        ) from None


def load_sentences(name: str, data_dir: str | Path | None = None) -> SentenceData:
    """Sentence dataset `name` (sst2, trec, agnews, ethos) from the data directory, else the hub."""
    if name not in SOURCES:
        raise UsageError(f"Unknown sentence dataset {name!r}; choose one of {', '.join(SOURCES)}.")
    source, root = SOURCES[name], resolve_data_dir(data_dir)
    if root is None:
        splits = _read_hub(name, source)
        where = {split: (source.hub["path"], None) for split in splits}
    else:
        read = {split: _read_local(root / name / file, name) for split, file in source.files.items()}
        splits = {split: examples for split, (examples, _) in read.items()}
        where = {split: (root / name / source.files[split], digest) for split, (_, digest) in read.items()}
    for split, (shown, digest) in where.items():
        _check_copy(f"{shown} ({name} {split})", splits[split], source, split, digest)
    return SentenceData(name, source.classes, splits["test"], splits.get("train"))


def _check_copy(what: str, examples: list[Example], source: Source, split: str, digest: str | None) -> None:
    """A copy whose examples a class or (for a local file) whose bytes differ from the
    standard copy's is an error; with ICL_OWN_DATA=1 (a copy of your own, on purpose) a
    warning. Hub copies are checked by their counts alone."""
    message = copy_difference(what, examples, source, split, digest)
    if message is None:
        return
    if os.environ.get("ICL_OWN_DATA") == "1":
        warnings.warn(f"{message}; using it as it is (ICL_OWN_DATA=1).", stacklevel=3)
        return
    raise UsageError(f"{message}. Replace it with a fresh copy, or set ICL_OWN_DATA=1 to use your own copy as it is.")


def truncate(text: str, max_chars: int = MAX_CHARS) -> str:
    """`text` cut to at most `max_chars` characters, at the last space before the limit
    (mid-word only where the first word alone is longer)."""
    if len(text) <= max_chars:
        return text
    head = text[: max_chars + 1]
    return head.rsplit(" ", 1)[0] if " " in head else text[:max_chars]


def sentence_records(
    name: str, n: int = 1000, seed: int = 0, demonstrations: int = 4, max_chars: int = MAX_CHARS, data_dir: str | Path | None = None
) -> list[Record]:
    """n records: inputs from the test split, demonstrations/2 true and demonstrations/2 false ones.

    Inputs are the first n of a random permutation of the test split (n at most its size).
    True demonstrations share the input's class; the false ones all come from one
    other class, drawn at random. Demonstrations come from the train split, or where there
    is none (AG News, ETHOS) from the other test examples, never the input itself. Every
    text is cut to `max_chars` characters. Same arguments, same records.
    """
    demos_per_class(demonstrations)  # checked before the data is read
    return records_from(load_sentences(name, data_dir), n, seed, demonstrations, max_chars)


def records_from(data: SentenceData, n: int = 1000, seed: int = 0, demonstrations: int = 4, max_chars: int = MAX_CHARS
                 ) -> list[Record]:
    """`sentence_records`' draw from a dataset at hand (a task file's too, `data.tasks`): n records,
    the same for the same data and arguments."""
    half, name = demos_per_class(demonstrations), data.name
    check_size(name, n, len(data.test), "test inputs")
    rng = random.Random(seed)
    pool = data.train if data.train is not None else data.test
    by_class = {c: [i for i, ex in enumerate(pool) if ex.label == c] for c in data.classes}
    order = rng.sample(range(len(data.test)), len(data.test))
    records = []
    for idx in order[:n]:
        x = data.test[idx]
        false_class = rng.choice([c for c in data.classes if c != x.label])
        mine = idx if data.train is None else -1  # the input's index in the pool, if it is there
        true = _draw(rng, [i for i in by_class[x.label] if i != mine], half, name)
        false = _draw(rng, by_class[false_class], half, name)
        records.append(Record(
            truncate(x.text, max_chars), x.label, false_class,
            tuple(truncate(pool[i].text, max_chars) for i in true),
            tuple(truncate(pool[i].text, max_chars) for i in false),
        ))
    return records


def _draw(rng: random.Random, indices: list[int], count: int, name: str) -> list[int]:
    if len(indices) < count:
        raise UsageError(f"{name} has too few examples of a class for {count} demonstrations: use fewer.")
    return rng.sample(indices, count)
