"""Bad input: the one exception type the helpers raise for it, the prompt checks (no torch
needed, so the CLI runs them before it imports torch) and the one warning for doubtful prompts;
and `Unjudgeable`, evidence a claim cannot be judged on."""
from __future__ import annotations

import operator
import re
import warnings


class UsageError(ValueError):
    """Bad input (unknown model, prompt too long, empty dataset, ...).

    The message says what went wrong and what to do; the CLI prints it as one line.
    """


class Unjudgeable(Exception):
    """Evidence a claim cannot be judged on, and why: a view of the records (fewer than 2
    correctly answered prompts in a dataset, heads given rather than located) or a setting
    that cannot build a prompt variant a claim needs (`data.setting`)."""


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
