"""What every study runs on: prompt sets and batched decompositions of them.

A `PromptSet` is N prompts of one dataset and variant with their label positions for one
tokenizer. `decomposed` runs a prompt set through the model in batches. A study keeps its
result in the results cache by asking `cache` (`cache.stored(kind, m, ps, compute, ...)`), which
builds its key: the kind, the model, a fingerprint of its weights (`ICLModel.fingerprint`:
what they hold, taken once a study, so that an edit by any means, `.data`, in place,
`load_state_dict`, a swapped module, keys a new result), dtype, dataset, variant, N and seed,
and a hash of the prompts themselves (and of any extra argument), so neither other weights
nor a changed prompt builder ever read a stale result. While an intervention is active on the
model nothing is read from or written to the cache.

Study functions, the naming rule: one function a result, named for what it returns, never
for how it is computed (`label_ranks`, `position_increases`, `attention_on_labels`); it
reads and writes the cache under its kind (`cached_study` makes one of a computation on
some heads or layers), and cache=False computes it afresh (at any batch_size), storing nothing.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import torch

from ..cache import stored
from ..core.batching import length_batches, prompt_order, walk
from ..core.decompose import Decomposition, concat, decompose
from ..data.positions import LabelPositions, find_positions
from ..data.prompts import LABELS, SEP, Prompt, build_prompts, parse_prompt
from ..data.setting import MAIN, Setting
from ..model.loading import ICLModel

Study = Callable[..., torch.Tensor]  # compute(m, ps, heads or layers, **options) -> [N, ...]


@dataclass
class PromptSet:
    """N prompts of one dataset and variant, with their label positions for one tokenizer."""

    dataset: str
    variant: str
    seed: int
    prompts: list[Prompt]
    directions: list[str]  # per prompt, e.g. "sentiment/number": the true class / the false class
    positions: LabelPositions  # [N, D]

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
    return prompt_set_of(m, [parse_prompt(t, labels, sep) for t in texts], name)


def prompt_set_of(m: ICLModel, prompts: list[Prompt], name: str = "custom") -> PromptSet:
    """Prompts given as `Prompt`s (e.g. one of another set), as a set of the variant "given"."""
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
    studied: its result is cached as the tensor `name` (`cache.stored(kind, m, ps, ..., **{key:
    list(arg)})`); cache=False computes it afresh (at any options, e.g. batch_size)."""
    def decorate(compute: Study) -> Study:
        @functools.wraps(compute)
        def study(m: ICLModel, ps: PromptSet, arg: Sequence, *, cache: bool = True, **options: object) -> torch.Tensor:
            return stored(kind, m, ps, lambda: {name: compute(m, ps, arg, **options)}, cache, **{key: list(arg)})[name]
        return study
    return decorate
