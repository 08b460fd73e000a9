"""Yang, Cho & Inoue's claims on task-recognition and task-learning heads: their roles when each set is
ablated, and how TR heads overlap induction heads."""
from __future__ import annotations

from ....core.heads import top_heads
from ....stats import mean_ci, spearman
from ....studies.head_sets import INDUCTION, TL, TR, HeadSetStudy
from ....studies.set_ablations import RANKED, TR_RATIO
from ...judgement import Judgement, all_hold
from ..registry import NO_PROMPTS, register
from .sources import TR_TL_RULES_SET, YANG, at_sizes, literature_claim

TR_TL = {"tr_drop": 0.2, "tr_gap": 0.1, "within_drop": 0.1}


def tr_tl_branches(study: HeadSetStudy, k: int) -> tuple[tuple, tuple]:
    """At size k, on the pooled word EVAL prompts: the recognition branch (the TR ratio with the top-k
    TR heads ablated minus its layer-matched draws' mean, its interval, and the paired TR-ratio gap TL
    ablated minus TR ablated, its interval) and the learning branch (ranked accuracy, the gold label
    above the other, with the top-k TL heads ablated minus its draws' mean, its interval), each as
    (number, interval, holds, why)."""
    pooled = study.pooled()
    clusters = pooled.inputs
    drop = pooled.effect(TR, k, TR_RATIO)
    gap = (pooled.hits(pooled.at(TL, k)[0], TR_RATIO).double() - pooled.hits(pooled.at(TR, k)[0], TR_RATIO).double())
    within = pooled.effect(TL, k, RANKED)
    (d_lo, d_hi), (g_lo, g_hi), (w_lo, w_hi) = (mean_ci(x, clusters=clusters) for x in (drop, gap, within))
    d, g, w = float(drop.mean()), float(gap.mean()), float(within.mean())
    recognition = (d, (d_lo, d_hi), d_hi < 0 and d <= -TR_TL["tr_drop"] and g_lo > 0 and g >= TR_TL["tr_gap"],
                   f"TR ratio beyond random with the TR heads ablated {d:+.3f} ({d_lo:+.3f} to {d_hi:+.3f}), "
                   f"TL ablated minus TR ablated {g:+.3f} ({g_lo:+.3f} to {g_hi:+.3f})")
    learning = (w, (w_lo, w_hi), w_hi < 0 and w <= -TR_TL["within_drop"],
                f"ranked accuracy beyond random with the TL heads ablated {w:+.3f} ({w_lo:+.3f} to {w_hi:+.3f})")
    return recognition, learning


def judge_tr_tl(study: HeadSetStudy) -> Judgement:
    """Both branches at both sizes: replicates where all four hold, partly where some do."""
    pooled = study.pooled()
    parts = {k: tr_tl_branches(study, k) for k in study.sizes}
    first = parts[study.sizes[0]][0]
    why = "; ".join(f"k = {k}: {r[3]} ({'holds' if r[2] else 'does not hold'}); {t[3]} ({'holds' if t[2] else 'does not hold'})"
                    for k, (r, t) in parts.items())
    return Judgement(first[0], first[1], len(pooled.inputs), all_hold(*(b[2] for r, t in parts.values() for b in (r, t))),
                     f"mean ablation at the last position on {len(pooled.inputs)} EVAL prompts (plain: TR ratio "
                     f"{pooled.tr_ratio(pooled.plain):.1%}, top-1 {pooled.plain.top1:.1%}, ranked {pooled.plain.ranked:.1%}); "
                     f"{why}")


register(literature_claim(
    id="tr_tl_roles", reconstructed=True,
    claim="Ablating task-recognition heads drops the TR ratio (the share of predictions that are one of the prompt's "
          "labels) far more than ablating task-learning heads or random heads, while ablating task-learning heads "
          "costs accuracy within the label set",
    paper=f"{YANG}: in Llama3-8B, ablating the top 3% TR heads takes the TR ratio from about 100% to about 20%; "
          "ablating the top 3% TL heads costs about 30 points of accuracy and about 10 of TR ratio; a random 3% does little",
    source="only a third-party summary of the paper is at hand (its code is not): TR = the norm of a head's output at the "
          "last position projected onto the span of the candidate labels' unembeddings, TL = its gold-minus-wrong "
          "direct logit over TR; ours reads the output through the frozen final norm, with our two labels (a plane), "
          "averaged over the correctly answered SCORE prompts, and ablates by the pooled mean at the last position "
          "(a reviewer describes theirs as randomising head outputs)",
    rule="at each size (the paper's share of heads, then 20), on the pooled word EVAL prompts with layer-matched random "
         "draws: the recognition branch holds where ablating the top TR heads lowers the TR ratio beyond random by at "
         "least {tr_drop} (interval below 0) and by at least {tr_gap} more than ablating the top TL heads (paired, "
         "interval above 0); the learning branch holds where ablating the top TL heads lowers ranked accuracy (the gold "
         "label above the other) beyond random by at least {within_drop} (interval below 0). Replicates where both "
         "branches hold at both sizes, partly where some do, does not replicate where none does",
    unit="TR ratio with the top TR heads ablated minus random draws (first size)",
    find=judge_tr_tl, thresholds=TR_TL, set_on=TR_TL_RULES_SET))


TR_INDUCTION = {"min_rho_gap": 0.1}


def judge_tr_induction(study: HeadSetStudy) -> Judgement:
    scores = study.scores.scores
    rho_tr, rho_tl = spearman(scores[TR], scores[INDUCTION]), spearman(scores[TL], scores[INDUCTION])
    rho_gap = rho_tr - rho_tl

    def part(k: int) -> tuple:
        induction = set(top_heads(scores[INDUCTION], k))
        tr, tl = (len(set(top_heads(scores[name], k)) & induction) for name in (TR, TL))
        return (rho_gap, None, tr > tl and rho_gap >= TR_INDUCTION["min_rho_gap"],
                f"the top-{k} induction set shares {tr} heads with the TR set, {tl} with the TL set")
    return at_sizes(study, part, None, f"Spearman's rho over all {study.n_layers * study.n_heads} heads with the "
                     f"induction score: TR {rho_tr:+.3f}, TL {rho_tl:+.3f}")


register(literature_claim(
    id="tr_overlaps_induction", reconstructed=True,
    claim="Task-recognition heads overlap induction heads more than task-learning heads do",
    paper=f"{YANG}: TR heads overlap induction heads more than TL heads do (Jaccard, Kendall, Spearman), and ablating "
          "induction heads looks like ablating TR heads",
    source="only a third-party summary of the paper is at hand; ours: the TR and TL scores as in tr_tl_roles, induction "
          "by the stripe score on random token sequences",
    rule="at each size, the top TR set shares more heads with the top induction set than the top TL set does, and "
         "Spearman's rho of the TR score with the induction score over all heads exceeds the TL score's by at least "
         "{min_rho_gap}: replicates at both sizes, partly at one, does not replicate at neither",
    unit="Spearman's rho with the induction score, TR minus TL",
    find=judge_tr_induction, thresholds=TR_INDUCTION, reads=NO_PROMPTS, set_on=TR_TL_RULES_SET))
