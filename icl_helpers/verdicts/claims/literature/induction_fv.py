"""The claims on induction and function-vector heads: that induction heads exist (Olsson et al. 2022), that
ablating FV heads costs more than ablating induction heads, with and without the other type's top heads (Yin &
Steinhardt 2025), that ablating induction heads pulls few-shot accuracy to zero-shot (Crosbie & Shutova 2025), and
that the two types are distinct and FV heads later (Yin & Steinhardt)."""
from __future__ import annotations

from typing import Callable

import torch

from ....core.heads import head_name, top_heads
from ....stats import bootstrap_ci, mean_ci
from ....studies.head_sets import FV, INDUCTION, PREFIX, HeadSetStudy, chance_overlap, exclusive
from ...judgement import Judgement, Unjudgeable, all_hold
from ..registry import NO_PROMPTS, register
from .sources import CROSBIE, OLSSON, YIN, at_sizes, hits, literature_claim

INDUCTION_EXIST = {"score": 0.3, "margin": 0.1}


def judge_induction_exist(study: HeadSetStudy) -> Judgement:
    """The largest stripe score of any head, against the largest score any head reaches on the null."""
    score, null = study.scores.scores[INDUCTION], study.scores.null
    bar = float(null.max()) + INDUCTION_EXIST["margin"]
    above_null = score > bar
    strong = above_null & (score >= INDUCTION_EXIST["score"])
    best = top_heads(score, 1)[0]
    return Judgement(float(score.max()), None, None, all_hold(bool(strong.any()), bool(above_null.any())),
                     f"{int(strong.sum())} of {score.numel()} heads score at least {INDUCTION_EXIST['score']} and above "
                     f"the null's largest ({float(null.max()):.3f}) by {INDUCTION_EXIST['margin']}, "
                     f"{int(above_null.sum())} above the null's bar alone; the top head {head_name(best)} scores "
                     f"{float(score.max()):.3f}; no interval (each score averages the random sequences)")


register(literature_claim(
    id="induction_exist", reconstructed=True,
    claim="Induction heads exist in these models: heads whose attention from the second occurrence of a token goes "
          "to the token that followed its first occurrence",
    paper=f"{OLSSON}: induction heads in every model studied (small attention-only models to large ones)",
    source="only the paper's opening is at hand; the score is TransformerLens's stripe score (its code read: alpha(i, "
          "i - n + 1) on BOS + R + R), our null (BOS + R + R', no id shared) and threshold are ours",
    rule="replicates where at least one head's stripe score is at least {score} and exceeds the largest null score "
         "of any head by {margin}; partly where some head exceeds the null's bar but none reaches {score}; does not "
         "replicate otherwise",
    unit="largest stripe score (attention, at most 1)",
    find=judge_induction_exist, thresholds=INDUCTION_EXIST, reads=NO_PROMPTS))


FV_OVER_INDUCTION = {"min_gap": 0.05}


def paired_gap(study: HeadSetStudy, milder: str, harsher: str) -> Callable[[int], tuple]:
    """part(k) of `_at_sizes`: top-1 accuracy with `milder`'s first k heads ablated minus with
    `harsher`'s, per prompt (paired), its interval; holds where the interval lies above 0 and the gap
    is at least min_gap."""
    clusters = study.pooled().inputs

    def part(k: int) -> tuple:
        gap = hits(study, milder, k) - hits(study, harsher, k)
        ci = mean_ci(gap, clusters=clusters)
        mean = float(gap.mean())
        return (mean, ci, ci[0] > 0 and mean >= FV_OVER_INDUCTION["min_gap"],
                f"{mean:+.3f} ({ci[0]:+.3f} to {ci[1]:+.3f})")
    return part


def judge_fv_over_induction(study: HeadSetStudy) -> Judgement:
    pooled = study.pooled()
    return at_sizes(study, paired_gap(study, INDUCTION, FV), len(pooled.inputs),
                     f"top-1 accuracy with the top-k induction heads mean-ablated at the last position minus with the "
                     f"top-k function-vector heads, on {len(pooled.inputs)} EVAL prompts ({pooled.plain.top1:.1%} plain)")


register(literature_claim(
    id="fv_over_induction",
    claim="Ablating function-vector heads hurts few-shot accuracy more than ablating induction heads, at equal numbers "
          "of heads",
    paper=f"{YIN}: FV ablation far more harmful than induction ablation in 12 models (Pythia 70M-6.9B, GPT-2, Llama 2 "
          "7B), the gap growing with size",
    source="its code read (mean ablation of z at the last token, FV score = Todd et al.'s AIE, induction = "
          "TransformerLens's detect_head); its figures' values are not at hand. Ours: top-1 over the vocabulary on our "
          "foo/bar prompts (theirs: F1 of 5 generated tokens on 19 held-out tasks), means pooled over both label "
          "mappings, induction by the stripe score",
    rule="at each size (the paper's share of heads, then 20), the paired difference (induction ablated minus FV "
         "ablated, top-1) has its 95% interval above 0 and is at least {min_gap}: replicates at both sizes, partly at "
         "one, does not replicate at neither (Yin's gap grows with size: at 72-336 heads a small one fits their trend)",
    unit="top-1 difference, induction-ablated minus FV-ablated",
    find=judge_fv_over_induction, thresholds=FV_OVER_INDUCTION))


def judge_fv_over_induction_excluded(study: HeadSetStudy) -> Judgement:
    milder, harsher = exclusive(INDUCTION, FV), exclusive(FV, INDUCTION)
    pooled = study.pooled()
    return at_sizes(study, paired_gap(study, milder, harsher), len(pooled.inputs),
                     f"top-1 accuracy with the top-k induction heads outside the top {max(study.sizes)} FV heads "
                     f"ablated minus with the top-k FV heads outside the top {max(study.sizes)} induction heads, on "
                     f"{len(pooled.inputs)} EVAL prompts")


register(literature_claim(
    id="fv_over_induction_excluded",
    claim="With the other type's top heads excluded, ablating function-vector heads still hurts few-shot accuracy "
          "more than ablating induction heads (the gap is not carried by heads of both types)",
    paper=f"{YIN}: with exclusion, induction-only ablation is close to random, FV-only ablation still hurts",
    source="its code read (exclusion: drop the other score's top 2% from the ranking, then take the top f); ours "
          "drops the other score's top K (the largest set studied), so each exclusive set shares no head with any "
          "set of the other type",
    rule="as fv_over_induction, on the exclusive sets: at each size the paired difference has its 95% interval above "
         "0 and is at least {min_gap}",
    unit="top-1 difference, exclusive induction minus exclusive FV",
    find=judge_fv_over_induction_excluded, thresholds=FV_OVER_INDUCTION))


NEAR_ZERO_SHOT = {"lost": 0.5}


def judge_near_zero_shot(study: HeadSetStudy) -> Judgement:
    """The share of the few-shot gain over zero-shot lost with the top prefix-matching heads ablated."""
    pooled, k = study.pooled(), study.sizes[0]
    top, draws = pooled.at(PREFIX, k)
    plain, zero = pooled.plain.top1_hits.double(), pooled.zero_shot.top1_hits.double()
    random = torch.stack([d.top1_hits.double() for d in draws]).mean(0)
    rows = torch.stack([plain, top.top1_hits.double(), zero, random], 1)  # [N, 4]

    def lost(s: torch.Tensor, col: int = 1) -> float:
        gain = float(s[:, 0].mean() - s[:, 2].mean())
        return float(s[:, 0].mean() - s[:, col].mean()) / gain if gain > 0 else float("nan")
    ours = lost(rows)
    if ours != ours:
        raise Unjudgeable(f"no few-shot gain to lose: top-1 {pooled.plain.top1:.1%} few-shot, "
                          f"{pooled.zero_shot.top1:.1%} zero-shot")
    ci = bootstrap_ci([rows], lost, clusters=[pooled.inputs])
    effect = pooled.effect(PREFIX, k)
    beyond = mean_ci(effect, clusters=pooled.inputs)
    return Judgement(ours, ci, len(plain), all_hold(ci[0] >= NEAR_ZERO_SHOT["lost"], beyond[1] < 0),
                     f"the top {k} prefix-matching heads mean-ablated at the last position take top-1 from "
                     f"{float(plain.mean()):.1%} to {float(rows[:, 1].mean()):.1%} (zero-shot {float(zero.mean()):.1%}): "
                     f"{ours:.0%} of the few-shot gain lost, {lost(rows, 3):.0%} with {len(draws)} layer-matched random "
                     f"draws; beyond random {float(effect.mean()):+.3f} ({beyond[0]:+.3f} to {beyond[1]:+.3f})")


register(literature_claim(
    id="induction_near_zero_shot", reconstructed=True,
    claim="Ablating a few percent of heads, the top induction (prefix-matching) heads, pulls few-shot accuracy "
          "down to about zero-shot, and far more than ablating random heads",
    paper=f"{CROSBIE}: 1% and 3% of heads by prefix-matching score, in Llama-3-8B and InternLM2-20B; few-shot NLP "
          "accuracy falls to about zero-shot; random heads far less",
    source="its abstract and code read (prefix-matching score on four copies of random ids; mean ablation of the "
          "heads' Q, K and V at every position from 500 MNLI sequences); ours ablates z at the last position only with "
          "the SCORE prompts' mean, at the paper's share of heads (about 3%): a reconstruction",
    rule="replicates where the share of the few-shot gain over zero-shot lost (top-1) has its 95% interval at or "
         "above {lost} and the set costs more than its layer-matched random draws (the per-prompt difference's "
         "interval below 0); partly where one holds; does not replicate where neither",
    unit="share of the few-shot gain over zero-shot lost",
    find=judge_near_zero_shot, thresholds=NEAR_ZERO_SHOT))


DISTINCT = {"p": 0.05}


def judge_distinct(study: HeadSetStudy) -> Judgement:
    scores, n = study.scores.scores, study.n_layers * study.n_heads

    def part(k: int) -> tuple:
        shared = len(set(top_heads(scores[INDUCTION], k)) & set(top_heads(scores[FV], k)))
        p = chance_overlap(shared, k, n)
        return shared / k, None, p >= DISTINCT["p"], f"{shared} of {k} shared, chance {k * k / n:.1f}, p = {p:.2g}"
    return at_sizes(study, part, None, f"heads the top-k induction and top-k FV sets share, of {n}")


register(literature_claim(
    id="induction_fv_distinct",
    claim="Induction heads and function-vector heads are distinct: their top sets barely overlap",
    paper=f"{YIN}: the top induction and FV heads barely overlap (its abstract; the overlap counted against random "
          "draws in its code)",
    source="its abstract and code read; ours counts the shared heads of the two top-k sets against the exact chance of "
          "sharing as many (hypergeometric)",
    rule="at each size, the two top sets share no more heads than chance explains (the chance of sharing as many at "
         "least {p}): replicates at both sizes, partly at one, does not replicate at neither",
    unit="share of the top-k sets shared",
    find=judge_distinct, thresholds=DISTINCT, reads=NO_PROMPTS))


LATER = {"p": 0.05}
PERMUTATIONS = 10_000  # relabellings of a permutation test


def layer_gap_p(upper: torch.Tensor, lower: torch.Tensor, seed: int = 0) -> float:
    """One-sided permutation p-value of mean(upper) - mean(lower) [heads' layers], PERMUTATIONS seeded relabellings."""
    both = torch.cat([upper, lower]).double()
    g = torch.Generator().manual_seed(seed)
    perms = torch.stack([torch.randperm(len(both), generator=g) for _ in range(PERMUTATIONS)])
    shuffled = both[perms]
    gaps = shuffled[:, :len(upper)].mean(1) - shuffled[:, len(upper):].mean(1)
    observed = float(upper.double().mean() - lower.double().mean())
    return float(((gaps >= observed - 1e-9).sum() + 1) / (PERMUTATIONS + 1))


def judge_later(study: HeadSetStudy) -> Judgement:
    def part(k: int) -> tuple:
        sets = study.sets(k, (FV, INDUCTION))
        fv, ind = (torch.tensor([float(l) for l, _ in sets[name]]) for name in (FV, INDUCTION))
        gap, p = float(fv.mean() - ind.mean()), layer_gap_p(fv, ind)
        return gap, None, gap > 0 and p < LATER["p"], f"mean layer {float(fv.mean()):.1f} FV, {float(ind.mean()):.1f} induction, p = {p:.2g}"
    return at_sizes(study, part, None, f"mean layer of the top-k FV heads minus the top-k induction heads' "
                     f"({study.n_layers} layers; a one-sided permutation test over the two sets' heads)")


register(literature_claim(
    id="fv_later_than_induction", reconstructed=True,
    claim="Function-vector heads sit in later layers than induction heads",
    paper=f"{YIN}: induction heads appear in earlier layers than FV heads",
    source="its abstract and a third-party summary; ours compares the mean layer of the two top-k sets",
    rule="at each size, the FV set's mean layer exceeds the induction set's with a one-sided permutation p below {p}: "
         "replicates at both sizes, partly at one, does not replicate at neither",
    unit="layers, FV mean minus induction mean",
    find=judge_later, thresholds=LATER, reads=NO_PROMPTS))
