"""The paper's claims, each with the number the paper gives and a verdict rule fixed before
looking at our data; and the judges that apply a rule to a study's per-prompt results.

A judge takes tensors (one row a prompt), returns a `Finding`: our headline number, its 95%
bootstrap interval over prompts (`stats`), N, the verdict and why. Verdicts: "replicates",
"partly", "does not replicate", or "not tested" (with the reason). `studies.report` runs
the studies and calls the judges; each notebook ends with the table of its claims.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import pandas as pd
import torch

from .core.heads import Head, top_heads
from .stats import bootstrap_ci, mean_ci, spearman
from .studies.causal import AblationRuns
from .studies.label_attention import true_vs_false, variant_change
from .studies.recency import Effects
from .studies.subvalues import FALSE_LABEL, POSITION_KINDS, TRUE_LABEL, kind_shares

REPLICATES, PARTLY, FAILS, NOT_TESTED = "replicates", "partly", "does not replicate", "not tested"
AMENDED = "(amended for the recency control, issue 14, before its data were seen)"
PREPRINT = "arXiv 2402.02872 (the preprint)"
EMNLP = "the EMNLP 2024 version"
# No text of the paper is at hand: each source names where the claim and its number stand as restated
# when this project began, and says it is unchecked rather than quote the number as fact.
UNCHECKED = "not checked against the paper's text"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and how we judge it."""

    id: str
    claim: str  # the paper's statement
    paper: str  # the paper's number, as it gives it
    rule: str  # the verdict rule, fixed before our data were seen
    source: str  # the version, section and figure or table the statement and number come from


CLAIMS = {c.id: c for c in [
    Claim("table2", "GPT-2 large learns the word tasks in context (Table 2)",
          "top-1 87-100% in all 8 cells (number inputs 94/100, sentiment inputs 92/87, country 100/100, animal 100/100)",
          "replicates: top-1 >= 80% in every cell and >= 50% on the recency family's prompts whose nearest "
          "demonstration is false; partly: pooled top-1 >= 50% otherwise; does not replicate: pooled top-1 below 50% "
          f"{AMENDED}",
          f"{PREPRINT}, Section 4, Table 2 (GPT-2 large); {UNCHECKED}"),
    Claim("fig2", "Attention layers, deep ones above all, carry the increase of the predicted label; FFN layers little (Fig. 2)",
          "almost all of the increase in deep attention layers (one example prompt)",
          "replicates: the summed attention-layer increase exceeds the summed FFN increase (95% CI of the difference "
          "above 0) and the deeper half of the layers carries most of the attention increase; does not replicate: "
          "the CI lies below 0; partly: otherwise",
          f"{PREPRINT}, Fig. 2 (GPT-2 large, one example prompt); {UNCHECKED}"),
    Claim("fig3_4", "The in-context heads (top 20 by increase) lie in deep layers (Figs. 3, 4)",
          "top 20 of 720 heads (2.8%) in layers 18-31 of 36",
          "replicates: >= 80% of the top 20 in the deeper half of the layers; partly: >= 50%; does not replicate: fewer",
          f"{PREPRINT}, Section 4, Figs. 3 and 4 (GPT-2 large: 36 layers x 20 heads); {UNCHECKED}"),
    Claim("fig12_15", "The in-context heads are largely the same across datasets (Figs. 12-15)",
          "largely the same heads in every dataset",
          "replicates: two datasets share >= 50% of their top 20 on average; partly: >= 25%; does not replicate: fewer",
          f"{PREPRINT}, Appendix A, Figs. 12-15; {UNCHECKED}"),
    Claim("table1", "A top in-context head's label values project to the label words (Table 1)",
          "head 22-0: label values' top tokens are the labels (BAR, Bar / foo, Foo)",
          "replicates: every label value of the top head has its own label among its top 10 tokens; partly: not the "
          "top head's, but one of the top 5 heads' do; does not replicate: none of the top 5",
          f"{PREPRINT}, Table 1 (GPT-2 large, head 22-0, the example prompt); {UNCHECKED}"),
    Claim("table3", "The same on a correctly predicted AG News prompt (Table 3, Appendix C)",
          "label values project to the labels", "as table1, on the first correctly predicted AG News prompt",
          f"{PREPRINT}, Appendix C, Table 3; {UNCHECKED}"),
    Claim("fig5", "Label values of in-context heads rank their labels far above random heads of the same layer (Fig. 5)",
          "in-context heads far above random; weakest head 19-11 MRR 0.0033",
          "replicates: the in-context heads' mean MRR (95% CI) lies above the 95th percentile of 20 layer-matched "
          "random draws and >= 75% of the heads beat their layer's random mean; partly: one of the two; "
          "does not replicate: neither",
          f"{PREPRINT}, Fig. 5 (head 19-11's MRR 0.0033); {UNCHECKED}"),
    Claim("fig6", "In-context heads attend more to the true labels than to the false ones (Fig. 6)",
          "true-label weight far above false-label weight",
          "replicates: mean (true - false) summed attention in the top 20 heads has its 95% CI above 0, true > false "
          "in >= 75% of heads, and the truth effect at equal distance (recency family) has its CI above 0; partly: "
          f"some but not all three; does not replicate: none {AMENDED}",
          f"{PREPRINT}, Fig. 6; {UNCHECKED}"),
    Claim("fig7", "A label position's attention weight rises with the log-probability increase of its subvalue (Fig. 7)",
          "a rising relation", "replicates: Spearman >= 0.3 with its 95% CI above 0; partly: CI above 0; "
          "does not replicate: otherwise",
          f"{PREPRINT}, Fig. 7; {UNCHECKED}"),
    Claim("fig8", "Imbalanced prompts: summed attention on true labels drops, on false labels rises (Fig. 8)",
          "true down, false up in the in-context heads",
          "replicates: the mean change of summed true-label attention has its 95% CI below 0, that of false-label "
          "attention above 0, and the attention per true-label position does not rise (CI of its change not above 0); "
          f"partly: some but not all three; does not replicate: none {AMENDED}",
          f"{PREPRINT}, Section 5.1, Fig. 8; {UNCHECKED}"),
    Claim("fig9", "Re-ordered prompts: summed attention on true labels drops in every in-context head (Fig. 9)",
          "true down in every in-context head",
          "replicates: the mean change of true-label attention has its 95% CI below 0, it drops in >= 90% of heads, and "
          "the distance effect at equal truth (recency family) has its CI above 0; partly: some but not all three; "
          f"does not replicate: none {AMENDED}",
          f"{PREPRINT}, Section 5.2, Fig. 9; {UNCHECKED}"),
    Claim("fig10_11", "Figs. 8 and 9 hold on the sentence datasets (Figs. 10, 11)", "as Figs. 8, 9",
          "the fig8 and fig9 rules on the sentence datasets pooled: replicates if both replicate; does not replicate "
          "if neither does at least partly; partly otherwise",
          f"{PREPRINT}, Sections 5.1 and 5.2, Figs. 10 and 11; {UNCHECKED}"),
    Claim("app_b_mrr", "Appendix B: label-value MRR in the heads shared by the sentence datasets (Figs. 16-18)",
          "in-context heads far above random",
          "the fig5 rule in the heads in all four sentence datasets' top 20 (the top 20 of their mean increase if "
          "none is), on each sentence dataset: replicates if it replicates on every dataset; does not replicate if "
          "on none even partly; partly otherwise",
          f"{PREPRINT}, Appendix B, Figs. 16-18; {UNCHECKED}"),
    Claim("app_b_attention", "Appendix B: true/false attention in the shared heads (Figs. 19-21)",
          "true above false", "the fig6 rule in app_b_mrr's heads on each sentence dataset, judged together as app_b_mrr",
          f"{PREPRINT}, Appendix B, Figs. 19-21; {UNCHECKED}"),
    Claim("app_d", "Appendix D: the same picture in LLaMA 7B, 13B, 30B", "label-value MRR and true > false attention",
          "on a Llama-family model, the fig5 and fig6 rules for the single head with the largest mean increase "
          "over the sentence datasets, on each of them: replicates if all eight judgements replicate; does not "
          "replicate if none does even partly; partly otherwise",
          f"{PREPRINT}, Appendix D (LLaMA 7B, 13B, 30B); {UNCHECKED}"),
    Claim("app_e", "Appendix E: position- and neuron-level increases", "label positions carry the head's increase",
          "replicates: the top head's largest position-level increases lie at true-label positions in most prompts: "
          "the share of prompts whose top-head position with the largest increase is a true-label position has its "
          "95% CI above 0.5; partly: otherwise, when that share's CI lies above chance (the share of a prompt's "
          "positions that are true-label positions, mean over prompts) and the position is a true label more often "
          "than a false one; does not replicate: otherwise",
          f"{PREPRINT}, Appendix E; {UNCHECKED}"),
    Claim("causal", "Ablating the in-context heads destroys accuracy; random heads do not (EMNLP version)",
          "87.6% -> 24.4% top-1 with the top 20 in-context heads ablated",
          "replicates: with the top 20 ablated (mean ablation, heads located on other prompts), top-1 falls below the "
          "5th percentile of 20 layer-matched random draws and to at most half the plain top-1; partly: below the "
          "5th percentile only; does not replicate: otherwise",
          f"{EMNLP} (beyond the preprint); no text at hand states 87.6% or 24.4%: {UNCHECKED}"),
    Claim("majority_bias", "Balancing label attention in the in-context heads reduces majority-label bias",
          "reduced by 22%", "replicates: relative reduction >= 11% (half the paper's) with its 95% CI above 0; "
          "partly: CI above 0; does not replicate: otherwise",
          f"{EMNLP}, its abstract as summaries quote it (22%); {UNCHECKED}"),
    Claim("recency_bias", "Position-free label keys in the in-context heads reduce recency bias",
          "reduced by 17%", "replicates: relative reduction >= 8.5% (half the paper's) with its 95% CI above 0; "
          "partly: CI above 0; does not replicate: otherwise",
          f"{EMNLP}, its abstract as summaries quote it (17%); {UNCHECKED}"),
]}


@dataclass
class Finding:
    """Our result for one claim."""

    id: str
    claim: str
    paper: str
    source: str
    ours: float | str | None
    ci: tuple[float, float] | None
    n: int | None
    verdict: str
    why: str
    correct_only: Finding | None = None  # the same rule on the correctly answered prompts, where it applies

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = list(self.ci) if self.ci is not None else None
        if self.correct_only is not None:
            d["correct_only"] = {k: v for k, v in self.correct_only.to_dict().items() if k in JUDGED}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        """The finding `to_dict` gave `d` for (a report's JSON entry)."""
        def one(fields: dict) -> Finding:
            ci = fields["ci"]
            return cls(**{**fields, "ci": None if ci is None else tuple(ci), "correct_only": None})

        found = one(d)
        if d.get("correct_only") is not None:
            found.correct_only = one({k: getattr(found, k) for k in ("id", "claim", "paper", "source")} | d["correct_only"])
        return found


JUDGED = ("ours", "ci", "n", "verdict", "why")  # what a correct-only judgement adds to its claim


def finding(id: str, ours: float | str | None, ci: tuple[float, float] | None, n: int | None, verdict: str,
            why: str) -> Finding:
    c = CLAIMS[id]
    return Finding(id, c.claim, c.paper, c.source, ours, ci, n, verdict, why)


def not_tested(id: str, reason: str) -> Finding:
    return finding(id, None, None, None, NOT_TESTED, reason)


def _all(*conditions: bool) -> str:
    """All conditions hold: replicates; some: partly; none: does not replicate."""
    return REPLICATES if all(conditions) else PARTLY if any(conditions) else FAILS


def judge_table2(correct: dict[str, torch.Tensor], false_nearest: torch.Tensor) -> Finding:
    """correct: per cell (e.g. "number inputs, true label foo"), [N] bool top-1 hits;
    false_nearest: [M] bool top-1 hits on the recency family's prompts whose nearest
    demonstration is false (`studies.recency`)."""
    pooled = torch.cat(list(correct.values())).double()
    cells = {name: float(c.double().mean()) for name, c in correct.items()}
    ours = float(pooled.mean())
    ci = bootstrap_ci(list(correct.values()), lambda *cs: torch.cat(cs).double().mean())
    far = float(false_nearest.double().mean())
    verdict = REPLICATES if min(cells.values()) >= 0.8 and far >= 0.5 else PARTLY if ours >= 0.5 else FAILS
    worst = min(cells, key=cells.get)
    return finding("table2", ours, ci, len(pooled), verdict,
                   f"pooled top-1 over {len(cells)} cells; lowest cell {worst}: {cells[worst]:.0%}; top-1 {far:.0%} on "
                   f"the {len(false_nearest)} recency-family prompts whose nearest demonstration is false")


def judge_fig2(attn: torch.Tensor, ffn: torch.Tensor) -> Finding:
    """attn, ffn: [N, L] layer-level increases of N prompts."""
    L = attn.shape[1]
    diff = attn.sum(1) - ffn.sum(1)
    ci = mean_ci(diff)
    total = float(attn.sum())
    deep = float(attn[:, L // 2:].sum()) / total if total > 0 else float("nan")
    verdict = REPLICATES if ci[0] > 0 and deep > 0.5 else FAILS if ci[1] < 0 else PARTLY
    share = f"{deep:.0%}" if total > 0 else "none (the attention layers' total is not positive)"
    return finding("fig2", float(diff.mean()), ci, len(diff), verdict,
                   f"ours is the mean over prompts of (summed attention-layer increase - summed FFN increase): "
                   f"attention {float(attn.sum(1).mean()):+.2f}, FFN {float(ffn.sum(1).mean()):+.2f} a prompt; "
                   f"deeper half's share of the attention increase {share}; the paper shows one prompt, we average N")


def _deep_share(head: torch.Tensor, k: int) -> float:
    """Share of the top k heads of head [N, L, H] in the deeper half of the layers."""
    L = head.shape[1]
    return sum(l >= L / 2 for l, _ in top_heads(head.mean(0), k)) / k


def _head_sets(id: str, heads: dict[str, torch.Tensor], statistic, replicate_at: float, partly_at: float,
               why: str) -> Finding:
    """A statistic of the datasets' top heads (resampled 200 times: each re-ranks every head),
    judged by two thresholds."""
    ours = statistic(*heads.values())
    ci = bootstrap_ci(list(heads.values()), statistic, draws=200)
    verdict = REPLICATES if ours >= replicate_at else PARTLY if ours >= partly_at else FAILS
    return finding(id, ours, ci, sum(len(h) for h in heads.values()), verdict, why)


def judge_fig3_4(heads: dict[str, torch.Tensor], k: int = 20) -> Finding:
    """heads: per dataset, head-level increases [N, L, H]."""
    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets("fig3_4", heads, lambda *hs: sum(_deep_share(h, k) for h in hs) / len(hs), 0.8, 0.5,
                      f"share of each dataset's top {k} in layers >= {L / 2:g} of {L}, mean over {len(heads)} datasets; "
                      f"top {k} of {L * H} heads is {k / (L * H):.1%} (paper 2.8%)")


def judge_fig12_15(heads: dict[str, torch.Tensor], k: int = 20) -> Finding:
    """heads: per dataset (two or more), head-level increases [N, L, H]."""
    def shared(*hs: torch.Tensor) -> float:
        tops = [set(top_heads(h.mean(0), k)) for h in hs]
        pairs = [(a, b) for i, a in enumerate(tops) for b in tops[i + 1:]]
        return sum(len(a & b) for a, b in pairs) / len(pairs) / k

    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets("fig12_15", heads, shared, 0.5, 0.25,
                      f"mean share of top {k} heads two of {len(heads)} datasets have in common ({', '.join(heads)}); "
                      f"chance {k / (L * H):.1%}")


def judge_label_values(id: str, hits: Sequence[float], heads: Sequence[Head], where: str) -> Finding:
    """hits: for the top 5 heads in order, the share of label values with their own label
    among their top 10 tokens, on one prompt (`where`)."""
    verdict = REPLICATES if hits[0] == 1 else PARTLY if any(h == 1 for h in hits) else FAILS
    shown = ", ".join(f"{l}-{h}: {x:.0%}" for (l, h), x in zip(heads, hits))
    return finding(id, float(hits[0]), None, 1, verdict, f"{where}; label values with their label in the top 10, "
                   f"top 5 heads: {shown}")


def judge_fig5(mrr: torch.Tensor, random_mrr: torch.Tensor, heads: Sequence[Head], id: str = "fig5") -> Finding:
    """mrr: [N, S] reciprocal rank a prompt (mean over its labels) in the S in-context heads;
    random_mrr: [D, N, S] the same for D draws of a random head of each one's layer. id: the
    claim judged by this rule (fig5, or a part of app_b_mrr, app_d)."""
    ours = float(mrr.mean())
    ci = mean_ci(mrr)
    draws = random_mrr.mean((1, 2))  # [D]
    p95 = float(torch.quantile(draws.double(), 0.95))
    above = int((mrr.mean(0) > random_mrr.mean((0, 1))).sum())
    verdict = _all(ci[0] > p95, above >= 0.75 * len(heads))
    return finding(id, ours, ci, len(mrr), verdict,
                   f"mean MRR of {len(heads)} in-context heads against {len(draws)} layer-matched random draws "
                   f"(mean {float(draws.mean()):.4f}, 95th percentile {p95:.4f}); {above}/{len(heads)} heads above "
                   f"their layer's random mean")


def judge_fig6(true: torch.Tensor, false: torch.Tensor, family: Effects, id: str = "fig6") -> Finding:
    """true, false: [N, S] summed attention on true / false labels in S in-context heads;
    family: the recency family's truth and distance effects on the same datasets. id: the
    claim judged by this rule (fig6, or a part of app_b_attention, app_d)."""
    diff = (true - false).mean(1)
    ci = mean_ci(diff)
    c = true_vs_false(true, false)
    verdict = _all(ci[0] > 0, c.heads_true_above >= 0.75 * c.heads, family.truth_ci[0] > 0)
    return finding(id, float(diff.mean()), ci, len(diff), verdict,
                   f"mean summed attention true {c.true:.3f}, false {c.false:.3f}; true > false in "
                   f"{c.heads_true_above}/{c.heads} heads; the balanced prompt puts the true labels nearest the input, "
                   f"so the recency family separates the two: {family.text()}")


def judge_fig7(attention: torch.Tensor, increase: torch.Tensor, summed: tuple[torch.Tensor, torch.Tensor]) -> Finding:
    """attention, increase: [N, S, K] each label position's attention weight in each top head
    and the position-level increase of its subvalue (NaN past a prompt's labels); summed: ours
    beside it, ([N, S], [N, S]) a head's summed true-label attention and the whole head's increase."""
    pairs = torch.stack([attention, increase], -1)  # [N, S, K, 2]: resampled together, by prompt

    def rho(p: torch.Tensor) -> float:
        kept = p[~p[..., 0].isnan()]  # [pairs, 2]
        return spearman(kept[:, 0], kept[:, 1])
    ours, ci = rho(pairs), bootstrap_ci([pairs], rho)
    verdict = REPLICATES if ours >= 0.3 and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return finding("fig7", ours, ci, len(pairs), verdict,
                   f"Spearman over {int((~attention.isnan()).sum())} (prompt, head, label position) triples of the top "
                   f"{attention.shape[1]} heads, each position's attention weight against its subvalue's increase (the "
                   f"paper's Fig. 7); ours beside it, a head's summed true-label attention against the whole head's "
                   f"increase: {spearman(*summed):.3f}")


def _change(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor]):
    """Per prompt, the mean change over heads of true- and of false-label attention, [N] each;
    before and after are (true, false) [N, S] on the same records."""
    return (after[0] - before[0]).mean(1), (after[1] - before[1]).mean(1)


def judge_fig8(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor],
               per_label: tuple[torch.Tensor, torch.Tensor], id: str = "fig8") -> Finding:
    """Balanced (true, false) [N, S] against imbalanced prompts of the same records;
    per_label: the mean attention a true-label position gets, [N, S], balanced then imbalanced."""
    dt, df = _change(before, after)
    ci_t, ci_f = mean_ci(dt), mean_ci(df)
    dp = (per_label[1] - per_label[0]).mean(1)
    ci_p = mean_ci(dp)
    return finding(id, float(dt.mean()), ci_t, len(dt), _all(ci_t[1] < 0, ci_f[0] > 0, ci_p[0] <= 0),
                   f"ours: mean change of summed true-label attention; false-label change {float(df.mean()):+.3f} "
                   f"(CI {ci_f[0]:+.3f} to {ci_f[1]:+.3f}); per true-label position {float(per_label[0].mean()):.3f} -> "
                   f"{float(per_label[1].mean()):.3f} (change CI {ci_p[0]:+.3f} to {ci_p[1]:+.3f}): the sum covers one "
                   f"true label instead of two, so it can drop while each label's own weight rises")


def judge_fig9(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor], family: Effects,
               id: str = "fig9") -> Finding:
    """Balanced (true, false) [N, S] against re-ordered prompts of the same records; family:
    the recency family's effects on the same datasets."""
    dt, _ = _change(before, after)
    ci = mean_ci(dt)
    c = variant_change(before, after)
    return finding(id, float(dt.mean()), ci, len(dt),
                   _all(ci[1] < 0, c.heads_true_down >= 0.9 * c.heads, family.distance_ci[0] > 0),
                   f"ours: mean change of summed true-label attention; it drops in {c.heads_true_down}/{c.heads} heads; "
                   f"recency family: {family.text()}")


def judge_fig10_11(imbalanced: Finding, reordered: Finding) -> Finding:
    """The fig8 and fig9 judgements made on the sentence datasets."""
    return finding("fig10_11", f"imbalanced: {imbalanced.verdict}; re-ordered: {reordered.verdict}", None,
                   imbalanced.n, _together([imbalanced, reordered]), f"imbalanced: {imbalanced.why}. Re-ordered: {reordered.why}")


def _together(parts: Sequence[Finding]) -> str:
    """Replicates if every part replicates; does not replicate if no part replicates even partly; else partly."""
    verdicts = {f.verdict for f in parts}
    return REPLICATES if verdicts == {REPLICATES} else FAILS if verdicts == {FAILS} else PARTLY


def judge_together(id: str, parts: dict[str, Finding], n: int, heads: str) -> Finding:
    """A claim judged part by part (per dataset, by the fig5 and fig6 rules, in the heads
    `heads` describes): `_together` of the parts' verdicts; n prompts in all."""
    count = {v: sum(f.verdict == v for f in parts.values()) for v in (REPLICATES, PARTLY)}
    shown = "; ".join(f"{name}: {ours_text(f)}, {f.verdict} ({f.why})" for name, f in parts.items())
    return finding(id, f"{count[REPLICATES]} of {len(parts)} replicate, {count[PARTLY]} partly", None, n,
                   _together(list(parts.values())), f"{heads}. {shown}")


def judge_app_e(kinds: torch.Tensor, chance: torch.Tensor, heads: Sequence[Head], neurons: Sequence[str] = ()) -> Finding:
    """kinds: [N, S] where each of S heads' position with the largest position-level increase
    lies, an index into `studies.subvalues.POSITION_KINDS` (the top head first); chance: [N] the share of
    each prompt's positions that are true-label positions; neurons: the top FFN neurons and
    their tokens, a line each, for the why."""
    hits = kinds[:, 0] == TRUE_LABEL
    ours, ci = float(hits.double().mean()), mean_ci(hits.double())
    false = float((kinds[:, 0] == FALSE_LABEL).double().mean())
    verdict = REPLICATES if ci[0] > 0.5 else PARTLY if ci[0] > float(chance.mean()) and ours > false else FAILS
    shares = kind_shares(kinds)  # [S, kinds]
    top5 = "; ".join(f"{l}-{h}: " + ", ".join(f"{name} {float(x):.1%}" for name, x in zip(POSITION_KINDS, row) if x > 0)
                     for (l, h), row in zip(heads[:5], shares))
    return finding("app_e", ours, ci, len(hits), verdict,
                   f"share of prompts whose top head ({heads[0][0]}-{heads[0][1]}) has its largest position-level "
                   f"increase at a true-label position; at a false-label one {false:.1%}; chance (a random position) "
                   f"{float(chance.mean()):.1%}; where the top 5 heads' largest lies: {top5}"
                   + (f"; top FFN neurons by mean neuron-level increase: {'; '.join(neurons)}" if neurons else ""))


def judge_causal(runs: AblationRuns, k: int, ablation: str, given: bool = False) -> Finding:
    """N prompts plainly, with the top k in-context heads (or the k heads given) ablated, and
    with k layer-matched random heads ablated in each of D draws (`studies.causal.ablation_runs`)."""
    plain, top, random = runs.plain, runs.top[k], runs.random[k]
    ours = top.top1
    ci = mean_ci(top.top1_hits.double())
    draws = torch.tensor([r.top1 for r in random], dtype=torch.float64)
    p5 = float(torch.quantile(draws, 0.05))
    verdict = REPLICATES if ours < p5 and ours <= plain.top1 / 2 else PARTLY if ours < p5 else FAILS
    mean = lambda measure: sum(measure(r) for r in random) / len(random)  # noqa: E731
    prob = lambda a: float(a.true_prob.mean())  # noqa: E731
    heads, where = ((f"the {k} heads given", "heads given, not located") if given else
                    (f"the top {k} in-context heads", "heads located on other prompts (other records) of the same datasets"))
    return finding("causal", ours, ci, len(top.predictions), verdict,
                   f"top-1 {plain.top1:.1%} plain, {ours:.1%} with {heads} {ablation}-ablated, "
                   f"{mean(lambda r: r.top1):.1%} with {k} layer-matched random heads (mean of {len(random)} draws; "
                   f"5th percentile {p5:.1%}); ranked (true above false) {plain.ranked:.1%} / {top.ranked:.1%} / "
                   f"{mean(lambda r: r.ranked):.1%}; true label's probability {prob(plain):.3f} / {prob(top):.3f} / "
                   f"{mean(prob):.3f}; {where}")


def judge_bias(id: str, flags: torch.Tensor, paper: float) -> Finding:
    """flags: [N, 3] bool a prompt: exposed (its biased label is wrong), biased plainly,
    biased with the intervention."""
    def reduction(f: torch.Tensor) -> float:
        plain, after = float((f[:, 0] & f[:, 1]).sum()), float((f[:, 0] & f[:, 2]).sum())
        return (plain - after) / plain if plain else float("nan")

    ours = reduction(flags)
    ci = bootstrap_ci([flags], reduction)
    exposed, plain = int(flags[:, 0].sum()), int((flags[:, 0] & flags[:, 1]).sum())
    verdict = REPLICATES if ours >= paper / 2 and ci[0] > 0 else PARTLY if ci[0] > 0 else FAILS
    return finding(id, ours, ci, len(flags), verdict,
                   f"relative reduction of the bias rate; {plain}/{exposed} exposed prompts biased plainly, "
                   f"{int((flags[:, 0] & flags[:, 2]).sum())} with the intervention")


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row a claim: claim, paper, ours (CI), N, verdict, and where any finding has one,
    the correct-only judgement."""
    rows = [{"claim": f.claim, "paper": f.paper, "ours (95% CI)": ours_text(f), "N": f.n, "verdict": f.verdict}
            for f in findings]
    if any(f.correct_only is not None for f in findings):
        for row, f in zip(rows, findings):
            row[CORRECT_ONLY] = correct_only_text(f)
    return pd.DataFrame(rows, index=[f.id for f in findings])


CORRECT_ONLY = "correct prompts only: ours, N, verdict"


def correct_only_text(f: Finding) -> str:
    c = f.correct_only
    return "-" if c is None else f"{ours_text(c)}, N={c.n}: {c.verdict}" if c.ours is not None else f"- ({c.why})"


def ours_text(f: Finding) -> str:
    if f.ours is None:
        return f"- ({f.why})"
    if isinstance(f.ours, str):
        return f.ours
    ci = f" ({f.ci[0]:.3g} to {f.ci[1]:.3g})" if f.ci is not None else ""
    return f"{f.ours:.3g}{ci}"


def markdown(findings: Sequence[Finding]) -> str:
    """The findings as one markdown table (claim, paper, ours (CI), N, verdict, correct-only
    judgement), then each tested claim's why and rule."""
    rows = [f"| id | claim | paper | ours (95% CI) | N | verdict | {CORRECT_ONLY} |", "|---|---|---|---|---|---|---|"]
    rows += [f"| {f.id} | {f.claim} | {f.paper} | {ours_text(f)} | {f.n if f.n is not None else '-'} | {f.verdict} | "
             f"{correct_only_text(f)} |" for f in findings]
    why = [f"- **{f.id}** ({f.verdict}): {f.why}. Rule: {CLAIMS[f.id].rule}. Paper: {f.source}."
           + (f" Correct prompts only ({f.correct_only.verdict}): {f.correct_only.why}." if f.correct_only else "")
           for f in findings if f.ours is not None]
    return "\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why) + "\n"
