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

`entries` keeps each entry: one checked file a key, written atomically by one process at a time.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence, Union, runtime_checkable

import torch

from .core.batching import Tensors
from .core.interventions import intervening
from .core.passes import Accuracy
from .data.prompts import Prompt
from .entries import JSON, JSON_FORM, TENSORS_FORM, Form, Value, cached, cached_as
from .model.loading import ICLModel
from .paths import cache_root


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


# --- the door: every kind of result a study keeps, each one call -------------------------
def _stored(m: ICLModel, path: Callable[[], Path], compute: Callable[[], Value], form: Form[Value],
            cache: bool) -> Value:
    """compute(), kept at path() (taken once the weights' fingerprint is held, `ICLModel.held`) and
    stored only where the weights still have that fingerprint after (`ICLModel.computed_from`);
    computed afresh and not stored where cache is False or while an intervention is active."""
    if not cache or intervening(m):
        return form.settle(compute())
    with m.held() as fingerprint:
        return cached_as(path(), lambda: m.computed_from(fingerprint, compute), form)


def stored(kind: str, m: ICLModel, on: On, compute: Callable[[], Tensors], cache: bool = True,
           **extra: object) -> Tensors:
    """compute() (name -> tensor, moved to the CPU), kept under `key(kind, m, on, **extra)`:
    read where it is there, else computed and stored (cache=False: computed afresh at any
    options, e.g. batch_size, and not stored)."""
    return _stored(m, lambda: key(kind, m, on, **extra), compute, TENSORS_FORM, cache)


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
    return _stored(m, lambda: key(kind, m, on, code, **extra).with_suffix(".json"), compute, JSON_FORM, True)


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
