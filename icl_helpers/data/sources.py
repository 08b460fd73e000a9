"""The sentence datasets' sources (Appendix A): for SST-2, TREC (coarse), AG News and ETHOS, the
classes, the files of the standard copy with their SHA-256 and the examples a class they hold,
the original repository each file comes from, and the dataset on the Hugging Face hub; how
a file's rows read as examples (`parse_examples`), and how a copy differs from the standard
one (`copy_difference`). Loading them is `data.sentences`, downloading them `data.fetch`.
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Example:
    """One example of a sentence dataset: its text and its class."""

    text: str
    label: str  # a class name


class _Malformed(ValueError):
    """A bad line of a local file (the loader adds the file name)."""


class BadCopy(ValueError):
    """A file that is not a copy of a dataset: the message names the file and says why;
    the caller adds what to do."""


def _sst2_line(row: list[str], classes: tuple[str, ...]) -> Example:
    label, _, text = row[0].partition(" ")
    if label not in ("0", "1") or not text.strip():
        raise _Malformed("expected 'LABEL TEXT' with LABEL 0 or 1")
    return Example(text, classes[int(label)])


def _trec_line(row: list[str], classes: tuple[str, ...]) -> Example:
    tag, _, text = row[0].partition(" ")
    coarse = tag.split(":")[0]
    if coarse not in classes or ":" not in tag or not text.strip():
        raise _Malformed(f"expected 'COARSE:fine QUESTION' with COARSE one of {', '.join(classes)}")
    return Example(text, coarse)


def _agnews_row(row: list[str], classes: tuple[str, ...]) -> Example:
    if len(row) != 3 or row[0] not in ("1", "2", "3", "4"):
        raise _Malformed("expected 'Class Index,Title,Description' with a class index 1-4")
    return Example(f"{row[1]} {row[2]}", classes[int(row[0]) - 1])


def _ethos_row(row: list[str], classes: tuple[str, ...]) -> Example:
    try:
        score = float(row[1]) if len(row) == 2 else None
    except ValueError:
        score = None
    if score is None or not 0 <= score <= 1:
        raise _Malformed("expected 'comment;isHate' with isHate a number in [0, 1]")
    return Example(row[0], classes[int(score >= 0.5)])


@dataclass(frozen=True)
class Source:
    """Where a dataset lives: local files under <data dir>/<name>/, their originals at
    <url>/<file>, and on the hub."""

    classes: tuple[str, ...]  # hub label i is classes[i]
    files: dict[str, str]  # split ("test", "train") -> file name
    parse: Callable[[list[str], tuple[str, ...]], Example]  # (a row's fields, classes) -> example
    table: tuple[str, list[str]] | None  # a CSV file's (delimiter, header); None: one example a line
    hub: dict[str, str]  # load_dataset keyword arguments
    hub_splits: dict[str, str]  # our split -> the hub's
    counts: dict[str, tuple[int, ...]]  # split -> examples of each class in the standard copy (local and hub alike)
    sha256: dict[str, str]  # split -> SHA-256 of the standard local file
    url: str  # the folder of the original repository that holds the files (raw, at a fixed commit)
    hub_label: str = "label"


# The original repositories, at the commits whose files have the SHA-256 below
FEW_SHOT_URL = "https://raw.githubusercontent.com/tonyzhaozh/few-shot-learning/e04d8643be91c2cce63f33e07760ff75d5aa3ad0/data"
ETHOS_URL = ("https://raw.githubusercontent.com/intelligence-csd-auth-gr/Ethos-Hate-Speech-Dataset/"
             "705258e118ce9611ebbd5ab2a4841b0066547293/ethos/ethos_data")
SOURCES: dict[str, Source] = {
    "sst2": Source(("negative", "positive"), {"train": "stsa.binary.train", "test": "stsa.binary.test"},
                    _sst2_line, None, {"path": "SetFit/sst2"}, {"train": "train", "test": "test"},
                    {"train": (3310, 3610), "test": (912, 909)},
                    {"train": "71c04bcc41291fa47454dd670df701b14ee9249156babeaac404cfe2c8d74338",
                     "test": "6a80dc9b9a0db2d3b37f2f809304febad31c90ab67a5b4157b7d9f881c53ef5b"},
                    url=f"{FEW_SHOT_URL}/sst2"),
    "trec": Source(("ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"), {"train": "train.txt", "test": "test.txt"},
                    _trec_line, None, {"path": "CogComp/trec", "revision": "refs/convert/parquet"},
                    {"train": "train", "test": "test"},
                    {"train": (86, 1250, 1162, 1223, 835, 896), "test": (9, 94, 138, 65, 81, 113)},
                    {"train": "202e3e1ad6143ed4f147f199324277e25b2573a78c08c3af1ff840b49c0779de",
                     "test": "69b2d406aa15b3b514b6bf9b3bf1fa2c3515ce7ae744651173f8e57347bfb2a9"},
                    url=f"{FEW_SHOT_URL}/trec", hub_label="coarse_label"),
    "agnews": Source(("World", "Sports", "Business", "Sci/Tech"), {"test": "test.csv"},
                      _agnews_row, (",", ["Class Index", "Title", "Description"]), {"path": "fancyzhx/ag_news"}, {"test": "test"},
                      {"test": (1900, 1900, 1900, 1900)},
                      {"test": "1b1b6c5f1dd034c83fec3f585611d2bc65c34fafd86685fc92cee5e6059313ef"},
                      url=f"{FEW_SHOT_URL}/agnews"),
    "ethos": Source(("not hate", "hate"), {"test": "Ethos_Dataset_Binary.csv"},
                     _ethos_row, (";", ["comment", "isHate"]), {"path": "iamollas/ethos", "name": "binary"}, {"test": "train"},
                     {"test": (565, 433)},
                     {"test": "0cd0050c2592afcb5eca5876df485ca15cda9d7d16fe32c269857260fd10d96c"},
                     url=ETHOS_URL),
}


def clean_text(text: str) -> str:
    """Whitespace runs to one space (both sources read alike)."""
    return " ".join(text.split())


def parse_examples(data: bytes, source: Source, shown: str) -> list[Example]:
    """The examples in a file's bytes; a BadCopy naming the file as `shown` where they are
    not UTF-8 text, the header or a row is malformed, or there is no example."""
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as a Windows editor may save a copy, is no text
    except UnicodeDecodeError as err:
        raise BadCopy(f"{shown} is not UTF-8 text (byte {err.start:,})") from None
    first = 1
    if source.table:
        delimiter, header = source.table
        rows = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
        if not rows or rows[0] != header:
            raise BadCopy(f"{shown}:1: malformed: expected the header {delimiter.join(header)!r}")
        rows, first = rows[1:], 2
    else:
        rows = [[line] for line in text.splitlines()]
    examples = []
    for i, row in enumerate(rows, first):
        try:
            example = source.parse(row, source.classes)
        except _Malformed as err:
            raise BadCopy(f"{shown}:{i}: malformed: {err}") from None
        examples.append(Example(clean_text(example.text), example.label))
    if not examples:
        raise BadCopy(f"{shown} holds no examples")
    return examples


def copy_difference(what: str, examples: list[Example], source: Source, split: str, digest: str | None) -> str | None:
    """How a copy (`what`) differs from the standard one: in its examples a class, or where
    `digest` is given, in its bytes' SHA-256; None where it does not."""
    counts = tuple(sum(e.label == c for e in examples) for c in source.classes)
    standard = source.counts[split]
    if counts == standard and digest in (None, source.sha256[split]):
        return None
    shown = ", ".join(f"{c} {n:,}" for c, n in zip(source.classes, counts))
    if sum(counts) != sum(standard):
        return f"{what} holds {sum(counts):,} examples, not the standard {sum(standard):,}: the copy is cut or edited"
    if counts != standard:
        return (f"{what} holds {shown} examples a class, not the standard "
                f"{', '.join(f'{n:,}' for n in standard)}: the copy is edited")
    return (f"{what} holds the standard examples a class ({shown}) but its bytes differ from the standard "
            f"copy's (SHA-256 {digest[:12]}..., not {source.sha256[split][:12]}...): the copy is edited")
