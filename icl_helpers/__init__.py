"""Helpers for reproducing Yu & Ananiadou (2024), "How do LLMs learn in context?".

The public API; the subpackages hold the rest: `model` (loading, adapters, hooks), `core`
(decompose, attribution, locate, projections, interventions), `data` (prompts, positions,
datasets), `studies` (one module per paper analysis), `viz` (figures and widgets).
"""
from .core.attribution import Readout
from .core.decompose import Decomposition, decompose
from .core.heads import Head
from .core.interventions import ablated, balanced_labels, position_free_labels
from .core.locate import LocateResult, locate
from .data.positions import LabelPositions, find_positions
from .data.prompts import Prompt, Record, Variant, build_prompt, build_prompts, parse_prompt
from .errors import UsageError
from .model.loading import BUNDLED, ICLModel, load_model

__all__ = [
    "BUNDLED", "Decomposition", "Head", "ICLModel", "LabelPositions", "LocateResult", "Prompt", "Readout", "Record",
    "UsageError", "Variant", "ablated", "balanced_labels", "build_prompt", "build_prompts", "decompose",
    "find_positions", "load_model", "locate", "parse_prompt", "position_free_labels",
]
