"""Where the package finds the checkout's data and keeps its caches, and the names the
command line needs before torch loads."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "data"  # word lists and word-dataset records
BUNDLED = "smollm2-135m"  # the bundled offline model's name, and its folder in the cache
DTYPE_NAMES = ("float32", "float16", "bfloat16")  # the dtypes models load in


def cache_root() -> Path:
    """$ICL_HELPERS_CACHE, else ~/.cache/icl_helpers: converted models and cached results."""
    return Path(os.environ.get("ICL_HELPERS_CACHE", Path.home() / ".cache" / "icl_helpers"))
