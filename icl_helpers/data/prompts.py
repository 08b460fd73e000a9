"""In-context classification prompts: records, one builder, labels.

A `Record` holds what a prompt is made of: the input, its class (the *true* class), the
other (*false*) class, and demonstrations of each. `build_prompt` renders a record as
`d1 : l1 d2 : l2 ... dK : lK x :` under a `Variant` (balanced, imbalanced, re-ordered,
any label pair, any even number of demonstrations, any separator) and keeps the character span of every
demonstration and label, so token positions never depend on searching the text (see
`positions`). The label helpers at the end give label token ids and each prompt's biased
label (Section 8).

A separator stands between a demonstration (or the input) and its label; its trailing
spaces belong to the label's token: " : " renders `love : bar like : bar one :`, the model's
next token " bar"; a newline renders `love\nbar like\nbar one\n`, the next token "bar". A
label is followed by one space, then the next demonstration, whatever the separator.
"""
from __future__ import annotations

import itertools
import json
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Sequence

from ..errors import UsageError

if TYPE_CHECKING:  # torch loads only where a tensor is built: the command line reads datasets before it loads
    import torch

SEP = " : "  # between a demonstration (or the input) and its label
LABELS = ("foo", "bar")  # the paper's (true label, false label)
CLASS_NAMES = ("<the input's class>", "<the other class>")  # labels: each record's own class names (`record_labels`)
Span = tuple[int, int]  # [start, end) character offsets in a prompt's text


def demos_per_class(demonstrations: int) -> int:
    """Half of them: the demonstrations of each class in a balanced prompt of `demonstrations`."""
    if demonstrations < 2 or demonstrations % 2:
        raise UsageError(f"The demonstrations of a prompt must be an even number of at least 2, not {demonstrations}.")
    return demonstrations // 2


def split_separator(sep: str) -> tuple[str, str]:
    """(end, gap): what ends a demonstration or the prompt (" :", "\n") and the spaces that
    open the label's token (" ", "")."""
    end = sep.rstrip(" ")
    if not end:
        raise UsageError(f"A separator must hold something besides spaces (e.g. ' : ' or a newline), not {sep!r}.")
    return end, sep[len(end):]


def check_size(name: str, n: int, size: int, what: str) -> None:
    """A UsageError where n prompts are asked of `name`, which holds `size` `what` (records, test inputs)."""
    if n > size:
        raise UsageError(f"{name} has {size:,} {what}: ask for at most {size:,} prompts, not {n:,}.")


@dataclass(frozen=True)
class Record:
    """One prompt's material. Demonstrations are listed in the order the balanced prompt
    shows them; the last true demonstration is the one next to the input."""

    input: str
    true_class: str  # the input's class
    false_class: str
    true_demos: tuple[str, ...]  # of the input's class
    false_demos: tuple[str, ...]  # of the other class

    @property
    def direction(self) -> str:
        """E.g. sentiment/number: the input (and so the true label) from the sentiment class."""
        return f"{self.true_class}/{self.false_class}"

    def to_json(self) -> str:
        """One JSON line, keys in field order, UTF-8 kept as is."""
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> "Record":
        """Parse `to_json`'s output; ValueError if the line is not one."""
        d, names = json.loads(line), [f.name for f in fields(cls)]
        if not isinstance(d, dict) or set(d) != set(names) or not all(isinstance(d[k], list) for k in names[3:]):
            raise ValueError(f"expected a JSON object with the keys {', '.join(names)} (the last two lists)")
        record = cls(d["input"], d["true_class"], d["false_class"], tuple(d["true_demos"]), tuple(d["false_demos"]))
        texts = (record.input, record.true_class, record.false_class, *record.true_demos, *record.false_demos)
        if not all(isinstance(t, str) and t for t in texts):
            raise ValueError("every input, class and demonstration must be non-empty text")
        return record


@dataclass(frozen=True)
class Variant:
    """How a record becomes a prompt. The default is the paper's balanced prompt."""

    demonstrations: int = 4  # of the balanced prompt, half of each class
    imbalanced: bool = False  # drop the last true demonstration and its label (Section 5.1)
    order: str | None = None  # "t"/"f" per demonstration in prompt order; None: the false ones, then the true
    labels: tuple[str, str] = LABELS  # (true label, false label); ("bar", "foo") swaps them
    sep: str = SEP  # between a demonstration and its label (`split_separator`)

    def __post_init__(self) -> None:
        half = demos_per_class(self.demonstrations)
        split_separator(self.sep)
        true, false = self.labels
        if not true.strip() or not false.strip() or true == false:
            raise UsageError(f"Labels must be two different non-empty words, not {self.labels!r}.")
        if self.order is not None and sorted(self.order) != sorted("t" * half + "f" * half):
            raise UsageError(f"A demonstration order is {half} 't' (true) and {half} 'f' (false) letters for {self.demonstrations} "
                             f"demonstrations, not {self.order!r}.")

    @property
    def pattern(self) -> str:
        """The order of the demonstrations, e.g. "fftt" (before an imbalanced prompt drops one)."""
        half = self.demonstrations // 2
        return self.order if self.order is not None else "f" * half + "t" * half


def orders(per_class: int = 2) -> tuple[str, ...]:
    """Every order of per_class true ("t") and per_class false ("f") demonstrations, sorted:
    6 of two a class, 2 of one, 20 of three."""
    return tuple(sorted({"".join(o) for o in itertools.permutations("f" * per_class + "t" * per_class)}))


def variants(per_class: int = 2, labels: tuple[str, str] = LABELS, sep: str = SEP) -> dict[str, Variant]:
    """The named variants of prompts of per_class demonstrations a class, label words `labels`
    and separator `sep`: balanced (the true demonstrations next to the input), imbalanced,
    re-ordered (the false ones next to it, Section 5.2), swapped labels, and the rest of the
    recency control's orders (`orders`), "order-ftft" and so on."""
    base = Variant(2 * per_class, labels=labels, sep=sep)
    near, far = "f" * per_class + "t" * per_class, "t" * per_class + "f" * per_class
    return {"balanced": base, "imbalanced": replace(base, imbalanced=True), "reordered": replace(base, order=far),
            "swapped": replace(base, labels=labels[::-1]),
            **{f"order-{o}": replace(base, order=o) for o in orders(per_class) if o not in (near, far)}}


ORDERS = orders()  # every order of two true and two false demonstrations
VARIANTS = variants()  # the paper's prompts: two demonstrations a class, foo/bar, " : "


def named_variant(name: str, table: dict[str, Variant] = VARIANTS) -> Variant:
    """The variant called `name` in `table` (`variants`), or a UsageError listing the names."""
    if name not in table:
        raise UsageError(f"Unknown prompt variant {name!r}: choose one of {', '.join(table)}.")
    return table[name]


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt; spans index `text`, one entry per demonstration, in prompt order."""

    text: str
    demos: tuple[Span, ...]  # each demonstration
    labels: tuple[Span, ...]  # each demonstration's label word
    is_true: tuple[bool, ...]  # the demonstration is of the input's class (its label is the true one)
    true_label: str
    false_label: str
    sep: str = SEP  # between a demonstration and its label


def _render(pairs: list[tuple[str, bool]], query: str, labels: tuple[str, str], sep: str) -> Prompt:
    """`d : l` for each (demonstration, is_true) pair, then `query :` (with `sep` for " : ")."""
    text, demos, label_spans = "", [], []
    for demo, is_true in pairs:
        demos.append((len(text), len(text) + len(demo)))
        text += demo + sep
        label = labels[0] if is_true else labels[1]
        label_spans.append((len(text), len(text) + len(label)))
        text += label + " "
    text += query + split_separator(sep)[0]
    return Prompt(text, tuple(demos), tuple(label_spans), tuple(t for _, t in pairs), *labels, sep)


def build_prompt(record: Record, variant: Variant = Variant()) -> Prompt:
    """The prompt for `record` under `variant`; uses the first half of its demonstrations of each class."""
    half = demos_per_class(variant.demonstrations)
    if half > min(len(record.true_demos), len(record.false_demos)):
        raise UsageError(
            f"{variant.demonstrations} demonstrations need {half} of each class; this record has "
            f"{len(record.true_demos)} true and {len(record.false_demos)} false ones: use fewer or regenerate the records."
        )
    demos = {"t": iter(record.true_demos[:half]), "f": iter(record.false_demos[:half])}
    pairs = [(next(demos[c]), c == "t") for c in variant.pattern]
    if variant.imbalanced:
        last_true = max(i for i, (_, is_true) in enumerate(pairs) if is_true)
        del pairs[last_true]
    return _render(pairs, record.input, record_labels(record, variant.labels), variant.sep)


def record_labels(record: Record, labels: tuple[str, str]) -> tuple[str, str]:
    """A record's (true, false) label words under a variant's `labels`: its own (true class, false class) where
    they are CLASS_NAMES, the two reversed where they are CLASS_NAMES reversed (the swapped variant), else `labels`."""
    if labels == CLASS_NAMES:
        return record.true_class, record.false_class
    if labels == CLASS_NAMES[::-1]:
        return record.false_class, record.true_class
    return labels


def build_prompts(records: Sequence[Record], variant: Variant = Variant()) -> list[Prompt]:
    """`build_prompt` for every record."""
    return [build_prompt(r, variant) for r in records]


def by_direction(records: Sequence[Record]) -> dict[str, list[Record]]:
    """The records grouped by direction (e.g. "sentiment/number"), in order of first appearance."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.direction, []).append(r)
    return groups


def parse_prompt(text: str, labels: tuple[str, str] = LABELS, sep: str = SEP) -> Prompt:
    """A `Prompt` from plain text in the `d1 : l1 ... dK : lK x :` format (with `sep` for " : ").

    labels: (true label, false label). A label is a label word after the separator and before
    a space; a demonstration is the text between the previous label and its separator.
    """
    Variant(labels=labels, sep=sep)  # validates the pair and the separator
    end = split_separator(sep)[0]
    words = f"{re.escape(labels[0])}|{re.escape(labels[1])}"
    found = list(re.finditer(rf"{re.escape(sep)}({words})(?= )", text))
    if not found:
        raise UsageError(
            f"No label {labels[0]!r} or {labels[1]!r} in the prompt {text!r}: write it as "
            f"{f'demo{sep}{labels[1]} demo{sep}{labels[0]} input{end}'!r}, or pass its label words and separator."
        )
    if not text.endswith(end):
        raise UsageError(f"The prompt {text!r} must end with {end!r} after the input.")
    starts = [0] + [m.end(1) + 1 for m in found[:-1]]
    return Prompt(
        text,
        tuple((s, m.start()) for s, m in zip(starts, found)),
        tuple(m.span(1) for m in found),
        tuple(m.group(1) == labels[0] for m in found),
        *labels,
        sep,
    )


# --- labels ---------------------------------------------------------------------------
def label_token_ids(tokenizer, words: Sequence[str], sep: str = SEP) -> torch.Tensor:
    """[len(words)] long: each word's first token as it follows a prompt's final separator
    (no special tokens). After " : ", the first token of " " + word; right after the
    separator's end (a newline), the token after the end's own tokens in end + word: a bare
    word may take a dummy prefix ("▁bar") that the prompt's "\nbar" does not."""
    import torch

    first = {w: ids[0] for w, ids in label_tokens(tokenizer, words, sep).items()}
    return torch.tensor([first[w] for w in words], dtype=torch.long)


def label_tokens(tokenizer, words: Sequence[str], sep: str = SEP) -> dict[str, list[int]]:
    """Each distinct word's token ids as it follows a prompt's final separator, in `label_token_ids`' context
    (the first is that function's). A UsageError where the tokenizer merges the separator with a word."""
    end, gap = split_separator(sep)
    context = "" if gap else end
    skip = tokenizer(context, add_special_tokens=False)["input_ids"] if context else []
    unique = sorted(set(words))
    ids = tokenizer([context + gap + w for w in unique], add_special_tokens=False)["input_ids"]
    if any(i[: len(skip)] != skip for i in ids):
        raise UsageError(f"The tokenizer merges the separator {sep!r} with a label word: choose another separator.")
    return {w: i[len(skip):] for w, i in zip(unique, ids)}


def prompt_label_ids(tokenizer, prompts: Sequence[Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
    """([N], [N]): each prompt's true and false label token ids (`label_token_ids` after its separator)."""
    import torch

    ids = torch.empty(len(prompts), 2, dtype=torch.long)
    for sep in dict.fromkeys(p.sep for p in prompts):
        rows = [i for i, p in enumerate(prompts) if p.sep == sep]
        words = [w for i in rows for w in (prompts[i].true_label, prompts[i].false_label)]
        ids[rows] = label_token_ids(tokenizer, words, sep).view(-1, 2)
    return ids[:, 0], ids[:, 1]


def mixed_label_prompts(records: Sequence[Record], variant: Variant = Variant()) -> list[Prompt]:
    """Prompts with the label pair swapped on every other pair of records (rows 2, 3, 6,
    7, ...), so neither label word is always the true one and, as records alternate
    direction, each direction meets both orders."""
    swapped = replace(variant, labels=variant.labels[::-1])
    return [build_prompt(r, swapped if (i // 2) % 2 else variant) for i, r in enumerate(records)]


def majority_labels(prompts: Sequence[Prompt]) -> list[str | None]:
    """Each prompt's majority label word (None on a tie)."""
    out = []
    for p in prompts:
        n_true = sum(p.is_true)
        n_false = len(p.is_true) - n_true
        out.append(None if n_true == n_false else p.true_label if n_true > n_false else p.false_label)
    return out


def nearest_labels(prompts: Sequence[Prompt]) -> list[str]:
    """Each prompt's label of the demonstration next to the input."""
    return [p.true_label if p.is_true[-1] else p.false_label for p in prompts]
