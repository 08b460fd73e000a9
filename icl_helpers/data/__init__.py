"""Data: prompt records and their builder, label token positions, word and sentence datasets.

Names are imported on first use, so the command line reads datasets before torch loads."""
from __future__ import annotations

import importlib

_WHERE = {"LabelPositions": "positions", "find_positions": "positions", **dict.fromkeys(
    ["Prompt", "Record", "VARIANTS", "Variant", "build_prompt", "build_prompts", "parse_prompt"], "prompts")}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'icl_helpers.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)


def __dir__() -> list[str]:
    return __all__
