"""The paper's claims, one object each: the statement, the paper's number and its source,
the verdict rule fixed before our data were seen (its prose reads the same thresholds as its
judge in `rules`), and the finder that runs the studies and applies the rule (`finders`).
A `Finding` is a claim with our judgement of it; `table` and `markdown` show findings.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import pandas as pd

from ..studies import biases
from . import finders, rules
from .evidence import Evidence
from .judgement import Judgement, ours_text

AMENDED = "(amended for the recency control, issue 14, before its data were seen)"
OVER_N = ("(amended, issue 35: judged over every prompt, where it was one, before those data were seen; the one "
          "prompt the paper shows is kept as the illustration)")
PREPRINT = "arXiv 2402.02872 (the preprint)"
EMNLP = "the EMNLP 2024 version"
# No text of the paper is at hand: each source names where the claim and its number stand as restated
# when this project began, and says it is unchecked rather than quote the number as fact.
UNCHECKED = "not checked against the paper's text"


@dataclass(frozen=True)
class Claim:
    """One claim of the paper and how we judge it. `paper`, `rule` and `source` may name the rule's
    thresholds ("{heads:.0%}") and the protocol's K, RANDOM_DRAWS and TOP: they are written
    out from the same numbers the judge reads."""

    id: str
    claim: str  # the paper's statement
    paper: str  # the paper's number, as it gives it
    rule: str  # the verdict rule, fixed before our data were seen
    source: str  # the version, section and figure or table the statement and number come from
    find: Callable[[Evidence], Judgement] = field(repr=False)  # the studies and the rule, on the evidence given
    thresholds: dict[str, float] = field(default_factory=dict)
    label_flow: bool = False  # about the label flow in located heads: judged again on the correct records
    held_out: bool = False  # measures located heads on prompts: judged again in heads located on other records

    def __post_init__(self):
        numbers = {**self.thresholds, "K": rules.K, "RANDOM_DRAWS": rules.RANDOM_DRAWS, "TOP": rules.TOP}
        for text in ("paper", "rule", "source"):
            object.__setattr__(self, text, getattr(self, text).format(**numbers))

    def finding(self, ours: Judgement, correct_only: Judgement | None = None, held_out: Judgement | None = None
                ) -> Finding:
        return Finding(self.id, self.claim, self.paper, self.source, ours.ours, ours.ci, ours.n, ours.verdict, ours.why,
                       correct_only, held_out)


CLAIMS = {c.id: c for c in [
    Claim("table2", "GPT-2 large learns the word tasks in context (Table 2)",
          "top-1 87-100% in all 8 cells (number inputs 94/100, sentiment inputs 92/87, country 100/100, animal 100/100)",
          "replicates: top-1 >= {cell:.0%} in every cell and >= {false_nearest:.0%} on the recency family's prompts whose "
          "nearest demonstration is false; partly: pooled top-1 >= {pooled:.0%} otherwise; does not replicate: pooled "
          "top-1 below {pooled:.0%} " + AMENDED,
          f"{PREPRINT}, Section 4, Table 2 (GPT-2 large); {UNCHECKED}", finders.table2, rules.TABLE2),
    Claim("fig2", "Attention layers, deep ones above all, carry the increase of the predicted label; FFN layers little (Fig. 2)",
          "almost all of the increase in deep attention layers (one example prompt)",
          "replicates: the summed attention-layer increase exceeds the summed FFN increase (95% CI of the difference "
          "above 0) and the deeper half of the layers carries most of the attention increase; does not replicate: "
          "the CI lies below 0; partly: otherwise",
          f"{PREPRINT}, Fig. 2 (GPT-2 large, one example prompt); {UNCHECKED}", finders.fig2, rules.FIG2, label_flow=True),
    Claim("fig3_4", "The in-context heads (top 20 by increase) lie in deep layers (Figs. 3, 4)",
          "top 20 of 720 heads (2.8%) in layers 18-31 of 36",
          "replicates: >= {replicates:.0%} of the top {K} in the deeper half of the layers; partly: >= {partly:.0%}; does not "
          "replicate: fewer",
          f"{PREPRINT}, Section 4, Figs. 3 and 4 (GPT-2 large: 36 layers x 20 heads); {UNCHECKED}", finders.fig3_4,
          rules.FIG3_4, label_flow=True),
    Claim("fig12_15", "The in-context heads are largely the same across datasets (Figs. 12-15)",
          "largely the same heads in every dataset",
          "replicates: two datasets share >= {replicates:.0%} of their top {K} on average; partly: >= {partly:.0%}; does not "
          "replicate: fewer",
          f"{PREPRINT}, Appendix A, Figs. 12-15; {UNCHECKED}", finders.fig12_15, rules.FIG12_15, label_flow=True),
    Claim("table1", "A top in-context head's label values project to the label words (Table 1)",
          "head 22-0: label values' top tokens are the labels (BAR, Bar / foo, Foo)",
          "replicates: in the top head, the share of prompts whose every label value ranks its own label token among "
          "the top {TOP} of the vocabulary has its 95% CI above {share:.0%}; partly: not in the top head, but in one of "
          "the top 5; does not replicate: in none of the top 5 " + OVER_N,
          f"{PREPRINT}, Table 1 (GPT-2 large, head 22-0, the example prompt); {UNCHECKED}", finders.table1, rules.TABLE1,
          label_flow=True, held_out=True),
    Claim("table3", "The same on a correctly predicted AG News prompt (Table 3, Appendix C)",
          "label values project to the labels", "the table1 rule on the AG News prompts, in AG News's top heads " + OVER_N,
          f"{PREPRINT}, Appendix C, Table 3; {UNCHECKED}", finders.table3, rules.TABLE1, label_flow=True, held_out=True),
    Claim("fig5", "Label values of in-context heads rank their labels far above random heads of the same layer (Fig. 5)",
          "in-context heads far above random; weakest head 19-11 MRR 0.0033",
          "replicates: the in-context heads' mean MRR (95% CI) lies above the {percentile}th percentile of {RANDOM_DRAWS} "
          "layer-matched random draws and >= {heads:.0%} of the heads beat their layer's random mean; partly: one of the "
          "two; does not replicate: neither",
          f"{PREPRINT}, Fig. 5 (head 19-11's MRR 0.0033); {UNCHECKED}", finders.fig5, rules.FIG5, label_flow=True, held_out=True),
    Claim("fig6", "In-context heads attend more to the true labels than to the false ones (Fig. 6)",
          "true-label weight far above false-label weight",
          "replicates: mean (true - false) summed attention in the top {K} heads has its 95% CI above 0, true > false "
          "in >= {heads:.0%} of heads, and the truth effect at equal distance (recency family) has its CI above 0; "
          "partly: some but not all three; does not replicate: none " + AMENDED,
          f"{PREPRINT}, Fig. 6; {UNCHECKED}", finders.fig6, rules.FIG6, label_flow=True, held_out=True),
    Claim("fig7", "A label position's attention weight rises with the log-probability increase of its subvalue (Fig. 7)",
          "a rising relation", "replicates: Spearman >= {rho} with its 95% CI above 0; partly: CI above 0; "
          "does not replicate: otherwise",
          f"{PREPRINT}, Fig. 7; {UNCHECKED}", finders.fig7, rules.FIG7, label_flow=True, held_out=True),
    Claim("fig8", "Imbalanced prompts: summed attention on true labels drops, on false labels rises (Fig. 8)",
          "true down, false up in the in-context heads",
          "replicates: the mean change of summed true-label attention has its 95% CI below 0, that of false-label "
          "attention above 0, and the attention per true-label position does not rise (CI of its change not above 0); "
          "partly: some but not all three; does not replicate: none " + AMENDED,
          f"{PREPRINT}, Section 5.1, Fig. 8; {UNCHECKED}", finders.fig8, label_flow=True, held_out=True),
    Claim("fig9", "Re-ordered prompts: summed attention on true labels drops in every in-context head (Fig. 9)",
          "true down in every in-context head",
          "replicates: the mean change of true-label attention has its 95% CI below 0, it drops in >= {heads:.0%} of heads, "
          "and the distance effect at equal truth (recency family) has its CI above 0; partly: some but not all three; "
          "does not replicate: none " + AMENDED,
          f"{PREPRINT}, Section 5.2, Fig. 9; {UNCHECKED}", finders.fig9, rules.FIG9, label_flow=True, held_out=True),
    Claim("fig10_11", "Figs. 8 and 9 hold on the sentence datasets (Figs. 10, 11)", "as Figs. 8, 9",
          "the fig8 and fig9 rules on the sentence datasets pooled: replicates if both replicate; does not replicate "
          "if neither does at least partly; partly otherwise",
          f"{PREPRINT}, Sections 5.1 and 5.2, Figs. 10 and 11; {UNCHECKED}", finders.fig10_11, label_flow=True, held_out=True),
    Claim("app_b_mrr", "Appendix B: label-value MRR in the heads shared by the sentence datasets (Figs. 16-18)",
          "in-context heads far above random",
          "the fig5 rule in the heads in all four sentence datasets' top {K} (the top {K} of their mean increase if "
          "none is), on each sentence dataset: replicates if it replicates on every dataset; does not replicate if "
          "on none even partly; partly otherwise",
          f"{PREPRINT}, Appendix B, Figs. 16-18; {UNCHECKED}", finders.sentence_finding(["fig5"], Evidence.shared),
          label_flow=True, held_out=True),
    Claim("app_b_attention", "Appendix B: true/false attention in the shared heads (Figs. 19-21)",
          "true above false", "the fig6 rule in app_b_mrr's heads on each sentence dataset, judged together as app_b_mrr",
          f"{PREPRINT}, Appendix B, Figs. 19-21; {UNCHECKED}", finders.sentence_finding(["fig6"], Evidence.shared),
          label_flow=True, held_out=True),
    Claim("app_d", "Appendix D: the same picture in LLaMA 7B, 13B, 30B", "label-value MRR and true > false attention",
          "on a Llama-family model, the fig5 and fig6 rules for the single head with the largest mean increase "
          "over the sentence datasets, on each of them: replicates if all eight judgements replicate; does not "
          "replicate if none does even partly; partly otherwise",
          f"{PREPRINT}, Appendix D (LLaMA 7B, 13B, 30B); {UNCHECKED}",
          finders.sentence_finding(["fig5", "fig6"], Evidence.top_head, llama_only=True), label_flow=True, held_out=True),
    Claim("app_e", "Appendix E: position- and neuron-level increases", "label positions carry the head's increase",
          "replicates: the top head's largest position-level increases lie at true-label positions in most prompts: "
          "the share of prompts whose top-head position with the largest increase is a true-label position has its "
          "95% CI above {share}; partly: otherwise, when that share's CI lies above chance (the share of a prompt's "
          "positions that are true-label positions, mean over prompts) and the position is a true label more often "
          "than a false one; does not replicate: otherwise",
          f"{PREPRINT}, Appendix E; {UNCHECKED}", finders.app_e, rules.APP_E, label_flow=True, held_out=True),
    Claim("causal", "Ablating the in-context heads destroys accuracy; random heads do not (EMNLP version)",
          "87.6% -> 24.4% top-1 with the top 20 in-context heads ablated",
          "replicates: with the top {K} ablated (mean ablation, heads located on other prompts), top-1 falls below the "
          "{percentile}th percentile of {RANDOM_DRAWS} layer-matched random draws and to at most {fraction:.0%} of the "
          "plain top-1; partly: below the {percentile}th percentile only; does not replicate: otherwise",
          f"{EMNLP} (beyond the preprint); no text at hand states 87.6% or 24.4%: {UNCHECKED}", finders.causal_finding,
          rules.CAUSAL),
    Claim("majority_bias", "Balancing label attention in the in-context heads reduces majority-label bias",
          "reduced by {paper:.0%}", "replicates: relative reduction >= {at_least:.0%} (half the paper's) with its 95% CI "
          "above 0; partly: CI above 0; does not replicate: otherwise",
          f"{EMNLP}, its abstract as summaries quote it ({{paper:.0%}}); {UNCHECKED}",
          finders.bias(biases.majority_bias, rules.MAJORITY_BIAS), rules.MAJORITY_BIAS),
    Claim("recency_bias", "Position-free label keys in the in-context heads reduce recency bias",
          "reduced by {paper:.0%}", "replicates: relative reduction >= {at_least:.1%} (half the paper's) with its 95% CI "
          "above 0; partly: CI above 0; does not replicate: otherwise",
          f"{EMNLP}, its abstract as summaries quote it ({{paper:.0%}}); {UNCHECKED}",
          finders.bias(biases.recency_bias, rules.RECENCY_BIAS), rules.RECENCY_BIAS),
]}


@dataclass
class Finding:
    """Our result for one claim: the claim's words and our judgement (`Judgement`'s fields)."""

    id: str
    claim: str
    paper: str
    source: str
    ours: float | str | None
    ci: tuple[float, float] | None
    n: int | None
    verdict: str
    why: str
    correct_only: Judgement | None = None  # the same rule on the correctly answered prompts, where it applies
    held_out: Judgement | None = None  # the same rule on held-out records, in heads located on the others

    def to_dict(self) -> dict:
        d = asdict(self)
        for part in (d, d["correct_only"], d["held_out"]):  # JSON has lists, not tuples
            if part is not None and part["ci"] is not None:
                part["ci"] = list(part["ci"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Finding:
        """The finding `to_dict` gave `d` for (a report's JSON entry)."""
        def ci(fields: dict) -> tuple[float, float] | None:
            return None if fields["ci"] is None else tuple(fields["ci"])

        def judgement(key: str) -> Judgement | None:
            extra = d.get(key)
            return None if extra is None else Judgement(**{**extra, "ci": ci(extra)})
        return cls(**{**d, "ci": ci(d), "correct_only": judgement("correct_only"), "held_out": judgement("held_out")})


VIEWS = {"correct_only": "correct prompts only: ours, N, verdict", "held_out": "held out: ours, N, verdict"}


def table(findings: Sequence[Finding]) -> pd.DataFrame:
    """One row a claim: claim, paper, ours (CI), N, verdict, and where any finding has one,
    the correct-only and the held-out judgement."""
    rows = [{"claim": f.claim, "paper": f.paper, "ours (95% CI)": ours_text(f), "N": f.n, "verdict": f.verdict}
            for f in findings]
    for key, column in VIEWS.items():
        if any(getattr(f, key) is not None for f in findings):
            for row, f in zip(rows, findings):
                row[column] = view_text(getattr(f, key))
    return pd.DataFrame(rows, index=[f.id for f in findings])


def view_text(j: Judgement | None) -> str:
    """A view's judgement as a table cell: ours, N and verdict, "- (why)" where not tested, "-" where none."""
    return "-" if j is None else f"{ours_text(j)}, N={j.n}: {j.verdict}" if j.ours is not None else f"- ({j.why})"


def markdown(findings: Sequence[Finding]) -> str:
    """The findings as one markdown table (claim, paper, ours (CI), N, verdict, the correct-only
    and held-out judgements), then each tested claim's why and rule."""
    rows = [f"| id | claim | paper | ours (95% CI) | N | verdict | {' | '.join(VIEWS.values())} |",
            "|---|---|---|---|---|---|---|---|"]
    rows += [f"| {f.id} | {f.claim} | {f.paper} | {ours_text(f)} | {f.n if f.n is not None else '-'} | {f.verdict} | "
             + " | ".join(view_text(getattr(f, key)) for key in VIEWS) + " |" for f in findings]
    why = [f"- **{f.id}** ({f.verdict}): {f.why}. Rule: {CLAIMS[f.id].rule}. Paper: {f.source}."
           + (f" Correct prompts only ({f.correct_only.verdict}): {f.correct_only.why}." if f.correct_only else "")
           + (f" Held out ({f.held_out.verdict}): {f.held_out.why}." if f.held_out else "")
           for f in findings if f.ours is not None]
    return "\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why) + "\n"
