"""The paper's claims, one object each: the statement, the paper's number and its source,
the verdict rule (its prose reads the same thresholds as its judge in `rules`; `set_on` says when
it was set and whether the data it judges had been read then), and the finder that runs the studies and applies the rule (`finders`).
A `Finding` is a claim with our judgement of it; `table` and `markdown` show findings.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import pandas as pd

from . import finders, rules
from .evidence import Evidence
from .judgement import Judgement, ours_text

V1 = "arXiv 2402.02872v1"  # the preprint; "l. N": line N of its text as extracted from the PDF
EMNLP = "the EMNLP 2024 version (arXiv 2402.02872v3)"
ABSTRACT_ONLY = ("only its abstract is at hand: the heads, the ablation and the bias measures are our reconstruction "
                 "(METHOD, Section 8)")
# When each rule was set, and whether the data it judges had been read then (git history).
FIRST_RULES = "2026-11-23 (7261f91), before the first report (22d7730) was made"
RECENCY_CONTROL = "2026-11-23 (2d54f5d), before the recency family's data were seen"
OVER_N = "2026-11-25 (d919c15): over every prompt where it read one, before those data were seen"
ISSUE_44 = ("2026-11-26 (issue 44), after the reports at 64 and 1,000 prompts of the earlier rules had been read: "
            "its thresholds are ours, not tuned to pass")
WORD_ONLY, SENTENCE_ONLY, BOTH = frozenset({"word"}), frozenset({"sentence"}), frozenset({"word", "sentence"})


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One claim of the paper (or one control or extension of ours, which says so) and how we judge
    it. `paper`, `rule` and `source` may name the rule's thresholds ("{heads:.0%}") and the
    protocol's K, RANDOM_DRAWS and TOP: they are written out from the same numbers the judge reads."""

    id: str
    claim: str  # the paper's statement, or "Our control: ..." / "Our extension: ..."
    paper: str  # the paper's number, heads and layers, as it gives them
    rule: str  # the verdict rule
    source: str  # the version and the line(s) of its text the statement and number rest on
    set_on: str  # when the rule was set, and whether the data it judges had been read then
    find: Callable[[Evidence], Judgement] = field(repr=False)  # the studies and the rule, on the evidence given
    notebooks: tuple[str, ...]  # the notebooks that end with its verdict ("01" ... "08")
    reads: frozenset[str] = WORD_ONLY  # the datasets its judgement needs prompts of ("word", "sentence")
    thresholds: dict[str, float] = field(default_factory=dict)
    label_flow: bool = False  # about the label flow in located heads: judged again on the correct records
    held_out: bool = False  # measures located heads on prompts: judged again in heads located on other inputs

    def __post_init__(self):
        numbers = {**self.thresholds, "K": rules.K, "RANDOM_DRAWS": rules.RANDOM_DRAWS, "TOP": rules.TOP}
        for text in ("claim", "paper", "rule", "source"):
            object.__setattr__(self, text, getattr(self, text).format(**numbers))

    def finding(self, ours: Judgement, correct_only: Judgement | None = None, held_out: Judgement | None = None
                ) -> Finding:
        return Finding(self.id, self.claim, self.paper, self.source, ours.ours, ours.ci, ours.n, ours.verdict, ours.why,
                       correct_only, held_out)


def claims_of(notebook: str) -> list[str]:
    """The ids of the claims notebook `notebook` ("01" ... "08") ends with, in registry order."""
    return [c.id for c in CLAIMS.values() if notebook in c.notebooks]


FLOW = {"label_flow": True, "held_out": True}
CLAIMS = {c.id: c for c in [
    Claim(id="table2", claim="GPT-2 large learns the word tasks in context (Table 2)",
          paper="top-1 87-100% in all 8 cells (number inputs 94/100, sentiment inputs 92/87, country 100/100, animal "
                "100/100, true label foo/bar)",
          rule="replicates: top-1 >= {cell:.0%} in every cell; partly: pooled top-1 >= {pooled:.0%} otherwise; does not "
               "replicate: pooled top-1 below {pooled:.0%}",
          source=f"{V1}, Section 4.1, Table 2 (l. 394-403); 'GPT2 large can classify the words by ICL' (l. 445)",
          set_on=FIRST_RULES, find=finders.table2, notebooks=("01",), thresholds=rules.TABLE2),
    Claim(id="table2_control", claim="Our control: the model still names the true label when a false demonstration is "
                                     "nearest the input",
          paper="not tested: the paper's prompts put the true demonstrations nearest the input (l. 421)",
          rule="replicates: top-1 on the recency family's prompts whose nearest demonstration is false has its 95% CI at "
               "or above {false_nearest:.0%}; partly: its mean is; does not replicate: otherwise",
          source=f"ours, beside {V1} Table 2 (l. 394-403)", set_on=RECENCY_CONTROL, find=finders.table2_control,
          notebooks=("01",), thresholds=rules.TABLE2_CONTROL),
    Claim(id="fig2", claim="Attention layers, deep ones above all, carry the increase of the predicted label; FFN layers "
                           "little (Fig. 2)",
          paper="almost all of the increase in deep attention layers (one example prompt)",
          rule="replicates: the summed attention-layer increase exceeds the summed FFN increase (95% CI of the difference "
               "above 0) and the deeper half of the layers carries most of the attention increase; does not replicate: "
               "the CI lies below 0; partly: otherwise",
          source=f"{V1}, Section 3.1, Fig. 2: 'Almost all the improvements are caused by deep attention layers' (l. 275)",
          set_on=f"{FIRST_RULES}; {OVER_N}", find=finders.fig2, notebooks=("01",), thresholds=rules.FIG2,
          label_flow=True),
    Claim(id="fig3_4", claim="The in-context heads (top 20 by increase) lie in deep layers (Figs. 3, 4)",
          paper="top 20 of 720 heads (2.8%) in layers 18-31 of 36",
          rule="replicates: >= {replicates:.0%} of the top {K} in the deeper half of the layers; partly: >= {partly:.0%}; "
               "does not replicate: fewer",
          source=f"{V1}, Section 4.2, Figs. 3 and 4 (GPT-2 large, 36 layers x 20 heads): 'The important heads are in "
                 "deep layers (18-31)' (l. 449)",
          set_on=FIRST_RULES, find=finders.fig3_4, notebooks=("01",), thresholds=rules.FIG3_4, label_flow=True),
    Claim(id="fig12_15", claim="The in-context heads are largely the same across datasets (Figs. 12-15)",
          paper="similar head indexes on every dataset; a large overlap between sentence and word datasets",
          rule="replicates: two datasets share >= {replicates:.0%} of their top {K} on average; partly: >= {partly:.0%}; "
               "does not replicate: fewer",
          source=f"{V1}, Section 4.2 ('The head indexes are similar on these datasets', l. 449) and Appendix A, Figs. "
                 "12-15 (l. 1153, 1165)",
          set_on=FIRST_RULES, find=finders.fig12_15, notebooks=("01",), reads=BOTH, thresholds=rules.FIG12_15,
          label_flow=True),
    Claim(id="table1", claim="A top in-context head's label values project to the label words (Table 1)",
          paper="head 22-0: label values' top tokens are the labels (BAR, Bar / foo, Foo)",
          rule="replicates: in the top head, the share of prompts whose every label value ranks its own label token among "
               "the top {TOP} of the vocabulary has its 95% CI above {share:.0%}; partly: not in the top head, but in one "
               "of the top 5; does not replicate: in none of the top 5 (the one prompt the paper shows is the "
               "illustration)",
          source=f"{V1}, Section 3.2, Table 1 (GPT-2 large, layer 22 head 0, l. 331-351): 'Label values' top words have "
                 "related concepts with the labels' (l. 389)",
          set_on=OVER_N, find=finders.table1, notebooks=("02",), thresholds=rules.TABLE1, **FLOW),
    Claim(id="table3", claim="The same on a correctly predicted AG News prompt (Table 3, Appendix C)",
          paper="head 23-13: label values' top tokens are the labels (BAR, bars / foo, Foo)",
          rule="the table1 rule on the AG News prompts, in AG News's top heads",
          source=f"{V1}, Appendix C, Table 3 (l. 1272-1298): 'On label values, \"bar\" and \"foo\" have top rankings' "
                 "(l. 1300)",
          set_on=OVER_N, find=finders.table3, notebooks=("02",), reads=SENTENCE_ONLY, thresholds=rules.TABLE1, **FLOW),
    Claim(id="two_towers", claim="Query and key are two towers: label keys carry their own demonstration, the last "
                                 "query the input (Table 1's key and query rows; the title)",
          paper="head 22-0, one prompt: the 2-, 5- and 11-keys hold love, like, two; the last query one, first",
          rule="keys: the label key ranks its own demonstration's word above the other demonstrations' words (MRR "
               "difference's 95% CI above 0, own at least {ratio:g}x theirs; the paper's label key is the key's input, "
               "the same in every head of a layer, so no random head of the layer differs from it); query: the "
               "in-context heads' last queries rank the input word by the fig5 rule against {RANDOM_DRAWS} layer-matched "
               "random draws, on each word dataset; replicates if all three judgements replicate; does not replicate if "
               "none does even partly; partly otherwise",
          source=f"{V1}, Section 3.2: label keys are 'their inputs before multiplying the key matrix', the query its "
                 "'reverse projection ... by multiplying QK^T' (l. 279); 'Label keys' top words ... are related to their "
                 "demonstrations ... Last token query's top words are related to the input text' (l. 389); the "
                 "hypothesis (l. 391) and 'two towers' (l. 514)",
          set_on=ISSUE_44, find=finders.two_towers, notebooks=("02",), thresholds=rules.TOWERS, **FLOW),
    Claim(id="metric", claim="Our extension: at a fixed position, a label's query-key score rises with its "
                              "demonstration's similarity to the input (the metric the two towers learn)",
          paper="argued from one prompt (Table 1, l. 389-391; Table 3's Liverpool, l. 1300), not measured",
          rule="in each word dataset's top {K} heads, the Spearman correlation over (prompt, head, label position) of the "
               "label's log attention and its demonstration's cosine similarity to the input in the model's input "
               "embeddings, each with the prompt's and the position's mean taken out: replicates: at least {rho} with "
               "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
          source=f"ours, beside {V1} Section 4.4's conclusion, the query and key matrices 'two towers ... for learning "
                 "the similarity metric' (l. 514)",
          set_on=ISSUE_44, find=finders.metric, notebooks=("02",), thresholds=rules.METRIC, **FLOW),
    Claim(id="fig5", claim="Label values of in-context heads rank their labels far above random heads of the same "
                           "layer (Fig. 5)",
          paper="much higher MRR than random heads; weakest head 19-11 MRR 0.0033 (mean rank 303)",
          rule="replicates: the in-context heads' mean MRR (95% CI) lies above the {percentile}th percentile of "
               "{RANDOM_DRAWS} layer-matched random draws and at least {ratio:g}x their mean, and >= {heads:.0%} of the "
               "heads beat their layer's random mean; partly: one of the two; does not replicate: neither",
          source=f"{V1}, Section 4.3, Fig. 5: 'Compared with random heads, label values have much higher MRR scores "
                 "in in-context heads. The smallest average MRR score 0.0033 is in layer 19, head 11' (l. 458)",
          set_on=ISSUE_44, find=finders.fig5, notebooks=("03",), thresholds=rules.FIG5, **FLOW),
    Claim(id="fig6", claim="In-context heads attend much more to the true labels than to the false ones (Fig. 6)",
          paper="true-label weight much larger than false-label weight in all in-context heads",
          rule="replicates: mean (true - false) summed attention in the top {K} heads has its 95% CI above 0 and is at "
               "least {min_attention}, and true > false in >= {heads:.0%} of heads; partly: one of the two; does not "
               "replicate: neither",
          source=f"{V1}, Section 4.4, Fig. 6: 'In all in-context heads, the attention weights between last token query "
                 "and true label keys are much larger than those ... false label keys' (l. 469, 507)",
          set_on=ISSUE_44, find=finders.fig6, notebooks=("04",), thresholds=rules.FIG6, **FLOW),
    Claim(id="fig6_control", claim="Our control: a label gets more attention for being true, at equal distance from "
                                   "the input (the recency family)",
          paper="not separated: the paper's true labels are always nearest the input (l. 421)",
          rule="replicates: the truth effect (attention a label position gets for being true, at equal distance) has its "
               "95% CI above 0; does not replicate: below 0; partly: otherwise",
          source=f"ours, beside {V1} Fig. 6 (l. 469)", set_on=RECENCY_CONTROL, find=finders.fig6_control,
          notebooks=("04",), **FLOW),
    Claim(id="fig7", claim="A label position's attention weight rises with the log-probability increase of its "
                           "subvalue (Fig. 7)",
          paper="not linear, but an increasing trend (three top heads, one random prompt)",
          rule="replicates: Spearman >= {rho} with its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
          source=f"{V1}, Section 4.4, Fig. 7: 'It is not a linear relationship, but it has a increasing trend' (l. 507)",
          set_on=FIRST_RULES, find=finders.fig7, notebooks=("04",), thresholds=rules.FIG7, **FLOW),
    Claim(id="fig8", claim="Imbalanced prompts: summed attention on true labels drops, on false labels rises (Fig. 8)",
          paper="true down, false up (heads 19-11 and 20-11; 'other in-context heads have similar trends')",
          rule="replicates: the mean change of summed true-label attention has its 95% CI below 0 and is at most "
               "-{min_change}, and that of false-label attention has its CI above 0 and is at least {min_change}; partly: "
               "one of the two; does not replicate: neither",
          source=f"{V1}, Section 5.1, Fig. 8: 'The sum of attention weights on true labels decrease on the imbalanced "
                 "dataset. On the contrary, the attention weights on false labels increase' (l. 540)",
          set_on=ISSUE_44, find=finders.fig8, notebooks=("05",), thresholds=rules.FIG8, **FLOW),
    Claim(id="fig9", claim="Re-ordered prompts: summed attention on true labels drops in the in-context heads (Fig. 9)",
          paper="much smaller on re-ordered prompts (heads 19-11 and 20-11; 'other heads have similar trends')",
          rule="replicates: the mean change of true-label attention has its 95% CI below 0 and is at most -{min_change}, "
               "and it drops in >= {heads:.0%} of heads; partly: one of the two; does not replicate: neither",
          source=f"{V1}, Section 5.2, Fig. 9: 'The sum of attention weights on re-order dataset are much smaller than "
                 "those on the origin dataset' (l. 640)",
          set_on=ISSUE_44, find=finders.fig9, notebooks=("06",), thresholds=rules.FIG9, **FLOW),
    Claim(id="fig9_control", claim="Our control: a label gets more attention for being nearest the input, at equal "
                                   "truth (the recency family)",
          paper="the paper's account of the order effect: labels also take in adjacent tokens (l. 421-437)",
          rule="replicates: the distance effect (nearest minus farthest label position, at equal truth) has its 95% CI "
               "above 0; does not replicate: below 0; partly: otherwise",
          source=f"ours, beside {V1} Section 5.2", set_on=RECENCY_CONTROL, find=finders.fig9_control,
          notebooks=("06",), **FLOW),
    Claim(id="fig10", claim="Imbalanced prompts: the attention a true label gets drops in most heads both word "
                            "datasets rank top, rises in few (Fig. 10)",
          paper="heads of layers 18-29 in both word datasets' top 20, on sentiment/number: up only in 21-19; down 'a lot' "
                "in 19-11, 20-11, 22-0, 24-13, 27-16",
          rule="in the heads in both word datasets' top {K}, on sentiment/number, the mean attention a true-label position "
               "gets: replicates: it drops (the change's 95% CI below 0, the change at most -{min_change}) in >= "
               "{heads:.0%} of the heads; partly: the mean change over the heads has its CI below 0; does not replicate: "
               "otherwise",
          source=f"{V1}, Section 5.2, Fig. 10: 'the average attention weight of imbalanced dataset only increases on head "
                 "21-19. In other in-context heads ... the attention weights decrease a lot' (l. 644, 649)",
          set_on=ISSUE_44, find=finders.fig10, notebooks=("05",), thresholds=rules.FIG10, **FLOW),
    Claim(id="fig11", claim="Re-ordered prompts: the attention a true label gets drops in every head both word datasets "
                            "rank top (Fig. 11)",
          paper="drops in all of them, most in 21-19 and 22-0",
          rule="the fig10 measure on re-ordered prompts: replicates: it drops (CI below 0, the change at most "
               "-{min_change}) in >= {heads:.0%} of the heads; partly: the mean change over the heads has its CI below 0; "
               "does not replicate: otherwise",
          source=f"{V1}, Section 5.2, Fig. 11: 'On re-order dataset, the attention weights on all incontext heads drop, "
                 "especially in 21-19 and 22-0' (l. 644, 654)",
          set_on=ISSUE_44, find=finders.fig11, notebooks=("06",), thresholds=rules.FIG11, **FLOW),
    Claim(id="fig8_9_sentences", claim="Our extension: Figs. 8 and 9 on the sentence datasets",
          paper="not in the paper: its Figs. 8-11 are on sentiment/number",
          rule="the fig8 and fig9 rules on the sentence datasets pooled: replicates if both replicate; does not "
               "replicate if neither does at least partly; partly otherwise",
          source=f"ours, beside {V1} Sections 5.1 and 5.2", set_on=ISSUE_44, find=finders.fig8_9_sentences,
          notebooks=("05", "06"), reads=SENTENCE_ONLY, **FLOW),
    Claim(id="app_b_mrr", claim="Appendix B: label-value MRR in the heads shared by the sentence datasets (Figs. 16-18)",
          paper="in-context heads above random heads on all four datasets (heads 26-14, 28-10, 29-17)",
          rule="the fig5 rule in the heads in all four sentence datasets' top {K} (the top {K} of their mean increase if "
               "none is), on each sentence dataset: replicates if it replicates on every dataset; does not replicate if "
               "on none even partly; partly otherwise",
          source=f"{V1}, Appendix B, Figs. 16-18: 'In all datasets, the labels in in-context heads have larger MRR "
                 "scores than random heads' (l. 1209)",
          set_on=ISSUE_44, find=finders.sentence_finding(["fig5"], Evidence.shared), notebooks=("03",),
          reads=SENTENCE_ONLY, **FLOW),
    Claim(id="app_b_attention", claim="Appendix B: true/false attention in the shared heads (Figs. 19-21)",
          paper="true much larger than false on all four datasets (heads 26-14, 28-10, 29-17)",
          rule="the fig6 rule in app_b_mrr's heads on each sentence dataset, judged together as app_b_mrr",
          source=f"{V1}, Appendix B, Figs. 19-21: 'the attention scores on true labels are much larger than false "
                 "labels' (l. 1209)",
          set_on=ISSUE_44, find=finders.sentence_finding(["fig6"], Evidence.shared), notebooks=("04",),
          reads=SENTENCE_ONLY, **FLOW),
    Claim(id="app_d", claim="Appendix D: the same picture in LLaMA 7B, 13B, 30B",
          paper="label-value MRR and true > false attention in the head with the largest increase, as in GPT-2 large",
          rule="on a Llama-family model, the fig5 and fig6 rules for the single head with the largest mean increase over "
               "the sentence datasets, on each of them: replicates if all eight judgements replicate; does not "
               "replicate if none does even partly; partly otherwise",
          source=f"{V1}, Appendix D, Figs. 22-27: 'the head with the largest log probability increase in each model ... "
                 "similar with the results in GPT2 large' (l. 1408)",
          set_on=ISSUE_44, find=finders.sentence_finding(["fig5", "fig6"], Evidence.top_head, llama_only=True),
          notebooks=("07",), reads=SENTENCE_ONLY, **FLOW),
    Claim(id="app_e", claim="Appendix E: a head's increase hardly depends on what was added before it, so increases "
                            "compare",
          paper="I(attn^n | Lin_0) is similar to I(attn^n | Lin_0 + attn^m): 'the sequence of subvalues do not affect "
                "the log probability increase score much'",
          rule="in the top {K} heads, the Spearman correlation over (prompt, head) pairs of each head's increase added "
               "alone on x_l and added after the heads before it in a random order of its layer: replicates: its 95% CI "
               "at or above {rho}; partly: at or above {partly}; does not replicate: below",
          source=f"{V1}, Appendix E (l. 1628), after Yu and Ananiadou (2024)",
          set_on=ISSUE_44, find=finders.app_e, notebooks=("02",), thresholds=rules.APP_E, **FLOW),
    Claim(id="causal", claim="Intervening in 1% of the heads, the in-context heads, destroys ICL accuracy; random heads "
                             "do not (EMNLP abstract)",
          paper="87.6% -> 24.4% accuracy with 1% of the heads intervened",
          rule="replicates: with the top 1% of heads (rounded up, at least one) mean-ablated, heads located on other "
               "prompts, top-1 falls below the {percentile}th percentile of {RANDOM_DRAWS} layer-matched random draws "
               "and to at most {fraction:.0%} of the plain top-1; partly: below the {percentile}th percentile only; does "
               "not replicate: otherwise",
          source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", set_on=ISSUE_44, find=finders.causal_finding,
          notebooks=("08",), thresholds=rules.CAUSAL),
    Claim(id="causal_top", claim="Our row: the same with the top {K} in-context heads ablated",
          paper="not in the text at hand",
          rule="the causal rule with the top {K} heads", source=f"ours, beside {EMNLP}, abstract; {ABSTRACT_ONLY}",
          set_on=FIRST_RULES, find=finders.causal_top, notebooks=("08",), thresholds=rules.CAUSAL),
    Claim(id="majority_bias", claim="Balancing label attention in the in-context heads reduces majority-label bias",
          paper="reduced by {paper:.0%}", rule="replicates: relative reduction >= {at_least:.0%} (half the paper's) with "
          "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
          source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", set_on=FIRST_RULES, find=finders.bias("majority", rules.MAJORITY_BIAS),
          notebooks=("08",), thresholds=rules.MAJORITY_BIAS),
    Claim(id="majority_cost", claim="Our control: balancing label attention costs at most {points:.0%} of top-1 on "
                                    "standard prompts",
          paper="not in the abstract", rule="replicates: the top-1 lost on balanced prompts has its 95% CI at or below "
          "{points:.0%}; partly: its mean is; does not replicate: otherwise",
          source=f"ours, beside {EMNLP}, abstract", set_on=ISSUE_44, find=finders.bias_cost("majority"),
          notebooks=("08",), thresholds=rules.BIAS_COST),
    Claim(id="recency_bias", claim="Position-free label keys in the in-context heads reduce recency bias",
          paper="reduced by {paper:.0%}", rule="replicates: relative reduction >= {at_least:.1%} (half the paper's) with "
          "its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
          source=f"{EMNLP}, abstract; {ABSTRACT_ONLY}", set_on=FIRST_RULES, find=finders.bias("recency", rules.RECENCY_BIAS),
          notebooks=("08",), thresholds=rules.RECENCY_BIAS),
    Claim(id="recency_cost", claim="Our control: position-free label keys cost at most {points:.0%} of top-1 on standard "
                                   "prompts",
          paper="not in the abstract", rule="replicates: the top-1 lost on balanced prompts has its 95% CI at or below "
          "{points:.0%}; partly: its mean is; does not replicate: otherwise",
          source=f"ours, beside {EMNLP}, abstract", set_on=ISSUE_44, find=finders.bias_cost("recency"),
          notebooks=("08",), thresholds=rules.BIAS_COST),
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
    why = [f"- **{f.id}** ({f.verdict}): {f.why}. Rule: {CLAIMS[f.id].rule} (set {CLAIMS[f.id].set_on}). Paper: {f.source}."
           + (f" Correct prompts only ({f.correct_only.verdict}): {f.correct_only.why}." if f.correct_only else "")
           + (f" Held out ({f.held_out.verdict}): {f.held_out.why}." if f.held_out else "")
           for f in findings if f.ours is not None]
    return "\n".join(rows) + "\n\nWhy, claim by claim, with the rule each verdict follows:\n\n" + "\n".join(why) + "\n"
