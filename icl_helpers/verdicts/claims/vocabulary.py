"""Section 3.2, Tables 1 and 3: what in-context heads' label values, label keys and last query project to
in the vocabulary; and our extension, the similarity metric the two towers learn."""
from __future__ import annotations

from typing import Sequence

import torch

from ...core.heads import Head, head_name, same_layer_random_heads
from ...errors import Unjudgeable
from ...stats import bootstrap_ci, mean_ci, spearman
from ...studies import label_attention, mrr, projection, towers
from ...studies.in_context_heads import first_correct
from ...studies.runner import PromptSet, prompt_set_from_texts
from .. import rules
from ..evidence import FIRST, WORD, Evidence, example
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold
from ..rules import RANDOM_DRAWS, TOP, Clusters
from .claim import FLOW, ISSUE_44, ISSUE_57, OVER_N, SENTENCE_ONLY, V1, Claim, register

TABLE1 = {"values": 0.5, "heads": 0.5}  # a head passes where half its label values show a related concept; half the heads
STRICT = {"share": 0.5}  # the earlier rule: the top head's prompts whose every label value ranks its own token


def concept_hits(s: Evidence, dataset: str, rows: torch.Tensor) -> torch.Tensor:
    """[N, S, D] float for the N records `rows` picks, the dataset's S in-context heads and each
    prompt's D label positions: 1 where the label value's top TOP tokens (stop words left out)
    hold a related concept of its label (`mrr.concept_ranks`), 0 where not, nan past its labels."""
    return rules.in_top(mrr.concept_ranks(s.m, s.prompts(dataset), s.heads(dataset))[rows])


def head_shares(hits: torch.Tensor) -> torch.Tensor:
    """[S]: each head's share of label values (every prompt and label position) that pass, from hits [N, S, D]."""
    return hits.transpose(0, 1).flatten(1).nanmean(1)


def passing_heads(hits: torch.Tensor) -> float:
    """The share of heads whose label values pass at least TABLE1's `values` of the time, from hits [N, S, D]."""
    return float((head_shares(hits) >= TABLE1["values"]).double().mean())


def judge_concepts(hits: torch.Tensor, heads: Sequence[Head], where: str, example: str,
                   clusters: Clusters = None) -> Judgement:
    """hits: [N, S, D] `concept_hits` in the S in-context heads, best located first; example: the
    paper's one-prompt illustration, in words. Ours: the share of heads that pass."""
    shares = head_shares(hits)
    ours, ci = passing_heads(hits), bootstrap_ci([hits], passing_heads, clusters=[clusters])
    best = int(shares.argmax())
    best_ci = bootstrap_ci([hits[:, best]], lambda x: float(x.nanmean()), clusters=[clusters])
    verdict = all_hold(ours >= TABLE1["heads"], best_ci[0] > TABLE1["values"])
    each = ", ".join(f"{head_name(h)}: {float(x):.0%}" for h, x in zip(heads, shares))
    return Judgement(ours, ci, len(hits), verdict,
                     f"{where}: {int((shares >= TABLE1['values']).sum())} of {len(heads)} heads show a related concept of "
                     f"the label (its case forms, whole tokens) among the top {TOP} tokens (stop words out) of at least "
                     f"{TABLE1['values']:.0%} of their label values; the best, {head_name(heads[best])}, of "
                     f"{float(shares[best]):.0%} ({best_ci[0]:.0%} to {best_ci[1]:.0%}); each head, in located order: "
                     f"{each}; {example}")


def judge_strict(hits: torch.Tensor, heads: Sequence[Head], where: str, clusters: Clusters = None) -> Judgement:
    """hits: [N, S] bool, the top S (5) heads in order: every label value of a prompt ranks its own
    label token among the top TOP of the vocabulary."""
    cis = [mean_ci(h.double(), clusters=clusters) for h in hits.T]
    above = [ci[0] > STRICT["share"] for ci in cis]
    verdict = REPLICATES if above[0] else PARTLY if any(above) else FAILS
    shown = ", ".join(f"{head_name(h)}: {float(x.double().mean()):.0%}" for h, x in zip(heads, hits.T))
    return Judgement(float(hits[:, 0].double().mean()), cis[0], len(hits), verdict,
                     f"{where}: share of prompts whose every label value ranks its own label token in the top {TOP} "
                     f"of the vocabulary, top 5 heads: {shown}")


def strict_hits(s: Evidence, dataset: str, rows: torch.Tensor) -> torch.Tensor:
    """[N, S] bool, the records `rows` picks and the dataset's top S = 5 heads: every label value of
    the prompt ranks its own label token among the top TOP of the vocabulary (`mrr.label_ranks`)."""
    ranks = mrr.label_ranks(s.m, s.prompts(dataset), s.heads(dataset)[:5])[rows]  # [N, S, labels]
    return ((ranks <= TOP) | ranks.isnan()).all(2)


def example_hits(proj: projection.Projections, heads: Sequence[Head]) -> str:
    """The paper's illustration on one prompt (`proj` holds it alone): for the first 5 heads, the
    share of its label values with a related concept of their label in their top TOP tokens, stop
    words left out (`Projections.table`)."""
    return ", ".join(f"{head_name(h)}: {projection.label_value_hits(proj.table(0, h, TOP)):.0%}" for h in heads[:5])


def given_prompt(s: Evidence, text: str, name: str) -> PromptSet:
    """A prompt set of one prompt written out in the setting's label words and separator."""
    return prompt_set_from_texts(s.m, [text], name=name, labels=s.setting.labels, sep=s.setting.sep)


def table1(s: Evidence) -> Judgement:
    """Table 1's label values over every prompt of FIRST, in its in-context heads, with the paper's
    example prompt (in the setting) as the illustration."""
    heads, rows = s.heads(FIRST), s.rows(FIRST)
    shown = projection.projections(s.m, given_prompt(s, example(s.setting), "example"))
    return judge_concepts(concept_hits(s, FIRST, rows), heads, f"{FIRST} prompts, {s.heads_named(FIRST)}",
                          f"the example prompt: {example_hits(shown, heads)}", s.inputs(FIRST)[rows])


CONCEPTS_RULE = ("a label value passes where a related concept of its label (its lower-case, capitalized and upper-case "
                 "spellings, alone or after a space, as whole tokens of the vocabulary: bar, Bar, BAR, ' bar', ...) is "
                 "among the top {TOP} tokens of its projection, stop words left out as the paper's tables leave them; a "
                 "head passes where at least {values:.0%} of its label values (every prompt, every label position) "
                 "pass. Replicates: at least {heads:.0%} of the in-context heads pass (the paper's head is 'an "
                 "example' of them) and the best head's share has its 95% CI above {values:.0%}; partly: one of the "
                 "two (the paper shows one head); does not replicate: neither. Ours: the share of heads that pass")
TABLES_SET = (f"{ISSUE_57}; the measure it reads (related concepts across the in-context heads) had not been computed "
              "on any model, but the earlier reports had shown the top 5 heads' shares by the exact label token")

register(Claim(id="table1", claim="Label values' top words have related concepts with the labels ('bar' and 'foo'), in an "
                                  "in-context head taken as an example (Table 1)",
               paper="head 22-0, one prompt: the label values' top words hold BAR, Bar / foo, Foo",
               rule=CONCEPTS_RULE + "; the one prompt the paper shows is the illustration",
               source=f"{V1}, Section 3.2, Table 1 (GPT-2 large, layer 22 head 0, l. 331-351): 'We take layer 22, head 0 "
                      "as an example' (l. 353); 'Label values' top words have related concepts with the labels' (l. 389)",
               set_on=TABLES_SET, unit="share of in-context heads", find=table1, notebooks=("02",), thresholds=TABLE1,
               **FLOW))


def table1_strict(s: Evidence) -> Judgement:
    """The earlier rule over every prompt of FIRST: the top head, the exact label token, every label value."""
    rows = s.rows(FIRST)
    return judge_strict(strict_hits(s, FIRST, rows), s.heads(FIRST)[:5], f"{FIRST} prompts, {s.heads_named(FIRST)}",
                        s.inputs(FIRST)[rows])


STRICT_RULE = ("replicates: in the top head, the share of prompts whose every label value ranks its own label token "
               "(exactly, e.g. ' bar') among the top {TOP} of the vocabulary has its 95% CI above {share:.0%}; partly: "
               "not in the top head, but in one of the top 5; does not replicate: in none of the top 5")

register(Claim(id="table1_strict", claim="Our row: Table 1's label values in the top head alone, by the label's exact token, "
                                         "every label value of a prompt",
               paper="head 22-0 lists BAR, Bar for 'bar' (l. 332-335), not the exact token",
               rule=STRICT_RULE, source=f"ours, beside {V1}, Section 3.2, Table 1 (l. 331-351, l. 389)", set_on=OVER_N,
               unit="share of prompts, in the top head", find=table1_strict, notebooks=("02",), thresholds=STRICT, **FLOW))


def agnews_rows(s: Evidence) -> torch.Tensor:
    """[N] bool: the AG News records judged (`Evidence.rows`: in the headline, those the model predicts
    correctly, as the paper's case is). Unjudgeable where no copy of AG News is at hand."""
    if "agnews" not in s.sentence:
        raise Unjudgeable("no copy of AG News here, and no hub")
    return s.rows("agnews")


def table3(s: Evidence) -> Judgement:
    """The table1 rule on the AG News prompts (Appendix C), with the first one predicted correctly
    as the illustration."""
    rows = agnews_rows(s)
    ps, heads = s.prompts("agnews"), s.heads("agnews")
    first = first_correct(s.m, ps)
    if first is None:
        shown = f"no AG News prompt of {len(ps)} is predicted correctly"
    else:
        one = projection.projections(s.m, given_prompt(s, ps.texts[first], "agnews-correct"))
        shown = f"AG News prompt {first} (the first predicted correctly): {example_hits(one, heads)}"
    where = f"{int(rows.sum())} AG News prompts, {s.heads_named('AG News')}"
    return judge_concepts(concept_hits(s, "agnews", rows), heads, where, shown, s.inputs("agnews")[rows])


register(Claim(id="table3", claim="On label values, 'bar' and 'foo' have top rankings, on a correctly predicted AG News "
                                  "prompt (Table 3, Appendix C)",
               paper="head 23-13, one prompt predicted 'foo': the label values' top words hold BAR, bars / foo, Foo",
               rule="the table1 rule on the AG News prompts, in AG News's in-context heads (headlined on the prompts the "
                    "model predicts correctly; the paper's case is one): " + CONCEPTS_RULE,
               source=f"{V1}, Appendix C, Table 3 (l. 1268-1298): 'We take head 23-13 as example. With the prediction "
                      "\"foo\"' (l. 1268); 'On label values, \"bar\" and \"foo\" have top rankings' (l. 1300)",
               set_on=TABLES_SET, unit="share of in-context heads", find=table3, notebooks=("02",), reads=SENTENCE_ONLY,
               thresholds=TABLE1, **FLOW))


def table3_strict(s: Evidence) -> Judgement:
    """The earlier rule on the AG News prompts."""
    rows = agnews_rows(s)
    where = f"{int(rows.sum())} AG News prompts, {s.heads_named('AG News')}"
    return judge_strict(strict_hits(s, "agnews", rows), s.heads("agnews")[:5], where, s.inputs("agnews")[rows])


register(Claim(id="table3_strict", claim="Our row: Table 3's label values in the top head alone, by the label's exact token, "
                                         "every label value of a prompt",
               paper="head 23-13, one prompt: the bar values list BAR, Bar and bar among other words (l. 1273-1276)",
               rule="on the AG News prompts (headlined on those the model predicts correctly), " + STRICT_RULE,
               source=f"ours, beside {V1}, Appendix C, Table 3 (l. 1268-1300)", set_on=OVER_N,
               unit="share of prompts, in the top head", find=table3_strict, notebooks=("02",), reads=SENTENCE_ONLY,
               thresholds=STRICT, **FLOW))


TOWERS = {"ratio": 2.0}  # an own word's MRR at least twice the others' (keys), the random heads' (queries)


def judge_keys(own: torch.Tensor, others: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """own, others: [N, S] a label key's reciprocal rank of its own demonstration's word and of
    the other demonstrations' words (mean over the prompt's label positions and the others), at
    the layers of the S in-context heads."""
    diff = (own - others).mean(1)
    ci = mean_ci(diff, clusters=clusters)
    o, x = float(own.mean()), float(others.mean())
    verdict = all_hold(ci[0] > 0, o >= TOWERS["ratio"] * x)
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"label keys: MRR of the own demonstration's word {o:.4f} against the other demonstrations' "
                     f"words {x:.4f} in the same key ({o / x if x else float('inf'):.1f}x); ours is the difference")


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
    parts = {"keys": judge_keys(torch.cat(own), torch.cat(others), clusters), **parts}
    return rules.judge_together(parts, len(clusters), "the word datasets, each in " +
                                ("the heads given" if s.given else "its top heads"))


register(Claim(id="two_towers", claim="Query and key are two towers: label keys carry their own demonstration, the last "
                                      "query the input (Table 1's key and query rows; the title)",
               paper="head 22-0, one prompt: the 2-, 5- and 11-keys hold love, like, two; the last query one, first",
               rule="keys: the label key ranks its own demonstration's word above the other demonstrations' words (MRR "
                    "difference's 95% CI above 0, own at least {ratio:g}x theirs; the paper's label key is the key's input, "
                    "the same in every head of a layer, so no random head of the layer differs from it); query: the "
                    "in-context heads' last queries rank the input word by the fig5 rule against {RANDOM_DRAWS} layer-matched "
                    "random draws, on each word dataset; replicates if all three judgements replicate; does not replicate if "
                    "none does even partly; partly otherwise",
               source=f"{V1}, Section 3.2: label keys are 'their inputs before multiplying the key matrix', the query its "
                      "'reverse projection ... by multiplying QK^T' (l. 279); 'Label keys' top words ... are related to their "
                      "demonstrations ... Last token query's top words are related to the input text' (l. 389); the "
                      "hypothesis (l. 391) and 'two towers' (l. 514)",
               set_on=ISSUE_44, unit="parts that replicate", find=two_towers, notebooks=("02",), thresholds=TOWERS, **FLOW))


METRIC = {"rho": 0.1}  # a weak but clear rise of a label's score with its demonstration's similarity


def judge_metric(score: torch.Tensor, similarity: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """score: [N, S, K] each label position's query-key score in S heads, centred within the prompt
    and at its position (`studies.towers.double_centred` of log attention); similarity: [N, K] its
    demonstration's similarity to the input, centred alike."""
    pairs = torch.stack([score, similarity[:, None].expand_as(score)], -1)  # [N, S, K, 2]

    def rho(p: torch.Tensor) -> float:
        return spearman(p[..., 0], p[..., 1])
    ours, ci = rho(pairs), bootstrap_ci([pairs], rho, clusters=[clusters])
    verdict = REPLICATES if ours >= METRIC["rho"] and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return Judgement(ours, ci, len(pairs), verdict,
                     f"Spearman over (prompt, head, label position) triples of the top {score.shape[1]} heads: a label's "
                     "query-key score (log attention) against its demonstration's cosine similarity to the input in the "
                     "model's input embeddings, each with the prompt's and the position's mean taken out")


def metric(s: Evidence) -> Judgement:
    """Per word dataset, in its heads, each label's log attention and its demonstration's similarity
    to the input, each double-centred (the prompt's and the position's means out); pooled."""
    score, similarity = [], []
    for d in WORD:
        ps, rows = s.prompts(d), s.rows(d)
        attention = label_attention.attention_on_labels(s.m, ps).per_label_at(s.heads(d))[rows]  # [N, S, K]
        score.append(towers.double_centred(attention.log().transpose(0, 1)).transpose(0, 1))  # centred per head
        similarity.append(towers.double_centred(towers.similarity(s.m, ps)[rows]))
    return judge_metric(torch.cat(score), torch.cat(similarity), s.clusters(WORD))


register(Claim(id="metric", claim="Our extension: at a fixed position, a label's query-key score rises with its "
                                   "demonstration's similarity to the input (the metric the two towers learn)",
               paper="argued from one prompt (Table 1, l. 389-391; Table 3's Liverpool, l. 1300), not measured",
               rule="in each word dataset's top {K} heads, the Spearman correlation over (prompt, head, label position) of the "
                    "label's log attention and its demonstration's cosine similarity to the input in the model's input "
                    "embeddings, each with the prompt's and the position's mean taken out: replicates: at least {rho} with "
                    "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
               source=f"ours, beside {V1} Section 4.4's conclusion, the query and key matrices 'two towers ... for learning "
                      "the similarity metric' (l. 514)",
               set_on=ISSUE_44, unit="Spearman's rho", find=metric, notebooks=("02",), thresholds=METRIC, **FLOW))
