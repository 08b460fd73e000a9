"""Helpers for reproducing Yu & Ananiadou (2024), "How do LLMs learn in context?".

The public API; the subpackages hold the rest: `model` (loading, adapters, hooks, prefix), `core`
(batching, decompose, attribution, locate, projections, interventions), `data` (prompts, positions,
words, sentences, datasets), `studies` (one module per paper analysis), `verdicts` (the paper's claims,
each judged by its rule), `viz` (figures and widgets). Names
are imported on first use, so `python -m icl_helpers` answers bad arguments before torch loads.
"""
from __future__ import annotations

import importlib

from .errors import UsageError  # noqa: F401 (public)

_WHERE = {  # public name -> module that defines it
    "BUNDLED": "paths", "ICLModel": "model.loading", "load_model": "model.loading",
    "Decomposition": "core.decompose", "decompose": "core.decompose", "Readout": "core.attribution",
    "LocateResult": "core.locate", "locate": "core.locate", "Head": "core.heads",
    "ablated": "core.interventions", "balanced_labels": "core.interventions", "position_free_labels": "core.interventions",
    "LabelPositions": "data.positions", "find_positions": "data.positions",
    "Prompt": "data.prompts", "Record": "data.prompts", "Variant": "data.prompts", "build_prompt": "data.prompts",
    "build_prompts": "data.prompts", "parse_prompt": "data.prompts",
}
__all__ = sorted([*_WHERE, "UsageError"])


def __getattr__(name: str) -> object:
    if name not in _WHERE:
        raise AttributeError(f"module 'icl_helpers' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)


def __dir__() -> list[str]:
    return __all__
