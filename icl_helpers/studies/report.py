"""Every claim of the paper tested on one model: the studies run once (their results cached
on disk, so notebooks and a second report reuse them), each judged by its rule in `claims`.
A notebook ends with `report(m, ..., ids=[its claims])`: the same code on its own prompts."""
from __future__ import annotations

import copy
import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import torch

from .. import claims
from ..claims import Finding, not_tested
from ..core.heads import Head, at_heads, check_heads, head_name, parse_heads, top_heads
from ..core.locate import LocateResult
from ..data.datasets import dataset_records
from ..errors import UsageError
from ..model.loading import ICLModel
from ..notebook import sentence_datasets
from . import causal, label_attention, mrr, projection, recency, subvalues
from .accuracy import table2_cells
from .in_context_heads import answered_correctly, first_correct, in_context_heads, located, shared_heads
from .runner import PromptSet, cache_file, cached, prompt_set, prompt_set_from_texts, prompts_hash, source_hash

WORD = ["sentiment_number", "animal_country"]
SENTENCE = ["sst2", "trec", "agnews", "ethos"]
FIRST = WORD[0]  # the dataset of the single-dataset claims (Table 1, Figs. 2, 5, the biases)
EXAMPLE = "love : bar like : bar eight : foo two : foo one :"  # the paper's running example (Table 1, Fig. 2)
K = 20  # in-context heads
RANDOM_DRAWS = 20  # layer-matched random-head draws (Fig. 5, the causal check)
TOP = 10  # tokens a projected vector (Tables 1, 3)
# Claims about the label flow, judged again on the prompts the model answers correctly (the
# paper's Appendix A filter): top-1 is the true label on the balanced prompt of that record.
CORRECT_ONLY = ("fig2", "fig3_4", "fig12_15", "fig5", "fig6", "fig7", "fig8", "fig9", "fig10_11", "app_b_mrr",
                "app_b_attention", "app_d", "app_e")


class TooFewCorrect(Exception):
    """A dataset with fewer than 2 correctly answered prompts, in a correct-only judgement."""


class Studies:
    """What the findings share, each built on first use and once: the balanced prompt set,
    located heads and recency family of a dataset, and the family's effects pooled.

    `rows(dataset)` [N] bool: the records a finding judges, all of them, or in the view
    `correct()` those whose balanced prompt the model answers correctly. The heads stay
    those located on all prompts, or the heads given (checked against the model at once)."""

    def __init__(self, m: ICLModel, n: int, sentence_n: int, seed: int, data_dir: str | Path | None,
                 heads: str | Sequence[Head] | None = None):
        self.m, self.n, self.sentence_n, self.seed, self.data_dir = m, n, sentence_n, seed, data_dir
        self.given = check_heads(parse_heads(heads), m.arch)
        self.correct_only = False
        self.prompts = functools.cache(self._prompts)
        self.loc = functools.cache(self._loc)
        self.heads = functools.cache(self._heads)
        self.family = functools.cache(self._family)
        self.effects = functools.cache(self._effects)
        self.correct = functools.cache(self._correct)

    @functools.cached_property
    def sentence(self) -> list[str]:
        """The sentence datasets this machine has ([] and one printed line where none)."""
        return sentence_datasets(SENTENCE, self.data_dir)

    def size(self, dataset: str) -> int:
        return self.n if dataset in WORD else self.sentence_n

    def _heads(self, dataset: str) -> list[Head]:
        """The heads given (in every dataset), else the dataset's top K."""
        return in_context_heads(self.m, self.prompts(dataset), K, self.given)

    def heads_named(self, dataset: str) -> str:
        """Which heads `heads(dataset)` are, in words."""
        return "the heads given" if self.given else f"{dataset}'s top heads"

    def _correct(self) -> Studies:
        """The same studies, judged on the correctly answered records only (built once: the
        claims share its effects)."""
        view = copy.copy(self)
        view.correct_only = True
        view.effects = functools.cache(view._effects)  # pooled over other rows than ours
        return view

    def rows(self, dataset: str) -> torch.Tensor:
        """[N] bool: the records judged (every one, or the correctly answered ones)."""
        if not self.correct_only:
            return torch.ones(self.size(dataset), dtype=torch.bool)
        right = answered_correctly(self.m, self.prompts(dataset))
        if right.sum() < 2:
            raise TooFewCorrect(f"{int(right.sum())} of {len(right)} {dataset} prompts answered correctly")
        return right

    def _prompts(self, dataset: str) -> PromptSet:
        return prompt_set(self.m, dataset, "balanced", self.size(dataset), self.seed, self.data_dir)

    def _loc(self, dataset: str) -> LocateResult:
        return located(self.m, self.prompts(dataset))

    def _family(self, dataset: str) -> recency.RecencyFamily:
        return recency.recency_family(self.m, dataset, self.heads(dataset), self.size(dataset), self.seed, self.data_dir)

    def _effects(self, datasets: tuple[str, ...]) -> recency.Effects:
        return recency.effects(torch.cat([self.family(d).cells()[self.rows(d)] for d in datasets]))

    def mean_increase(self, datasets: Sequence[str]) -> torch.Tensor:
        """[L, H]: each head's mean increase, averaged over the datasets (located on all their prompts)."""
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


def report(m: ICLModel, n: int, sentence_n: int, seed: int = 0, data_dir: str | Path | None = None,
           progress: Callable[[str], None] = print, ids: Sequence[str] = tuple(claims.CLAIMS),
           heads: str | Sequence[Head] | None = None) -> list[Finding]:
    """One finding a claim of `ids` (default: all of `claims.CLAIMS`), in their order: n prompts
    a word dataset, sentence_n a sentence dataset (none where no copy or hub can be had: those
    say why). Only the studies those claims need are run. heads ("19-11,20-11" or (layer, head)
    pairs): analyse these in every dataset instead of each one's top K located (Figs. 3-4 and
    12-15 still judge the located top K)."""
    unknown = [i for i in ids if i not in FINDERS]
    if unknown:
        raise UsageError(f"Unknown claim id(s) {', '.join(unknown)}: choose from {', '.join(FINDERS)}.")
    s = Studies(m, n, sentence_n, seed, data_dir, heads)
    found = []
    for id in ids:
        progress(f"{id}: {claims.CLAIMS[id].claim}")
        found.append(kept_finding(id, s))
    return found


def judged(id: str, s: Studies) -> Finding:
    """The claim judged on all prompts, and where it applies, on the correct ones only."""
    f = FINDERS[id](s)
    if id in CORRECT_ONLY and f.ours is not None:
        f = replace(f, correct_only=correct_only(id, s))
    return f


def kept_finding(id: str, s: Studies) -> Finding:
    """`judged(id, s)`, kept in the results cache under the model's weights, the sizes, seed,
    heads given, sentence datasets at hand and the package's own source: a report run again,
    or resumed after an interruption, judges only the claims it had not finished."""
    m = s.m
    path = cache_file("finding", model=m.name, weights=m.fingerprint(), dtype=str(m.model.dtype).removeprefix("torch."),
                      claim=id, n=s.n, sentence_n=s.sentence_n, seed=s.seed, heads=prompts_hash([repr(s.given)]),
                      data=prompts_hash(s.sentence), code=source_hash())
    text = lambda: json.dumps(judged(id, s).to_dict()).encode()  # noqa: E731
    stored = cached(path, lambda: {"finding": torch.frombuffer(bytearray(text()), dtype=torch.uint8)})
    return Finding.from_dict(json.loads(stored["finding"].numpy().tobytes()))


def correct_only(id: str, s: Studies) -> Finding:
    """The claim judged by its rule on the correctly answered records only."""
    try:
        return FINDERS[id](s.correct())
    except TooFewCorrect as few:
        return not_tested(id, str(few))


def table2(s: Studies) -> Finding:
    """Top-1 per dataset, direction and true label, and where a false demonstration is nearest."""
    false_nearest = torch.cat([s.family(d).top1_hits[:, ~s.family(d).is_true[:, -1]].flatten() for d in WORD])
    cells = table2_cells(s.m, WORD, s.n, s.seed)
    return claims.judge_table2({f"{c.direction.split('/')[0]} inputs, true label {c.true_label}": c.top1_hits
                                for c in cells}, false_nearest)


def table1(s: Studies) -> Finding:
    example = projection.projections(s.m, prompt_set_from_texts(s.m, [EXAMPLE], name="example"))
    return claims.judge_label_values("table1", label_value_hits(example, 0, s.heads(FIRST)), s.heads(FIRST)[:5],
                                     f"the example prompt, {s.heads_named(FIRST)}")


def fig6(s: Studies) -> Finding:
    true, false = (torch.cat(parts) for parts in zip(*(word_attention(s, d) for d in WORD)))
    return claims.judge_fig6(true, false, s.effects(tuple(WORD)))


def fig7(s: Studies) -> Finding:
    """Each label position's attention weight and its subvalue's increase [N, S, K] in each word
    dataset's heads, beside ours: a head's summed true-label attention and its increase [N, S]."""
    attention, increase = [], []
    for d in WORD:
        ps, heads, rows = s.prompts(d), s.heads(d), s.rows(d)
        attention.append(label_attention.attention_on_labels(s.m, ps).per_label_at(heads)[rows])
        increase.append(label_attention.label_increases(s.m, ps, heads)[rows])
    summed = (torch.cat([word_attention(s, d)[0] for d in WORD]),
              torch.cat([at_heads(s.loc(d).head[s.rows(d)], s.heads(d)) for d in WORD]))
    return claims.judge_fig7(torch.cat(attention), torch.cat(increase), summed)


def word_attention(s: Studies, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed attention on the true and on the false labels [N, K] in the dataset's heads, judged rows."""
    true, false = label_attention.attention_on_labels(s.m, s.prompts(dataset)).at(s.heads(dataset))
    return true[s.rows(dataset)], false[s.rows(dataset)]


def fig10_11(s: Studies) -> Finding:
    if not s.sentence:
        return not_tested("fig10_11", "no copy of the sentence datasets here, and no hub")
    return claims.judge_fig10_11(*(variant_finding(s, v, id, s.sentence) for v, id in
                                   (("imbalanced", "fig8"), ("reordered", "fig9"))))


def bias(id: str, measure: Callable, paper: float) -> Callable[[Studies], Finding]:
    def find(s: Studies) -> Finding:
        return claims.judge_bias(id, measure(s.m, dataset_records(FIRST, s.n, s.seed), s.heads(FIRST)).flags, paper)
    return find


def causal_finding(s: Studies) -> Finding:
    """Per word dataset, the top K heads located on its first n/2 balanced prompts (or the heads
    given), mean-ablated on prompts of its other n/2 records, against RANDOM_DRAWS layer-matched
    draws; pooled. The first n/2 balanced prompts are the first half of the dataset's located
    set (a word dataset's records come in one order): their scores and texts are read from it."""
    n = s.n
    if n < 2:
        return not_tested("causal", "needs at least 2 prompts a word dataset: half locate the heads, half evaluate them")
    runs = []
    for d in WORD:
        heads = list(s.given) if s.given else top_heads(s.loc(d).head[: n // 2].mean(0), K)
        k = len(heads)  # K, every head of a smaller model, or the heads given
        runs.append(causal.ablation_runs(s.m, causal.evaluation_prompts(d, n // 2, n - n // 2, s.seed), heads, [k],
                                         RANDOM_DRAWS, s.seed, causal.ablation_means(s.m, s.prompts(d).texts[: n // 2])))
    return claims.judge_causal(causal.AblationRuns.cat(runs), k, "mean", given=s.given is not None)


def app_e(s: Studies) -> Finding:
    """Where the in-context heads' largest position-level increase lies [N, S] against a random
    position's chance [N]; the best neuron of each of the top FFN layers beside it."""
    ps, heads, rows = s.prompts(FIRST), s.heads(FIRST), s.rows(FIRST)
    kinds = subvalues.top_position_kinds(subvalues.position_increases(s.m, ps, heads), ps.positions)
    layers = subvalues.top_ffn_layers(s.m, ps)
    neurons = subvalues.top_neurons(s.m, layers, subvalues.neuron_increases(s.m, ps, layers)[rows], k=1)
    return claims.judge_app_e(kinds[rows], subvalues.true_label_chance(ps.positions)[rows], heads,
                              subvalues.neuron_lines(neurons))


def label_value_hits(proj: projection.Projections, prompt: int, heads: Sequence[Head]) -> list[float]:
    """For the first 5 heads: share of a prompt's label values with their own label in their top tokens."""
    return [projection.label_value_hits(proj.table(prompt, head, TOP)) for head in heads[:5]]


def table3(s: Studies) -> Finding:
    """Table 1's test on the first AG News prompt the model predicts correctly (Appendix C),
    told by the predictions its heads were located on (no second pass)."""
    if "agnews" not in s.sentence:
        return not_tested("table3", "no copy of AG News here, and no hub")
    ps, heads = s.prompts("agnews"), s.heads("agnews")
    first = first_correct(s.m, ps)
    if first is None:
        return not_tested("table3", f"no AG News prompt of {len(ps)} is predicted correctly")
    one = prompt_set_from_texts(s.m, [ps.texts[first]], name="agnews-correct")
    return claims.judge_label_values("table3", label_value_hits(projection.projections(s.m, one), 0, heads), heads[:5],
                                     f"AG News prompt {first} (the first predicted correctly), {s.heads_named('AG News')}")


def fig5(s: Studies) -> Finding:
    """MRR [N, S] of the in-context heads against RANDOM_DRAWS draws of a random head of each one's layer."""
    ours, random = mrr.layer_matched_mrr(s.m, s.prompts(FIRST), s.heads(FIRST), RANDOM_DRAWS, s.seed)
    rows = s.rows(FIRST)
    return claims.judge_fig5(ours[rows], random[:, rows], s.heads(FIRST))


def stand_in(m: ICLModel) -> str:
    """Appendix D's model, said plainly: the paper's are LLaMA 1 (7B, 13B, 30B); ours is another."""
    cfg = m.arch.config
    return (f"run on {m.name} ({cfg.model_type}, {m.arch.n_layers} layers x {m.arch.n_heads} heads), a stand-in "
            "for the paper's LLaMA 7B, 13B and 30B")


def sentence_finding(id: str, judges: Sequence[str], pick: Callable[[Studies], tuple[list[Head], str]],
                     llama_only: bool = False) -> Callable[[Studies], Finding]:
    """Appendices B and D: the fig5 and/or fig6 rule (`judges`) in the heads `pick` gives, on
    each sentence dataset (its correct-only rows in that view), judged together."""
    def find(s: Studies) -> Finding:
        if not s.sentence:
            return not_tested(id, "no copy of the sentence datasets here, and no hub")
        if llama_only and s.m.arch.family != "llama":
            return not_tested(id, f"Appendix D is about LLaMA; {s.m.name} is not a Llama-family model")
        heads, which = pick(s)
        if llama_only:
            which = f"{stand_in(s.m)}; {which}"
        parts = {}
        for d in s.sentence:
            ps, rows = s.prompts(d), s.rows(d)
            if "fig5" in judges:
                ours, random = mrr.layer_matched_mrr(s.m, ps, heads, RANDOM_DRAWS, s.seed)
                parts[f"{d} MRR"] = claims.judge_fig5(ours[rows], random[:, rows], heads, id)
            if "fig6" in judges:
                true, false = label_attention.attention_on_labels(s.m, ps).at(heads)
                family = recency.recency_family(s.m, d, heads, s.size(d), s.seed, s.data_dir)
                parts[f"{d} attention"] = claims.judge_fig6(true[rows], false[rows],
                                                            recency.effects(family.cells()[rows]), id)
        return claims.judge_together(id, parts, sum(int(s.rows(d).sum()) for d in s.sentence), which)
    return find


def variant_finding(s: Studies, variant: str, id: str, datasets: Sequence[str]) -> Finding:
    """The fig8 (imbalanced) or fig9 (re-ordered) judgement over `datasets` pooled, each in its
    own heads, beside the recency family's effects on those datasets."""
    summed: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"balanced": [], variant: []}
    per_label: dict[str, list[torch.Tensor]] = {"balanced": [], variant: []}
    for d in datasets:
        rows = s.rows(d)
        for v in summed:
            ps = prompt_set(s.m, d, v, s.size(d), s.seed, s.data_dir)
            true, false = label_attention.attention_on_labels(s.m, ps).at(s.heads(d))
            summed[v].append((true[rows], false[rows]))
            per_label[v].append((true / ps.positions.chosen(True).sum(1, keepdim=True))[rows])
    before, after = (tuple(torch.cat(x) for x in zip(*summed[v])) for v in summed)
    if variant == "imbalanced":
        return claims.judge_fig8(before, after, tuple(torch.cat(per_label[v]) for v in per_label), id)
    return claims.judge_fig9(before, after, s.effects(tuple(datasets)), id)


FINDERS: dict[str, Callable[[Studies], Finding]] = {
    "table2": table2,
    "fig2": lambda s: claims.judge_fig2(s.loc(FIRST).attn[s.rows(FIRST)], s.loc(FIRST).ffn[s.rows(FIRST)]),
    "fig3_4": lambda s: claims.judge_fig3_4({d: s.loc(d).head[s.rows(d)] for d in WORD}, K),
    "fig12_15": lambda s: claims.judge_fig12_15({d: s.loc(d).head[s.rows(d)] for d in WORD + s.sentence}, K),
    "table1": table1,
    "table3": table3,
    "fig5": fig5,
    "fig6": fig6,
    "fig7": fig7,
    "fig8": lambda s: variant_finding(s, "imbalanced", "fig8", WORD),
    "fig9": lambda s: variant_finding(s, "reordered", "fig9", WORD),
    "fig10_11": fig10_11,
    "app_b_mrr": sentence_finding("app_b_mrr", ["fig5"], Studies.shared),
    "app_b_attention": sentence_finding("app_b_attention", ["fig6"], Studies.shared),
    "app_d": sentence_finding("app_d", ["fig5", "fig6"], Studies.top_head, llama_only=True),
    "app_e": app_e,
    "causal": causal_finding,
    "majority_bias": bias("majority_bias", causal.majority_bias, 0.22),
    "recency_bias": bias("recency_bias", causal.recency_bias, 0.17),
}
assert list(FINDERS) == list(claims.CLAIMS), "a finder a claim, in the registry's order"
