"""Bad input: the one exception type the helpers raise for it, the prompt checks and cleaning
(no torch needed, so the CLI runs them before it imports torch) and the one warning for doubtful
prompts; and `CannotMeasure`, a quantity the records or the setting at hand cannot give."""
from __future__ import annotations

import operator
import re
import unicodedata
import warnings


class UsageError(ValueError):
    """Bad input (unknown model, prompt too long, empty dataset, ...).

    The message says what went wrong and what to do; the CLI prints it as one line.
    """


class CannotMeasure(Exception):
    """A quantity the records or the setting at hand cannot give, and why: too few distinct inputs
    for an interval (`stats`), a prompt variant the setting cannot build (`data.setting`). The
    verdicts read it as a claim not tested, saying why (`verdicts.judgement.Unjudgeable`)."""


def check_prompts(prompts: list[str]) -> list[str]:
    """The prompts as a list, or a UsageError saying what is wrong: a list of non-empty texts."""
    if isinstance(prompts, str):
        raise UsageError("Prompts must be a list of texts, not one string: pass [prompt].")
    prompts = list(prompts)
    if not prompts:
        raise UsageError("No prompts given: pass at least one prompt.")
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise UsageError(f"Prompt {i} is a {type(p).__name__}, not text: pass a list of strings.")
        if not p.strip():
            raise UsageError(f"Prompt {i} is empty: every prompt needs text.")
    return prompts


def clean_text(text: str) -> str:
    """A prompt (or a word or text that goes into one) read from a file or the command line, as its
    writer sees it: Windows line ends ("\\r\\n") as "\\n", and without the invisible characters that an
    editor may leave among the spaces at either end, each of which a tokenizer would read as tokens
    (a byte-order mark, a zero-width space or joiner: any Unicode format character, category Cf; a
    carriage return). The text between is kept as written."""
    text = text.replace("\r\n", "\n")
    start, end = 0, len(text)
    while start < end and _blank(text[start]):
        start += 1
    while end > start and _blank(text[end - 1]):
        end -= 1
    return _visible(text[:start]) + text[start:end] + _visible(text[end:])


def _invisible(char: str) -> bool:
    return char == "\r" or unicodedata.category(char) == "Cf"


def _blank(char: str) -> bool:
    return char.isspace() or _invisible(char)


def _visible(text: str) -> str:
    return "".join(c for c in text if not _invisible(c))


def check_count(value: int, name: str) -> int:
    """value (a batch size, a number of heads), or a UsageError where it is not a whole number at
    least 1; `name` is the argument's."""
    try:
        count = operator.index(value)
    except TypeError:
        raise UsageError(f"{name} must be a whole number, not {value!r}.") from None
    if count < 1:
        raise UsageError(f"{name} must be at least 1, not {count}.")
    return count


def warn_without_demonstration(prompts: list[str]) -> None:
    """One warning for all prompts that hold no demonstration label (no ' : label' before
    the final ' :'), e.g. a bare 'one :': the in-context heads then have nothing to read.
    Shown once a process for the same prompts, however many callers check them."""
    bare = [i for i, p in enumerate(prompts) if not re.search(r" : \S", p.rstrip().removesuffix(":"))]
    if bare:
        shown = ", ".join(map(str, bare[:5])) + (", ..." if len(bare) > 5 else "")
        warnings.warn(f"{len(bare)} of {len(prompts)} prompts hold no demonstration label (prompt {shown}): "
                      "in-context learning needs 'demo : label' pairs before the input, e.g. 'love : bar eight : foo one :'.",
                      UserWarning, stacklevel=1)
