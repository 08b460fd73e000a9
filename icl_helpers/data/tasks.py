"""A classification task of one's own, read from a file and drawn into prompt records as the paper's datasets are.

Two forms. A JSON-lines file holds one `{"input": TEXT, "class": NAME}` object a line; its classes come in
order of first appearance, and other keys are ignored. A folder holds one UTF-8 file a class, `<class>.txt`,
one example a line; its classes come in the order of the file names, and blank lines are skipped.

Each text is read as the sentence datasets are: invisible characters at its ends dropped, whitespace
runs made one space, then cut to `max_chars` characters (`sentences.truncate`). An input repeated within
its class is kept once. `read_task` refuses, in one line and before any model loads, what cannot make
the paper's prompts (see `inputs_needed` for the count a class needs).

`drawn` draws records as the paper does. Two classes are drawn as the word datasets are
(`words.make_word_records`): rows alternate direction, and an input may recur. More classes are drawn as
the sentence datasets without a train split are (`sentences.records_from`). There each example is an
input at most once, and one other class is drawn at random for the false demonstrations.

`add_task` makes a task a dataset like the paper's: its name then gives its records under any `Setting`
(`Setting.records`: the demonstrations a class set exactly as for the paper's datasets), and so its prompt
sets and every study and claim that takes a dataset's name.

Label words and separator are the setting's (`Setting.labels`, `Setting.sep`): foo/bar by default, any two
words, or each record's own class names (`prompts.CLASS_NAMES`: its true class labels the demonstrations of its class).
`check_label_words` refuses label words a prompt could not tell apart, and notes those of several tokens.
"""
from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import UsageError, check_count, clean_text
from . import sources
from .prompts import CLASS_NAMES, SEP, Record, label_tokens
from .sentences import MAX_CHARS, SentenceData, records_from, truncate
from .sources import SOURCES, Example
from .words import WORD_DATASETS, make_word_records

MIN_INPUTS = 10  # stats.MIN_CLUSTERS, the fewest distinct inputs an interval is drawn from (stats loads torch)
DRAWN_AS = {"words": "as the word datasets are", "sentences": "as the sentence datasets are"}  # how `drawn` draws
DRAWS = tuple(DRAWN_AS)


@dataclass(frozen=True)
class Task:
    """A task as read: its classes in order, its examples in file order (each text cut, once a class)."""

    name: str  # the file's stem, or the folder's name
    classes: tuple[str, ...]
    examples: tuple[Example, ...]
    digest: str  # 12 hex digits of SHA-256 over the classes and examples: the records depend on these alone
    max_chars: int = MAX_CHARS  # the length every text was cut to
    notes: tuple[str, ...] = ()  # one line each: texts cut, repeated inputs dropped

    def of(self, cls: str) -> list[str]:
        """The texts of class `cls`, in file order."""
        return [e.text for e in self.examples if e.label == cls]

    @property
    def sentences(self) -> bool:
        """Whether most examples hold three words or more (the median count): the towers then rank a text's
        content tokens, as a sentence dataset's, not a word's spellings (`studies.towers.candidates`). A few
        names of two words ("New Zealand") leave a task of words one."""
        return statistics.median(len(e.text.split()) for e in self.examples) > 2

    @property
    def draw(self) -> str:
        """How `drawn` draws it by default: "words" (as the word datasets are) for two classes, else "sentences"."""
        return DRAWS[len(self.classes) > 2]

    def label_words(self, labels: tuple[str, str]) -> list[str]:
        """The words its prompts label with under a setting's `labels`: its classes where they are CLASS_NAMES
        (either way round), else the two."""
        return list(self.classes) if set(labels) == set(CLASS_NAMES) else list(labels)

    def described(self, labels: tuple[str, str], n: int, note: str | None = None) -> dict:
        """What a report of n records in these label words records of the task: its name, classes, examples,
        digest, label words, draw and notes (`note`: the label words', `check_label_words`)."""
        return {"name": self.name, "classes": list(self.classes), "examples": len(self.examples), "digest": self.digest,
                "labels": list(labels), "records": f"{n} drawn {DRAWN_AS[self.draw]}",
                "notes": [*self.notes, *([note] if note else [])]}

    def pools(self) -> dict[str, list[str]]:
        """Each class's texts, which the demonstrations are drawn from (`Setting.fit`)."""
        return {c: self.of(c) for c in self.classes}


TASKS: dict[str, Task] = {}  # the tasks `add_task` made datasets, by name


def add_task(task: Task) -> str:
    """Make `task` a dataset by its name, which it returns (a task added before under that name is replaced).
    A UsageError where the name is one of the paper's datasets'."""
    if task.name in WORD_DATASETS or task.name in SOURCES:
        raise UsageError(f"The task {task.name!r} has the name of one of the paper's datasets: rename its file.")
    TASKS[task.name] = task
    return task.name


def inputs_needed(n_classes: int, per_class: int = 2) -> int:
    """The distinct inputs a class needs. A prompt takes an input and max(per_class, 2) others of its class.
    The split by input takes 2 * ceil(MIN_INPUTS / n_classes), so that each half holds MIN_INPUTS inputs."""
    return max(max(per_class, 2) + 1, 2 * math.ceil(MIN_INPUTS / n_classes))


def read_task(path: str | Path, per_class: int = 2, max_chars: int = MAX_CHARS) -> Task:
    """The task in a JSON-lines file or a folder of `<class>.txt` files (see the module). A UsageError says
    what to do where the file cannot give prompts of per_class demonstrations a class."""
    path = Path(path).expanduser()
    if path.is_dir():
        classes, rows = _folder_rows(path)
    elif path.is_file():
        classes, rows = _jsonl_rows(path)
    else:
        raise UsageError(f"No task file {path}: pass a JSON-lines file, one {{\"input\": TEXT, \"class\": NAME}} a "
                         f"line, or a folder of <class>.txt files, one example a line.")
    if not rows:
        raise UsageError(f"{path} holds no examples: write one example a line.")
    if len(classes) < 2:
        raise UsageError(f"{path} holds one class ({classes[0]!r}): a task needs examples of two or more classes.")
    examples, where, cut, repeated = [], {}, 0, 0
    for at, raw, cls in rows:
        text = _one_line(raw)
        if not text:
            raise UsageError(f"{at}: the input is empty: give every example its text, or drop the line.")
        cut += len(text) > max_chars
        text = truncate(text, max_chars)
        if text in where:
            other, first = where[text]
            if other != cls:
                raise UsageError(f"{at}: the input {_shown(text)} is in class {cls!r} and in class {other!r} "
                                 f"({first}): give each input one class.")
            repeated += 1
            continue
        where[text] = (cls, at)
        examples.append(Example(text, cls))
    notes = ((f"{_count(cut, 'example')} cut to {max_chars} characters, at the last space before the limit",) * bool(cut)
             + (f"{_count(repeated, 'input')} repeated in its class, kept once",) * bool(repeated))
    body = json.dumps([list(classes), [[e.text, e.label] for e in examples]], ensure_ascii=False)
    task = Task(path.stem if path.is_file() else path.name, tuple(classes), tuple(examples),
                hashlib.sha256(body.encode()).hexdigest()[:12], max_chars, notes)
    check_task(task, per_class, str(path))
    return task


def check_task(task: Task, per_class: int = 2, shown: str | None = None) -> None:
    """A UsageError where a class of `task` holds fewer distinct inputs than `inputs_needed`, saying how many."""
    need, record = inputs_needed(len(task.classes), per_class), max(per_class, 2) + 1
    for cls in task.classes:
        have = len(task.of(cls))
        if have < need:
            raise UsageError(
                f"{shown or task.name}: class {cls!r} holds {_count(have, 'distinct input')}, and {need} are needed: {record} for "
                f"a prompt of {per_class} demonstrations a class, and {MIN_INPUTS} in each half of the held-out split by "
                f"input across the {len(task.classes)} classes. Add examples to it, or drop the class.")


def _one_line(text: str) -> str:
    """A text as the sentence datasets' are read: `errors.clean_text`, then whitespace runs one space."""
    return sources.clean_text(clean_text(text))


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'s' * (n != 1)}"


def _shown(text: str, most: int = 60) -> str:
    return repr(text if len(text) <= most else text[: most - 3] + "...")


def _decoded(path: Path) -> str:
    """The file's text, or a UsageError naming the line of its first byte that is not UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")  # a byte-order mark, as a Windows editor may save it, is no text
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line} is not UTF-8 text (byte {err.start:,}): save the file as UTF-8.") from None


def _jsonl_rows(path: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(classes in order of first appearance, (where, input, class) a line) of a JSON-lines file."""
    rows, form = [], '{"input": TEXT, "class": NAME}'
    for i, line in enumerate(_decoded(path).split("\n"), 1):  # not splitlines: JSON text may hold U+2028 as is
        if not line.strip():
            continue
        at = f"{path}:{i}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{at} is not JSON ({err.msg}): write one {form} object a line.") from None
        if not isinstance(row, dict):
            raise UsageError(f"{at} is a JSON {type(row).__name__}, not an object: write one {form} a line.")
        for key in ("input", "class"):
            if key not in row:
                raise UsageError(f"{at} has no {key!r}: write one {form} a line.")
        text, cls = row["input"], row["class"]
        if isinstance(cls, int) and not isinstance(cls, bool):
            cls = str(cls)
        if not isinstance(text, str) or not isinstance(cls, str):
            wrong = "input" if not isinstance(text, str) else "class"
            raise UsageError(f"{at}: the {wrong} is a {type(row[wrong]).__name__}, not text: write one {form} a line.")
        cls = _one_line(cls)
        if not cls:
            raise UsageError(f"{at}: the class is empty: name the class of every example.")
        rows.append((at, text, cls))
    return list(dict.fromkeys(cls for _, _, cls in rows)), rows


def _folder_rows(path: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(classes in the order of their file names, (where, input, class) a non-blank line) of a task folder."""
    files = sorted(p for p in path.iterdir() if p.suffix == ".txt" and p.is_file() and not p.name.startswith("."))
    if len(files) < 2:
        found = f" ({files[0].name})" if files else ""
        raise UsageError(f"{path} holds {_count(len(files), 'class file')}{found}: a task folder needs a <class>.txt file "
                         f"for each of two or more classes, one example a line.")
    rows = [(f"{f}:{i}", line, f.stem) for f in files for i, line in enumerate(_decoded(f).split("\n"), 1)
            if _one_line(line)]
    return [f.stem for f in files], rows


def drawn(task: Task, n: int, seed: int = 0, draw: str | None = None) -> list[Record]:
    """n records of `task` drawn with `seed` (see the module), two demonstrations a class as drawn, before a
    `Setting` sets them. draw: "words" or "sentences"; None takes the task's own (`Task.draw`)."""
    check_count(n, "n")
    draw = draw or task.draw
    if draw not in DRAWS:
        raise UsageError(f"Unknown draw {draw!r}: choose one of {', '.join(DRAWS)}.")
    if draw == "sentences":
        return records_from(SentenceData(task.name, task.classes, list(task.examples), None), n, seed,
                            max_chars=task.max_chars)
    if len(task.classes) != 2:
        raise UsageError(f"The word datasets' draw takes two classes; {task.name} has {len(task.classes)}: "
                         "draw as the sentence datasets are.")
    first, second = task.classes
    return make_word_records((first, second), (task.of(first), task.of(second)), n, seed)


def check_label_words(tokenizer, words: Sequence[str], sep: str = SEP) -> str | None:
    """A UsageError where two label words share their first token after `sep`, or one's first token is
    among another's tokens. Else a one-line note naming the words of several tokens, or None."""
    tokens = label_tokens(tokenizer, words, sep)
    def name(i: int) -> str:
        return tokenizer.decode([i])

    for a, ids in tokens.items():
        for b, other in tokens.items():
            if a == b:
                continue
            if ids[0] == other[0]:
                raise UsageError(f"The label words {a!r} and {b!r} share their first token {name(ids[0])!r}, which "
                                 "scores a label: choose words that begin differently.")
            if ids[0] in other[1:]:
                raise UsageError(f"The first token of the label word {a!r}, {name(ids[0])!r}, is also a token of "
                                 f"{b!r}: choose words that share no token.")
    several = [f"{w!r} by {name(ids[0])!r} (of {len(ids)})" for w, ids in tokens.items() if len(ids) > 1]
    return f"Label words of several tokens are scored by their first: {', '.join(several)}." if several else None
