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
from .judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold, ours_text, together

K = MAIN.heads  # in-context heads (20; a robustness setting analyses its own number, `data.setting`)
RANDOM_DRAWS = 20  # layer-matched random-head draws (Fig. 5, the causal check)
TOP = 10  # tokens a projected vector (Tables 1, 3)

# Each rule's thresholds. A difference a rule claims has a minimum effect ("min_*"): an interval that merely
# clears 0 on a tiny difference is not the paper's "much larger" (issue 44).
TABLE2 = {"cell": 0.8, "pooled": 0.5}
TABLE2_CONTROL = {"false_nearest": 0.5}
FIG2 = {"deep": 0.5}
TABLE1 = {"share": 0.5}
TOWERS = {"ratio": 2.0}  # an own word's MRR at least twice the others' (keys), the random heads' (queries)
FIG3_4 = {"replicates": 0.8, "partly": 0.5}
FIG12_15 = {"replicates": 0.5, "partly": 0.25}
FIG5 = {"percentile": 95, "heads": 0.75, "ratio": 2.0}
FIG6 = {"heads": 0.75, "min_attention": 0.05}  # summed attention on two true labels minus two false ones
FIG7 = {"rho": 0.3}
FIG8 = {"min_change": 0.01}
FIG9 = {"heads": 0.9, "min_change": 0.01}
FIG10 = {"heads": 2 / 3, "min_change": 0.01}  # the text: down in most shared heads, up in one (21-19)
FIG11 = {"heads": 0.9, "min_change": 0.01}  # the text: down in all shared heads
APP_E = {"rho": 0.8, "partly": 0.5}
METRIC = {"rho": 0.1}  # a weak but clear rise of a label's score with its demonstration's similarity
CAUSAL = {"percentile": 5, "fraction": 0.5}
MAJORITY_BIAS = {"paper": 0.22, "at_least": 0.22 / 2}  # the paper's reduction, and half of it
RECENCY_BIAS = {"paper": 0.17, "at_least": 0.17 / 2}
BIAS_COST = {"points": 0.05}  # top-1 on standard prompts an intervention may cost


Clusters = torch.Tensor | None  # [N] long: each row's distinct input, which the intervals resample (`stats`)


def judge_table2(correct: dict[str, torch.Tensor], clusters: dict[str, torch.Tensor] | None = None) -> Judgement:
    """correct: per cell (e.g. "number inputs, true label foo"), [N] bool top-1 hits; clusters:
    per cell, each prompt's distinct input."""
    pooled = torch.cat(list(correct.values())).double()
    cells = {name: float(c.double().mean()) for name, c in correct.items()}
    ours = float(pooled.mean())
    ci = bootstrap_ci(list(correct.values()), lambda *cs: torch.cat(cs).double().mean(),
                      clusters=None if clusters is None else [clusters[name] for name in correct])
    verdict = REPLICATES if min(cells.values()) >= TABLE2["cell"] else PARTLY if ours >= TABLE2["pooled"] else FAILS
    worst = min(cells, key=cells.get)
    return Judgement(ours, ci, len(pooled), verdict, f"pooled top-1 over {len(cells)} cells; lowest cell {worst}: "
                     f"{cells[worst]:.0%}; " + ", ".join(f"{name} {v:.0%}" for name, v in cells.items()))


def judge_table2_control(false_nearest: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """false_nearest: [M] bool top-1 hits on the recency family's prompts whose nearest
    demonstration is false (`studies.recency`)."""
    ours = float(false_nearest.double().mean())
    ci = mean_ci(false_nearest.double(), clusters=clusters)
    verdict = (REPLICATES if ci[0] >= TABLE2_CONTROL["false_nearest"] else
               PARTLY if ours >= TABLE2_CONTROL["false_nearest"] else FAILS)
    return Judgement(ours, ci, len(false_nearest), verdict,
                     f"top-1 on the {len(false_nearest)} recency-family prompts whose nearest demonstration is false "
                     "(the paper's prompts always put the true ones nearest the input)")


def judge_fig2(attn: torch.Tensor, ffn: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """attn, ffn: [N, L] layer-level increases of N prompts."""
    L = attn.shape[1]
    diff = attn.sum(1) - ffn.sum(1)
    ci = mean_ci(diff, clusters=clusters)
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


def _head_sets(heads: dict[str, torch.Tensor], statistic, rule: dict[str, float], why: str,
               clusters: dict[str, torch.Tensor] | None) -> Judgement:
    """A statistic of the datasets' top heads (resampled 200 times: each re-ranks every head),
    judged by the rule's two thresholds."""
    ours = statistic(*heads.values())
    ci = bootstrap_ci(list(heads.values()), statistic, draws=200,
                      clusters=None if clusters is None else [clusters[d] for d in heads])
    verdict = REPLICATES if ours >= rule["replicates"] else PARTLY if ours >= rule["partly"] else FAILS
    return Judgement(ours, ci, sum(len(h) for h in heads.values()), verdict, why)


def judge_fig3_4(heads: dict[str, torch.Tensor], k: int = K, clusters: dict[str, torch.Tensor] | None = None
                 ) -> Judgement:
    """heads: per dataset, head-level increases [N, L, H]; clusters: per dataset, each prompt's input."""
    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, lambda *hs: sum(_deep_share(h, k) for h in hs) / len(hs), FIG3_4,
                      f"share of each dataset's top {k} in layers >= {L / 2:g} of {L}, mean over {len(heads)} datasets; "
                      f"top {k} of {L * H} heads is {k / (L * H):.1%} (paper 2.8%)", clusters)


def judge_fig12_15(heads: dict[str, torch.Tensor], k: int = K, clusters: dict[str, torch.Tensor] | None = None
                   ) -> Judgement:
    """heads: per dataset (two or more), head-level increases [N, L, H]."""
    def shared(*hs: torch.Tensor) -> float:
        tops = [set(top_heads(h.mean(0), k)) for h in hs]
        pairs = [(a, b) for i, a in enumerate(tops) for b in tops[i + 1:]]
        return sum(len(a & b) for a, b in pairs) / len(pairs) / k

    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, shared, FIG12_15,
                      f"mean share of top {k} heads two of {len(heads)} datasets have in common ({', '.join(heads)}); "
                      f"chance {k / (L * H):.1%}", clusters)


def judge_label_values(hits: torch.Tensor, heads: Sequence[Head], where: str, example: str,
                       clusters: Clusters = None) -> Judgement:
    """hits: [N, S] bool, the top S (5) heads in order: every label value of a prompt ranks
    its own label token among the top TOP of the vocabulary; example: the paper's one-prompt
    illustration, in words."""
    cis = [mean_ci(h.double(), clusters=clusters) for h in hits.T]
    above = [ci[0] > TABLE1["share"] for ci in cis]
    verdict = REPLICATES if above[0] else PARTLY if any(above) else FAILS
    shown = ", ".join(f"{l}-{h}: {float(x.double().mean()):.0%}" for (l, h), x in zip(heads, hits.T))
    return Judgement(float(hits[:, 0].double().mean()), cis[0], len(hits), verdict,
                     f"{where}: share of prompts whose every label value ranks its own label token in the top {TOP} "
                     f"of the vocabulary, top 5 heads: {shown}; {example}")


def judge_fig5(mrr: torch.Tensor, random_mrr: torch.Tensor, heads: Sequence[Head], clusters: Clusters = None,
               what: str = "MRR") -> Judgement:
    """mrr: [N, S] reciprocal rank a prompt (mean over its labels) in the S in-context heads;
    random_mrr: [D, N, S] the same for D draws of a random head of each one's layer."""
    ours = float(mrr.mean())
    ci = mean_ci(mrr, clusters=clusters)
    draws = random_mrr.mean((1, 2))  # [D]
    p95 = float(torch.quantile(draws.double(), FIG5["percentile"] / 100))
    above = int((mrr.mean(0) > random_mrr.mean((0, 1))).sum())
    verdict = all_hold(ci[0] > p95 and ours >= FIG5["ratio"] * float(draws.mean()), above >= FIG5["heads"] * len(heads))
    return Judgement(ours, ci, len(mrr), verdict,
                     f"mean {what} of {len(heads)} in-context heads against {len(draws)} layer-matched random draws "
                     f"(mean {float(draws.mean()):.4f}, {FIG5['percentile']}th percentile {p95:.4f}; ours "
                     f"{ours / float(draws.mean()) if float(draws.mean()) else float('inf'):.1f}x their mean); "
                     f"{above}/{len(heads)} heads above their layer's random mean")


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


def judge_fig6(true: torch.Tensor, false: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """true, false: [N, S] summed attention on true / false labels in S in-context heads."""
    diff = (true - false).mean(1)
    ci = mean_ci(diff, clusters=clusters)
    c = true_vs_false(true, false)
    verdict = all_hold(ci[0] > 0 and float(diff.mean()) >= FIG6["min_attention"], c.heads_true_above >= FIG6["heads"] * c.heads)
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"ours: mean (true - false) summed attention; true {c.true:.3f}, false {c.false:.3f}; true > false "
                     f"in {c.heads_true_above}/{c.heads} heads; the balanced prompt puts the true labels nearest the "
                     "input, which the control row separates")


def judge_truth_control(family: Effects) -> Judgement:
    """The recency family's truth effect: attention a label position gets for being true, at equal distance."""
    lo, hi = family.truth_ci
    verdict = REPLICATES if lo > 0 else FAILS if hi < 0 else PARTLY
    return Judgement(family.truth, family.truth_ci, family.n, verdict, family.text())


def judge_distance_control(family: Effects) -> Judgement:
    """The recency family's distance effect: attention a label position gets for being nearest the input, at equal truth."""
    lo, hi = family.distance_ci
    verdict = REPLICATES if lo > 0 else FAILS if hi < 0 else PARTLY
    return Judgement(family.distance, family.distance_ci, family.n, verdict, family.text())


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


def judge_fig7(attention: torch.Tensor, increase: torch.Tensor, summed: tuple[torch.Tensor, torch.Tensor],
               clusters: Clusters = None) -> Judgement:
    """attention, increase: [N, S, K] each label position's attention weight in each top head
    and the position-level increase of its subvalue (NaN past a prompt's labels); summed: ours
    beside it, ([N, S], [N, S]) a head's summed true-label attention and the whole head's increase."""
    pairs = torch.stack([attention, increase], -1)  # [N, S, K, 2]: resampled together, by prompt

    def rho(p: torch.Tensor) -> float:
        kept = p[~p[..., 0].isnan()]  # [pairs, 2]
        return spearman(kept[:, 0], kept[:, 1])
    ours, ci = rho(pairs), bootstrap_ci([pairs], rho, clusters=[clusters])
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
               per_label: tuple[torch.Tensor, torch.Tensor], clusters: Clusters = None) -> Judgement:
    """Balanced (true, false) [N, S] against imbalanced prompts of the same records;
    per_label: the mean attention a true-label position gets, [N, S], balanced then imbalanced
    (described: Fig. 10 judges it)."""
    dt, df = _change(before, after)
    ci_t, ci_f = mean_ci(dt, clusters=clusters), mean_ci(df, clusters=clusters)
    least = FIG8["min_change"]
    verdict = all_hold(ci_t[1] < 0 and float(dt.mean()) <= -least, ci_f[0] > 0 and float(df.mean()) >= least)
    return Judgement(float(dt.mean()), ci_t, len(dt), verdict,
                     f"ours: mean change of summed true-label attention; false-label change {float(df.mean()):+.3f} "
                     f"(CI {ci_f[0]:+.3f} to {ci_f[1]:+.3f}); per true-label position {float(per_label[0].mean()):.3f} "
                     f"-> {float(per_label[1].mean()):.3f}: the sum covers one true label instead of two")


def judge_fig9(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor],
               clusters: Clusters = None) -> Judgement:
    """Balanced (true, false) [N, S] against re-ordered prompts of the same records."""
    dt, _ = _change(before, after)
    ci = mean_ci(dt, clusters=clusters)
    c = variant_change(before, after)
    verdict = all_hold(ci[1] < 0 and float(dt.mean()) <= -FIG9["min_change"], c.heads_true_down >= FIG9["heads"] * c.heads)
    return Judgement(float(dt.mean()), ci, len(dt), verdict,
                     f"ours: mean change of summed true-label attention; it drops in {c.heads_true_down}/{c.heads} heads")


def judge_per_head_drop(before: torch.Tensor, after: torch.Tensor, heads: Sequence[Head], rule: dict[str, float],
                        which: str, clusters: Clusters = None) -> Judgement:
    """Figs. 10 and 11: before, after: [N, S] the mean attention a true-label position gets in
    each of S heads on the same records; replicates where it drops (CI of the change below 0, the
    change at most -rule["min_change"]) in at least rule["heads"] of the heads; partly where the
    mean over heads drops (CI below 0)."""
    change = after - before  # [N, S]
    cis = [mean_ci(c, clusters=clusters) for c in change.T]
    least = rule["min_change"]
    down = [(l, h) for (l, h), c, ci in zip(heads, change.T, cis) if ci[1] < 0 and float(c.mean()) <= -least]
    up = [(l, h) for (l, h), c, ci in zip(heads, change.T, cis) if ci[0] > 0 and float(c.mean()) >= least]
    pooled = mean_ci(change.mean(1), clusters=clusters)
    verdict = REPLICATES if len(down) >= rule["heads"] * len(heads) else PARTLY if pooled[1] < 0 else FAILS
    name = lambda hs: ", ".join(f"{l}-{h}" for l, h in hs) or "none"  # noqa: E731
    return Judgement(float(change.mean()), pooled, len(change), verdict,
                     f"ours: mean change over the {len(heads)} heads of the attention a true-label position gets "
                     f"({which}); down in {len(down)} ({name(down)}), up in {len(up)} ({name(up)}): each head's change "
                     f"at least {least} with its 95% CI clear of 0")


def judge_fig8_9_sentences(imbalanced: Judgement, reordered: Judgement) -> Judgement:
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


def judge_app_e(increase: torch.Tensor, heads: Sequence[Head], positions: str, clusters: Clusters = None) -> Judgement:
    """increase: [N, S, 3] each of S heads' increase added alone, in a random order and last
    (`studies.order.ORDERS`); positions: the position-level description, a line."""
    pairs = increase[..., :2]  # [N, S, 2]: alone, random order

    def rho(p: torch.Tensor) -> float:
        return spearman(p[..., 0], p[..., 1])
    ours, ci = rho(pairs), bootstrap_ci([pairs], rho, clusters=[clusters])
    verdict = REPLICATES if ci[0] >= APP_E["rho"] else PARTLY if ci[0] >= APP_E["partly"] else FAILS
    alone, random, last = increase.mean(0).unbind(-1)  # [S] each
    k = max(1, len(heads) // 2)
    kept = len(set(top_heads(alone[None], k)) & set(top_heads(random[None], k)))
    return Judgement(ours, ci, len(increase), verdict,
                     f"Spearman over (prompt, head) pairs of the top {len(heads)} heads, each head's increase added "
                     f"alone on x_l against added after the heads before it in a random order of its layer; added "
                     f"last (after all others) {spearman(increase[..., 0], increase[..., 2]):.3f}; mean increase alone "
                     f"{float(alone.mean()):+.3f}, random order {float(random.mean()):+.3f}, last {float(last.mean()):+.3f}; "
                     f"the top {k} by mean increase keep {kept} of {k} heads in a random order. {positions}")


def judge_causal(runs: AblationRuns, k: int, ablation: str, given: bool = False, clusters: Clusters = None) -> Judgement:
    """N prompts plainly, with the top k in-context heads (or the k heads given) ablated, and
    with k layer-matched random heads ablated in each of D draws (`studies.ablation.ablation_runs`)."""
    plain, top, random = runs.plain, runs.top[k], runs.random[k]
    ours = top.top1
    ci = mean_ci(top.top1_hits.double(), clusters=clusters)
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


def judge_bias(flags: torch.Tensor, rule: dict[str, float], clusters: Clusters = None) -> Judgement:
    """flags: [N, 3] bool a prompt: exposed (its biased label is wrong), biased plainly,
    biased with the intervention; rule: MAJORITY_BIAS or RECENCY_BIAS."""
    def reduction(f: torch.Tensor) -> float:
        plain, after = float((f[:, 0] & f[:, 1]).sum()), float((f[:, 0] & f[:, 2]).sum())
        return (plain - after) / plain if plain else float("nan")

    ours = reduction(flags)
    ci = bootstrap_ci([flags], reduction, clusters=[clusters])
    exposed, plain = int(flags[:, 0].sum()), int((flags[:, 0] & flags[:, 1]).sum())
    verdict = REPLICATES if ours >= rule["at_least"] and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return Judgement(ours, ci, len(flags), verdict,
                     f"relative reduction of the bias rate; {plain}/{exposed} exposed prompts biased plainly, "
                     f"{int((flags[:, 0] & flags[:, 2]).sum())} with the intervention")


def judge_bias_cost(hits: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """hits: [N, 2] bool top-1 on standard (balanced) prompts, plainly and with the intervention."""
    drop = (hits[:, 0].double() - hits[:, 1].double())
    ours, ci = float(drop.mean()), mean_ci(drop, clusters=clusters)
    verdict = REPLICATES if ci[1] <= BIAS_COST["points"] else PARTLY if ours <= BIAS_COST["points"] else FAILS
    return Judgement(ours, ci, len(hits), verdict,
                     f"ours: top-1 lost on standard prompts, {float(hits[:, 0].double().mean()):.1%} plain -> "
                     f"{float(hits[:, 1].double().mean()):.1%} with the intervention")
