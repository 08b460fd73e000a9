"""Progress bars for steps that take a while: `tqdm.auto` (a widget in a notebook, text on
stderr in a terminal), shown as the step starts (a step of one batch would otherwise show
nothing until it ends) and removed when it ends, so no finished bar is left in a notebook.

TQDM_DISABLE=1 turns every bar off: the main job sets it, so that notebooks it executes
carry no bar frozen at the moment it was saved.
"""
from __future__ import annotations

import os

from tqdm.auto import tqdm


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A bar over `total` steps, labelled `desc`; update it with `.update()`, end with `.close()`."""
    off = not enabled or os.environ.get("TQDM_DISABLE", "") not in ("", "0")
    return tqdm(total=total, desc=desc, leave=False, disable=off)
