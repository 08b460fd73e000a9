"""Where each architecture family keeps its weights and activations: one adapter a family,
found from a config's model_type before any weights load.

`base` holds the common ground (`Site`, `Arch`, keys without positions); every other module
of this folder is a family (`gpt2`, `llama`, `qwen3`, ...; `gemma`: Gemma 1, 2 and 3) and
declares the model types it adapts, `FAMILIES = {model_type: adapter class}`. The registry,
`architectures()`, finds them all: a new family is one module here, and the tests of every
family (`tests/test_families.py`) and the family table of `docs/models.md` follow it.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil

from torch import nn

from ...errors import UsageError
from .base import Angles, Arch, Branch, PositionFreeKeys, RotaryKeys, Site, softcap_

__all__ = ["Angles", "Arch", "Branch", "PositionFreeKeys", "RotaryKeys", "Site", "softcap_", "architectures",
           "adapter_class", "arch_for"]


@functools.cache
def architectures() -> dict[str, type[Arch]]:
    """model_type -> adapter class, sorted by model_type: the `FAMILIES` of every module of
    this folder (its package path), imported when first asked for."""
    found: dict[str, type[Arch]] = {}
    for module in pkgutil.iter_modules(__path__):
        for model_type, adapter in getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILIES", {}).items():
            if found.setdefault(model_type, adapter) is not adapter:
                raise RuntimeError(f"Two adapters claim model type {model_type!r}: {found[model_type]} and {adapter}.")
    return dict(sorted(found.items()))


def adapter_class(model_type: str | None) -> type[Arch]:
    """The adapter class for a config's model_type (known before any weights load), or a
    UsageError naming the supported families and the folder a new one goes in."""
    known = architectures()
    if model_type not in known:
        raise UsageError(
            f"Model type {model_type!r} is not supported; supported families: "
            f"{', '.join(known)}. Add an adapter in icl_helpers/model/adapters/."
        )
    return known[model_type]


def arch_for(model: nn.Module) -> Arch:
    """The adapter for `model`, or a UsageError naming the supported families."""
    return adapter_class(getattr(getattr(model, "config", None), "model_type", None))(model)
