"""Where the package finds the checkout's data and keeps its caches, how cache files are
checked, written, locked and given permissions, and the names the command line needs
before torch loads."""
from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from .errors import UsageError

try:
    import fcntl
except ImportError:  # Windows: no locks, so two processes may compute the same entry twice
    fcntl = None

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA = REPO_ROOT / "data"  # word lists and word-dataset records
BUNDLED = "smollm2-135m"  # the bundled offline model's name, and its folder in the cache
DTYPE_NAMES = ("float32", "float16", "bfloat16")  # the dtypes models load in


def cache_root() -> Path:
    """$ICL_HELPERS_CACHE, else ~/.cache/icl_helpers: converted models and cached results."""
    return Path(os.environ.get("ICL_HELPERS_CACHE", Path.home() / ".cache" / "icl_helpers"))


def check_model_name(name: object) -> str:
    """`name` if it can name a model (a non-blank text), else a UsageError saying what to give."""
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"No model named ({name!r}): give a hub id, a local folder saved with save_pretrained, "
                         f"or {BUNDLED}.")
    return name


def absent(path: Path, folder: bool = False) -> str | None:
    """Why `path` is not the file (or, where `folder`, the folder) asked for, as a message's
    words ("does not exist", "is a file, not a folder", ...); None where it is one."""
    if not path.exists():
        return "does not exist"
    if folder and not path.is_dir():
        return "is a file, not a folder"
    if not folder and path.is_dir():
        return "is a folder, not a file"
    return None


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file: the same path once resolved (through symlinks), or one
    file on disk (a hard link). Either may not exist yet."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one is missing
        return False


def try_write(folder: Path, size: int = 0) -> None:
    """Make a file of `size` bytes in `folder`, synced to disk, and remove it: an OSError where
    that cannot be done. A real write, not os.access: root passes os.access even where nothing
    can be written, and a full disk fails here."""
    with tempfile.TemporaryFile(dir=folder) as probe:
        probe.write(bytes(size))
        probe.flush()
        os.fsync(probe.fileno())


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
    """write(tmp) to a temporary file (or folder) beside `path`, then rename it into place
    with the user's umask (a folder's files too: some writers make theirs 0600): `path` is
    either its old self or the whole new one, whatever
    fails (a full disk, an exception of any type, a kill). The temporary one never outlives
    a failure that Python sees. One of a killed process is removed by the next write of `path`
    (`remove_dead_writers`), or by `remove_orphans` under a lock."""
    path = Path(path)
    remove_dead_writers(path)
    tmp = temporary_of(path)
    try:
        write(tmp)
        for made in [tmp, *tmp.rglob("*")] if tmp.is_dir() else [tmp]:
            os.chmod(made, user_mode(made.is_dir()))
        os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    """`text` (UTF-8, with \\n line ends) at `path`, written by `write_atomically`."""
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8", newline="\n"))


def temporary_of(path: Path) -> Path:
    """The temporary name this process writes `path` under: `.NAME.PID.tmp` beside it."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def remove(path: Path) -> None:
    """Delete a file, or a folder with all it holds; one that is already gone is no error."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def out_of_space(err: BaseException) -> bool:
    """Whether an exception of any type says the disk (or the user's quota) is full: an
    OSError's errno, or the words safetensors and tokenizers put in their own exceptions."""
    return (getattr(err, "errno", None) in (errno.ENOSPC, errno.EDQUOT)
            or re.search(r"No space left on device|Disk quota exceeded|os error (28|122)\b", str(err)) is not None)


@contextmanager
def locked(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock on `path` while inside (an flock on the file `NAME.lock`
    beside it, which stays): another process that asks for it waits, with one line on
    stderr, until this one is done. The lock dies with its process, so a killed holder
    never blocks a later run. Yields False, and locks nothing, where no lock file can be
    made (a read-only place, or Windows)."""
    lock = path.with_name(path.name + ".lock")
    fd = None
    if fcntl is not None:
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o666)  # read-only will do: a lock another user made
        except OSError:
            pass
    if fd is None:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"Waiting for another process that is making {path} ...", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield True
    finally:
        os.close(fd)


def temporaries_of(path: Path) -> Iterator[tuple[Path, int]]:
    """The temporary files (or folders) beside `path` that its writers made (`temporary_of`), each
    with its writer's process id."""
    name = re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.tmp")
    for temporary in path.parent.glob(".*.tmp"):
        if match := name.fullmatch(temporary.name):
            yield temporary, int(match[1])


def remove_orphans(path: Path) -> None:
    """Remove the temporary files (or folders) that writers of `path` left beside it. Call
    it holding `locked(path)`: no live writer of `path` has one then, so each is a killed
    process's, removed at once rather than an hour later."""
    for orphan, _ in temporaries_of(path):
        remove(orphan)


def remove_dead_writers(path: Path) -> None:
    """Remove the temporary files (or folders) of `path` whose writer no longer runs: no lock
    needed, as each live writer's is kept. This checks processes of this machine only."""
    for orphan, pid in temporaries_of(path):
        if not running(pid):
            remove(orphan)


def running(pid: int) -> bool:
    """Whether process `pid` runs (one of another user's too, or this one). True on Windows,
    where os.kill would end it rather than ask."""
    if pid == os.getpid() or sys.platform == "win32":
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such process, or too large a number for one
        return False
    except PermissionError:  # another user's
        pass
    return True


def sweep_leftovers(folder: Path, pattern: str, older_than: float = 3600) -> None:
    """Remove files and folders matching `pattern` in `folder` untouched for `older_than`
    seconds: temporary output of a killed process that no lock tells apart from a live
    one's. One that another process renames or removes meanwhile is passed over."""
    for leftover in folder.glob(pattern):
        try:
            if time.time() - leftover.lstat().st_mtime > older_than:
                remove(leftover)
        except FileNotFoundError:
            pass
