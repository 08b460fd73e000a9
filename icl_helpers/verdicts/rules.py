"""The verdict rules: each rule's thresholds (which the claim's prose in `claims` and its
judge here both read) and the judge that applies it to a study's per-prompt results.

A judge takes tensors (one row a prompt) and returns a `Judgement`; `claims` names the
claim. K, RANDOM_DRAWS and TOP are the protocol every rule shares."""
from __future__ import annotations

from typing import Sequence

import torch

from ..core.heads import Head, top_heads
from ..data.setting import MAIN
from ..stats import bootstrap_ci, mean_ci, spearman
from ..studies.ablation import AblationRuns
from ..studies.label_attention import true_vs_false, variant_change
from ..studies.recency import Effects
from ..studies.subvalues import FALSE_LABEL, POSITION_KINDS, TRUE_LABEL, kind_shares
from .judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold, ours_text, together

K = MAIN.heads  # in-context heads (20; a robustness setting analyses its own number, `data.setting`)
RANDOM_DRAWS = 20  # layer-matched random-head draws (Fig. 5, the causal check)
TOP = 10  # tokens a projected vector (Tables 1, 3)

TABLE2 = {"cell": 0.8, "false_nearest": 0.5, "pooled": 0.5}
FIG2 = {"deep": 0.5}
TABLE1 = {"share": 0.5}
FIG3_4 = {"replicates": 0.8, "partly": 0.5}
FIG12_15 = {"replicates": 0.5, "partly": 0.25}
FIG5 = {"percentile": 95, "heads": 0.75}
FIG6 = {"heads": 0.75}
FIG7 = {"rho": 0.3}
FIG9 = {"heads": 0.9}
APP_E = {"share": 0.5}
CAUSAL = {"percentile": 5, "fraction": 0.5}
MAJORITY_BIAS = {"paper": 0.22, "at_least": 0.22 / 2}  # the paper's reduction, and half of it
RECENCY_BIAS = {"paper": 0.17, "at_least": 0.17 / 2}


def judge_table2(correct: dict[str, torch.Tensor], false_nearest: torch.Tensor) -> Judgement:
    """correct: per cell (e.g. "number inputs, true label foo"), [N] bool top-1 hits;
    false_nearest: [M] bool top-1 hits on the recency family's prompts whose nearest
    demonstration is false (`studies.recency`)."""
    pooled = torch.cat(list(correct.values())).double()
    cells = {name: float(c.double().mean()) for name, c in correct.items()}
    ours = float(pooled.mean())
    ci = bootstrap_ci(list(correct.values()), lambda *cs: torch.cat(cs).double().mean())
    far = float(false_nearest.double().mean())
    verdict = (REPLICATES if min(cells.values()) >= TABLE2["cell"] and far >= TABLE2["false_nearest"] else
               PARTLY if ours >= TABLE2["pooled"] else FAILS)
    worst = min(cells, key=cells.get)
    return Judgement(ours, ci, len(pooled), verdict,
                     f"pooled top-1 over {len(cells)} cells; lowest cell {worst}: {cells[worst]:.0%}; top-1 {far:.0%} on "
                     f"the {len(false_nearest)} recency-family prompts whose nearest demonstration is false")


def judge_fig2(attn: torch.Tensor, ffn: torch.Tensor) -> Judgement:
    """attn, ffn: [N, L] layer-level increases of N prompts."""
    L = attn.shape[1]
    diff = attn.sum(1) - ffn.sum(1)
    ci = mean_ci(diff)
    total = float(attn.sum())
    deep = float(attn[:, L // 2:].sum()) / total if total > 0 else float("nan")
    verdict = REPLICATES if ci[0] > 0 and deep > FIG2["deep"] else FAILS if ci[1] < 0 else PARTLY
    share = f"{deep:.0%}" if total > 0 else "none (the attention layers' total is not positive)"
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"ours is the mean over prompts of (summed attention-layer increase - summed FFN increase): "
                     f"attention {float(attn.sum(1).mean()):+.2f}, FFN {float(ffn.sum(1).mean()):+.2f} a prompt; "
                     f"deeper half's share of the attention increase {share}; the paper shows one prompt, we average N")


def _deep_share(head: torch.Tensor, k: int) -> float:
    """Share of the top k heads of head [N, L, H] in the deeper half of the layers."""
    L = head.shape[1]
    return sum(l >= L / 2 for l, _ in top_heads(head.mean(0), k)) / k


def _head_sets(heads: dict[str, torch.Tensor], statistic, rule: dict[str, float], why: str) -> Judgement:
    """A statistic of the datasets' top heads (resampled 200 times: each re-ranks every head),
    judged by the rule's two thresholds."""
    ours = statistic(*heads.values())
    ci = bootstrap_ci(list(heads.values()), statistic, draws=200)
    verdict = REPLICATES if ours >= rule["replicates"] else PARTLY if ours >= rule["partly"] else FAILS
    return Judgement(ours, ci, sum(len(h) for h in heads.values()), verdict, why)


def judge_fig3_4(heads: dict[str, torch.Tensor], k: int = K) -> Judgement:
    """heads: per dataset, head-level increases [N, L, H]."""
    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, lambda *hs: sum(_deep_share(h, k) for h in hs) / len(hs), FIG3_4,
                      f"share of each dataset's top {k} in layers >= {L / 2:g} of {L}, mean over {len(heads)} datasets; "
                      f"top {k} of {L * H} heads is {k / (L * H):.1%} (paper 2.8%)")


def judge_fig12_15(heads: dict[str, torch.Tensor], k: int = K) -> Judgement:
    """heads: per dataset (two or more), head-level increases [N, L, H]."""
    def shared(*hs: torch.Tensor) -> float:
        tops = [set(top_heads(h.mean(0), k)) for h in hs]
        pairs = [(a, b) for i, a in enumerate(tops) for b in tops[i + 1:]]
        return sum(len(a & b) for a, b in pairs) / len(pairs) / k

    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, shared, FIG12_15,
                      f"mean share of top {k} heads two of {len(heads)} datasets have in common ({', '.join(heads)}); "
                      f"chance {k / (L * H):.1%}")


def judge_label_values(hits: torch.Tensor, heads: Sequence[Head], where: str, example: str) -> Judgement:
    """hits: [N, S] bool, the top S (5) heads in order: every label value of a prompt ranks
    its own label token among the top TOP of the vocabulary; example: the paper's one-prompt
    illustration, in words."""
    cis = [mean_ci(h.double()) for h in hits.T]
    above = [ci[0] > TABLE1["share"] for ci in cis]
    verdict = REPLICATES if above[0] else PARTLY if any(above) else FAILS
    shown = ", ".join(f"{l}-{h}: {float(x.double().mean()):.0%}" for (l, h), x in zip(heads, hits.T))
    return Judgement(float(hits[:, 0].double().mean()), cis[0], len(hits), verdict,
                     f"{where}: share of prompts whose every label value ranks its own label token in the top {TOP} "
                     f"of the vocabulary, top 5 heads: {shown}; {example}")


def judge_fig5(mrr: torch.Tensor, random_mrr: torch.Tensor, heads: Sequence[Head]) -> Judgement:
    """mrr: [N, S] reciprocal rank a prompt (mean over its labels) in the S in-context heads;
    random_mrr: [D, N, S] the same for D draws of a random head of each one's layer."""
    ours = float(mrr.mean())
    ci = mean_ci(mrr)
    draws = random_mrr.mean((1, 2))  # [D]
    p95 = float(torch.quantile(draws.double(), FIG5["percentile"] / 100))
    above = int((mrr.mean(0) > random_mrr.mean((0, 1))).sum())
    verdict = all_hold(ci[0] > p95, above >= FIG5["heads"] * len(heads))
    return Judgement(ours, ci, len(mrr), verdict,
                     f"mean MRR of {len(heads)} in-context heads against {len(draws)} layer-matched random draws "
                     f"(mean {float(draws.mean()):.4f}, {FIG5['percentile']}th percentile {p95:.4f}); {above}/{len(heads)} heads above "
                     f"their layer's random mean")


def judge_fig6(true: torch.Tensor, false: torch.Tensor, family: Effects) -> Judgement:
    """true, false: [N, S] summed attention on true / false labels in S in-context heads;
    family: the recency family's truth and distance effects on the same datasets."""
    diff = (true - false).mean(1)
    ci = mean_ci(diff)
    c = true_vs_false(true, false)
    verdict = all_hold(ci[0] > 0, c.heads_true_above >= FIG6["heads"] * c.heads, family.truth_ci[0] > 0)
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"mean summed attention true {c.true:.3f}, false {c.false:.3f}; true > false in "
                     f"{c.heads_true_above}/{c.heads} heads; the balanced prompt puts the true labels nearest the input, "
                     f"so the recency family separates the two: {family.text()}")


def judge_fig7(attention: torch.Tensor, increase: torch.Tensor, summed: tuple[torch.Tensor, torch.Tensor]) -> Judgement:
    """attention, increase: [N, S, K] each label position's attention weight in each top head
    and the position-level increase of its subvalue (NaN past a prompt's labels); summed: ours
    beside it, ([N, S], [N, S]) a head's summed true-label attention and the whole head's increase."""
    pairs = torch.stack([attention, increase], -1)  # [N, S, K, 2]: resampled together, by prompt

    def rho(p: torch.Tensor) -> float:
        kept = p[~p[..., 0].isnan()]  # [pairs, 2]
        return spearman(kept[:, 0], kept[:, 1])
    ours, ci = rho(pairs), bootstrap_ci([pairs], rho)
    verdict = REPLICATES if ours >= FIG7["rho"] and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return Judgement(ours, ci, len(pairs), verdict,
                     f"Spearman over {int((~attention.isnan()).sum())} (prompt, head, label position) triples of the top "
                     f"{attention.shape[1]} heads, each position's attention weight against its subvalue's increase (the "
                     f"paper's Fig. 7); ours beside it, a head's summed true-label attention against the whole head's "
                     f"increase: {spearman(*summed):.3f}")


def _change(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor]):
    """Per prompt, the mean change over heads of true- and of false-label attention, [N] each;
    before and after are (true, false) [N, S] on the same records."""
    return (after[0] - before[0]).mean(1), (after[1] - before[1]).mean(1)


def judge_fig8(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor],
               per_label: tuple[torch.Tensor, torch.Tensor]) -> Judgement:
    """Balanced (true, false) [N, S] against imbalanced prompts of the same records;
    per_label: the mean attention a true-label position gets, [N, S], balanced then imbalanced."""
    dt, df = _change(before, after)
    ci_t, ci_f = mean_ci(dt), mean_ci(df)
    dp = (per_label[1] - per_label[0]).mean(1)
    ci_p = mean_ci(dp)
    return Judgement(float(dt.mean()), ci_t, len(dt), all_hold(ci_t[1] < 0, ci_f[0] > 0, ci_p[0] <= 0),
                     f"ours: mean change of summed true-label attention; false-label change {float(df.mean()):+.3f} "
                     f"(CI {ci_f[0]:+.3f} to {ci_f[1]:+.3f}); per true-label position {float(per_label[0].mean()):.3f} "
                     f"-> {float(per_label[1].mean()):.3f} (change CI {ci_p[0]:+.3f} to {ci_p[1]:+.3f}): the sum covers "
                     f"one true label instead of two, so it can drop while each label's own weight rises")


def judge_fig9(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor],
               family: Effects) -> Judgement:
    """Balanced (true, false) [N, S] against re-ordered prompts of the same records; family:
    the recency family's effects on the same datasets."""
    dt, _ = _change(before, after)
    ci = mean_ci(dt)
    c = variant_change(before, after)
    return Judgement(float(dt.mean()), ci, len(dt),
                     all_hold(ci[1] < 0, c.heads_true_down >= FIG9["heads"] * c.heads, family.distance_ci[0] > 0),
                     f"ours: mean change of summed true-label attention; it drops in {c.heads_true_down}/{c.heads} heads; "
                     f"recency family: {family.text()}")


def judge_fig10_11(imbalanced: Judgement, reordered: Judgement) -> Judgement:
    """The fig8 and fig9 judgements made on the sentence datasets."""
    return Judgement(f"imbalanced: {imbalanced.verdict}; re-ordered: {reordered.verdict}", None, imbalanced.n,
                     together([imbalanced, reordered]), f"imbalanced: {imbalanced.why}. Re-ordered: {reordered.why}")


def judge_together(parts: dict[str, Judgement], n: int, heads: str) -> Judgement:
    """A claim judged part by part (per dataset, by the fig5 and fig6 rules, in the heads
    `heads` describes): `together` of the parts' verdicts; n prompts in all."""
    count = {v: sum(j.verdict == v for j in parts.values()) for v in (REPLICATES, PARTLY)}
    shown = "; ".join(f"{name}: {ours_text(j)}, {j.verdict} ({j.why})" for name, j in parts.items())
    return Judgement(f"{count[REPLICATES]} of {len(parts)} replicate, {count[PARTLY]} partly", None, n,
                     together(list(parts.values())), f"{heads}. {shown}")


def judge_app_e(kinds: torch.Tensor, chance: torch.Tensor, heads: Sequence[Head], neurons: Sequence[str] = (),
                neuron_n: int = 0) -> Judgement:
    """kinds: [N, S] where each of S heads' position with the largest position-level increase
    lies, an index into `studies.subvalues.POSITION_KINDS` (the top head first); chance: [N] the share of
    each prompt's positions that are true-label positions; neurons: the top FFN neurons and
    their tokens, a line each, for the why, by their mean over neuron_n prompts."""
    hits = kinds[:, 0] == TRUE_LABEL
    ours, ci = float(hits.double().mean()), mean_ci(hits.double())
    false = float((kinds[:, 0] == FALSE_LABEL).double().mean())
    verdict = (REPLICATES if ci[0] > APP_E["share"] else
               PARTLY if ci[0] > float(chance.mean()) and ours > false else FAILS)
    shares = kind_shares(kinds)  # [S, kinds]
    top5 = "; ".join(f"{l}-{h}: " + ", ".join(f"{name} {float(x):.1%}" for name, x in zip(POSITION_KINDS, row) if x > 0)
                     for (l, h), row in zip(heads[:5], shares))
    return Judgement(ours, ci, len(hits), verdict,
                     f"share of prompts whose top head ({heads[0][0]}-{heads[0][1]}) has its largest position-level "
                     f"increase at a true-label position; at a false-label one {false:.1%}; chance (a random position) "
                     f"{float(chance.mean()):.1%}; where the top 5 heads' largest lies: {top5}"
                     + (f"; top FFN neurons by mean neuron-level increase over {neuron_n} prompts: {'; '.join(neurons)}"
                        if neurons else ""))


def judge_causal(runs: AblationRuns, k: int, ablation: str, given: bool = False) -> Judgement:
    """N prompts plainly, with the top k in-context heads (or the k heads given) ablated, and
    with k layer-matched random heads ablated in each of D draws (`studies.ablation.ablation_runs`)."""
    plain, top, random = runs.plain, runs.top[k], runs.random[k]
    ours = top.top1
    ci = mean_ci(top.top1_hits.double())
    draws = torch.tensor([r.top1 for r in random], dtype=torch.float64)
    p5 = float(torch.quantile(draws, CAUSAL["percentile"] / 100))
    verdict = (REPLICATES if ours < p5 and ours <= plain.top1 * CAUSAL["fraction"] else
               PARTLY if ours < p5 else FAILS)

    def mean(measure) -> float:
        return sum(measure(r) for r in random) / len(random)

    def prob(a) -> float:
        return float(a.true_prob.mean())
    heads, where = ((f"the {k} heads given", "heads given, not located") if given else
                    (f"the top {k} in-context heads", "heads located on other prompts (other records) of the same datasets"))
    return Judgement(ours, ci, len(top.predictions), verdict,
                     f"top-1 {plain.top1:.1%} plain, {ours:.1%} with {heads} {ablation}-ablated, "
                     f"{mean(lambda r: r.top1):.1%} with {k} layer-matched random heads (mean of {len(random)} draws; "
                     f"{CAUSAL['percentile']}th percentile {p5:.1%}); ranked (true above false) {plain.ranked:.1%} / {top.ranked:.1%} / "
                     f"{mean(lambda r: r.ranked):.1%}; true label's probability {prob(plain):.3f} / {prob(top):.3f} / "
                     f"{mean(prob):.3f}; {where}")


def judge_bias(flags: torch.Tensor, rule: dict[str, float]) -> Judgement:
    """flags: [N, 3] bool a prompt: exposed (its biased label is wrong), biased plainly,
    biased with the intervention; rule: MAJORITY_BIAS or RECENCY_BIAS."""
    def reduction(f: torch.Tensor) -> float:
        plain, after = float((f[:, 0] & f[:, 1]).sum()), float((f[:, 0] & f[:, 2]).sum())
        return (plain - after) / plain if plain else float("nan")

    ours = reduction(flags)
    ci = bootstrap_ci([flags], reduction)
    exposed, plain = int(flags[:, 0].sum()), int((flags[:, 0] & flags[:, 1]).sum())
    verdict = REPLICATES if ours >= rule["at_least"] and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return Judgement(ours, ci, len(flags), verdict,
                     f"relative reduction of the bias rate; {plain}/{exposed} exposed prompts biased plainly, "
                     f"{int((flags[:, 0] & flags[:, 2]).sum())} with the intervention")
