"""What every view of the evidence shares (`Common`), each built on first use and once: a dataset's
records, balanced prompt set and their pass, its held-out halves and the causal check's runs; and
`kept`, how a holder keeps what it builds. `evidence.Evidence` is a view's own."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import torch

from ..core.heads import Head
from ..core.locate import LocateResult
from ..data.prompts import Record
from ..data.sentences import sentence_datasets
from ..data.setting import Setting
from ..data.sources import SOURCES
from ..data.split import input_halves, input_ids
from ..data.words import WORD_DATASETS
from ..model.loading import ICLModel
from ..studies import ablation
from ..studies.in_context_heads import located
from ..studies.runner import PromptSet, prompt_set
from .judgement import Unjudgeable
from .rules import RANDOM_DRAWS

WORD = list(WORD_DATASETS)  # the paper's word datasets: sentiment_number, animal_country
SENTENCE = list(SOURCES)  # its sentence datasets: sst2, trec, agnews, ethos

Value = TypeVar("Value")


def kept(method: Callable[..., Value]) -> Callable[..., Value]:
    """A method whose result is built on first use and kept on its instance (in `built`), one a distinct argument tuple."""
    @functools.wraps(method)
    def once(self, *args):
        key = (method.__name__, *args)
        if key not in self.built:
            self.built[key] = method(self, *args)
        return self.built[key]
    return once


class Common:
    """What every view of the evidence shares, each built on first use and once: a dataset's records, its
    balanced prompt set and their pass (`loc`), its held-out halves and the causal check's runs (in a setting's
    number of heads). Every prompt is in `setting`'s label
    words, separator and demonstrations a class; `given`: the heads given (checked), or (). task: the name of
    a task added as a dataset (`data.tasks.add_task`), which then stands in for the word datasets, and no
    sentence dataset is read; None: the paper's datasets."""

    def __init__(self, m: ICLModel, n: int, sentence_n: int, seed: int, data_dir: str | Path | None,
                 given: Sequence[Head], setting: Setting, task: str | None = None):
        self.m, self.n, self.sentence_n, self.seed, self.data_dir = m, n, sentence_n, seed, data_dir
        self.given, self.setting, self.task = given, setting, task
        self.word = [task] if task else list(WORD)  # the datasets the word datasets' claims read
        self.built: dict[tuple, object] = {}

    @functools.cached_property
    def sentence(self) -> list[str]:
        """The sentence datasets this machine has ([] and one printed line where none; [] for a task)."""
        return [] if self.task else sentence_datasets(SENTENCE, self.data_dir)

    def size(self, dataset: str) -> int:
        return self.n if dataset in self.word else self.sentence_n

    @kept
    def records(self, dataset: str) -> list[Record]:
        return self.setting.records(dataset, self.size(dataset), self.seed, self.data_dir)

    @kept
    def prompts(self, dataset: str) -> PromptSet:
        return prompt_set(self.m, dataset, "balanced", self.size(dataset), self.seed, self.data_dir, self.setting)

    @kept
    def loc(self, dataset: str) -> LocateResult:
        return located(self.m, self.prompts(dataset))

    @kept
    def inputs(self, dataset: str) -> torch.Tensor:
        """[N] long: each record's distinct input, numbered within the dataset."""
        return input_ids(self.records(dataset))

    @kept
    def halves(self, dataset: str) -> torch.Tensor:
        """[N] bool: the held-out view's locating records (the same in every view): in each class of input, half of its
        distinct inputs drawn with the seed (rounded down), with all their records."""
        locate = input_halves(self.records(dataset), self.seed)  # the head-type scores' SCORE half too
        if locate.sum() < 2 or (~locate).sum() < 2:
            raise Unjudgeable(f"{len(locate)} {dataset} prompts: held out needs at least 2 records to locate the heads "
                              "on and 2 others to judge them")
        return locate

    def datasets_of(self, kind: str) -> list[str]:
        """The datasets of a kind: "word" (`word`) or "sentence" (those at hand, `sentence`)."""
        return list(self.word) if kind == "word" else self.sentence

    @kept
    def ablations(self, kind: str, setting: Setting) -> ablation.AblationRuns:
        """The causal check's runs (`studies.ablation.causal_check`, notebook 08's) on the datasets
        of a kind ("word", "sentence"), pooled: per dataset, its top `setting.heads` (or the heads given)
        located on the prompts of the held-out view's locating half (`halves`: half the distinct
        inputs of each class), the first 1% and all of them mean-ablated on prompts of the other
        half's records (the rows `Evidence.evaluated` picks), against RANDOM_DRAWS layer-matched draws."""
        datasets = self.datasets_of(kind)
        for d in datasets:
            self.halves(d)  # enough records on both sides, or Unjudgeable
        n = self.n if kind == "word" else self.sentence_n
        runs = ablation.causal_check(self.m, datasets, n, self.seed, self.data_dir, setting, self.given,
                                     n_random=RANDOM_DRAWS)
        return ablation.AblationRuns.cat(list(runs.values()))
