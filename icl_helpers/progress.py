"""Progress bars for steps that take a while: shown as a step starts (a step of one batch would
otherwise show nothing until it ends) and removed when it ends.

In a terminal, tqdm's text bar on stderr. In a notebook kernel, the same text in one display
output that each step redraws in place and the end empties (`NotebookBar`): a notebook saved
during or after a run holds no widget (its model dies with the kernel, and a reopened notebook
shows "Error displaying widget" where it was, GitHub a bar frozen at the moment of saving),
at most an empty output or the plain text of a bar still running. transformers', the hub's and
datasets' own bars are widgets in a notebook: `library_bars_off` turns them off around our
calls into those libraries.

TQDM_DISABLE=1 turns every bar of ours off: the main job sets it.
"""
from __future__ import annotations

import functools
import io
import os
import sys
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator

from tqdm import tqdm


class NotebookBar(tqdm):
    """tqdm drawn as plain text in one display output of the running cell, redrawn in place, and
    emptied when the bar closes (tqdm draws "" on closing a bar that does not stay). It publishes
    through the kernel's own display publisher (what IPython.display.display calls), so that this
    floor of the package imports no presentation library."""

    def __init__(self, *args, **kwargs) -> None:
        self._output = None  # the display id, set by the first draw (tqdm's __init__ draws)
        super().__init__(*args, file=io.StringIO(), **kwargs)  # tqdm's own writes (a closing "\r") go nowhere

    def display(self, msg: str | None = None, pos: int | None = None) -> None:
        data = {"text/plain": str(self) if msg is None else msg}  # "" on closing: an output that shows nothing
        shown = self._output is not None
        self._output = self._output or uuid.uuid4().hex
        _shell().display_pub.publish(data, {}, transient={"display_id": self._output}, update=shown)


def _shell():
    """The running IPython shell, or None."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython else None


def in_notebook() -> bool:
    """Whether this runs in a notebook's kernel (where tqdm.auto would draw a widget)."""
    shell = _shell()
    return shell is not None and "IPKernelApp" in shell.config


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A bar over `total` steps, labelled `desc`; update it with `.update()`, end with `.close()`."""
    off = not enabled or os.environ.get("TQDM_DISABLE", "") not in ("", "0")
    return (NotebookBar if in_notebook() else tqdm)(total=total, desc=desc, leave=False, disable=off)


@contextmanager
def library_bars_off() -> Iterator[None]:
    """In a notebook kernel, transformers', the hub's and datasets' own progress bars off for the
    block (each would leave a widget behind), then back as they were; elsewhere nothing changes."""
    switches = _library_switches() if in_notebook() else []
    restore = [on for is_on, off, on in switches if is_on()]
    for _, off, _ in switches:
        off()
    try:
        yield
    finally:
        for on in restore:
            on()


Switch = tuple[Callable[[], bool], Callable[[], None], Callable[[], None]]  # (is on, turn off, turn on)


def _library_switches() -> list[Switch]:
    """The progress-bar switches of transformers (which turns the hub's with its own), of its GGUF
    reader (whose bar, drawn as the bundled model is first converted, obeys no switch: its tqdm is
    swapped for a disabled one) and, where it is loaded, datasets."""
    from transformers import modeling_gguf_pytorch_utils as gguf
    from transformers.utils import logging

    shown = gguf.tqdm
    switches = [(logging.is_progress_bar_enabled, logging.disable_progress_bar, logging.enable_progress_bar),
                (lambda: gguf.tqdm is shown, lambda: setattr(gguf, "tqdm", functools.partial(shown, disable=True)),
                 lambda: setattr(gguf, "tqdm", shown))]
    if "datasets" in sys.modules:
        from datasets import utils

        switches.append((lambda: not utils.are_progress_bars_disabled(), utils.disable_progress_bars,
                         utils.enable_progress_bars))
    return switches
