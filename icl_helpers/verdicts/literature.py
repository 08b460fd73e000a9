"""Claims of the literature on which heads carry in-context learning, judged on our head sets as the
paper's claims are judged on its heads: a registry of its own, `LITERATURE`, apart from the paper's
`claims.CLAIMS`.

Each `LiteratureClaim` cites its paper by name, says what of it we hold (its code, its text, or only its
abstract or a summary: then our measure is a reconstruction of theirs, and says so), and fixes its rule
and thresholds here, and says when (`RULES_SET`: after one trial run had been seen, which it says;
`TR_TL_RULES_SET` for Yang et al.'s, before any of their data had been seen). A judge reads a
`studies.head_sets.HeadSetStudy` and returns a `Judgement`: intervals are 95% bootstrap intervals over
the distinct inputs of the word datasets' EVAL prompts pooled (`stats.mean_ci` with clusters); a
claim judged at the study's two set sizes (the paper's share of heads, then K) holds at both
(replicates), at one (partly) or at neither (does not replicate), its headline number the first's.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..core.heads import head_name, top_heads
from ..data.setting import MAIN, Setting
from ..errors import Unjudgeable
from ..model.adapters.base import Arch
from ..stats import MIN_CLUSTERS, bootstrap_ci, mean_ci, spearman
from ..studies.head_sets import (
    FV,
    INDUCTION,
    PREFIX,
    TL,
    TR,
    HeadSetStudy,
    chance_overlap,
    exclusive,
)
from ..studies.head_types import input_halves
from ..studies.set_ablations import RANKED, TR_RATIO
from .evidence import WORD, paper_share_heads
from .judgement import Judgement, all_hold, not_tested, ours_text
from .rules import K

RULES_SET = ("2026-11-27 (issue 58), after one 32-prompt trial run of the head sets on the bundled model had been "
             "seen (its scores, overlaps and ablation curves), before any run at the committed sizes or on another model")
OLSSON = "Olsson et al. 2022, \"In-context learning and induction heads\" (arXiv 2209.11895)"
CROSBIE = ("Crosbie & Shutova 2025, \"Induction heads as an essential mechanism for pattern matching in in-context "
           "learning\" (arXiv 2407.07011)")
YIN = "Yin & Steinhardt 2025, \"Which attention heads matter for in-context learning?\" (ICML 2025, arXiv 2502.14010)"
YANG = "Yang, Cho & Inoue 2025 (ICLR 2026, arXiv 2509.24164), task-recognition and task-learning heads"
TR_TL_RULES_SET = ("2026-11-27 (issue 58), with the task-recognition and task-learning scores, before any of their "
                   "numbers or any ablation of their sets had been seen, on any model or size")
PERMUTATIONS = 10_000  # relabellings of a permutation test


def set_sizes(arch: Arch) -> tuple[int, int]:
    """The two set sizes every claim reads: the paper's share of the model's heads (20 of GPT-2 large's
    720, `evidence.paper_share_heads`), then K (20)."""
    return paper_share_heads(arch), K


@dataclass(frozen=True, kw_only=True)
class LiteratureClaim:
    """One claim of a paper other than Yu & Ananiadou's, and how we judge it on our head sets."""

    id: str
    claim: str  # the claim, in the paper's sense
    paper: str  # the paper by name and its number, as it gives it
    holds: str  # what of the paper is at hand, and whether our measure is theirs or a reconstruction
    reconstructed: bool  # our measure is rebuilt from a description, not the paper's own code or text
    rule: str  # the verdict rule, written from `thresholds`
    unit: str  # what our number is
    judge: Callable[[HeadSetStudy], Judgement] = field(repr=False)
    thresholds: dict[str, float] = field(default_factory=dict)
    reads_prompts: bool = True  # judged on the EVAL prompts (with an interval that needs MIN_CLUSTERS inputs)
    set_on: str = RULES_SET
    notebooks: tuple[str, ...] = ("09",)  # the notebooks that end with its verdict

    def __post_init__(self):
        object.__setattr__(self, "rule", self.rule.format(**self.thresholds))


LITERATURE: dict[str, LiteratureClaim] = {}  # id -> claim, in the order they are registered


def register(claim: LiteratureClaim) -> LiteratureClaim:
    """Add `claim` to LITERATURE (its id must be new, and none of the paper's `CLAIMS`)."""
    if claim.id in LITERATURE:
        raise ValueError(f"claim {claim.id!r} is registered twice")
    LITERATURE[claim.id] = claim
    return claim


@dataclass(frozen=True)
class LiteratureFinding:
    """A claim of the literature with our judgement of it."""

    claim: LiteratureClaim
    judgement: Judgement

    @property
    def id(self) -> str:
        return self.claim.id

    @property
    def verdict(self) -> str:
        return self.judgement.verdict


def claims_of(notebook: str) -> list[str]:
    """The ids of the literature's claims notebook `notebook` ("09") ends with, in registry order."""
    return [c.id for c in LITERATURE.values() if notebook in c.notebooks]


def judged(study: HeadSetStudy, ids: Sequence[str] | None = None) -> list[LiteratureFinding]:
    """Each claim (all of LITERATURE, or those of `ids`) judged on the study; "not tested" with the
    reason where its data cannot judge it (too few distinct inputs)."""
    out = []
    for id in ids or list(LITERATURE):
        try:
            judgement = LITERATURE[id].judge(study)
        except Unjudgeable as e:
            judgement = not_tested(str(e))
        out.append(LiteratureFinding(LITERATURE[id], judgement))
    return out


def markdown(findings: Sequence[LiteratureFinding]) -> str:
    """The findings as one markdown table, then each claim's why, rule and what of its paper we hold."""
    rows = ["| id | claim of the literature | paper | ours (95% CI) | N | verdict |", "|---|---|---|---|---|---|"]
    rows += [f"| {f.id} | {f.claim.claim} | {f.claim.paper} | {ours_text(f.judgement)} | "
             f"{f.judgement.n if f.judgement.n is not None else '-'} | {f.verdict} |" for f in findings]
    why = [f"- **{f.id}** ({f.verdict}): {f.judgement.why}. Rule: {f.claim.rule} (set {f.claim.set_on}). "
           f"Source: {f.claim.holds}." for f in findings]
    return "\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why) + "\n"


@functools.cache
def fewest_prompts(seed: int = 0, setting: Setting = MAIN, most: int = 1000) -> int:
    """The fewest word prompts a dataset at which the word datasets' EVAL halves pooled (`input_halves`)
    hold MIN_CLUSTERS distinct inputs, which the claims' intervals need."""
    def enough(n: int) -> bool:
        inputs = set()
        for d in WORD:
            records = setting.records(d, n, seed)
            held = ~input_halves(records, seed)
            inputs |= {(d, r.input) for r, h in zip(records, held.tolist()) if h}
        return len(inputs) >= MIN_CLUSTERS
    return next((n for n in range(2, most) if enough(n)), most)


# --- the rules ----------------------------------------------------------------------------------


def _hits(study: HeadSetStudy, name: str, k: int) -> torch.Tensor:
    """[N] float: top-1 hits of the pooled word EVAL prompts with the set's first k heads ablated."""
    return study.pooled().at(name, k)[0].top1_hits.double()


def _at_sizes(study: HeadSetStudy, part: Callable[[int], tuple[float, tuple[float, float] | None, bool, str]],
              n: int | None, what: str) -> Judgement:
    """A claim judged at each of the study's sizes by part(k) -> (ours, ci, holds, why): replicates where
    it holds at every size, partly at some, does not replicate at none; the first size's number headlines."""
    parts = {k: part(k) for k in study.sizes}
    first = parts[study.sizes[0]]
    why = "; ".join(f"k = {k}: {w} ({'holds' if h else 'does not hold'})" for k, (_, _, h, w) in parts.items())
    return Judgement(first[0], first[1], n, all_hold(*(h for _, _, h, _ in parts.values())), f"{what}; {why}")


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


register(LiteratureClaim(
    id="induction_exist",
    claim="Induction heads exist in these models: heads whose attention from the second occurrence of a token goes "
          "to the token that followed its first occurrence",
    paper=f"{OLSSON}: induction heads in every model studied (small attention-only models to large ones)",
    holds="only the paper's opening is at hand; the score is TransformerLens's stripe score (its code read: alpha(i, "
          "i - n + 1) on BOS + R + R), our null (BOS + R + R', no id shared) and threshold are ours",
    reconstructed=True,
    rule="replicates where at least one head's stripe score is at least {score} and exceeds the largest null score "
         "of any head by {margin}; partly where some head exceeds the null's bar but none reaches {score}; does not "
         "replicate otherwise",
    unit="largest stripe score (attention, at most 1)",
    judge=judge_induction_exist, thresholds=INDUCTION_EXIST, reads_prompts=False))


FV_OVER_INDUCTION = {"min_gap": 0.05}


def paired_gap(study: HeadSetStudy, milder: str, harsher: str) -> Callable[[int], tuple]:
    """part(k) of `_at_sizes`: top-1 accuracy with `milder`'s first k heads ablated minus with
    `harsher`'s, per prompt (paired), its interval; holds where the interval lies above 0 and the gap
    is at least min_gap."""
    clusters = study.pooled().inputs

    def part(k: int) -> tuple:
        gap = _hits(study, milder, k) - _hits(study, harsher, k)
        ci = mean_ci(gap, clusters=clusters)
        mean = float(gap.mean())
        return (mean, ci, ci[0] > 0 and mean >= FV_OVER_INDUCTION["min_gap"],
                f"{mean:+.3f} ({ci[0]:+.3f} to {ci[1]:+.3f})")
    return part


def judge_fv_over_induction(study: HeadSetStudy) -> Judgement:
    pooled = study.pooled()
    return _at_sizes(study, paired_gap(study, INDUCTION, FV), len(pooled.inputs),
                     f"top-1 accuracy with the top-k induction heads mean-ablated at the last position minus with the "
                     f"top-k function-vector heads, on {len(pooled.inputs)} EVAL prompts ({pooled.plain.top1:.1%} plain)")


register(LiteratureClaim(
    id="fv_over_induction",
    claim="Ablating function-vector heads hurts few-shot accuracy more than ablating induction heads, at equal numbers "
          "of heads",
    paper=f"{YIN}: FV ablation far more harmful than induction ablation in 12 models (Pythia 70M-6.9B, GPT-2, Llama 2 "
          "7B), the gap growing with size",
    holds="its code read (mean ablation of z at the last token, FV score = Todd et al.'s AIE, induction = "
          "TransformerLens's detect_head); its figures' values are not at hand. Ours: top-1 over the vocabulary on our "
          "foo/bar prompts (theirs: F1 of 5 generated tokens on 19 held-out tasks), means pooled over both label "
          "mappings, induction by the stripe score",
    reconstructed=False,
    rule="at each size (the paper's share of heads, then 20), the paired difference (induction ablated minus FV "
         "ablated, top-1) has its 95% interval above 0 and is at least {min_gap}: replicates at both sizes, partly at "
         "one, does not replicate at neither (Yin's gap grows with size: at 72-336 heads a small one fits their trend)",
    unit="top-1 difference, induction-ablated minus FV-ablated",
    judge=judge_fv_over_induction, thresholds=FV_OVER_INDUCTION))


def judge_fv_over_induction_excluded(study: HeadSetStudy) -> Judgement:
    milder, harsher = exclusive(INDUCTION, FV), exclusive(FV, INDUCTION)
    pooled = study.pooled()
    return _at_sizes(study, paired_gap(study, milder, harsher), len(pooled.inputs),
                     f"top-1 accuracy with the top-k induction heads outside the top {max(study.sizes)} FV heads "
                     f"ablated minus with the top-k FV heads outside the top {max(study.sizes)} induction heads, on "
                     f"{len(pooled.inputs)} EVAL prompts")


register(LiteratureClaim(
    id="fv_over_induction_excluded",
    claim="With the other type's top heads excluded, ablating function-vector heads still hurts few-shot accuracy "
          "more than ablating induction heads (the gap is not carried by heads of both types)",
    paper=f"{YIN}: with exclusion, induction-only ablation is close to random, FV-only ablation still hurts",
    holds="its code read (exclusion: drop the other score's top 2% from the ranking, then take the top f); ours "
          "drops the other score's top K (the largest set studied), so each exclusive set shares no head with any "
          "set of the other type",
    reconstructed=False,
    rule="as fv_over_induction, on the exclusive sets: at each size the paired difference has its 95% interval above "
         "0 and is at least {min_gap}",
    unit="top-1 difference, exclusive induction minus exclusive FV",
    judge=judge_fv_over_induction_excluded, thresholds=FV_OVER_INDUCTION))


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


register(LiteratureClaim(
    id="induction_near_zero_shot",
    claim="Ablating a few percent of heads, the top induction (prefix-matching) heads, pulls few-shot accuracy "
          "down to about zero-shot, and far more than ablating random heads",
    paper=f"{CROSBIE}: 1% and 3% of heads by prefix-matching score, in Llama-3-8B and InternLM2-20B; few-shot NLP "
          "accuracy falls to about zero-shot; random heads far less",
    holds="its abstract and code read (prefix-matching score on four copies of random ids; mean ablation of the "
          "heads' Q, K and V at every position from 500 MNLI sequences); ours ablates z at the last position only with "
          "the SCORE prompts' mean, at the paper's share of heads (about 3%): a reconstruction",
    reconstructed=True,
    rule="replicates where the share of the few-shot gain over zero-shot lost (top-1) has its 95% interval at or "
         "above {lost} and the set costs more than its layer-matched random draws (the per-prompt difference's "
         "interval below 0); partly where one holds; does not replicate where neither",
    unit="share of the few-shot gain over zero-shot lost",
    judge=judge_near_zero_shot, thresholds=NEAR_ZERO_SHOT))


DISTINCT = {"p": 0.05}


def judge_distinct(study: HeadSetStudy) -> Judgement:
    scores, n = study.scores.scores, study.n_layers * study.n_heads

    def part(k: int) -> tuple:
        shared = len(set(top_heads(scores[INDUCTION], k)) & set(top_heads(scores[FV], k)))
        p = chance_overlap(shared, k, n)
        return shared / k, None, p >= DISTINCT["p"], f"{shared} of {k} shared, chance {k * k / n:.1f}, p = {p:.2g}"
    return _at_sizes(study, part, None, f"heads the top-k induction and top-k FV sets share, of {n}")


register(LiteratureClaim(
    id="induction_fv_distinct",
    claim="Induction heads and function-vector heads are distinct: their top sets barely overlap",
    paper=f"{YIN}: the top induction and FV heads barely overlap (its abstract; the overlap counted against random "
          "draws in its code)",
    holds="its abstract and code read; ours counts the shared heads of the two top-k sets against the exact chance of "
          "sharing as many (hypergeometric)",
    reconstructed=False,
    rule="at each size, the two top sets share no more heads than chance explains (the chance of sharing as many at "
         "least {p}): replicates at both sizes, partly at one, does not replicate at neither",
    unit="share of the top-k sets shared",
    judge=judge_distinct, thresholds=DISTINCT, reads_prompts=False))


LATER = {"p": 0.05}


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
    return _at_sizes(study, part, None, f"mean layer of the top-k FV heads minus the top-k induction heads' "
                     f"({study.n_layers} layers; a one-sided permutation test over the two sets' heads)")


register(LiteratureClaim(
    id="fv_later_than_induction",
    claim="Function-vector heads sit in later layers than induction heads",
    paper=f"{YIN}: induction heads appear in earlier layers than FV heads",
    holds="its abstract and a third-party summary; ours compares the mean layer of the two top-k sets",
    reconstructed=True,
    rule="at each size, the FV set's mean layer exceeds the induction set's with a one-sided permutation p below {p}: "
         "replicates at both sizes, partly at one, does not replicate at neither",
    unit="layers, FV mean minus induction mean",
    judge=judge_later, thresholds=LATER, reads_prompts=False))


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


register(LiteratureClaim(
    id="tr_tl_roles",
    claim="Ablating task-recognition heads drops the TR ratio (the share of predictions that are one of the prompt's "
          "labels) far more than ablating task-learning heads or random heads, while ablating task-learning heads "
          "costs accuracy within the label set",
    paper=f"{YANG}: in Llama3-8B, ablating the top 3% TR heads takes the TR ratio from about 100% to about 20%; "
          "ablating the top 3% TL heads costs about 30 points of accuracy and about 10 of TR ratio; a random 3% does little",
    holds="only a third-party summary of the paper is at hand (its code is not): TR = the norm of a head's output at the "
          "last position projected onto the span of the candidate labels' unembeddings, TL = its gold-minus-wrong "
          "direct logit over TR; ours reads the output through the frozen final norm, with our two labels (a plane), "
          "averaged over the correctly answered SCORE prompts, and ablates by the pooled mean at the last position "
          "(a reviewer describes theirs as randomising head outputs)",
    reconstructed=True,
    rule="at each size (the paper's share of heads, then 20), on the pooled word EVAL prompts with layer-matched random "
         "draws: the recognition branch holds where ablating the top TR heads lowers the TR ratio beyond random by at "
         "least {tr_drop} (interval below 0) and by at least {tr_gap} more than ablating the top TL heads (paired, "
         "interval above 0); the learning branch holds where ablating the top TL heads lowers ranked accuracy (the gold "
         "label above the other) beyond random by at least {within_drop} (interval below 0). Replicates where both "
         "branches hold at both sizes, partly where some do, does not replicate where none does",
    unit="TR ratio with the top TR heads ablated minus random draws (first size)",
    judge=judge_tr_tl, thresholds=TR_TL, set_on=TR_TL_RULES_SET))


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
    return _at_sizes(study, part, None, f"Spearman's rho over all {study.n_layers * study.n_heads} heads with the "
                     f"induction score: TR {rho_tr:+.3f}, TL {rho_tl:+.3f}")


register(LiteratureClaim(
    id="tr_overlaps_induction",
    claim="Task-recognition heads overlap induction heads more than task-learning heads do",
    paper=f"{YANG}: TR heads overlap induction heads more than TL heads do (Jaccard, Kendall, Spearman), and ablating "
          "induction heads looks like ablating TR heads",
    holds="only a third-party summary of the paper is at hand; ours: the TR and TL scores as in tr_tl_roles, induction "
          "by the stripe score on random token sequences",
    reconstructed=True,
    rule="at each size, the top TR set shares more heads with the top induction set than the top TL set does, and "
         "Spearman's rho of the TR score with the induction score over all heads exceeds the TL score's by at least "
         "{min_rho_gap}: replicates at both sizes, partly at one, does not replicate at neither",
    unit="Spearman's rho with the induction score, TR minus TL",
    judge=judge_tr_induction, thresholds=TR_INDUCTION, reads_prompts=False, set_on=TR_TL_RULES_SET))
