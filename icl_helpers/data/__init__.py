"""Data: prompt records and their builder, label token positions, word and sentence datasets.

Names are imported on first use, so the command line reads datasets before torch loads."""
from __future__ import annotations

from ..lazy import lazy_exports

_WHERE = {"LabelPositions": "positions", "find_positions": "positions", **dict.fromkeys(
    ["Prompt", "Record", "VARIANTS", "Variant", "build_prompt", "build_prompts", "parse_prompt"], "prompts")}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)

