"""What every study runs on: prompt sets, batched decompositions of them, and a disk cache.

A `PromptSet` is N prompts of one dataset and variant with their label positions for one
tokenizer. `decomposed` runs a prompt set through the model in batches; `cached` keeps a
study's tensors on disk under `$ICL_HELPERS_CACHE/results/`, one file per key: the key
names the kind of result, the model, dtype, dataset, variant, N and seed, and ends with a
hash of the prompts themselves (and of any extra argument), so a changed prompt builder
never reads a stale result.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch

from ..core.decompose import Decomposition, decompose
from ..data.datasets import dataset_records
from ..data.positions import LabelPositions, find_positions
from ..data.prompts import VARIANTS, Prompt, build_prompts, parse_prompt
from ..model.loading import ICLModel
from ..paths import cache_root

Tensors = dict[str, torch.Tensor]


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

    def __len__(self) -> int:
        return len(self.prompts)


def prompt_set(m: ICLModel, dataset: str, variant: str = "balanced", n: int = 1000, seed: int = 0,
               data_dir: str | Path | None = None) -> PromptSet:
    """The first n prompts of a word dataset (sentiment_number, animal_country: both
    directions alternate) or n prompts of a sentence dataset (sst2, trec, agnews, ethos:
    drawn with `seed` from `data_dir`), under a variant of `data.prompts.VARIANTS`."""
    records = dataset_records(dataset, n, seed, data_dir)
    prompts = build_prompts(records, VARIANTS[variant])
    return PromptSet(dataset, variant, seed, prompts, [r.direction for r in records], find_positions(m.tokenizer, prompts))


def prompt_set_from_texts(m: ICLModel, texts: list[str], name: str = "custom",
                          labels: tuple[str, str] = ("foo", "bar")) -> PromptSet:
    """Prompts written out as text, `d1 : l1 ... dK : lK x :`; labels: (true, false)."""
    prompts = [parse_prompt(t, labels) for t in texts]
    return PromptSet(name, "given", 0, prompts, ["?"] * len(prompts), find_positions(m.tokenizer, prompts))


def decomposed(m: ICLModel, ps: PromptSet, batch_size: int = 32, record: Iterable[str] = ()
               ) -> Iterator[tuple[slice, Decomposition]]:
    """(rows, decomposition of those prompts) for consecutive batches of a prompt set."""
    for start in range(0, len(ps), batch_size):
        rows = slice(start, start + batch_size)
        yield rows, decompose(m, ps.texts[rows], record=record)


# --- disk cache --------------------------------------------------------------------------
def prompts_hash(prompts: list[str]) -> str:
    """A short, stable hash of a prompt list (order matters)."""
    return hashlib.sha256("\x00".join(prompts).encode()).hexdigest()[:12]


def cache_file(kind: str, **key: object) -> Path:
    """The file for `kind` (e.g. "locate") and a key such as model=..., dataset=..., n=..."""
    parts = [kind] + [f"{k}={v}" for k, v in key.items()]
    name = re.sub(r"[^A-Za-z0-9=._-]+", "-", "__".join(parts))
    return cache_root() / "results" / f"{name}.pt"


def result_file(kind: str, m: ICLModel, ps: PromptSet, **extra: object) -> Path:
    """The cache file of a result on a prompt set: model, dtype, dataset, variant, N, seed,
    and a hash of the prompts (and of anything in `extra`)."""
    return cache_file(kind, model=m.name, dtype=str(m.model.dtype).removeprefix("torch."), dataset=ps.dataset,
                      variant=ps.variant, n=len(ps), seed=ps.seed, prompts=prompts_hash(ps.texts),
                      **{k: prompts_hash([repr(v)]) for k, v in extra.items()})


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
