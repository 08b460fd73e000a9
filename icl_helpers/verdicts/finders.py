"""A finder a claim: it runs the studies a claim needs on the shared `Evidence` (all records,
or a view of them) and applies the claim's rule (`rules`) to their per-prompt results."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..core.heads import Head, at_heads, same_layer_random_heads
from ..model.loading import ICLModel
from ..studies import label_attention, mrr, order, projection, subvalues, towers
from ..studies.accuracy import table2_cells
from ..studies.in_context_heads import first_correct
from ..studies.runner import PromptSet, prompt_set, prompt_set_from_texts
from . import rules
from .evidence import FIRST, WORD, Evidence, example
from .judgement import Judgement, not_tested
from .rules import RANDOM_DRAWS, TOP


def table2(s: Evidence) -> Judgement:
    """Top-1 per dataset, direction and true label."""
    cells = table2_cells(s.m, WORD, s.n, s.seed, setting=s.setting)
    names = [f"{c.direction.split('/')[0]} inputs, true label {c.true_label}" for c in cells]
    inputs = {d: s.inputs(d) for d in WORD}
    return rules.judge_table2({name: c.top1_hits for name, c in zip(names, cells)},
                              {name: inputs[c.dataset][c.records] for name, c in zip(names, cells)})


def table2_control(s: Evidence) -> Judgement:
    """Top-1 on the recency family's prompts whose nearest demonstration is false."""
    hits = [s.family(d).top1_hits[s.rows(d)][:, ~s.family(d).is_true[:, -1]] for d in WORD]  # [N, orders] each
    return rules.judge_table2_control(torch.cat(hits).flatten(), s.clusters(WORD).repeat_interleave(hits[0].shape[1]))


def fig2(s: Evidence) -> Judgement:
    return rules.judge_fig2(s.loc(FIRST).attn[s.rows(FIRST)], s.loc(FIRST).ffn[s.rows(FIRST)], s.clusters([FIRST]))


def fig3_4(s: Evidence) -> Judgement:
    return rules.judge_fig3_4({d: s.loc(d).head[s.rows(d)] for d in WORD}, s.setting.heads,
                              {d: s.clusters([d]) for d in WORD})


def fig12_15(s: Evidence) -> Judgement:
    return rules.judge_fig12_15({d: s.loc(d).head[s.rows(d)] for d in WORD + s.sentence}, s.setting.heads,
                                {d: s.clusters([d]) for d in WORD + s.sentence})


def table1(s: Evidence) -> Judgement:
    """Table 1's test over every prompt of FIRST, with the paper's example prompt (in the setting) as its illustration."""
    heads = s.heads(FIRST)
    shown = projection.projections(s.m, given_prompt(s, example(s.setting), "example"))
    return rules.judge_label_values(label_value_hits(s, FIRST), heads[:5], f"{FIRST} prompts, {s.heads_named(FIRST)}",
                                    f"the example prompt: {example_hits(shown, heads)}", s.clusters([FIRST]))


def given_prompt(s: Evidence, text: str, name: str) -> PromptSet:
    """A prompt set of one prompt written out in the setting's label words and separator."""
    return prompt_set_from_texts(s.m, [text], name=name, labels=s.setting.labels, sep=s.setting.sep)


def two_towers(s: Evidence) -> Judgement:
    """Table 1's key and query rows over every prompt of the word datasets: each label key against
    the other demonstrations' words (pooled), each dataset's in-context heads' last queries against
    RANDOM_DRAWS draws of a random head of each one's layer."""
    own, others, parts = [], [], {}
    for d in WORD:
        heads, rows = s.heads(d), s.rows(d)
        layers = sorted({l for l, _ in heads})
        pool = [(l, h) for l in layers for h in range(s.m.arch.n_heads)]
        ranks = towers.tower_ranks(s.m, s.prompts(d), pool)
        key = ranks["key"][rows].reciprocal()  # [N, F, K, K]
        eye = torch.eye(key.shape[-1], dtype=torch.bool)
        at = [layers.index(l) for l, _ in heads]  # each head's layer
        own.append(key[..., eye].nanmean(-1)[:, at])  # [N, S]
        others.append(key[..., ~eye].nanmean(-1)[:, at])
        query = ranks["query"][rows, :, -1].reciprocal()  # [N, pool]: the input word
        column = {h: i for i, h in enumerate(pool)}
        random = torch.stack([query[:, [column[h] for h in same_layer_random_heads(heads, s.m.arch.n_heads, s.seed + i)]]
                              for i in range(RANDOM_DRAWS)])
        parts[f"{d} query"] = rules.judge_fig5(query[:, [column[h] for h in heads]], random, heads, s.clusters([d]),
                                               "reciprocal rank of the input word in the last query")
    clusters = s.clusters(WORD)
    parts = {"keys": rules.judge_keys(torch.cat(own), torch.cat(others), clusters), **parts}
    return rules.judge_together(parts, len(clusters), "the word datasets, each in " +
                                ("the heads given" if s.given else "its top heads"))


def metric(s: Evidence) -> Judgement:
    """Per word dataset, in its heads, each label's log attention and its demonstration's similarity
    to the input, each double-centred (the prompt's and the position's means out); pooled."""
    score, similarity = [], []
    for d in WORD:
        ps, rows = s.prompts(d), s.rows(d)
        attention = label_attention.attention_on_labels(s.m, ps).per_label_at(s.heads(d))[rows]  # [N, S, K]
        score.append(towers.double_centred(attention.log().transpose(0, 1)).transpose(0, 1))  # centred per head
        similarity.append(towers.double_centred(towers.similarity(s.m, ps)[rows]))
    return rules.judge_metric(torch.cat(score), torch.cat(similarity), s.clusters(WORD))


def fig6(s: Evidence) -> Judgement:
    true, false = (torch.cat(parts) for parts in zip(*(word_attention(s, d) for d in WORD)))
    return rules.judge_fig6(true, false, s.clusters(WORD))


def fig6_control(s: Evidence) -> Judgement:
    return rules.judge_truth_control(s.effects(tuple(WORD)))


def fig9_control(s: Evidence) -> Judgement:
    return rules.judge_distance_control(s.effects(tuple(WORD)))


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
    return rules.judge_fig7(torch.cat(attention), torch.cat(increase), summed, s.clusters(WORD))


def word_attention(s: Evidence, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed attention on the true and on the false labels [N, K] in the dataset's heads, judged rows."""
    true, false = label_attention.attention_on_labels(s.m, s.prompts(dataset)).at(s.heads(dataset))
    return true[s.rows(dataset)], false[s.rows(dataset)]


def fig8(s: Evidence) -> Judgement:
    return variant_finding(s, "imbalanced", WORD)


def fig9(s: Evidence) -> Judgement:
    return variant_finding(s, "reordered", WORD)


def fig10(s: Evidence) -> Judgement:
    return shared_head_finding(s, "imbalanced", rules.FIG10)


def fig11(s: Evidence) -> Judgement:
    return shared_head_finding(s, "reordered", rules.FIG11)


def shared_head_finding(s: Evidence, variant: str, rule: dict[str, float]) -> Judgement:
    """Figs. 10 and 11: on FIRST, in the heads both word datasets rank top (the paper's 'rank top20 on
    both sentiment/number dataset and animal/country dataset'), the attention a true-label position
    gets, balanced against the variant, head by head."""
    heads, which = s.word_shared()
    weight = [label_attention.true_label_weight(s.m, prompt_set(s.m, FIRST, v, s.size(FIRST), s.seed, s.data_dir,
                                                                  s.setting), heads)[s.rows(FIRST)]
              for v in ("balanced", variant)]
    return rules.judge_per_head_drop(*weight, heads, rule, f"{which}, balanced -> {variant}", s.clusters([FIRST]))


def fig8_9_sentences(s: Evidence) -> Judgement:
    if not s.sentence:
        return not_tested("no copy of the sentence datasets here, and no hub")
    return rules.judge_fig8_9_sentences(*(variant_finding(s, v, s.sentence) for v in ("imbalanced", "reordered")))


def bias(measure: str, rule: dict[str, float]) -> Callable[[Evidence], Judgement]:
    """A bias claim's finder: the bias `measure` ("majority" or "recency", `Evidence.bias`) in
    FIRST's heads, judged by `rule`."""
    def find(s: Evidence) -> Judgement:
        return rules.judge_bias(s.bias(measure).flags, rule, s.clusters([FIRST]))
    return find


def bias_cost(measure: str) -> Callable[[Evidence], Judgement]:
    """The top-1 the bias intervention `measure` costs on standard prompts."""
    def find(s: Evidence) -> Judgement:
        return rules.judge_bias_cost(s.bias(measure).standard_hits, s.clusters([FIRST]))
    return find


def causal_finding(s: Evidence, k: int | None = None) -> Judgement:
    """The causal check (`Evidence.ablations`) with the first k heads ablated: the EMNLP abstract's
    1% of the model's heads by default."""
    k = s.one_percent() if k is None else k
    runs = s.ablations()
    clusters = torch.cat([s.inputs(d)[s.n // 2:] + i * s.n for i, d in enumerate(WORD)])
    return rules.judge_causal(runs, min(k, max(runs.top)), "mean", given=s.given is not None, clusters=clusters)


def causal_top(s: Evidence) -> Judgement:
    return causal_finding(s, s.setting.heads)


def app_e(s: Evidence) -> Judgement:
    """Order-insensitivity of the in-context heads' increases (`studies.order`), with where the top 5
    heads' largest position-level increase lies beside it (described, not judged)."""
    ps, heads, rows = s.prompts(FIRST), s.heads(FIRST), s.rows(FIRST)
    increase = order.order_increases(s.m, ps, heads, s.seed)[rows]
    kinds = subvalues.top_position_kinds(subvalues.position_increases(s.m, ps, heads[:5]), ps.positions)[rows]
    shares = subvalues.kind_shares(kinds)  # [5, kinds]
    where = "; ".join(f"{l}-{h}: " + ", ".join(f"{name} {float(x):.1%}" for name, x in zip(subvalues.POSITION_KINDS, row)
                                               if x > 0) for (l, h), row in zip(heads[:5], shares))
    return rules.judge_app_e(increase, heads, f"Where the top 5 heads' largest position-level increase lies: {where}",
                             s.clusters([FIRST]))


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
    return rules.judge_label_values(label_value_hits(s, "agnews"), heads[:5], where, shown, s.clusters(["agnews"]))


def fig5(s: Evidence) -> Judgement:
    """MRR [N, S] of the in-context heads against RANDOM_DRAWS draws of a random head of each one's layer."""
    ours, random = mrr.layer_matched_mrr(s.m, s.prompts(FIRST), s.heads(FIRST), RANDOM_DRAWS, s.seed)
    rows = s.rows(FIRST)
    return rules.judge_fig5(ours[rows], random[:, rows], s.heads(FIRST), s.clusters([FIRST]))


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
            ps, rows, clusters = s.prompts(d), s.rows(d), s.clusters([d])
            if "fig5" in judges:
                ours, random = mrr.layer_matched_mrr(s.m, ps, heads, RANDOM_DRAWS, s.seed)
                parts[f"{d} MRR"] = rules.judge_fig5(ours[rows], random[:, rows], heads, clusters)
            if "fig6" in judges:
                true, false = label_attention.attention_on_labels(s.m, ps).at(heads)
                parts[f"{d} attention"] = rules.judge_fig6(true[rows], false[rows], clusters)
        return rules.judge_together(parts, sum(int(s.rows(d).sum()) for d in s.sentence), which)
    return find


def variant_finding(s: Evidence, variant: str, datasets: Sequence[str]) -> Judgement:
    """The fig8 (imbalanced) or fig9 (re-ordered) judgement over `datasets` pooled, each in its own heads."""
    summed: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"balanced": [], variant: []}
    per_label: dict[str, list[torch.Tensor]] = {"balanced": [], variant: []}
    for d in datasets:
        rows = s.rows(d)
        for v in summed:
            ps = prompt_set(s.m, d, v, s.size(d), s.seed, s.data_dir, s.setting)
            true, false = label_attention.attention_on_labels(s.m, ps).at(s.heads(d))
            summed[v].append((true[rows], false[rows]))
            per_label[v].append(label_attention.true_label_weight(s.m, ps, s.heads(d))[rows])
    before, after = (tuple(torch.cat(x) for x in zip(*summed[v])) for v in summed)
    clusters = s.clusters(datasets)
    if variant == "imbalanced":
        return rules.judge_fig8(before, after, tuple(torch.cat(per_label[v]) for v in per_label), clusters)
    return rules.judge_fig9(before, after, clusters)
