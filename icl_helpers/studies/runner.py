"""What every study runs on: prompt sets, batched decompositions of them, and a disk cache.

A `PromptSet` is N prompts of one dataset and variant with their label positions for one
tokenizer. `decomposed` runs a prompt set through the model in batches; `study_result`
keeps a study's tensors on disk under `$ICL_HELPERS_CACHE/results/`, one file per key: the
key names the kind of result, the model, a fingerprint of its weights, dtype, dataset,
variant, N and seed, and ends with a hash of the prompts themselves (and of any extra
argument), so neither other weights nor a changed prompt builder ever read a stale result.
While an intervention is active on the model nothing is read from or written to the cache.
Each entry is one file, written atomically, that holds the tensors and their SHA-256, checked
on every read, and the file name it was written under: a damaged entry, or one copied over
another key's file, is rebuilt with a warning (an older version's entry is rebuilt without
one). A cache that cannot be written (a full disk, no permission, not a folder) gives one
warning a folder and a process, and keeps the results it could not store in memory for the
rest of the run. One process at a time makes an entry (a lock file beside it): two runs on
one cache compute each result once.

Study functions, the naming rule: one function a result, named for what it returns, never
for how it is computed (`label_ranks`, `position_increases`, `attention_on_labels`); it
reads and writes the cache under its kind (`cached_study` makes one of a computation on
some heads or layers), and cache=False computes it afresh (at any batch_size), storing nothing.
"""
from __future__ import annotations

import functools
import hashlib
import io
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import torch

from ..core.batching import Tensors, length_batches, prompt_order, walk
from ..core.decompose import Decomposition, concat, decompose
from ..core.interventions import intervening
from ..data.positions import LabelPositions, find_positions
from ..data.prompts import LABELS, SEP, Prompt, build_prompts, parse_prompt
from ..data.setting import MAIN, Setting
from ..model.loading import ICLModel
from ..paths import cache_root, locked, remove_orphans, sweep_leftovers, write_atomically

Study = Callable[..., torch.Tensor]  # compute(m, ps, heads or layers, **options) -> [N, ...]


@dataclass
class PromptSet:
    """N prompts of one dataset and variant, with their label positions for one tokenizer."""

    dataset: str
    variant: str
    seed: int
    prompts: list[Prompt]
    directions: list[str]  # per prompt, e.g. "sentiment/number": the true class / the false class
    positions: LabelPositions  # [N, K]

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.prompts]

    @property
    def title(self) -> str:
        """"dataset (variant)", e.g. for a progress bar."""
        return f"{self.dataset} ({self.variant})"

    def __len__(self) -> int:
        return len(self.prompts)

    def first(self, n: int) -> PromptSet:
        """The first n prompts (all of them, if fewer)."""
        return replace(self, prompts=self.prompts[:n], directions=self.directions[:n], positions=self.positions[:n])


def prompt_set(m: ICLModel, dataset: str, variant: str = "balanced", n: int = 1000, seed: int = 0,
               data_dir: str | Path | None = None, setting: Setting = MAIN) -> PromptSet:
    """The first n prompts of a word dataset (sentiment_number, animal_country: both
    directions alternate) or n prompts of a sentence dataset (sst2, trec, agnews, ethos:
    drawn with `seed` from `data_dir`), under a variant of `data.prompts.VARIANTS`, in the
    setting's label words, separator and demonstrations a class (`data.setting`)."""
    chosen = setting.variant(variant)
    records = setting.records(dataset, n, seed, data_dir)
    prompts = build_prompts(records, chosen)
    return PromptSet(dataset, variant, seed, prompts, [r.direction for r in records], find_positions(m.tokenizer, prompts))


def prompt_set_from_texts(m: ICLModel, texts: list[str], name: str = "custom", labels: tuple[str, str] = LABELS,
                          sep: str = SEP) -> PromptSet:
    """Prompts written out as text, `d1 : l1 ... dK : lK x :` (`sep` for " : "); labels: (true, false)."""
    prompts = [parse_prompt(t, labels, sep) for t in texts]
    return PromptSet(name, "given", 0, prompts, ["?"] * len(prompts), find_positions(m.tokenizer, prompts))


def decomposed(m: ICLModel, ps: PromptSet, batch_size: int = 32, record: Iterable[str] = ()
               ) -> Iterator[tuple[torch.Tensor, Decomposition]]:
    """(rows [b], decomposition of those prompts) for batches of a prompt set's prompts of
    similar length (`length_batches`): every prompt once, not in prompt order."""
    for rows, texts in walk(ps.texts, length_batches(m, ps.texts, batch_size), ps.title):
        yield rows, decompose(m, texts, record=record)


def gathered(m: ICLModel, ps: PromptSet, batch_size: int, record: Iterable[str],
             keep: Callable[[torch.Tensor, Decomposition], Decomposition]) -> Decomposition:
    """One decomposition of every prompt of a set, in prompt order: `decomposed`'s batches,
    each reduced by keep(rows [b], its decomposition) (e.g. to some positions, `at_positions`)."""
    parts, seen = [], []
    for rows, dec in decomposed(m, ps, batch_size, record):
        parts.append(keep(rows, dec))
        seen.append(rows)
    return concat(parts).select(prompt_order(seen))


def cached_study(kind: str, name: str, key: str) -> Callable[[Study], Study]:
    """A study function from compute(m, ps, arg, **options) -> [N, ...], arg the heads or layers
    studied: its result is cached as the tensor `name` under `result_file(kind, m, ps,
    **{key: list(arg)})`; cache=False computes it afresh (at any options, e.g. batch_size)."""
    def decorate(compute: Study) -> Study:
        @functools.wraps(compute)
        def study(m: ICLModel, ps: PromptSet, arg: Sequence, *, cache: bool = True, **options: object) -> torch.Tensor:
            return study_result(kind, m, ps, lambda: {name: compute(m, ps, arg, **options)}, cache, **{key: list(arg)})[name]
        return study
    return decorate


# --- disk cache --------------------------------------------------------------------------
def prompts_hash(prompts: list[str]) -> str:
    """A short, stable hash of a prompt list (order matters)."""
    return hashlib.sha256("\x00".join(prompts).encode()).hexdigest()[:12]


def source_hash() -> str:
    """A short hash of the package's own source files: results that depend on its code (a
    report's findings) are reused only by the same code. Take it when the code is loaded
    (`verdicts.findings.CODE`), not later: the files may change under a running process."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\x00" + path.read_bytes())
    return digest.hexdigest()[:12]


def cache_file(kind: str, **key: object) -> Path:
    """The file for `kind` (e.g. "locate") and a key such as model=..., dataset=..., n=..."""
    parts = [kind] + [f"{k}={v}" for k, v in key.items()]
    name = re.sub(r"[^A-Za-z0-9=._-]+", "-", "__".join(parts))
    return cache_root() / "results" / f"{name}.pt"


def result_file(kind: str, m: ICLModel, ps: PromptSet, **extra: object) -> Path:
    """The cache file of a result on a prompt set: model, weights, dtype, dataset, variant,
    N, seed, and a hash of the prompts (and of anything in `extra`)."""
    return cache_file(kind, model=m.name, weights=m.fingerprint(), dtype=str(m.model.dtype).removeprefix("torch."),
                      dataset=ps.dataset, variant=ps.variant, n=len(ps), seed=ps.seed, prompts=prompts_hash(ps.texts),
                      **{k: prompts_hash([repr(v)]) for k, v in extra.items()})


def study_result(kind: str, m: ICLModel, ps: PromptSet, compute: Callable[[], Tensors], cache: bool = True,
                 **extra: object) -> Tensors:
    """compute(), cached under `result_file(kind, m, ps, **extra)`; computed afresh and not
    stored where cache is False or while an intervention is active on the model."""
    if not cache or intervening(m):
        return {k: v.detach().cpu() for k, v in compute().items()}
    return cached(result_file(kind, m, ps, **extra), compute)


_KEPT: dict[Path, Tensors] = {}  # results whose cache file could not be written, for the rest of the run
_UNWRITABLE: set[Path] = set()  # the cache folders this process has warned of


def cached(path: Path, compute: Callable[[], Tensors]) -> Tensors:
    """Load the tensors at `path`, or compute and save them there. One process at a time
    makes an entry: another that wants it meanwhile waits, then reads it. Where the entry
    cannot be written, the result is kept in memory for the rest of the run (`_keep`)."""
    if path in _KEPT:
        return {k: v.clone() for k, v in _KEPT[path].items()}  # the caller's to change, as a read's would be
    with locked(path) as alone:
        if alone:
            remove_orphans(path)  # a killed writer's temporary file
        if path.exists():
            try:
                stored = _read(path)
                if stored is not None:
                    return stored
            except Exception as err:  # a damaged entry of any kind is rebuilt
                warnings.warn(f"Rebuilding the damaged cache file {path} ({err}).", stacklevel=2)
        result = {k: v.detach().cpu() for k, v in compute().items()}
        try:
            _write(path, result)
        except Exception as err:  # a full disk or no permission, whatever type the writer raises
            _keep(path, result, err)
        return result


def _keep(path: Path, result: Tensors, err: Exception) -> None:
    """Keep `result`, which could not be written at `path`, in memory for the rest of the run;
    the first time a process meets its folder, one warning names it and says what to do."""
    _KEPT[path] = {k: v.clone() for k, v in result.items()}
    if path.parent not in _UNWRITABLE:
        _UNWRITABLE.add(path.parent)
        warnings.warn(f"Could not write the cache file {path} ({err}); this run keeps the results it cannot write to "
                      f"{path.parent} in memory, and later runs compute them again: free some space there, or set "
                      "ICL_HELPERS_CACHE to a writable folder.", stacklevel=3)


_FORMAT = "icl_helpers results 3"  # 2: no key in the entry; 1: a bare torch.save, its checksum in a .sha256 file


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
    key = stored.get("key")
    if stored["format"] != _FORMAT or not isinstance(key, str) or stored.get("sha256") != _digest(stored.get("tensors", {}), key):
        raise ValueError("its tensors do not match the checksum stored with them")
    if key != path.name:
        raise ValueError(f"it holds the entry of {key}, copied over this one")
    return stored["tensors"]


def _write(path: Path, result: Tensors) -> None:
    """Save `result`, its key (the file name) and their checksum at `path` in one file, atomically,
    with the user's umask. torch.save writes to memory first: the disk sees one plain write,
    whose errors are OSErrors."""
    buffer = io.BytesIO()
    torch.save({"format": _FORMAT, "key": path.name, "sha256": _digest(result, path.name), "tensors": result}, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_leftovers(path.parent, "*.tmp")  # of entries nobody makes again
    write_atomically(path, lambda tmp: tmp.write_bytes(buffer.getbuffer()))
    path.with_suffix(".sha256").unlink(missing_ok=True)  # an older version's checksum file
