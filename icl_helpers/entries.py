"""The results cache's entries on disk (`cache` is its door and builds every key).

An entry is one file named for its key (`cache.cache_file`). `cached` keeps a dict of tensors (a torch
file, `.pt`), `cached_json` a JSON value (a text file, `.json`), `cached_as` a value of any `Form`. Each entry
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
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

import torch

from .core.batching import Tensors
from .paths import locked, remove_orphans, sweep_leftovers, write_atomically

JSON = Any  # what json.loads returns: dicts, lists, strings, numbers, booleans and None
Value = TypeVar("Value")


@dataclass(frozen=True)
class Form(Generic[Value]):
    """How one kind of value is checked, stored, read back and handed out."""

    settle: Callable[[Value], Value]  # a computed value as a read would give it
    copy: Callable[[Value], Value]  # a copy for a caller to change
    dump: Callable[[Path, Value], bytes]  # the entry's bytes: the value, its key (the file name) and their checksum
    read: Callable[[Path], Value | None]  # the value at a path, checked; None for an older version's entry (a miss)


_KEPT: dict[Path, object] = {}  # results whose cache file could not be written, for the rest of the run
_UNWRITABLE: set[Path] = set()  # the cache folders this process has warned of


def cached_as(path: Path, compute: Callable[[], Value], form: Form[Value]) -> Value:
    """Load the value at `path` as `form` reads it, or compute and save it there. One process at a
    time makes an entry: another that wants it meanwhile waits, then reads it. Where the entry cannot
    be written, the result is kept in memory for the rest of the run (`_keep`)."""
    if path in _KEPT:
        return form.copy(_KEPT[path])  # the caller's to change, as a read's would be
    with locked(path) as alone:
        if alone:
            remove_orphans(path)  # a killed writer's temporary file
        if path.exists():
            try:
                stored = form.read(path)
                if stored is not None:
                    return stored
            except Exception as err:  # a damaged entry of any kind is rebuilt
                warnings.warn(f"Rebuilding the damaged cache file {path} ({err}).", stacklevel=3)
        result = form.settle(compute())
        try:
            _write(path, form.dump(path, result))
        except Exception as err:  # a full disk or no permission, whatever type the writer raises
            _keep(path, form.copy(result), err)
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


TENSORS_FORM = Form[Tensors](
    settle=lambda tensors: {k: v.detach().cpu() for k, v in tensors.items()},
    copy=lambda tensors: {k: v.clone() for k, v in tensors.items()},
    dump=_dump_tensors,
    read=_read,
)


def cached(path: Path, compute: Callable[[], Tensors]) -> Tensors:
    """The tensors at `path` (a `cache_file`), or compute() (name -> tensor, moved to the CPU)
    saved there."""
    return cached_as(path, compute, TENSORS_FORM)


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


JSON_FORM = Form[JSON](
    settle=lambda value: json.loads(_text(value)),  # tuples to lists, as read back
    copy=lambda value: json.loads(_text(value)),
    dump=_dump_json,
    read=_read_json,
)


def cached_json(path: Path, compute: Callable[[], JSON]) -> JSON:
    """The JSON value at `path` (a `cache_file(...).with_suffix(".json")`), or compute()
    (dicts, lists, strings, numbers, booleans, None) saved there."""
    return cached_as(path, compute, JSON_FORM)
