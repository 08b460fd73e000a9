"""The results cache: tensors and JSON kept on disk under `$ICL_HELPERS_CACHE/results/`.

An entry is one file named for its key (`cache_file`: a kind such as "locate" and the
values that decide the result: a model, a fingerprint of what its weights hold, a hash of the prompts
(`prompts_hash`), of the package's code (`source_hash`), ...). `cached` keeps a dict of
tensors (a torch file, `.pt`), `cached_json` a JSON value (a text file, `.json`). Each entry
is written atomically and holds its value, its SHA-256, checked on every read, and the file
name it was written under: a damaged entry, or one copied over another key's file, is
rebuilt with a warning (an older version's tensors without one). A cache that cannot be
written (a full disk, no permission, not a folder) gives one warning a folder and a
process, and keeps the results it could not store in memory for the rest of the run. One
process at a time makes an entry (a lock file beside it): two runs on one cache compute each
result once.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

import torch

from .paths import cache_root, locked, remove_orphans, sweep_leftovers, write_atomically

Tensors = dict[str, torch.Tensor]
JSON = Any  # what json.loads returns: dicts, lists, strings, numbers, booleans and None
Value = TypeVar("Value")


def prompts_hash(prompts: list[str]) -> str:
    """A short, stable hash of a list of texts (order matters): prompts, or the reprs of a key's values."""
    return hashlib.sha256("\x00".join(prompts).encode()).hexdigest()[:12]


def source_hash() -> str:
    """A short hash of the package's own source files: results that depend on its code (a
    report's findings) are reused only by the same code. Take it when the code is loaded
    (`verdicts.findings.CODE`), not later: the files may change under a running process."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()[:12]


NAME_MAX = 200  # a file name's length at most, so that its lock's and a writer's temporary names fit in 255 bytes


def cache_file(kind: str, **key: object) -> Path:
    """The tensors' file for `kind` (e.g. "locate") and a key such as model=..., dataset=..., n=...
    (`.with_suffix(".json")`: the same key's JSON file). A key too long for a file name (a model
    named by a long local path) keeps its start and ends with a hash of the whole key."""
    parts = [kind] + [f"{k}={v}" for k, v in key.items()]
    name = re.sub(r"[^A-Za-z0-9=._-]+", "-", "__".join(parts))
    room = NAME_MAX - len(".json")
    if len(name) > room:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        name = f"{name[: room - len(digest) - 2]}__{digest}"
    return cache_root() / "results" / f"{name}.pt"


@dataclass(frozen=True)
class _Kind(Generic[Value]):
    """How one kind of value is checked, stored, read back and handed out."""

    settle: Callable[[Value], Value]  # a computed value as a read would give it
    copy: Callable[[Value], Value]  # a copy for a caller to change
    dump: Callable[[Path, Value], bytes]  # the entry's bytes: the value, its key (the file name) and their checksum
    read: Callable[[Path], Value | None]  # the value at a path, checked; None for an older version's entry (a miss)


_KEPT: dict[Path, object] = {}  # results whose cache file could not be written, for the rest of the run
_UNWRITABLE: set[Path] = set()  # the cache folders this process has warned of


def _cached(path: Path, compute: Callable[[], Value], kind: _Kind[Value]) -> Value:
    """Load the value at `path`, or compute and save it there. One process at a time makes an
    entry: another that wants it meanwhile waits, then reads it. Where the entry cannot be
    written, the result is kept in memory for the rest of the run (`_keep`)."""
    if path in _KEPT:
        return kind.copy(_KEPT[path])  # the caller's to change, as a read's would be
    with locked(path) as alone:
        if alone:
            remove_orphans(path)  # a killed writer's temporary file
        if path.exists():
            try:
                stored = kind.read(path)
                if stored is not None:
                    return stored
            except Exception as err:  # a damaged entry of any kind is rebuilt
                warnings.warn(f"Rebuilding the damaged cache file {path} ({err}).", stacklevel=3)
        result = kind.settle(compute())
        try:
            _write(path, kind.dump(path, result))
        except Exception as err:  # a full disk or no permission, whatever type the writer raises
            _keep(path, kind.copy(result), err)
        return result


def _keep(path: Path, result: object, err: Exception) -> None:
    """Keep `result`, which could not be written at `path`, in memory for the rest of the run;
    the first time a process meets its folder, one warning names it and says what to do."""
    _KEPT[path] = result
    if path.parent not in _UNWRITABLE:
        _UNWRITABLE.add(path.parent)
        warnings.warn(f"Could not write the cache file {path} ({err}); this run keeps the results it cannot write to "
                      f"{path.parent} in memory, and later runs compute them again: free some space there, or set "
                      "ICL_HELPERS_CACHE to a writable folder.", stacklevel=4)


def _write(path: Path, entry: bytes) -> None:
    """The entry's bytes at `path`, atomically, with the user's umask: the disk sees one plain
    write, whose errors are OSErrors."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(path.parent, "*.tmp")  # of entries nobody makes again
    write_atomically(path, lambda tmp: tmp.write_bytes(entry))
    path.with_suffix(".sha256").unlink(missing_ok=True)  # an older version's checksum file


def _check(key: object, sha256: object, digest: str, path: Path, mismatch: str) -> None:
    """A ValueError unless the entry's checksum is its content's (else `mismatch` says so) and its
    key is `path`'s name."""
    if not isinstance(key, str) or sha256 != digest:
        raise ValueError(mismatch)
    if key != path.name:
        raise ValueError(f"it holds the entry of {key}, copied over this one")


# --- tensors -------------------------------------------------------------------------------
_TENSORS = "icl_helpers results 3"  # 2: no key in the entry; 1: a bare torch.save, its checksum in a .sha256 file
_MISMATCH = "its tensors do not match the checksum stored with them"


def _digest(tensors: Tensors, key: str = "") -> str:
    """SHA-256 of the entry's key (its file name), and of the tensors' names, dtypes, shapes and bytes."""
    digest = hashlib.sha256(f"{key}\n".encode())
    for name, t in sorted(tensors.items()):
        digest.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        digest.update(t.contiguous().reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


def _read(path: Path) -> Tensors | None:
    """The tensors at `path`, checked against the checksum stored with them and against the
    key (file name) they were written under; None for an older version's entry (a miss: it is rebuilt)."""
    stored = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(stored, dict):
        raise ValueError("it is not a results file")
    if stored.get("format") in (None, "icl_helpers results 2"):
        return None
    if stored["format"] != _TENSORS:
        raise ValueError(_MISMATCH)
    tensors = stored.get("tensors", {})
    _check(stored.get("key"), stored.get("sha256"), _digest(tensors, str(stored.get("key"))), path,
           _MISMATCH)
    return tensors


def _dump_tensors(path: Path, tensors: Tensors) -> bytes:
    """torch.save of the tensors, their key and their checksum, made in memory."""
    buffer = io.BytesIO()
    torch.save({"format": _TENSORS, "key": path.name, "sha256": _digest(tensors, path.name), "tensors": tensors}, buffer)
    return buffer.getvalue()


_TENSOR_KIND = _Kind[Tensors](
    settle=lambda tensors: {k: v.detach().cpu() for k, v in tensors.items()},
    copy=lambda tensors: {k: v.clone() for k, v in tensors.items()},
    dump=_dump_tensors,
    read=_read,
)


def cached(path: Path, compute: Callable[[], Tensors]) -> Tensors:
    """The tensors at `path` (a `cache_file`), or compute() (name -> tensor, moved to the CPU)
    saved there."""
    return _cached(path, compute, _TENSOR_KIND)


# --- JSON ----------------------------------------------------------------------------------
_JSON = "icl_helpers json 1"


def _text(value: JSON) -> str:
    """The value's JSON text, the same for equal values (keys sorted): what its checksum covers."""
    return json.dumps(value, sort_keys=True)


def _json_digest(value: JSON, key: str) -> str:
    return hashlib.sha256(f"{key}\n{_text(value)}".encode()).hexdigest()


def _read_json(path: Path) -> JSON:
    """The JSON value at `path`, checked as `_read` checks tensors."""
    stored = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(stored, dict) or stored.get("format") != _JSON:
        raise ValueError("it is not a results file")
    _check(stored.get("key"), stored.get("sha256"), _json_digest(stored.get("value"), str(stored.get("key"))), path,
           "its value does not match the checksum stored with it")
    return stored["value"]


def _dump_json(path: Path, value: JSON) -> bytes:
    entry = {"format": _JSON, "key": path.name, "sha256": _json_digest(value, path.name), "value": value}
    return json.dumps(entry).encode("utf-8")


_JSON_KIND = _Kind[JSON](
    settle=lambda value: json.loads(_text(value)),  # tuples to lists, as read back
    copy=lambda value: json.loads(_text(value)),
    dump=_dump_json,
    read=_read_json,
)


def cached_json(path: Path, compute: Callable[[], JSON]) -> JSON:
    """The JSON value at `path` (a `cache_file(...).with_suffix(".json")`), or compute()
    (dicts, lists, strings, numbers, booleans, None) saved there."""
    return _cached(path, compute, _JSON_KIND)
