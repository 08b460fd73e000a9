"""Public names imported on first use: a package's `__all__`, `__getattr__` and `__dir__` from one
table, so that a command answers bad arguments before torch loads (PEP 562)."""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, where: dict[str, str]
                 ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """(__all__, __getattr__, __dir__) of `package`, whose public names are those of `where`
    (name -> the module of the package that defines it), each imported when first asked for."""
    names = sorted(where)

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{where[name]}", package), name)

    def __dir__() -> list[str]:
        return names

    return names, __getattr__, __dir__
