"""Where the package finds the checkout's data and keeps its caches, how cache files are
checked and given permissions, and the names the command line needs before torch loads."""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "data"  # word lists and word-dataset records
BUNDLED = "smollm2-135m"  # the bundled offline model's name, and its folder in the cache
DTYPE_NAMES = ("float32", "float16", "bfloat16")  # the dtypes models load in


def cache_root() -> Path:
    """$ICL_HELPERS_CACHE, else ~/.cache/icl_helpers: converted models and cached results."""
    return Path(os.environ.get("ICL_HELPERS_CACHE", Path.home() / ".cache" / "icl_helpers"))


def checksum_of(path: Path) -> list:
    """[size, sha256] of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digest.update(block)
    return [os.path.getsize(path), digest.hexdigest()]


def user_mode(directory: bool = False) -> int:
    """The permissions the user's umask gives a new file (or folder): temporary files are made 0600."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def sweep_leftovers(folder: Path, pattern: str, older_than: float = 3600) -> None:
    """Remove files and folders matching `pattern` in `folder` older than an hour: the
    temporary output of a process that was killed before it could clean up."""
    for leftover in folder.glob(pattern):
        if time.time() - leftover.lstat().st_mtime > older_than:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
