"""Section 3.2's two towers: what in-context heads' label keys and last query project to in the vocabulary
(with our rows beside them: the attention-only key, the unturned query, the same on AG News); Section 5.2's
adjacent tokens in label keys (l. 642); and our extension, the similarity metric the two towers learn."""
from __future__ import annotations

from typing import Sequence

import torch

from ...core.heads import Head, same_layer_random_heads
from ...stats import mean_ci, unweighted, weighted_ci, weighted_spearman
from ...studies import label_attention, towers
from .. import rules
from ..evidence import Evidence, agnews_rows
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, not_tested
from ..rules import RANDOM_DRAWS, Clusters
from ..whose import OURS
from .registry import SENTENCE_ONLY, Claim, register
from .sources import FLOW, OUR_THRESHOLDS, RESTATED, V1

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
    """The dataset's tower ranks (`studies.towers.tower_ranks`) of the records `rows` in its S in-context heads,
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
    for d in s.word:
        ours, random = heads_ranks(s, d, s.rows(d))
        if key is not None:
            keys.append(ours[key])
        if query is not None:
            parts |= query_parts(ours[query], random[query], s.heads(d), d, s.clusters([d]))
    if key is not None:
        parts = {**key_parts(torch.cat(keys), s.clusters(s.word)), **parts}
    return rules.judge_together(parts, len(s.clusters(s.word)), "the word datasets, each in " +
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
               set_on=f"{RESTATED}; the paper's key, the turned query and the ranks among the kept tokens had not been "
                      "computed on any model",
               unit="parts that replicate", find=two_towers, notebooks=("02",), thresholds=TOWERS, views=FLOW))


def two_towers_attention_key(s: Evidence) -> Judgement:
    return word_towers(s, "key_attention", None)


register(Claim(id="two_towers_attention_key", whose=OURS, claim="Our row: the label keys as the attention outputs written into the "
                                                    "label position alone carry their own demonstration",
               paper="the paper's label key is the key projection's input (l. 279); this row takes x_l less the embedding "
                     "and every earlier FFN output, the reading the earlier reports judged",
               rule="the keys of the two_towers rule, on that vector: " + TOWERS_CRITERIA + ": " + KEYS_RULE + "; " + TOGETHER,
               source=f"ours, beside {V1} Section 3.2 (l. 279, l. 389)",
               set_on=f"{RESTATED}; its MRR contrast had been shown by the earlier reports (two_towers' keys), its ranks "
                      "among the kept tokens had not been computed",
               unit="parts that replicate", find=two_towers_attention_key, notebooks=("02",), thresholds=TOWERS, views=FLOW))


def two_towers_unrotated(s: Evidence) -> Judgement:
    return word_towers(s, None, "query")


register(Claim(id="two_towers_unrotated", whose=OURS, claim="Our row: the last query as it is, unturned, carries the input",
               paper="the paper's GPT-2 turns no query (l. 279's q W_K); on a rotary model the vector a label's key is "
                     "scored against is the query turned by the label's distance (two_towers' reading)",
               rule="the query parts of the two_towers rule on q W_K, one vector a head: " + TOWERS_CRITERIA + ": " +
                    QUERY_RULE + ", on each word dataset; " + TOGETHER,
               source=f"ours, beside {V1} Section 3.2 (l. 279, l. 389)",
               set_on=f"{RESTATED}; its MRR against random heads had been shown by the earlier reports (two_towers' "
                      "queries), its ranks among the kept tokens had not been computed",
               unit="parts that replicate", find=two_towers_unrotated, notebooks=("02",), thresholds=TOWERS, views=FLOW))


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
               set_on=f"{RESTATED}; the measure it reads had not been computed on any model",
               unit="parts that replicate", find=two_towers_agnews, notebooks=("02",), reads=SENTENCE_ONLY,
               thresholds=TOWERS, views=FLOW))


ADJACENT = {"ratio": 2.0}  # the adjacent text's MRR at least twice the farther ones'


def judge_adjacent(ranks: torch.Tensor, adjacent: torch.Tensor, farther: torch.Tensor, what: str,
                   clusters: Clusters = None) -> Judgement:
    """ranks: [N, S, D, J] each text's rank in each label key, at the layers of S in-context heads;
    adjacent, farther: [N, D, J] bool (`studies.towers.adjacent_texts`). A prompt's MRR of its adjacent
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
    for d in s.word:
        rows = s.rows(d)
        ranks.append(heads_ranks(s, d, rows)[0]["key"])
        for side, parts in sides.items():
            parts.append([mask[rows] for mask in towers.adjacent_texts(s.prompts(d), side)])
    key, clusters = torch.cat(ranks), s.clusters(s.word)
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
               set_on=f"{RESTATED}; the measure it reads had not been computed on any model",
               unit="parts that replicate", find=label_keys_adjacent, notebooks=("02",), thresholds=ADJACENT, views=FLOW))


METRIC = {"rho": 0.1}  # a weak but clear rise of a label's score with its demonstration's similarity


def judge_metric(score: torch.Tensor, similarity: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """score: [N, S, D] each label position's query-key score in S heads, centred within the prompt
    and at its position (`studies.towers.double_centred` of log attention); similarity: [N, D] its
    demonstration's similarity to the input, centred alike."""
    pairs = torch.stack([score, similarity[:, None].expand_as(score)], -1)  # [N, S, D, 2]

    def rho(p: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return weighted_spearman(p[..., 0], p[..., 1], torch.ones_like(p[..., 0], dtype=torch.bool), w)
    ours, ci = unweighted(rho, pairs), weighted_ci(pairs, rho, clusters=clusters)
    verdict = REPLICATES if ours >= METRIC["rho"] and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return Judgement(ours, ci, len(pairs), verdict,
                     f"Spearman over (prompt, head, label position) triples of the top {score.shape[1]} heads: a label's "
                     "query-key score (log attention) against its demonstration's cosine similarity to the input in the "
                     "model's input embeddings, each with the prompt's and the position's mean taken out")


def metric(s: Evidence) -> Judgement:
    """Per word dataset, in its heads, each label's log attention and its demonstration's similarity
    to the input, each double-centred (the prompt's and the position's means out); pooled."""
    score, similarity = [], []
    for d in s.word:
        ps, rows = s.prompts(d), s.rows(d)
        attention = label_attention.attention_on_labels(s.m, ps).per_label_at(s.heads(d))[rows]  # [N, S, D]
        score.append(towers.double_centred(attention.log().transpose(0, 1)).transpose(0, 1))  # centred per head
        similarity.append(towers.double_centred(towers.similarity(s.m, ps)[rows]))
    return judge_metric(torch.cat(score), torch.cat(similarity), s.clusters(s.word))


register(Claim(id="metric", whose=OURS, claim="Our extension: at a fixed position, a label's query-key score rises with its "
                                   "demonstration's similarity to the input (the metric the two towers learn)",
               paper="argued from one prompt (Table 1, l. 389-391; Table 3's Liverpool, l. 1300), not measured",
               rule="in each word dataset's top {K} heads, the Spearman correlation over (prompt, head, label position) of the "
                    "label's log attention and its demonstration's cosine similarity to the input in the model's input "
                    "embeddings, each with the prompt's and the position's mean taken out: replicates: at least {rho} with "
                    "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
               source=f"ours, beside {V1} Section 4.4's conclusion, the query and key matrices 'two towers ... for learning "
                      "the similarity metric' (l. 514)",
               set_on=OUR_THRESHOLDS, unit="Spearman's rho", find=metric, notebooks=("02",), thresholds=METRIC, views=FLOW))
