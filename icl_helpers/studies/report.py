"""Every claim of the paper tested on one model: the studies run once (their results cached
on disk, so notebooks and a second report reuse them), each judged by its rule in `claims`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import torch

from .. import claims
from ..claims import Finding, not_tested
from ..core.heads import Head, at_heads, same_layer_random_heads
from ..core.locate import LocateResult
from ..data.datasets import dataset_records
from ..data.prompts import prompt_label_ids
from ..model.loading import ICLModel
from ..notebook import sentence_datasets
from . import causal, label_attention, mrr, projection, recency
from .accuracy import table2_cells
from .in_context_heads import located
from .runner import PromptSet, prompt_set, prompt_set_from_texts

WORD = ["sentiment_number", "animal_country"]
SENTENCE = ["sst2", "trec", "agnews", "ethos"]
EXAMPLE = "love : bar like : bar eight : foo two : foo one :"  # the paper's running example (Table 1, Fig. 2)
K = 20  # in-context heads
RANDOM_DRAWS = 20  # layer-matched random-head draws (Fig. 5, the causal check)
TOP = 10  # tokens a projected vector (Tables 1, 3)
ISSUE_15 = "not built yet (Appendices B, D, E: the next part of this work)"


def report(m: ICLModel, n: int, sentence_n: int, seed: int = 0, data_dir: str | Path | None = None,
           progress: Callable[[str], None] = print) -> list[Finding]:
    """One finding a claim of `claims.CLAIMS`, in its order: n prompts a word dataset,
    sentence_n a sentence dataset (none where no copy or hub can be had: those say why)."""
    sentence = sentence_datasets(SENTENCE, data_dir)
    sets = {d: prompt_set(m, d, "balanced", n, seed) for d in WORD}
    sets |= {d: prompt_set(m, d, "balanced", sentence_n, seed, data_dir) for d in sentence}
    found: dict[str, Finding] = {}

    progress("Locating the in-context heads")
    loc = {d: located(m, ps) for d, ps in sets.items()}
    heads = {d: r.top_heads(K) for d, r in loc.items()}
    first = WORD[0]

    progress("The recency family: every order of the demonstrations")
    family = {d: recency.recency_family(m, d, heads[d], n if d in WORD else sentence_n, seed, data_dir) for d in sets}
    word_effects = recency.effects(torch.cat([family[d].cells() for d in WORD]))
    sentence_effects = recency.effects(torch.cat([family[d].cells() for d in sentence])) if sentence else None

    progress("Table 2: accuracy")
    false_nearest = torch.cat([family[d].top1[:, ~family[d].is_true[:, -1]].flatten() for d in WORD])
    found["table2"] = claims.judge_table2({f"{c.direction.split('/')[0]} inputs, true label {c.true_label}": c.top1
                                           for c in table2_cells(m, WORD, n, seed)}, false_nearest)
    found["fig2"] = claims.judge_fig2(loc[first].attn, loc[first].ffn)
    found["fig3_4"] = claims.judge_fig3_4({d: loc[d].head for d in WORD}, K)
    found["fig12_15"] = claims.judge_fig12_15({d: r.head for d, r in loc.items()}, K)

    progress("Tables 1 and 3: projections")
    example = projection.projections(m, prompt_set_from_texts(m, [EXAMPLE], name="example"))
    found["table1"] = claims.judge_label_values("table1", label_value_hits(example, 0, heads[first]), heads[first][:5],
                                                f"the example prompt, {first}'s top heads")
    found["table3"] = table3(m, sets["agnews"], loc["agnews"], K) if "agnews" in sets else not_tested(
        "table3", "no copy of AG News here, and no hub")

    progress("Fig. 5: label-value MRR")
    found["fig5"] = fig5(m, sets[first], heads[first], seed)

    progress("Figs. 6-11: attention on the labels")
    attention = {d: label_attention.attention_on_labels(m, sets[d]) for d in WORD}
    true, false = (torch.cat(parts) for parts in zip(*(attention[d].at(heads[d]) for d in WORD)))
    found["fig6"] = claims.judge_fig6(true, false, word_effects)
    increase = torch.cat([at_heads(loc[d].head, heads[d]) for d in WORD])
    found["fig7"] = claims.judge_fig7(true, increase)
    for variant, id in (("imbalanced", "fig8"), ("reordered", "fig9")):
        found[id] = variant_finding(m, variant, id, WORD, n, seed, data_dir, heads, word_effects)
    if sentence:
        found["fig10_11"] = claims.judge_fig10_11(
            *(variant_finding(m, v, id, sentence, sentence_n, seed, data_dir, heads, sentence_effects) for v, id in
              (("imbalanced", "fig8"), ("reordered", "fig9"))))
    else:
        found["fig10_11"] = not_tested("fig10_11", "no copy of the sentence datasets here, and no hub")
    for id in ("app_b_mrr", "app_b_attention", "app_d", "app_e"):
        found[id] = not_tested(id, ISSUE_15)
    progress("Causal check: ablating the in-context heads")
    found["causal"] = causal_finding(m, WORD, n, seed)

    progress("Biases: interventions in the in-context heads")
    records = dataset_records(first, n, seed)
    for id, measure, paper in (("majority_bias", causal.majority_bias, 0.22), ("recency_bias", causal.recency_bias, 0.17)):
        found[id] = claims.judge_bias(id, measure(m, records, heads[first]).flags, paper)
    return [found[id] for id in claims.CLAIMS]


def causal_finding(m: ICLModel, datasets: Sequence[str], n: int, seed: int) -> Finding:
    """Per dataset, the top K heads located on its first n/2 balanced prompts, mean-ablated on
    prompts of its other n/2 records, against RANDOM_DRAWS layer-matched draws; datasets pooled."""
    if n < 2:
        return not_tested("causal", "needs at least 2 prompts a word dataset: half locate the heads, half evaluate them")
    runs = []
    for d in datasets:
        locating = prompt_set(m, d, "balanced", n // 2, seed)
        heads = located(m, locating).top_heads(K)
        k = len(heads)  # K, or every head of a smaller model
        runs.append(causal.ablation_runs(m, causal.evaluation_prompts(d, n // 2, n - n // 2, seed), heads, [k],
                                         RANDOM_DRAWS, seed, causal.ablation_means(m, locating.texts)))
    return claims.judge_causal(causal.AblationRuns.cat(runs), k, "mean")


def label_value_hits(proj: projection.Projections, prompt: int, heads: Sequence[Head]) -> list[float]:
    """For the first 5 heads: share of a prompt's label values with their own label in their top tokens."""
    return [projection.label_value_hits(proj.table(prompt, head, TOP)) for head in heads[:5]]


def table3(m: ICLModel, ps: PromptSet, loc: LocateResult, k: int) -> Finding:
    """Table 1's test on the first AG News prompt the model predicts correctly (Appendix C),
    told by the predictions `loc` was scored for (no second pass)."""
    heads = loc.top_heads(k)
    right = (loc.targets == prompt_label_ids(m.tokenizer, ps.prompts)[0]).nonzero().flatten().tolist()
    if not right:
        return not_tested("table3", f"no AG News prompt of {len(ps)} is predicted correctly")
    one = prompt_set_from_texts(m, [ps.texts[right[0]]], name="agnews-correct")
    return claims.judge_label_values("table3", label_value_hits(projection.projections(m, one), 0, heads), heads[:5],
                                     f"AG News prompt {right[0]} (the first predicted correctly), AG News's top heads")


def fig5(m: ICLModel, ps: PromptSet, heads: list[Head], seed: int) -> Finding:
    """MRR [N, S] of the in-context heads against RANDOM_DRAWS draws of a random head of each one's layer."""
    draws = [same_layer_random_heads(heads, m.arch.n_heads, seed + d) for d in range(RANDOM_DRAWS)]
    layers = sorted({l for l, _ in heads})
    pool = [(l, h) for l in layers for h in range(m.arch.n_heads)]  # every head of those layers: one pass
    ranks = mrr.label_ranks(m, ps, pool).reciprocal().nanmean(2)  # [N, every head of the layers]
    column = {head: i for i, head in enumerate(pool)}
    at = lambda hs: ranks[:, [column[tuple(h)] for h in hs]]  # noqa: E731
    return claims.judge_fig5(at(heads), torch.stack([at(hs) for hs in draws]), heads)


def variant_finding(m: ICLModel, variant: str, id: str, datasets: Sequence[str], n: int, seed: int,
                    data_dir: str | Path | None, heads: dict[str, list[Head]], family: recency.Effects) -> Finding:
    """The fig8 (imbalanced) or fig9 (re-ordered) judgement over `datasets` pooled, each in its
    own heads; `family`: the recency family's effects on those datasets."""
    summed: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"balanced": [], variant: []}
    per_label: dict[str, list[torch.Tensor]] = {"balanced": [], variant: []}
    for d in datasets:
        for v in summed:
            ps = prompt_set(m, d, v, n, seed, data_dir)
            true, false = label_attention.attention_on_labels(m, ps).at(heads[d])
            summed[v].append((true, false))
            per_label[v].append(true / ps.positions.chosen(True).sum(1, keepdim=True))
    before, after = (tuple(torch.cat(x) for x in zip(*summed[v])) for v in summed)
    if variant == "imbalanced":
        return claims.judge_fig8(before, after, tuple(torch.cat(per_label[v]) for v in per_label), id)
    return claims.judge_fig9(before, after, family, id)
