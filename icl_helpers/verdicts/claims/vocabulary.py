"""Section 3.2, Tables 1 and 3: what in-context heads' label values, label keys and last query project to
in the vocabulary (the two towers, with our rows beside them: the strict value rule, the attention-only
key, the unturned query); Section 5.2's adjacent tokens in label keys (l. 642); and our extension, the
similarity metric the two towers learn."""
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
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold, not_tested
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


# top: the tokens the paper lists for one vector (Table 1's last query 15, its input's "one" 14th; Table 3's keys 16);
# share: most of the vectors; ratio: an own word's MRR at least twice the other demonstrations' (keys)
TOWERS = {"top": 15, "share": 0.5, "ratio": 2.0}
SEEN = " among the top {top} tokens (stop words, punctuation and special tokens left out, as the paper's lists)"
TOWERS_CRITERIA = ("by two criteria each: ranks a reader can see (replicates: in a prompt's vectors the share where its "
                  "word ranks" + SEEN + ", averaged over prompts, has its 95% CI above {share:.0%}) and a contrast")
KEYS_RULE = ("the label key ranks its own demonstration's word above the other demonstrations' words in the same key "
             "(MRR at least {ratio:g}x theirs and the difference's 95% CI above 0), at the layer of each in-context head")
QUERY_RULE = ("the in-context heads' last queries rank the input word by the fig5 rule against {RANDOM_DRAWS} "
              "layer-matched random draws (a turned query's reciprocal rank averaged over the labels)")
TOGETHER = "replicates if every part replicates; does not replicate if none does even partly; partly otherwise"
FUNCTION = ("What the towers do, attention that follows a label's truth at equal distance from the input, is fig6_control's "
            "test.")


def judge_top(ranks: torch.Tensor, what: str, clusters: Clusters = None) -> Judgement:
    """ranks: [N, ...] a word's rank in each of a prompt's vectors (NaN: none): the share of a prompt's
    vectors where it ranks in the top TOWERS["top"], averaged over the prompts that have one."""
    flat = ranks.flatten(1)
    seen = flat.isfinite()
    kept = seen.any(1)
    share = ((flat <= TOWERS["top"]) & seen).sum(1)[kept] / seen.sum(1)[kept]  # [N']
    ci = mean_ci(share, clusters=None if clusters is None else clusters[kept])
    verdict = REPLICATES if ci[0] > TOWERS["share"] else FAILS
    return Judgement(float(share.double().mean()), ci, len(share), verdict,
                     f"share of {what}{SEEN.format(**TOWERS)}, by prompt; median rank {float(flat[seen].median()):.0f}")


def judge_keys(own: torch.Tensor, others: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """own, others: [N, S] a label key's reciprocal rank of its own demonstration's word and of the
    other demonstrations' words (mean over the prompt's label positions and the others), at the
    layers of the S in-context heads."""
    diff = (own - others).mean(1)
    ci = mean_ci(diff, clusters=clusters)
    o, x = float(own.mean()), float(others.mean())
    verdict = REPLICATES if ci[0] > 0 and o >= TOWERS["ratio"] * x else FAILS
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"MRR of the own demonstration's word {o:.4f} against the other demonstrations' words {x:.4f} in "
                     f"the same key ({o / x if x else float('inf'):.1f}x); ours is the difference")


def key_parts(key: torch.Tensor, clusters: Clusters = None) -> dict[str, Judgement]:
    """key: [N, S, D, D + 1] the rank of each text (the demonstrations, then the input) in each label key,
    at the layer of each of S in-context heads: its top-`top` share and its contrast."""
    demos = key[..., :-1]  # [N, S, D, D]
    eye = torch.eye(demos.shape[-1], dtype=torch.bool)
    rr = demos.reciprocal()
    return {"keys, seen": judge_top(demos[..., eye], "label keys whose own demonstration's word is", clusters),
            "keys against the other demonstrations": judge_keys(rr[..., eye].nanmean(-1), rr[..., ~eye].nanmean(-1),
                                                                clusters)}


def query_parts(query: torch.Tensor, random: torch.Tensor, heads: Sequence[Head], name: str,
                clusters: Clusters = None) -> dict[str, Judgement]:
    """query: [N, S, ...] the input's rank in the last query of S in-context heads (one a label, turned
    to its distance, or one alone); random: [draws, N, S, ...] in layer-matched random heads. Its
    top-`top` share, and its MRR against the random heads (`rules.judge_fig5`)."""
    def per_head(ranks: torch.Tensor, lead: int) -> torch.Tensor:
        return ranks.reciprocal().reshape(*ranks.shape[:lead], -1).nanmean(-1)
    contrast = rules.judge_fig5(per_head(query, 2), per_head(random, 3), heads, clusters,
                                "reciprocal rank of the input word in the last query")
    return {f"{name} query, seen": judge_top(query, "last queries whose input word is", clusters),
            f"{name} query against random heads": contrast}


def heads_ranks(s: Evidence, dataset: str, rows: torch.Tensor
                ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The dataset's tower ranks (`towers.tower_ranks`) of the records `rows` in its S in-context heads,
    a key at its head's layer: "key", "key_attention" [N, S, D, J], "query" [N, S], "query_rotated"
    [N, S, D]; and the queries' in RANDOM_DRAWS draws of a random head of each one's layer
    [draws, N, S, ...]."""
    heads = s.heads(dataset)
    layers = sorted({l for l, _ in heads})
    pool = [(l, h) for l in layers for h in range(s.m.arch.n_heads)]
    ranks = {k: v[rows] for k, v in towers.tower_ranks(s.m, s.prompts(dataset), pool).items()}
    column = {h: i for i, h in enumerate(pool)}
    at = [layers.index(l) for l, _ in heads]
    ours = {k: ranks[k][:, at] for k in ("key", "key_attention")}
    ours |= {k: ranks[k][:, [column[h] for h in heads]] for k in ("query", "query_rotated")}
    draws = [[column[h] for h in same_layer_random_heads(heads, s.m.arch.n_heads, s.seed + i)]
             for i in range(RANDOM_DRAWS)]
    random = {k: torch.stack([ranks[k][:, d] for d in draws]) for k in ("query", "query_rotated")}
    return ours, random


def word_towers(s: Evidence, key: str | None, query: str | None) -> Judgement:
    """Table 1's key and query rows over every prompt of the word datasets: the label keys `key` (pooled:
    "key" or "key_attention", None: none) and each dataset's last queries `query` ("query_rotated",
    "query", None: none), part by part."""
    keys, parts = [], {}
    for d in WORD:
        ours, random = heads_ranks(s, d, s.rows(d))
        if key is not None:
            keys.append(ours[key])
        if query is not None:
            parts |= query_parts(ours[query], random[query], s.heads(d), d, s.clusters([d]))
    if key is not None:
        parts = {**key_parts(torch.cat(keys), s.clusters(WORD)), **parts}
    return rules.judge_together(parts, len(s.clusters(WORD)), "the word datasets, each in " +
                                ("the heads given" if s.given else "its top heads"))


def two_towers(s: Evidence) -> Judgement:
    """The paper's label key (the key projection's input) and the last query turned to each label."""
    return word_towers(s, "key", "query_rotated")


register(Claim(id="two_towers", claim="Query and key are two towers: label keys carry their own demonstration, the last "
                                      "query the input (Table 1's key and query rows; the title)",
               paper="head 22-0, one prompt: the 2-, 5- and 11-keys hold love, like, two (3rd, 4th and 6th of the words "
                     "listed); the last query one (14th of 15)",
               rule="the label key as the paper builds it, what the key projection reads at the label (the layer's normed "
                    "input, the same in every head of a layer), and each in-context head's last query mapped into that "
                    "space, turned by each label's distance (q R(t - p) W_K: the vector the label's key input is scored "
                    "against on a rotary model; q W_K on GPT-2), judged " + TOWERS_CRITERIA + ": keys: " + KEYS_RULE +
                    "; query: " + QUERY_RULE + ", on each word dataset; " + TOGETHER + ". " + FUNCTION,
               source=f"{V1}, Section 3.2 and Table 1 (l. 331-351): label keys are 'their inputs before multiplying the key "
                      "matrix', the query its 'reverse projection ... by multiplying QK^T' (l. 279); 'Label keys' top words ... are related to their "
                      "demonstrations ... Last token query's top words are related to the input text' (l. 389); the "
                      "hypothesis (l. 391) and 'two towers' (l. 514)",
               set_on=f"{ISSUE_57}; the paper's key, the turned query and the ranks among the kept tokens had not been "
                      "computed on any model",
               unit="parts that replicate", find=two_towers, notebooks=("02",), thresholds=TOWERS, **FLOW))


def two_towers_attention_key(s: Evidence) -> Judgement:
    return word_towers(s, "key_attention", None)


register(Claim(id="two_towers_attention_key", claim="Our row: the label keys as the attention outputs written into the "
                                                    "label position alone carry their own demonstration",
               paper="the paper's label key is the key projection's input (l. 279); this row takes x_l less the embedding "
                     "and every earlier FFN output, the reading the earlier reports judged",
               rule="the keys of the two_towers rule, on that vector: " + TOWERS_CRITERIA + ": " + KEYS_RULE + "; " + TOGETHER,
               source=f"ours, beside {V1} Section 3.2 (l. 279, l. 389)",
               set_on=f"{ISSUE_57}; its MRR contrast had been shown by the earlier reports (two_towers' keys), its ranks "
                      "among the kept tokens had not been computed",
               unit="parts that replicate", find=two_towers_attention_key, notebooks=("02",), thresholds=TOWERS, **FLOW))


def two_towers_unrotated(s: Evidence) -> Judgement:
    return word_towers(s, None, "query")


register(Claim(id="two_towers_unrotated", claim="Our row: the last query as it is, unturned, carries the input",
               paper="the paper's GPT-2 turns no query (l. 279's q W_K); on a rotary model the vector a label's key is "
                     "scored against is the query turned by the label's distance (two_towers' reading)",
               rule="the query parts of the two_towers rule on q W_K, one vector a head: " + TOWERS_CRITERIA + ": " +
                    QUERY_RULE + ", on each word dataset; " + TOGETHER,
               source=f"ours, beside {V1} Section 3.2 (l. 279, l. 389)",
               set_on=f"{ISSUE_57}; its MRR against random heads had been shown by the earlier reports (two_towers' "
                      "queries), its ranks among the kept tokens had not been computed",
               unit="parts that replicate", find=two_towers_unrotated, notebooks=("02",), thresholds=TOWERS, **FLOW))


def two_towers_agnews(s: Evidence) -> Judgement:
    """Table 3's key and query rows on the AG News prompts judged (`agnews_rows`: in the headline, those
    the model answers correctly), in AG News's in-context heads."""
    rows = agnews_rows(s)
    if rows.sum() < 2:
        return not_tested(f"{int(rows.sum())} AG News prompts judged")
    clusters = s.inputs("agnews")[rows]
    ours, random = heads_ranks(s, "agnews", rows)
    parts = {**key_parts(ours["key"], clusters),
             **query_parts(ours["query_rotated"], random["query_rotated"], s.heads("agnews"), "agnews", clusters)}
    where = f"{int(rows.sum())} AG News prompts, {s.heads_named('AG News')}"
    return rules.judge_together(parts, int(rows.sum()), where)


register(Claim(id="two_towers_agnews", claim="The same on a correctly predicted AG News prompt: label keys carry their "
                                             "demonstration, the last query the input (Table 3's key and query rows)",
               paper="head 23-13, one prompt: the first true label's key holds iverpool, Spanish, Liverpool (2nd, 9th, "
                     "12th of 16) from its demonstration; the last query iverpool (6th of 14) from the input",
               rule="the two_towers rule (the paper's key, the query turned to each label) on the AG News prompts "
                    "(headlined on those the model answers correctly), in AG News's top heads, a text's tokens its content tokens (a text ranks as "
                    "its best one), judged " + TOWERS_CRITERIA + ": keys: " + KEYS_RULE + "; query: " + QUERY_RULE + "; " +
                    TOGETHER,
               source=f"{V1}, Appendix C, Table 3 (l. 1272-1298): 'the labels correspond to business demonstrations "
                      "extract the concepts about business ... The top tokens of true labels are related to places such as "
                      "\"Liverpool\" and \"Spanish\" ... We find \"iverpool\" ... in last token query' (l. 1300)",
               set_on=f"{ISSUE_57}; the measure it reads had not been computed on any model",
               unit="parts that replicate", find=two_towers_agnews, notebooks=("02",), reads=SENTENCE_ONLY,
               thresholds=TOWERS, **FLOW))


ADJACENT = {"ratio": 2.0}  # the adjacent text's MRR at least twice the farther ones'


def judge_adjacent(ranks: torch.Tensor, adjacent: torch.Tensor, farther: torch.Tensor, what: str,
                   clusters: Clusters = None) -> Judgement:
    """ranks: [N, S, D, J] each text's rank in each label key, at the layers of S in-context heads;
    adjacent, farther: [N, D, J] bool (`towers.adjacent_texts`). A prompt's MRR of its adjacent
    texts' words and of the farther ones', over its keys that have both; the prompts with one."""
    rr = ranks.reciprocal()

    def mrr_of(mask: torch.Tensor) -> torch.Tensor:  # [N]: over a prompt's heads, its keys' mean over the mask
        per_key = (rr * mask[:, None]).nansum(-1) / mask[:, None].sum(-1)  # [N, S, D]: NaN where the key has none
        return per_key.flatten(1).nanmean(1)
    near, far = mrr_of(adjacent), mrr_of(farther)
    kept = near.isfinite()
    diff = (near - far)[kept]
    ci = mean_ci(diff, clusters=None if clusters is None else clusters[kept])
    a, f = float(near[kept].mean()), float(far[kept].mean())
    verdict = REPLICATES if ci[0] > 0 and a >= ADJACENT["ratio"] * f else FAILS
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"MRR of {what} {a:.4f} against the farther texts' words of the same class relation {f:.4f} in the "
                     f"same key ({a / f if f else float('inf'):.1f}x); ours is the difference")


def label_keys_adjacent(s: Evidence) -> Judgement:
    """In the word datasets' in-context heads' layers, the paper's label keys: the adjacent texts' words
    against farther ones', before the label and after it."""
    ranks, sides = [], {-1: [], 1: []}
    for d in WORD:
        rows = s.rows(d)
        ranks.append(heads_ranks(s, d, rows)[0]["key"])
        for side, parts in sides.items():
            parts.append([mask[rows] for mask in towers.adjacent_texts(s.prompts(d), side)])
    key, clusters = torch.cat(ranks), s.clusters(WORD)
    before, after = ([torch.cat(m) for m in zip(*sides[side])] for side in (-1, 1))
    parts = {"before": judge_adjacent(key, *before, "the demonstration's word just before the label's own", clusters),
             "after": judge_adjacent(key, *after, "the text's word just after the label (a key cannot attend to it)",
                                     clusters)}
    return rules.judge_together(parts, len(clusters), "the word datasets, each in " +
                                ("the heads given" if s.given else "its top heads"))


register(Claim(id="label_keys_adjacent", claim="Label keys also extract a little of the tokens adjacent to their "
                                               "demonstration ('lover' and 'height' in the 5-key; numbers in the 11-key)",
               paper="head 22-0, one prompt: the 5-key holds Lover (from love, before it) and height (from eight, after "
                     "it); the 11-key more numbers than the 8-key, from eight (before it) and one (after it)",
               rule="in the label keys as the paper builds them (the key projection's input), at the layer of each "
                    "in-context head, on the word datasets: before: the word of the demonstration just before the "
                    "label's own, against the words of the demonstrations farther before it that stand to the label's "
                    "class as it does (both of it, or both not: class alone makes no difference); after: the word of the "
                    "text just after the label (the next demonstration, or the input after the last label) against "
                    "the texts farther after it, alike; each replicates where the adjacent word's MRR is at least "
                    "{ratio:g}x the farther ones' and the difference's 95% CI lies above 0, in the keys that have both; "
                    + TOGETHER,
               source=f"{V1}, Section 5.2: 'the labels not only extract the corresponding demonstrations but also extract "
                      "a little adjacent tokens' (l. 549-551); '\"lover\" also exists in 5-key, and \"height\" (which "
                      "may be related to \"eight\") is also contained in 5-key ... 11-key may extract information from "
                      "\"eight\" and \"one\"' (l. 642)",
               set_on=f"{ISSUE_57}; the measure it reads had not been computed on any model",
               unit="parts that replicate", find=label_keys_adjacent, notebooks=("02",), thresholds=ADJACENT, **FLOW))


METRIC = {"rho": 0.1}  # a weak but clear rise of a label's score with its demonstration's similarity


def judge_metric(score: torch.Tensor, similarity: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """score: [N, S, D] each label position's query-key score in S heads, centred within the prompt
    and at its position (`studies.towers.double_centred` of log attention); similarity: [N, D] its
    demonstration's similarity to the input, centred alike."""
    pairs = torch.stack([score, similarity[:, None].expand_as(score)], -1)  # [N, S, D, 2]

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
        attention = label_attention.attention_on_labels(s.m, ps).per_label_at(s.heads(d))[rows]  # [N, S, D]
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
