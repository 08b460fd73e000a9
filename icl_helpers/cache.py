"""A disk cache for results a later notebook reuses (located heads, ...).

Files live under `$ICL_HELPERS_CACHE/results/` (default ~/.cache/icl_helpers/results/),
one per key: the key names the model, dataset, variant, N and seed, and ends with a hash
of the prompts themselves, so a changed prompt builder never reads a stale result.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

import torch

from .models import _cache_root

Tensors = dict[str, torch.Tensor]


def prompts_hash(prompts: list[str]) -> str:
    """A short, stable hash of a prompt list (order matters)."""
    return hashlib.sha256("\x00".join(prompts).encode()).hexdigest()[:12]


def cache_file(kind: str, **key: object) -> Path:
    """The file for `kind` (e.g. "locate") and a key such as model=..., dataset=..., n=..."""
    parts = [kind] + [f"{k}={v}" for k, v in key.items()]
    name = re.sub(r"[^A-Za-z0-9=._-]+", "-", "__".join(parts))
    return _cache_root() / "results" / f"{name}.pt"


def cached(path: Path, compute: Callable[[], Tensors]) -> Tensors:
    """Load the tensors at `path`, or compute and save them there (atomically)."""
    if path.exists():
        return torch.load(path, map_location="cpu", weights_only=True)
    result = {k: v.detach().cpu() for k, v in compute().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    torch.save(result, tmp)
    os.replace(tmp, path)
    return result
