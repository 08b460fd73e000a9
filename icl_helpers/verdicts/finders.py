"""A finder a claim: it runs the studies a claim needs on the shared `Evidence` (all records,
or a view of them) and applies the claim's rule (`rules`) to their per-prompt results."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..core.heads import Head, at_heads, top_heads
from ..model.loading import ICLModel
from ..studies import ablation, label_attention, mrr, projection, recency, subvalues
from ..studies.accuracy import table2_cells
from ..studies.in_context_heads import first_correct
from ..studies.runner import PromptSet, prompt_set, prompt_set_from_texts
from . import rules
from .evidence import FIRST, WORD, Evidence, example
from .judgement import Judgement, not_tested
from .rules import RANDOM_DRAWS, TOP

# Appendix E's neurons describe, its position kinds judge: every neuron of three FFN layers scored
# against the whole vocabulary costs N x 3 x d_ffn log-sum-exps over V (Gemma 3 at N = 1,000: about
# two hours on one core), so the neuron lines read the first prompts only.
NEURON_PROMPTS = 100


def table2(s: Evidence) -> Judgement:
    """Top-1 per dataset, direction and true label, and where a false demonstration is nearest."""
    false_nearest = torch.cat([s.family(d).top1_hits[:, ~s.family(d).is_true[:, -1]].flatten() for d in WORD])
    cells = table2_cells(s.m, WORD, s.n, s.seed, setting=s.setting)
    return rules.judge_table2({f"{c.direction.split('/')[0]} inputs, true label {c.true_label}": c.top1_hits
                                for c in cells}, false_nearest)


def fig2(s: Evidence) -> Judgement:
    return rules.judge_fig2(s.loc(FIRST).attn[s.rows(FIRST)], s.loc(FIRST).ffn[s.rows(FIRST)])


def fig3_4(s: Evidence) -> Judgement:
    return rules.judge_fig3_4({d: s.loc(d).head[s.rows(d)] for d in WORD}, s.setting.heads)


def fig12_15(s: Evidence) -> Judgement:
    return rules.judge_fig12_15({d: s.loc(d).head[s.rows(d)] for d in WORD + s.sentence}, s.setting.heads)


def table1(s: Evidence) -> Judgement:
    """Table 1's test over every prompt of FIRST, with the paper's example prompt (in the setting) as its illustration."""
    heads = s.heads(FIRST)
    shown = projection.projections(s.m, given_prompt(s, example(s.setting), "example"))
    return rules.judge_label_values(label_value_hits(s, FIRST), heads[:5], f"{FIRST} prompts, {s.heads_named(FIRST)}",
                                    f"the example prompt: {example_hits(shown, heads)}")


def given_prompt(s: Evidence, text: str, name: str) -> PromptSet:
    """A prompt set of one prompt written out in the setting's label words and separator."""
    return prompt_set_from_texts(s.m, [text], name=name, labels=s.setting.labels, sep=s.setting.sep)


def fig6(s: Evidence) -> Judgement:
    true, false = (torch.cat(parts) for parts in zip(*(word_attention(s, d) for d in WORD)))
    return rules.judge_fig6(true, false, s.effects(tuple(WORD)))


def fig7(s: Evidence) -> Judgement:
    """Each label position's attention weight and its subvalue's increase [N, S, K] in each word
    dataset's heads, beside ours: a head's summed true-label attention and its increase [N, S]."""
    attention, increase = [], []
    for d in WORD:
        ps, heads, rows = s.prompts(d), s.heads(d), s.rows(d)
        attention.append(label_attention.attention_on_labels(s.m, ps).per_label_at(heads)[rows])
        increase.append(label_attention.label_increases(s.m, ps, heads)[rows])
    summed = (torch.cat([word_attention(s, d)[0] for d in WORD]),
              torch.cat([at_heads(s.loc(d).head[s.rows(d)], s.heads(d)) for d in WORD]))
    return rules.judge_fig7(torch.cat(attention), torch.cat(increase), summed)


def word_attention(s: Evidence, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed attention on the true and on the false labels [N, K] in the dataset's heads, judged rows."""
    true, false = label_attention.attention_on_labels(s.m, s.prompts(dataset)).at(s.heads(dataset))
    return true[s.rows(dataset)], false[s.rows(dataset)]


def fig8(s: Evidence) -> Judgement:
    return variant_finding(s, "imbalanced", WORD)


def fig9(s: Evidence) -> Judgement:
    return variant_finding(s, "reordered", WORD)


def fig10_11(s: Evidence) -> Judgement:
    if not s.sentence:
        return not_tested("no copy of the sentence datasets here, and no hub")
    return rules.judge_fig10_11(*(variant_finding(s, v, s.sentence) for v in ("imbalanced", "reordered")))


def bias(measure: Callable, rule: dict[str, float]) -> Callable[[Evidence], Judgement]:
    """A bias claim's finder: `measure` (`studies.biases.majority_bias` or `recency_bias`) in
    FIRST's heads, judged by `rule`."""
    def find(s: Evidence) -> Judgement:
        records = s.setting.records(FIRST, s.n, s.seed)
        return rules.judge_bias(measure(s.m, records, s.heads(FIRST), s.setting).flags, rule)
    return find


def causal_finding(s: Evidence) -> Judgement:
    """Per word dataset, the top K (the setting's) heads located on its first n/2 balanced prompts (or the heads
    given), mean-ablated on prompts of its other n/2 records, against RANDOM_DRAWS layer-matched
    draws; pooled. The first n/2 balanced prompts are the first half of the dataset's located
    set (a word dataset's records come in one order): their scores and texts are read from it."""
    n = s.n
    if n < 2:
        return not_tested("needs at least 2 prompts a word dataset: half locate the heads, half evaluate them")
    runs = []
    for d in WORD:
        heads = list(s.given) if s.given else top_heads(s.loc(d).head[: n // 2].mean(0), s.setting.heads)
        k = len(heads)  # K, every head of a smaller model, or the heads given
        evaluated = ablation.evaluation_prompts(d, n // 2, n - n // 2, s.seed, setting=s.setting)
        means = ablation.ablation_means(s.m, s.prompts(d).texts[: n // 2])
        runs.append(ablation.ablation_runs(s.m, evaluated, heads, [k], RANDOM_DRAWS, s.seed, means))
    return rules.judge_causal(ablation.AblationRuns.cat(runs), k, "mean", given=s.given is not None)


def app_e(s: Evidence) -> Judgement:
    """Where the in-context heads' largest position-level increase lies [N, S] against a random
    position's chance [N], in the top 5 heads (the rule reads the top one, the why all 5); the best
    neuron of each of the top FFN layers beside it, over the judged records among the first NEURON_PROMPTS."""
    ps, heads, rows = s.prompts(FIRST), s.heads(FIRST)[:5], s.rows(FIRST)
    kinds = subvalues.top_position_kinds(subvalues.position_increases(s.m, ps, heads), ps.positions)
    layers = subvalues.top_ffn_layers(s.m, ps)
    described = ps.first(NEURON_PROMPTS)
    increase = subvalues.neuron_increases(s.m, described, layers)[rows[: len(described)]]
    neurons = subvalues.top_neurons(s.m, layers, increase, k=1)
    return rules.judge_app_e(kinds[rows], subvalues.true_label_chance(ps.positions)[rows], heads,
                              subvalues.neuron_lines(neurons), len(increase))


def label_value_hits(s: Evidence, dataset: str) -> torch.Tensor:
    """[N, S] bool, the judged records and the dataset's top S = 5 heads: every label value of
    the prompt ranks its own label token among the top TOP of the vocabulary (`mrr.label_ranks`)."""
    ranks = mrr.label_ranks(s.m, s.prompts(dataset), s.heads(dataset)[:5])[s.rows(dataset)]  # [N, S, labels]
    return ((ranks <= TOP) | ranks.isnan()).all(2)


def example_hits(proj: projection.Projections, heads: Sequence[Head]) -> str:
    """The paper's illustration on one prompt (`proj` holds it alone): for the first 5 heads, the
    share of its label values with their own label (any case) in their top TOP tokens, stop
    words left out (`Projections.table`)."""
    return ", ".join(f"{l}-{h}: {projection.label_value_hits(proj.table(0, (l, h), TOP)):.0%}" for l, h in heads[:5])


def table3(s: Evidence) -> Judgement:
    """Table 1's test over every AG News prompt (Appendix C), with the first prompt the model
    predicts correctly as its illustration (told by the predictions its heads were located on)."""
    if "agnews" not in s.sentence:
        return not_tested("no copy of AG News here, and no hub")
    ps, heads = s.prompts("agnews"), s.heads("agnews")
    first = first_correct(s.m, ps)
    if first is None:
        shown = f"no AG News prompt of {len(ps)} is predicted correctly"
    else:
        one = projection.projections(s.m, given_prompt(s, ps.texts[first], "agnews-correct"))
        shown = f"AG News prompt {first} (the first predicted correctly): {example_hits(one, heads)}"
    where = f"AG News prompts, {s.heads_named('AG News')}"
    return rules.judge_label_values(label_value_hits(s, "agnews"), heads[:5], where, shown)


def fig5(s: Evidence) -> Judgement:
    """MRR [N, S] of the in-context heads against RANDOM_DRAWS draws of a random head of each one's layer."""
    ours, random = mrr.layer_matched_mrr(s.m, s.prompts(FIRST), s.heads(FIRST), RANDOM_DRAWS, s.seed)
    rows = s.rows(FIRST)
    return rules.judge_fig5(ours[rows], random[:, rows], s.heads(FIRST))


def stand_in(m: ICLModel) -> str:
    """Appendix D's model, said plainly: the paper's are LLaMA 1 (7B, 13B, 30B); ours is another."""
    cfg = m.arch.config
    return (f"run on {m.name} ({cfg.model_type}, {m.arch.n_layers} layers x {m.arch.n_heads} heads), a stand-in "
            "for the paper's LLaMA 7B, 13B and 30B")


def sentence_finding(judges: Sequence[str], pick: Callable[[Evidence], tuple[list[Head], str]],
                     llama_only: bool = False) -> Callable[[Evidence], Judgement]:
    """Appendices B and D: the fig5 and/or fig6 rule (`judges`) in the heads `pick` gives, on
    each sentence dataset (its correct-only rows in that view), judged together."""
    def find(s: Evidence) -> Judgement:
        if not s.sentence:
            return not_tested("no copy of the sentence datasets here, and no hub")
        if llama_only and s.m.arch.family != "llama":
            return not_tested(f"Appendix D is about LLaMA; {s.m.name} is not a Llama-family model")
        heads, which = pick(s)
        if llama_only:
            which = f"{stand_in(s.m)}; {which}"
        parts = {}
        for d in s.sentence:
            ps, rows = s.prompts(d), s.rows(d)
            if "fig5" in judges:
                ours, random = mrr.layer_matched_mrr(s.m, ps, heads, RANDOM_DRAWS, s.seed)
                parts[f"{d} MRR"] = rules.judge_fig5(ours[rows], random[:, rows], heads)
            if "fig6" in judges:
                true, false = label_attention.attention_on_labels(s.m, ps).at(heads)
                family = s.family_in(d, heads)
                parts[f"{d} attention"] = rules.judge_fig6(true[rows], false[rows], recency.effects(family.cells()[rows]))
        return rules.judge_together(parts, sum(int(s.rows(d).sum()) for d in s.sentence), which)
    return find


def variant_finding(s: Evidence, variant: str, datasets: Sequence[str]) -> Judgement:
    """The fig8 (imbalanced) or fig9 (re-ordered) judgement over `datasets` pooled, each in its
    own heads, beside the recency family's effects on those datasets."""
    summed: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"balanced": [], variant: []}
    per_label: dict[str, list[torch.Tensor]] = {"balanced": [], variant: []}
    for d in datasets:
        rows = s.rows(d)
        for v in summed:
            ps = prompt_set(s.m, d, v, s.size(d), s.seed, s.data_dir, s.setting)
            true, false = label_attention.attention_on_labels(s.m, ps).at(s.heads(d))
            summed[v].append((true[rows], false[rows]))
            per_label[v].append((true / ps.positions.chosen(True).sum(1, keepdim=True))[rows])
    before, after = (tuple(torch.cat(x) for x in zip(*summed[v])) for v in summed)
    if variant == "imbalanced":
        return rules.judge_fig8(before, after, tuple(torch.cat(per_label[v]) for v in per_label))
    return rules.judge_fig9(before, after, s.effects(tuple(datasets)))
