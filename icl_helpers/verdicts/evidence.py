"""The evidence the findings share on one model, in one setting (`data.setting`: the heads a
claim analyses, label words, separator, demonstrations a class): each dataset's balanced
prompt set, its located heads and recency family, built on first use and once (the studies
cache their passes on disk), and the views a claim is judged again in (the correctly answered
records; held-out records, in heads located on others)."""
from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Sequence

import torch

from ..core.heads import Head, check_heads, head_name, parse_heads, top_heads
from ..core.locate import LocateResult
from ..data.prompts import Record, build_prompt
from ..data.sentences import sentence_datasets
from ..data.setting import MAIN, Setting
from ..errors import Unjudgeable
from ..model.loading import ICLModel
from ..studies import recency
from ..studies.in_context_heads import answered_correctly, in_context_heads, located, shared_heads
from ..studies.runner import PromptSet, prompt_set

WORD = ["sentiment_number", "animal_country"]
SENTENCE = ["sst2", "trec", "agnews", "ethos"]
FIRST = WORD[0]  # the dataset of the single-dataset claims (Table 1, Figs. 2, 5, the biases)
# The paper's running example (Table 1, Fig. 2), "love : bar like : bar eight : foo two : foo one :" (`EXAMPLE`), as
# a record with one more demonstration a class in front, for a setting of three a class (`example`).
EXAMPLE_RECORD = Record("one", "number", "sentiment", ("three", "eight", "two"), ("happy", "love", "like"))


def example(setting: Setting = MAIN) -> str:
    """The paper's example prompt in a setting's label words, separator and demonstrations a class."""
    return build_prompt(setting.cut(EXAMPLE_RECORD), setting.variant("balanced")).text


EXAMPLE = example()


class Evidence:
    """What the findings share, each built on first use and once: the balanced prompt set,
    located heads and recency family of a dataset, and the family's effects pooled.

    `rows(dataset)` [N] bool: the records a finding judges, all of them; in the view
    `correct()` those whose balanced prompt the model answers correctly, in the heads located
    on all prompts; in the view `held_out()` the even records (0, 2, ...), in heads located on
    the odd ones, so that no head is judged on the prompts that selected it. The heads given
    (checked against the model at once) replace the located ones in every dataset. Every prompt
    is in the setting's label words, separator and demonstrations a class; the located heads
    are its top `setting.heads`."""

    def __init__(self, m: ICLModel, n: int, sentence_n: int, seed: int, data_dir: str | Path | None,
                 heads: str | Sequence[Head] | None = None, setting: Setting = MAIN):
        self.m, self.n, self.sentence_n, self.seed, self.data_dir = m, n, sentence_n, seed, data_dir
        self.setting = setting
        self.given = check_heads(parse_heads(heads), m.arch)
        self.view = "all"  # or "correct", "held out"
        self.prompts = functools.cache(self._prompts)
        self.loc = functools.cache(self._loc)
        self.heads = functools.cache(self._heads)
        self.family = functools.cache(self._family)
        self.effects = functools.cache(self._effects)
        self.correct = functools.cache(self._correct)
        self.held_out = functools.cache(self._held_out)

    @functools.cached_property
    def sentence(self) -> list[str]:
        """The sentence datasets this machine has ([] and one printed line where none)."""
        return sentence_datasets(SENTENCE, self.data_dir)

    def size(self, dataset: str) -> int:
        return self.n if dataset in WORD else self.sentence_n

    def _heads(self, dataset: str) -> list[Head]:
        """The heads given (in every dataset), else the dataset's top `setting.heads` (located on the
        odd records in the held-out view)."""
        if self.view == "held out":
            return top_heads(self.mean_increase([dataset]), self.setting.heads)
        return in_context_heads(self.m, self.prompts(dataset), self.setting.heads, self.given)

    def heads_named(self, dataset: str) -> str:
        """Which heads `heads(dataset)` are, in words."""
        return "the heads given" if self.given else f"{dataset}'s top heads"

    def _correct(self) -> Evidence:
        """The same studies, judged on the correctly answered records only (built once: the
        claims share its effects)."""
        view = copy.copy(self)
        view.view = "correct"
        view.effects = functools.cache(view._effects)  # pooled over other rows than ours
        return view

    def _held_out(self) -> Evidence:
        """The same studies, judged on the even records in heads located on the odd ones (built
        once: the claims share its heads, families and effects)."""
        if self.given:
            raise Unjudgeable("the heads were given, not located: no prompt selected them")
        view = copy.copy(self)
        view.view = "held out"
        view.heads = functools.cache(view._heads)
        view.family = functools.cache(view._family)
        view.effects = functools.cache(view._effects)
        return view

    def locating(self, dataset: str) -> torch.Tensor:
        """[N] bool: the records the heads are located on (the odd ones in the held-out view)."""
        n = self.size(dataset)
        if self.view != "held out":
            return torch.ones(n, dtype=torch.bool)
        if n < 4:
            raise Unjudgeable(f"{n} {dataset} prompts: held out needs at least 4, half to locate the heads, half to judge")
        return torch.arange(n) % 2 == 1

    def rows(self, dataset: str) -> torch.Tensor:
        """[N] bool: the records judged (every one, the correctly answered ones, or the even ones)."""
        if self.view == "held out":
            return ~self.locating(dataset)
        if self.view == "all":
            return torch.ones(self.size(dataset), dtype=torch.bool)
        right = answered_correctly(self.m, self.prompts(dataset))
        if right.sum() < 2:
            raise Unjudgeable(f"{int(right.sum())} of {len(right)} {dataset} prompts answered correctly")
        return right

    def _prompts(self, dataset: str) -> PromptSet:
        return prompt_set(self.m, dataset, "balanced", self.size(dataset), self.seed, self.data_dir, self.setting)

    def _loc(self, dataset: str) -> LocateResult:
        return located(self.m, self.prompts(dataset))

    def _family(self, dataset: str) -> recency.RecencyFamily:
        return self.family_in(dataset, self.heads(dataset))

    def family_in(self, dataset: str, heads: Sequence[Head]) -> recency.RecencyFamily:
        """The dataset's recency family (its records in every order), attention in `heads`."""
        return recency.recency_family(self.m, dataset, heads, self.size(dataset), self.seed, self.data_dir, self.setting)

    def _effects(self, datasets: tuple[str, ...]) -> recency.Effects:
        return recency.effects(torch.cat([self.family(d).cells()[self.rows(d)] for d in datasets]))

    def mean_increase(self, datasets: Sequence[str]) -> torch.Tensor:
        """[L, H]: each head's mean increase over the records it is located on, averaged over the datasets."""
        if self.view == "held out":
            return torch.stack([self.loc(d).head[self.locating(d)].mean(0) for d in datasets]).mean(0)
        return torch.stack([self.loc(d).head_mean for d in datasets]).mean(0)

    def shared(self) -> tuple[list[Head], str]:
        """Appendix B's heads: in every sentence dataset's in-context heads (or the heads given), and a line saying which."""
        if self.given:
            return list(self.given), "the heads given"
        return shared_heads({d: self.heads(d) for d in self.sentence}, self.mean_increase(self.sentence))

    def top_head(self) -> tuple[list[Head], str]:
        """Appendix D's head: of the sentence datasets' in-context heads (or the heads given), the one with the
        largest mean increase."""
        scores = self.mean_increase(self.sentence)
        best = max({h for d in self.sentence for h in self.heads(d)}, key=lambda h: float(scores[h]))
        among = "of the heads given, " if self.given else ""
        return [best], f"head {head_name(best)}, {among}the largest mean increase over {', '.join(self.sentence)}"
