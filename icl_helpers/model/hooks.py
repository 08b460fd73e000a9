"""Attach forward hooks for the length of a `with` block."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Literal

from torch import nn

Hook = tuple[nn.Module, Literal["pre", "post"], Callable]


@contextmanager
def attached(hooks: list[Hook], first: bool = False) -> Iterator[None]:
    """Register each (module, "pre" | "post", fn); remove them all on exit, even on error.

    "pre" hooks are called as fn(module, args) before forward, "post" as
    fn(module, args, output) after it; a non-None return replaces args / output.
    first: each is called before the hooks its module has already (else after them).
    """
    handles = [
        module.register_forward_pre_hook(fn, prepend=first) if kind == "pre"
        else module.register_forward_hook(fn, prepend=first)
        for module, kind, fn in hooks
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
