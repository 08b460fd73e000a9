"""Where the package finds the checkout's data and keeps its caches, how cache files are
checked and given permissions, and the names the command line needs before torch loads."""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Callable

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


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """write(tmp) to a temporary file beside `path`, then rename it into place with the
    user's umask: `path` is either its old self or the whole new file, whatever fails
    (a full disk, an exception of any type, a kill). The temporary file never outlives a
    failure that Python sees; one of a killed process ends in `.tmp` (see sweep_leftovers)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.chmod(tmp, user_mode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """`text` (UTF-8) at `path`, written by `write_atomically`."""
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def sweep_leftovers(folder: Path, pattern: str, older_than: float = 3600) -> None:
    """Remove files and folders matching `pattern` in `folder` older than an hour: the
    temporary output of a process that was killed before it could clean up."""
    for leftover in folder.glob(pattern):
        if time.time() - leftover.lstat().st_mtime > older_than:
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)
