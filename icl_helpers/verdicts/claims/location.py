"""Sections 3.1 and 4.2, Figs. 2-4 and 12-15: where the increase of the predicted label lies (attention
layers, deep heads), how alike the datasets' in-context heads are, and that the sentence datasets'
largest heads differ (Appendix A)."""
from __future__ import annotations

import functools
from typing import Callable

import torch

from ...core.heads import head_name, top_heads
from ...stats import bootstrap_ci, unweighted, weighted_ci
from ..evidence import Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, not_tested
from ..rules import Clusters, K
from .registry import BOTH, SENTENCE_ONLY, Claim, register
from .sources import LOCATED, RESTATED, V1


def deeper_half(L: int) -> int:
    """The first layer of the deeper half of L layers: layers >= L/2 (the paper's 18-31 of 36, l. 449)."""
    return (L + 1) // 2


FIG2 = {"almost_all": 0.8, "most": 0.5, "min_total": 1.0}


def _fig2_shares(increases: torch.Tensor, deep: int, w: torch.Tensor) -> torch.Tensor:
    """increases: [N, 2, L] each prompt's attention- and FFN-layer increases; w [d, N] each prompt's multiplicity in
    d resamples: [d, 2] the attention layers' share and the deeper half's attention layers' share (layers >= deep)
    of the summed increase of all layers, pooled over the prompts."""
    x = increases.double()
    parts = torch.stack([x.sum((1, 2)), x[:, 0].sum(1), x[:, 0, deep:].sum(1)], 1)  # [N, 3]: all, attention, deep
    pooled = w @ parts  # [d, 3]
    return pooled[:, 1:] / pooled[:, :1]


def judge_fig2(attn: torch.Tensor, ffn: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """attn, ffn: [N, L] layer-level increases of N prompts."""
    L = attn.shape[1]
    deep = deeper_half(L)
    increases = torch.stack([attn, ffn], 1)  # [N, 2, L]: resampled together, by prompt
    shares = [unweighted(lambda x, w, i=i: _fig2_shares(x, deep, w)[:, i], increases) for i in (0, 1)]
    cis = [weighted_ci(increases, lambda x, w, i=i: _fig2_shares(x, deep, w)[:, i], clusters=clusters) for i in (0, 1)]
    total = float(increases.sum((1, 2)).mean())
    grown = total >= FIG2["min_total"]
    verdict = (REPLICATES if grown and min(shares) >= FIG2["almost_all"] and min(ci[0] for ci in cis) > FIG2["most"]
               else PARTLY if grown and min(shares) >= FIG2["most"] else FAILS)
    shown = [f"{x:.0%} ({lo:.0%} to {hi:.0%})" for x, (lo, hi) in zip(shares, cis)]
    return Judgement(shares[1], cis[1], len(increases), verdict,
                     f"ours is the deeper half's attention layers' (>= {deep} of {L}) share of the summed increase of all "
                     f"layers, {shown[1]}; the attention layers' share {shown[0]}; all layers {total:+.2f} a prompt "
                     f"(attention {float(attn.sum(1).mean()):+.2f}, FFN {float(ffn.sum(1).mean()):+.2f}); the paper shows "
                     "one prompt, we pool N")


def fig2(s: Evidence) -> Judgement:
    return judge_fig2(s.loc(s.first).attn[s.rows(s.first)], s.loc(s.first).ffn[s.rows(s.first)], s.clusters([s.first]))


register(Claim(id="fig2", claim="Almost all the increase of the predicted label comes from deep attention layers (Fig. 2)",
               paper="almost all of the increase in deep attention layers (one example prompt)",
               rule="of the summed increase of all layers (attention and FFN, each layer's increase on its own input, pooled "
                    "over the prompts), the attention layers' share and the deeper half's attention layers' share: "
                    "replicates: both at least {almost_all:.0%}, their 95% CIs above {most:.0%}; partly: both at least "
                    "{most:.0%}; does not replicate: otherwise, or where all layers together raise the prediction's "
                    "log-probability by less than {min_total:g} a prompt (the minimum effect: no increase to share)",
               source=f"{V1}, Section 3.1, Fig. 2: 'Almost all the improvements are caused by deep attention layers' (l. 275)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (fig2's attention and FFN sums a prompt "
                      "and the deeper half's share of the attention increase)",
               unit="share of all layers' increase, deep attention layers", find=fig2, notebooks=("01",), thresholds=FIG2,
               views=LOCATED))


FIG3_4 = {"replicates": 0.8, "partly": 2 / 3}  # partly: twice as many deep as shallow (chance: as many)


def _deep_share(head: torch.Tensor, k: int) -> float:
    """Share of the top k heads of head [N, L, H] in the deeper half of the layers."""
    deep = deeper_half(head.shape[1])
    return sum(l >= deep for l, _ in top_heads(head.mean(0), k)) / k


def _resampled(heads: dict[str, torch.Tensor], statistic: Callable[..., float],
               clusters: dict[str, torch.Tensor] | None) -> tuple[float, tuple[float, float]]:
    """A statistic of the datasets' head-level increases heads[d] [N_d, L, H] and its interval
    (resampled 200 times, each dataset on its own: each draw re-ranks every head)."""
    ci = bootstrap_ci(list(heads.values()), statistic, draws=200,
                      clusters=None if clusters is None else [clusters[d] for d in heads])
    return statistic(*heads.values()), ci


def _head_sets(heads: dict[str, torch.Tensor], statistic: Callable[..., float], rule: dict[str, float], why: str,
               clusters: dict[str, torch.Tensor] | None) -> Judgement:
    """A statistic of the datasets' top heads (`_resampled`), judged by the rule's two thresholds."""
    ours, ci = _resampled(heads, statistic, clusters)
    verdict = REPLICATES if ours >= rule["replicates"] else PARTLY if ours >= rule["partly"] else FAILS
    return Judgement(ours, ci, sum(len(h) for h in heads.values()), verdict, why)


def judge_fig3_4(heads: dict[str, torch.Tensor], k: int = K, clusters: dict[str, torch.Tensor] | None = None
                 ) -> Judgement:
    """heads: per dataset, head-level increases [N, L, H]; clusters: per dataset, each prompt's input."""
    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, lambda *hs: sum(_deep_share(h, k) for h in hs) / len(hs), FIG3_4,
                      f"share of each dataset's top {k} in layers >= {deeper_half(L)} of {L}, mean over {len(heads)} datasets; "
                      f"top {k} of {L * H} heads is {k / (L * H):.1%} (paper 2.8%)", clusters)


def fig3_4(s: Evidence) -> Judgement:
    return judge_fig3_4({d: s.loc(d).head[s.rows(d)] for d in s.word}, s.setting.heads,
                              {d: s.clusters([d]) for d in s.word})


register(Claim(id="fig3_4", claim="The in-context heads (top 20 by increase) lie in deep layers (Figs. 3, 4)",
               paper="top 20 of 720 heads (2.8%) in layers 18-31 of 36",
               rule="replicates: >= {replicates:.0%} of the top {K} in the deeper half of the layers; partly: >= {partly:.0%} "
                    "(the minimum effect: twice as many as in the shallower half, where chance puts as many); does not "
                    "replicate: fewer",
               source=f"{V1}, Section 4.2, Figs. 3 and 4 (GPT-2 large, 36 layers x 20 heads): 'The important heads are in "
                      "deep layers (18-31)' (l. 449)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (fig3_4's share, partly from 50%)",
               unit="share of the top heads in the deeper half", find=fig3_4, notebooks=("01",), thresholds=FIG3_4, views=LOCATED))


FIG12_15 = {"replicates": 0.5, "partly": 0.25, "over_chance": 2.0}


def judge_fig12_15(heads: dict[str, torch.Tensor], k: int = K, clusters: dict[str, torch.Tensor] | None = None
                   ) -> Judgement:
    """heads: per dataset (two or more), head-level increases [N, L, H]."""
    def shared(*hs: torch.Tensor) -> float:
        tops = [set(top_heads(h.mean(0), k)) for h in hs]
        pairs = [(a, b) for i, a in enumerate(tops) for b in tops[i + 1:]]
        return sum(len(a & b) for a, b in pairs) / len(pairs) / k

    L, H = next(iter(heads.values())).shape[1:]
    chance = k / (L * H)  # two top-k sets drawn at random share k / (L H) of their heads
    rule = {v: max(FIG12_15[v], FIG12_15["over_chance"] * chance) for v in ("replicates", "partly")}
    return _head_sets(heads, shared, rule,
                      f"mean share of top {k} heads two of {len(heads)} datasets have in common ({', '.join(heads)}); "
                      f"chance {chance:.1%}", clusters)


def fig12_15(s: Evidence) -> Judgement:
    return judge_fig12_15({d: s.loc(d).head[s.rows(d)] for d in s.word + s.sentence}, s.setting.heads,
                                {d: s.clusters([d]) for d in s.word + s.sentence})


register(Claim(id="fig12_15", claim="The in-context heads are largely the same across datasets (Figs. 12-15)",
               paper="similar head indexes on every dataset; a large overlap between sentence and word datasets",
               rule="replicates: two datasets share >= {replicates:.0%} of their top {K} on average; partly: >= {partly:.0%}; "
                    "either only where it is also at least {over_chance:g}x the share two random sets of {K} heads have "
                    "(chance; the minimum effect); does not replicate: fewer",
               source=f"{V1}, Section 4.2 ('The head indexes are similar on these datasets', l. 449) and Appendix A, Figs. "
                      "12-15 (l. 1153, 1165)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (fig12_15's share)",
               unit="share of the top heads two datasets share", find=fig12_15, notebooks=("01",), reads=BOTH, thresholds=FIG12_15,
               views=LOCATED))


FIG12_15_LARGEST = {"lead": 0.1, "replicates": 0.5}


def _largest_apart(lead: float, *hs: torch.Tensor) -> float:
    """Share of the pairs of datasets (hs: each [N, L, H]) whose largest heads differ clearly: in each
    dataset of the pair, its own largest head's mean increase exceeds the other's largest head's by at
    least `lead` of its own (a near-tie is not a different head)."""
    means = torch.stack([h.mean(0).flatten() for h in hs])  # [D, L H]
    tops = means.argmax(1)  # [D]
    own = means.gather(1, tops[:, None])  # [D, 1]
    leads = (own > 0) & (own - means[:, tops] >= lead * own)  # [D, D]: in dataset d, d's largest head against e's
    pairs = torch.triu_indices(len(hs), len(hs), 1)
    return float((leads & leads.T)[pairs[0], pairs[1]].float().mean())


def judge_fig12_15_largest(heads: dict[str, torch.Tensor], clusters: dict[str, torch.Tensor] | None = None
                           ) -> Judgement:
    """heads: per dataset (two or more), head-level increases [N, L, H]; clusters: per dataset, each prompt's input."""
    rule = FIG12_15_LARGEST
    ours, ci = _resampled(heads, functools.partial(_largest_apart, rule["lead"]), clusters)
    verdict = REPLICATES if ours >= rule["replicates"] else PARTLY if ours > 0 else FAILS
    pairs = len(heads) * (len(heads) - 1) // 2
    largest = []
    for d, h in heads.items():
        (top,) = top_heads(h.mean(0), 1)
        largest.append(f"{d} {head_name(top)} ({float(h.mean(0)[top]):+.3f})")
    return Judgement(ours, ci, sum(len(h) for h in heads.values()), verdict,
                     f"largest head by mean increase: {', '.join(largest)}; {round(ours * pairs)} of {pairs} pairs of "
                     f"datasets differ clearly (each leads the other's by >= {rule['lead']:.0%} of its own increase, in "
                     "its own dataset)")


def fig12_15_largest(s: Evidence) -> Judgement:
    if len(s.sentence) < 2:
        return not_tested(f"{len(s.sentence)} sentence dataset(s) at hand: the largest heads of two or more are compared")
    return judge_fig12_15_largest({d: s.loc(d).head[s.rows(d)] for d in s.sentence}, {d: s.clusters([d]) for d in s.sentence})


register(Claim(id="fig12_15_largest", claim="Across the sentence datasets the largest head is different, although their top "
                                            "20 heads are similar (Appendix A, Figs. 12-15)",
               paper="top 20 heads similar on SST-2, TREC, AGNews and ETHOS, 'although the largest head is different'",
               rule="of the pairs of sentence datasets, the share whose largest heads (by mean increase) differ clearly: in "
                    "each dataset of the pair, its own largest head leads the other's by at least {lead:.0%} of its own mean "
                    "increase (the minimum effect: a near-tie is not a different head); replicates: >= {replicates:.0%} of "
                    "the pairs; partly: at least one pair; does not replicate: none (one largest head on every dataset)",
               source=f"{V1}, Appendix A, Figs. 12-15: 'The head indexes with top20 largest log probability increase are "
                      "similar in these sentence classification datasets, although the largest head is different' (l. 1153)",
               set_on=f"{RESTATED}; its measure had not been computed on any model, but notebook 01 had charted each "
                      "sentence dataset's head increases on the bundled model",
               unit="share of sentence dataset pairs whose largest heads differ", find=fig12_15_largest, notebooks=("01",),
               reads=SENTENCE_ONLY, thresholds=FIG12_15_LARGEST, views=LOCATED))
