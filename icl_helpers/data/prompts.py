"""In-context classification prompts: records, one builder, labels.

A `Record` holds what a prompt is made of: the input, its class (the *true* class), the
other (*false*) class, and demonstrations of each. `build_prompt` renders a record as
`d1 : l1 d2 : l2 ... dK : lK x :` under a `Variant` (balanced, imbalanced, re-ordered,
any label pair, any even K) and keeps the character span of every demonstration and
label, so token positions never depend on searching the text (see `positions`). The label
helpers at the end give label token ids and each prompt's biased label (Section 8).
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Sequence

import torch

from ..errors import UsageError

SEP = " : "  # between a demonstration (or the input) and its label
Span = tuple[int, int]  # [start, end) character offsets in a prompt's text


def demos_per_class(k: int) -> int:
    """K/2, the demonstrations of each class in a balanced prompt of K demonstrations."""
    if k < 2 or k % 2:
        raise UsageError(f"K (demonstrations a prompt) must be an even number of at least 2, not {k}.")
    return k // 2


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

    k: int = 4  # demonstrations of the balanced prompt, K/2 of each class
    imbalanced: bool = False  # drop the last true demonstration and its label (Section 5.1)
    order: str | None = None  # "t"/"f" per demonstration in prompt order; None: the false ones, then the true
    labels: tuple[str, str] = ("foo", "bar")  # (true label, false label); ("bar", "foo") swaps them

    def __post_init__(self) -> None:
        half = demos_per_class(self.k)
        true, false = self.labels
        if not true.strip() or not false.strip() or true == false:
            raise UsageError(f"Labels must be two different non-empty words, not {self.labels!r}.")
        if self.order is not None and sorted(self.order) != sorted("t" * half + "f" * half):
            raise UsageError(f"A demonstration order is {half} 't' (true) and {half} 'f' (false) letters for K={self.k}, "
                             f"not {self.order!r}.")

    @property
    def pattern(self) -> str:
        """The order of the K demonstrations, e.g. "fftt" (before an imbalanced prompt drops one)."""
        half = self.k // 2
        return self.order if self.order is not None else "f" * half + "t" * half


ORDERS = ("fftt", "ftft", "fttf", "tfft", "tftf", "ttff")  # every order of two true and two false demonstrations

VARIANTS: dict[str, Variant] = {
    "balanced": Variant(),  # order fftt: the true demonstrations next to the input
    "imbalanced": Variant(imbalanced=True),
    "reordered": Variant(order="ttff"),  # the false demonstrations next to the input (Section 5.2)
    "swapped": Variant(labels=("bar", "foo")),
    **{f"order-{o}": Variant(order=o) for o in ORDERS if o not in ("fftt", "ttff")},  # the recency family
}


def named_variant(name: str) -> Variant:
    """The variant called `name` in VARIANTS, or a UsageError listing the names."""
    if name not in VARIANTS:
        raise UsageError(f"Unknown prompt variant {name!r}: choose one of {', '.join(VARIANTS)}.")
    return VARIANTS[name]


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt; spans index `text`, one entry per demonstration, in prompt order."""

    text: str
    demos: tuple[Span, ...]  # each demonstration
    labels: tuple[Span, ...]  # each demonstration's label word
    is_true: tuple[bool, ...]  # the demonstration is of the input's class (its label is the true one)
    true_label: str
    false_label: str


def _render(pairs: list[tuple[str, bool]], query: str, labels: tuple[str, str]) -> Prompt:
    """`d : l` for each (demonstration, is_true) pair, then `query :`."""
    text, demos, label_spans = "", [], []
    for demo, is_true in pairs:
        demos.append((len(text), len(text) + len(demo)))
        text += demo + SEP
        label = labels[0] if is_true else labels[1]
        label_spans.append((len(text), len(text) + len(label)))
        text += label + " "
    text += query + SEP.rstrip()
    return Prompt(text, tuple(demos), tuple(label_spans), tuple(t for _, t in pairs), *labels)


def build_prompt(record: Record, variant: Variant = Variant()) -> Prompt:
    """The prompt for `record` under `variant`; uses the first K/2 demonstrations of each class."""
    half = demos_per_class(variant.k)
    if half > min(len(record.true_demos), len(record.false_demos)):
        raise UsageError(
            f"K={variant.k} needs {half} demonstrations of each class; this record has "
            f"{len(record.true_demos)} true and {len(record.false_demos)} false ones: lower K or regenerate the records."
        )
    demos = {"t": iter(record.true_demos[:half]), "f": iter(record.false_demos[:half])}
    pairs = [(next(demos[c]), c == "t") for c in variant.pattern]
    if variant.imbalanced:
        last_true = max(i for i, (_, is_true) in enumerate(pairs) if is_true)
        del pairs[last_true]
    return _render(pairs, record.input, variant.labels)


def build_prompts(records: Sequence[Record], variant: Variant = Variant()) -> list[Prompt]:
    """`build_prompt` for every record."""
    return [build_prompt(r, variant) for r in records]


def by_direction(records: Sequence[Record]) -> dict[str, list[Record]]:
    """The records grouped by direction (e.g. "sentiment/number"), in order of first appearance."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.direction, []).append(r)
    return groups


def parse_prompt(text: str, labels: tuple[str, str] = ("foo", "bar")) -> Prompt:
    """A `Prompt` from plain text in the `d1 : l1 ... dK : lK x :` format.

    labels: (true label, false label). A label is a label word after " : " and before a
    space; a demonstration is the text between the previous label and its " : ".
    """
    Variant(labels=labels)  # validates the pair
    found = list(re.finditer(rf" : ({re.escape(labels[0])}|{re.escape(labels[1])})(?= )", text))
    if not found:
        raise UsageError(
            f"No label {labels[0]!r} or {labels[1]!r} in the prompt {text!r}: write it as "
            f"'demo : {labels[1]} demo : {labels[0]} input :', or pass its label words."
        )
    if not text.endswith(SEP.rstrip()):
        raise UsageError(f"The prompt {text!r} must end with ' :' after the input.")
    starts = [0] + [m.end(1) + 1 for m in found[:-1]]
    return Prompt(
        text,
        tuple((s, m.start()) for s, m in zip(starts, found)),
        tuple(m.span(1) for m in found),
        tuple(m.group(1) == labels[0] for m in found),
        *labels,
    )


# --- labels ---------------------------------------------------------------------------
def label_token_ids(tokenizer, words: Sequence[str]) -> torch.Tensor:
    """[len(words)] long: the first token of " " + word for each word (no special tokens):
    the token that follows a prompt's final " :"."""
    unique = sorted(set(words))
    ids = tokenizer([" " + w for w in unique], add_special_tokens=False)["input_ids"]
    first = {w: i[0] for w, i in zip(unique, ids)}
    return torch.tensor([first[w] for w in words], dtype=torch.long)


def prompt_label_ids(tokenizer, prompts: Sequence[Prompt]) -> tuple[torch.Tensor, torch.Tensor]:
    """([N], [N]): each prompt's true and false label token ids."""
    ids = label_token_ids(tokenizer, [w for p in prompts for w in (p.true_label, p.false_label)])
    return ids[0::2], ids[1::2]


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
