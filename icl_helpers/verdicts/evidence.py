"""The evidence the findings share on one model, in one setting (`data.setting`: the heads a
claim analyses, label words, separator, demonstrations a class): each dataset's balanced
prompt set, its located heads and recency orders, built on first use and once (the studies
cache their passes on disk), the distinct inputs its intervals resample, and the views a
claim is judged again in (`View`: the correctly answered records, in heads located on them;
held-out records, in heads located on others). What every view shares is `common.Common`."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, ClassVar, Sequence

import torch

from ..core.heads import Head, check_heads, head_name, parse_heads, top_heads
from ..core.locate import LocateResult
from ..data.prompts import Prompt, Record, build_prompt
from ..data.setting import MAIN, Setting
from ..data.split import records_in
from ..model.adapters.base import Arch
from ..model.loading import ICLModel
from ..studies import ablation, biases, recency
from ..studies.in_context_heads import answered_correctly, in_context_heads, shared_heads
from ..studies.runner import PromptSet
from .common import WORD, Common, kept
from .judgement import Unjudgeable

VARIANTS = ("imbalanced", "reordered")  # Section 5's prompt variants: Figs. 8 and 10; Figs. 9 and 11
NO_SENTENCE_DATA = "no copy of the sentence datasets here, and no hub"  # why a claim on them alone is not tested
FIRST = WORD[0]  # the dataset of the single-dataset claims (Table 1, Figs. 2, 5, the biases' word rows)
# The paper's running example (Table 1, Fig. 2), "love : bar like : bar eight : foo two : foo one :" (`EXAMPLE`), as
# a record with one more demonstration a class in front, for a setting of three a class (`example`).
EXAMPLE_RECORD = Record("one", "number", "sentiment", ("three", "eight", "two"), ("happy", "love", "like"))


def example(setting: Setting = MAIN) -> Prompt:
    """The paper's example prompt in a setting's label words, separator and demonstrations a class."""
    return build_prompt(setting.cut(EXAMPLE_RECORD), setting.variant("balanced"))


EXAMPLE = example().text


@dataclass(frozen=True)
class View:
    """The records a finding judges, and the records its heads are located on: every record, in
    the heads located on them all. Every view shares what is built from every record (`Common`);
    each builds its own heads, recency orders, effects and bias runs (`Evidence`: they depend on its records)."""

    key: ClassVar[str] = "all"  # its name in a report's JSON
    title: ClassVar[str] = "all prompts"  # its column's heading
    mark: ClassVar[str] = "all prompts"  # its name in a cell of the cross-model table (`compare`)
    about: ClassVar[str] = "every prompt, in the heads located on them all"
    relocates: bool = False  # its heads are located on `locating`'s records, not taken from the main view

    def rows(self, s: Evidence, dataset: str) -> torch.Tensor:
        """[N] bool: the records judged."""
        return torch.ones(s.size(dataset), dtype=torch.bool)

    def locating(self, s: Evidence, dataset: str) -> torch.Tensor:
        """[N] bool: the records the heads are located on: those judged."""
        return s.rows(dataset)

    def setting(self, s: Evidence) -> Setting:
        """The setting the view judges in: the evidence's own."""
        return s.setting

    def check(self, s: Evidence) -> None:
        """Raise Unjudgeable where this view cannot judge `s` at all."""


@dataclass(frozen=True)
class Correct(View):
    """The records whose balanced prompt the model answers correctly, in heads located on them (as
    the paper's Appendix A locates on the correct cases)."""

    key: ClassVar[str] = "correct_only"
    title: ClassVar[str] = "correct prompts only"
    mark: ClassVar[str] = "correct only"
    about: ClassVar[str] = ("the prompts the model answers correctly (top-1 the true label on the balanced prompt), in "
                            "heads located on those prompts, as the paper's Appendix A locates on the correct cases")
    relocates: bool = True

    def rows(self, s: Evidence, dataset: str) -> torch.Tensor:
        right = answered_correctly(s.m, s.prompts(dataset))
        if right.sum() < 2:
            raise Unjudgeable(f"{int(right.sum())} of {len(right)} {dataset} prompts answered correctly")
        return right


@dataclass(frozen=True)
class HeldOut(View):
    """Half the distinct inputs of each class, drawn with the seed (the evidence's `halves`), in heads
    located on the other half, so that no head is judged on the prompts (or the inputs) that selected it."""

    key: ClassVar[str] = "held_out"
    title: ClassVar[str] = "held out"
    mark: ClassVar[str] = "held out"
    about: ClassVar[str] = ("in each class of input, the prompts of half its distinct inputs (drawn with the seed), "
                            "in heads located on the other half's prompts, so that no head is judged on the inputs "
                            "that selected it (where heads are located; not where they are given)")
    relocates: bool = True

    def rows(self, s: Evidence, dataset: str) -> torch.Tensor:
        return ~s.halves(dataset)

    def locating(self, s: Evidence, dataset: str) -> torch.Tensor:
        return s.halves(dataset)

    def check(self, s: Evidence) -> None:
        if s.given:
            raise Unjudgeable("the heads were given, not located: no prompt selected them")


PAPER_HEADS = 36 * 20  # GPT-2 large's heads, of which the paper analyses its top MAIN.heads (l. 266, Figs. 3-4)


def paper_share_heads(arch: Arch) -> int:
    """The in-context heads a model of `arch`'s size has at the paper's share (20 of 720), rounded
    half up (in integers: 7.5 is 8), at least 2."""
    return max(2, (2 * MAIN.heads * arch.n_layers * arch.n_heads + PAPER_HEADS) // (2 * PAPER_HEADS))


@dataclass(frozen=True)
class PaperShare(View):
    """Every record, in the top heads at the paper's share of the model's heads (`paper_share_heads`)
    rather than its count: the main run's located heads, cut to that many (or widened)."""

    key: ClassVar[str] = "paper_share"
    title: ClassVar[str] = "the paper's share of heads"
    mark: ClassVar[str] = "paper's share"
    about: ClassVar[str] = (f"every prompt, in the top heads at the paper's share of a model's heads ({MAIN.heads} of "
                            "GPT-2 large's 720, rounded, at least 2) instead of its count")

    def setting(self, s: Evidence) -> Setting:
        return replace(s.setting, heads=paper_share_heads(s.m.arch))

    def check(self, s: Evidence) -> None:
        if s.given:
            raise Unjudgeable("the heads were given, not located: no share of them is ranked")
        if s.setting != MAIN:
            raise Unjudgeable("judged in the main setting only (a setting of its own analyses its own number of heads)")


ALL, CORRECT, HELD_OUT, PAPER_SHARE = View(), Correct(), HeldOut(), PaperShare()
VIEWS = {view.key: view for view in (ALL, CORRECT, HELD_OUT, PAPER_SHARE)}  # a report's views, in its columns' order


def described() -> dict[str, dict[str, str]]:
    """Each view of VIEWS by key: its title, mark and what it judges, as a report's JSON records them
    (the cross-model table, which reads JSON alone, names the views from there)."""
    return {key: {"title": view.title, "mark": view.mark, "about": view.about} for key, view in VIEWS.items()}


class Evidence:
    """What the findings judge on one model in one view (`View`: every record, the correct ones, held out,
    ...), built on first use and once: the heads a dataset's claims analyse, its recency orders and their
    effects pooled, the bias runs; what every view shares (records, prompts, their pass, halves, the
    causal check's runs) comes from `common`, one `Common` for all of them.

    `rows(dataset)` [N] bool: the records a finding judges; `in_view(view)` the same evidence judging
    the records a `View` picks (`CORRECT`, `HELD_OUT`, ...). `clusters(datasets)`: each judged row's
    distinct input, which the intervals resample (`stats.bootstrap_ci`). The heads given (checked
    against the model at once) replace the located ones in every dataset. Every prompt is in the
    setting's label words, separator and demonstrations a class; the located heads are its top `setting.heads`."""

    def __init__(self, m: ICLModel, n: int, sentence_n: int, seed: int, data_dir: str | Path | None,
                 heads: str | Sequence[Head] | None = None, setting: Setting = MAIN, task: str | None = None):
        common = Common(m, n, sentence_n, seed, data_dir, check_heads(parse_heads(heads), m.arch), setting, task)
        self._judge(common, ALL, setting, {})

    def _judge(self, common: Common, view: View, setting: Setting, views: dict[View, Evidence]) -> None:
        """Make this the evidence of `view`, in `setting`, on `common`, kept in `views` (every view's, by view)."""
        self.common, self.view, self.setting, self.views = common, view, setting, views
        self.m, self.n, self.sentence_n, self.seed = common.m, common.n, common.sentence_n, common.seed
        self.data_dir, self.given = common.data_dir, common.given
        self.built: dict[tuple, object] = {}
        views[view] = self

    def in_view(self, view: View) -> Evidence:
        """The same evidence judging the records `view` picks, built once a view (the claims share it):
        it shares `common`, with its own heads, orders, effects and bias runs."""
        if view not in self.views:
            main = self.views[ALL]
            view.check(main)
            Evidence.__new__(Evidence)._judge(self.common, view, view.setting(main), self.views)
        return self.views[view]

    @property
    def word(self) -> list[str]:
        """The datasets the word datasets' claims read: the paper's word datasets, or a task (`Common.word`)."""
        return self.common.word

    @property
    def first(self) -> str:
        """The dataset of the single-dataset claims: FIRST, or a task."""
        return self.common.word[0]

    @property
    def sentence(self) -> list[str]:
        """The sentence datasets this machine has (`Common.sentence`)."""
        return self.common.sentence

    def size(self, dataset: str) -> int:
        return self.common.size(dataset)

    def records(self, dataset: str) -> list[Record]:
        return self.common.records(dataset)

    def prompts(self, dataset: str) -> PromptSet:
        return self.common.prompts(dataset)

    def loc(self, dataset: str) -> LocateResult:
        return self.common.loc(dataset)

    def inputs(self, dataset: str) -> torch.Tensor:
        """[N] long: each record's distinct input, numbered within the dataset (`Common.inputs`)."""
        return self.common.inputs(dataset)

    def halves(self, dataset: str) -> torch.Tensor:
        """[N] bool: the held-out view's locating records (`Common.halves`)."""
        return self.common.halves(dataset)

    def datasets_of(self, kind: str) -> list[str]:
        return self.common.datasets_of(kind)

    def ablations(self, kind: str) -> ablation.AblationRuns:
        """The causal check's runs on the datasets of a kind, in this view's number of heads (`Common.ablations`)."""
        return self.common.ablations(kind, self.setting)

    @kept
    def heads(self, dataset: str) -> list[Head]:
        """The heads given (in every dataset), else the dataset's top `setting.heads` (located on the
        records `view.locating` picks where the view relocates them)."""
        if self.view.relocates and not self.given:
            return top_heads(self.mean_increase([dataset]), self.setting.heads)
        return in_context_heads(self.m, self.prompts(dataset), self.setting.heads, self.given)

    def heads_named(self, dataset: str) -> str:
        """Which heads `heads(dataset)` are, in words."""
        return "the heads given" if self.given else f"{dataset}'s top heads"

    def locating(self, dataset: str) -> torch.Tensor:
        """[N] bool: the records the heads are located on (`View.locating`)."""
        return self.view.locating(self, dataset)

    def rows(self, dataset: str) -> torch.Tensor:
        """[N] bool: the records judged (`View.rows`)."""
        return self.view.rows(self, dataset)

    def clusters(self, datasets: Sequence[str], rows: Callable[[str], torch.Tensor] | None = None) -> torch.Tensor:
        """[rows]: the distinct input of each judged record of the datasets (or of the records
        rows(dataset) [N] bool picks), pooled in order (numbered apart from one dataset to the
        next): what an interval resamples."""
        parts, base = [], 0
        for d in datasets:
            ids = self.inputs(d)
            parts.append(ids[(rows or self.rows)(d)] + base)
            base += len(ids)
        return torch.cat(parts)

    @kept
    def orders(self, dataset: str) -> recency.RecencyOrders:
        return self.orders_in(dataset, self.heads(dataset))

    def orders_in(self, dataset: str, heads: Sequence[Head]) -> recency.RecencyOrders:
        """The dataset's recency orders (its records in every order), attention in `heads`."""
        return recency.recency_orders(self.m, dataset, heads, self.size(dataset), self.seed, self.data_dir, self.setting)

    @kept
    def effects(self, datasets: tuple[str, ...]) -> recency.Effects:
        return recency.effects(torch.cat([self.orders(d).cells()[self.rows(d)] for d in datasets]),
                               self.clusters(datasets))

    def mean_increase(self, datasets: Sequence[str]) -> torch.Tensor:
        """[L, H]: each head's mean increase over the records it is located on, averaged over the datasets."""
        return torch.stack([self.loc(d).head[self.locating(d)].mean(0) for d in datasets]).mean(0)

    def word_shared(self) -> tuple[list[Head], str]:
        """Figs. 10 and 11's heads: in both word datasets' in-context heads (or the heads given), and a line saying which."""
        if self.given:
            return list(self.given), "the heads given"
        return shared_heads({d: self.heads(d) for d in self.word}, self.mean_increase(self.word))

    def evaluated(self, dataset: str) -> torch.Tensor:
        """[N] bool: the records the causal check ablates on (the other half of `halves`)."""
        return ~self.halves(dataset)

    @kept
    def bias(self, measure: str, dataset: str) -> biases.BiasEffect:
        """A bias intervention ("majority" or "recency", `studies.biases`) on the dataset's judged
        records (`rows`), in its heads (held out: located on the other half of the inputs)."""
        return biases.measured_bias(self.m, measure, records_in(self.records(dataset), self.rows(dataset)),
                                    self.heads(dataset), self.setting)

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


def agnews_rows(s: Evidence) -> torch.Tensor:
    """[N] bool: the AG News records judged (`Evidence.rows`: in the headline, those the model predicts
    correctly, as the paper's case is). Unjudgeable where no copy of AG News is at hand."""
    if "agnews" not in s.sentence:
        raise Unjudgeable("no copy of AG News here, and no hub")
    return s.rows("agnews")
