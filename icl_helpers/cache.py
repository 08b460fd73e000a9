"""The results cache: the one door to the results kept on disk under `$ICL_HELPERS_CACHE/results/`.

A study asks it for a result by kind (e.g. "locate"), model and what the result was computed on,
and gives the computation: `stored` keeps tensors, `stored_accuracies` the `Accuracy` of passes
under several interventions, `stored_json` a JSON value (a finding), `stored_together` the results
of one computation that gives several kinds at once, `stored_parts` a result kept a part (a layer) at a
time, the parts not kept computed together (`stored_accuracy_parts`: passes kept so, e.g. a number of heads
ablated). Caching a study is one call of one of them.
Every entry's name is built by one function, `key`: the kind, the model's name, a fingerprint of
what its weights hold and dtype, what the result was computed on (a prompt set, prompts, token
sequences, or a finding's claim and sizes), a hash of anything else that decides it (heads,
seeds, ...), and the package's code version where the result depends on it (`source_hash`).
The weights' fingerprint is taken once a result, and a result is stored only where the weights
still have it after; while an intervention is active on the model nothing is read or stored.

An entry is one file named for its key (`cache_file`). `cached` keeps a dict of tensors (a torch
file, `.pt`), `cached_json` a JSON value (a text file, `.json`). Each entry
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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Generic, Mapping, Protocol, Sequence, TypeVar, Union, runtime_checkable

import torch

from .core.batching import Tensors
from .core.interventions import intervening
from .core.passes import Accuracy
from .data.prompts import Prompt
from .model.loading import ICLModel
from .paths import cache_root, locked, remove_orphans, sweep_leftovers, write_atomically

JSON = Any  # what json.loads returns: dicts, lists, strings, numbers, booleans and None
Value = TypeVar("Value")


def prompts_hash(texts: Sequence[str]) -> str:
    """A short, stable hash of a list of texts (order matters): prompts, or the reprs of a key's values.
    The list's JSON text is hashed, which tells every list apart (a join would not: `["a\\x00b", "c"]`
    and `["a", "b\\x00c"]` join alike)."""
    return hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()[:12]


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


def cache_file(kind: str, **values: object) -> Path:
    """The tensors' file for `kind` (e.g. "locate") and a key's values such as model=..., dataset=...,
    n=... in order (`key` gives every study's; `.with_suffix(".json")`: the same key's JSON file). A key
    too long for a file name (a model named by a long local path) keeps its start and ends with a hash
    of the whole key."""
    parts = [kind] + [f"{k}={v}" for k, v in values.items()]
    name = re.sub(r"[^A-Za-z0-9=._-]+", "-", "__".join(parts))
    room = NAME_MAX - len(".json")
    if len(name) > room:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        name = f"{name[: room - len(digest) - 2]}__{digest}"
    return cache_root() / "results" / f"{name}.pt"


@runtime_checkable
class PromptSetLike(Protocol):
    """A prompt set (`studies.runner.PromptSet`, on the floor above): what its key names."""

    dataset: str
    variant: str
    seed: int
    prompts: list[Prompt]
    directions: list[str]

    def __len__(self) -> int: ...


On = Union[PromptSetLike, Sequence[Prompt], torch.Tensor, Mapping[str, object]]  # what a result is computed on


def _named(on: On) -> dict[str, object]:
    """What a key says of the inputs a result was computed on: a prompt set's dataset, variant, N,
    seed and a hash of its prompts and their directions; prompts' N and a hash of the prompts
    themselves (a `Prompt`'s repr: its text, spans, which labels are true, label words and separator,
    since a text alone does not say which label is true); token sequences' [S, T] count S, length T
    and a hash of their ids; a mapping's items as they are (a finding's claim, sizes and seed)."""
    if isinstance(on, Mapping):
        return dict(on)
    if isinstance(on, torch.Tensor):
        return {"n": len(on), "T": on.shape[1], "ids": prompts_hash([" ".join(map(str, r)) for r in on.tolist()])}
    if isinstance(on, PromptSetLike):
        return {"dataset": on.dataset, "variant": on.variant, "n": len(on), "seed": on.seed,
                "prompts": prompts_hash([repr(pd) for pd in zip(on.prompts, on.directions)])}
    return {"n": len(on), "prompts": prompts_hash([repr(p) for p in on])}


def key(kind: str, m: ICLModel, on: On, code: str | None = None, **extra: object) -> Path:
    """The one key of every result, as its tensors' file (`.with_suffix(".json")`: its JSON file):
    the kind, the model's name, its weights' fingerprint (`ICLModel.fingerprint`) and dtype, what
    the result was computed on (`_named`), a hash of the repr of each `extra` value (heads, seeds,
    ...) and, for a result that depends on the package's code, its version (`source_hash`)."""
    return cache_file(kind, model=m.name, weights=m.fingerprint(), dtype=str(m.model.dtype).removeprefix("torch."),
                      **_named(on), **{k: prompts_hash([repr(v)]) for k, v in extra.items()},
                      **({} if code is None else {"code": code}))


@dataclass(frozen=True)
class _Form(Generic[Value]):
    """How one kind of value is checked, stored, read back and handed out."""

    settle: Callable[[Value], Value]  # a computed value as a read would give it
    copy: Callable[[Value], Value]  # a copy for a caller to change
    dump: Callable[[Path, Value], bytes]  # the entry's bytes: the value, its key (the file name) and their checksum
    read: Callable[[Path], Value | None]  # the value at a path, checked; None for an older version's entry (a miss)


_KEPT: dict[Path, object] = {}  # results whose cache file could not be written, for the rest of the run
_UNWRITABLE: set[Path] = set()  # the cache folders this process has warned of


def _cached(path: Path, compute: Callable[[], Value], form: _Form[Value]) -> Value:
    """Load the value at `path`, or compute and save it there. One process at a time makes an
    entry: another that wants it meanwhile waits, then reads it. Where the entry cannot be
    written, the result is kept in memory for the rest of the run (`_keep`)."""
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


_TENSORS_FORM = _Form[Tensors](
    settle=lambda tensors: {k: v.detach().cpu() for k, v in tensors.items()},
    copy=lambda tensors: {k: v.clone() for k, v in tensors.items()},
    dump=_dump_tensors,
    read=_read,
)


def cached(path: Path, compute: Callable[[], Tensors]) -> Tensors:
    """The tensors at `path` (a `cache_file`), or compute() (name -> tensor, moved to the CPU)
    saved there."""
    return _cached(path, compute, _TENSORS_FORM)


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


_JSON_FORM = _Form[JSON](
    settle=lambda value: json.loads(_text(value)),  # tuples to lists, as read back
    copy=lambda value: json.loads(_text(value)),
    dump=_dump_json,
    read=_read_json,
)


def cached_json(path: Path, compute: Callable[[], JSON]) -> JSON:
    """The JSON value at `path` (a `cache_file(...).with_suffix(".json")`), or compute()
    (dicts, lists, strings, numbers, booleans, None) saved there."""
    return _cached(path, compute, _JSON_FORM)


# --- the door: every kind of result a study keeps, each one call -------------------------
def _stored(m: ICLModel, path: Callable[[], Path], compute: Callable[[], Value], form: _Form[Value],
            cache: bool) -> Value:
    """compute(), kept at path() (taken once the weights' fingerprint is held, `ICLModel.held`) and
    stored only where the weights still have that fingerprint after (`ICLModel.computed_from`);
    computed afresh and not stored where cache is False or while an intervention is active."""
    if not cache or intervening(m):
        return form.settle(compute())
    with m.held() as fingerprint:
        return _cached(path(), lambda: m.computed_from(fingerprint, compute), form)


def stored(kind: str, m: ICLModel, on: On, compute: Callable[[], Tensors], cache: bool = True,
           **extra: object) -> Tensors:
    """compute() (name -> tensor, moved to the CPU), kept under `key(kind, m, on, **extra)`:
    read where it is there, else computed and stored (cache=False: computed afresh at any
    options, e.g. batch_size, and not stored)."""
    return _stored(m, lambda: key(kind, m, on, **extra), compute, _TENSORS_FORM, cache)


def stored_accuracies(kind: str, m: ICLModel, on: On, compute: Callable[[], list[Accuracy]],
                      **extra: object) -> list[Accuracy]:
    """compute(): the `Accuracy` of passes under each of several interventions (`core.passes`),
    kept as one result under `key(kind, m, on, **extra)`, as `stored` keeps tensors."""
    return _accuracies(stored(kind, m, on, lambda: _accuracy_tensors(compute()), **extra))


def stored_accuracy_parts(kind: str, m: ICLModel, on: On, parts: Sequence[int],
                          compute: Callable[[list[int]], dict[int, list[Accuracy]]], part: str = "part",
                          **extra: object) -> dict[int, list[Accuracy]]:
    """`stored_accuracies` kept one a part (`stored_parts`): compute(missing parts) -> part -> its passes'
    `Accuracy`, so that a call asking for parts an earlier call computed runs none of their passes."""
    kept = stored_parts(kind, m, on, parts, lambda missing: {p: _accuracy_tensors(a) for p, a in compute(missing).items()},
                        part=part, **extra)
    return {p: _accuracies(t) for p, t in kept.items()}


def _accuracy_tensors(accs: Sequence[Accuracy]) -> Tensors:
    return {f"{i}.{f.name}": getattr(a, f.name) for i, a in enumerate(accs) for f in fields(Accuracy)}


def _accuracies(t: Tensors) -> list[Accuracy]:
    names = [f.name for f in fields(Accuracy)]
    return [Accuracy(**{name: t[f"{i}.{name}"] for name in names}) for i in range(len(t) // len(names))]


def stored_json(kind: str, m: ICLModel, on: On, compute: Callable[[], JSON], code: str | None = None,
                **extra: object) -> JSON:
    """compute() (dicts, lists, strings, numbers, booleans, None), kept under
    `key(kind, m, on, code, **extra)`'s JSON file, as `stored` keeps tensors."""
    return _stored(m, lambda: key(kind, m, on, code, **extra).with_suffix(".json"), compute, _JSON_FORM, True)


def stored_together(kind: str, kinds: Sequence[str], m: ICLModel, on: On, compute: Callable[[], dict[str, Tensors]],
                    cache: bool = True) -> Tensors:
    """Result `kind` of a computation that gives each of `kinds` at once (compute() -> kind ->
    tensors), kept as `stored` keeps one; where it was computed and stored, the other kinds are
    stored too, each under its own key, unless there already."""
    done: dict[str, Tensors] = {}

    def one() -> Tensors:
        done.update(compute())
        return done[kind]

    with m.held():  # the other kinds stored under the fingerprint their computation was checked against
        result = stored(kind, m, on, one, cache)
        if done and cache and not intervening(m):
            for other in set(kinds) - {kind}:
                path = key(other, m, on)
                if not path.exists():
                    cached(path, lambda: done[other])
    return result


def stored_parts(kind: str, m: ICLModel, on: On, parts: Sequence[int], compute: Callable[[list[int]], dict[int, Tensors]],
                 cache: bool = True, part: str = "part", **extra: object) -> dict[int, Tensors]:
    """Results kept one a part (e.g. a layer), each as `stored` keeps one, under `key(kind, m, on,
    **extra, **{part: p})`: those not kept yet computed together, compute(missing parts) -> part -> tensors,
    so that calls asking for overlapping parts compute each part once."""
    with m.held():
        fresh = not cache or intervening(m)
        missing = [p for p in parts if fresh or not key(kind, m, on, **extra, **{part: p}).exists()]
        computed: dict[int, Tensors] = {}

        def part_of(p: int) -> Tensors:  # the missing parts computed together, when the first of them is asked for
            if p not in computed:
                computed.update(compute(missing if p in missing else [p]))
            return computed[p]
        return {p: stored(kind, m, on, lambda p=p: part_of(p), cache, **extra, **{part: p}) for p in parts}


def forget(kind: str, m: ICLModel, on: On, **extra: object) -> None:
    """Remove the entry of `key(kind, m, on, **extra)`, if there is one (e.g. one written before its result
    gained a part), so that the next ask computes it again."""
    key(kind, m, on, **extra).unlink(missing_ok=True)
