"""Appendices B, D and E: the fig5 and fig6 rules in the sentence datasets' shared heads and in a
Llama-family model's top head, and the order-insensitivity of the increases."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ...core.heads import Head, top_heads
from ...model.loading import ICLModel
from ...stats import bootstrap_ci, spearman
from ...studies import label_attention, mrr, order, subvalues
from .. import rules
from ..evidence import FIRST, NO_SENTENCE_DATA, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, not_tested
from ..rules import RANDOM_DRAWS, Clusters
from .claim import FLOW, ISSUE_44, SENTENCE_ONLY, V1, Claim, register


def stand_in(m: ICLModel) -> str:
    """Appendix D's model, said plainly: the paper's are LLaMA 1 (7B, 13B, 30B); ours is another."""
    cfg = m.arch.config
    return (f"run on {m.name} ({cfg.model_type}, {m.arch.n_layers} layers x {m.arch.n_heads} heads), a stand-in "
            "for the paper's LLaMA 7B, 13B and 30B")


def sentence_finding(judges: Sequence[str], pick: Callable[[Evidence], tuple[list[Head], str]],
                     llama_only: bool = False) -> Callable[[Evidence], Judgement]:
    """Appendices B and D: the fig5 and/or fig6 rule (`judges`) in the heads `pick` gives, on
    each sentence dataset (its correct-only rows in that view), judged together."""
    def find(s: Evidence) -> Judgement:
        if not s.sentence:
            return not_tested(NO_SENTENCE_DATA)
        if llama_only and s.m.arch.family != "llama":
            return not_tested(f"Appendix D is about LLaMA; {s.m.name} is not a Llama-family model")
        heads, which = pick(s)
        if llama_only:
            which = f"{stand_in(s.m)}; {which}"
        parts = {}
        for d in s.sentence:
            ps, rows, clusters = s.prompts(d), s.rows(d), s.clusters([d])
            if "fig5" in judges:
                ours, random = mrr.layer_matched_mrr(s.m, ps, heads, RANDOM_DRAWS, s.seed)
                parts[f"{d} MRR"] = rules.judge_fig5(ours[rows], random[:, rows], heads, clusters)
            if "fig6" in judges:
                true, false = label_attention.attention_on_labels(s.m, ps).at(heads)
                parts[f"{d} attention"] = rules.judge_fig6(true[rows], false[rows], clusters)
        return rules.judge_together(parts, sum(int(s.rows(d).sum()) for d in s.sentence), which)
    return find


register(Claim(id="app_b_mrr", claim="Appendix B: label-value MRR in the heads shared by the sentence datasets (Figs. 16-18)",
               paper="in-context heads above random heads on all four datasets (heads 26-14, 28-10, 29-17)",
               rule="the fig5 rule in the heads in all four sentence datasets' top {K} (the top {K} of their mean increase if "
                    "none is), on each sentence dataset: replicates if it replicates on every dataset; does not replicate if "
                    "on none even partly; partly otherwise",
               source=f"{V1}, Appendix B, Figs. 16-18: 'In all datasets, the labels in in-context heads have larger MRR "
                      "scores than random heads' (l. 1209)",
               set_on=ISSUE_44, unit="datasets that replicate", find=sentence_finding(["fig5"], Evidence.shared), notebooks=("03",),
               reads=SENTENCE_ONLY, **FLOW))


register(Claim(id="app_b_attention", claim="Appendix B: true/false attention in the shared heads (Figs. 19-21)",
               paper="true much larger than false on all four datasets (heads 26-14, 28-10, 29-17)",
               rule="the fig6 rule in app_b_mrr's heads on each sentence dataset, judged together as app_b_mrr",
               source=f"{V1}, Appendix B, Figs. 19-21: 'the attention scores on true labels are much larger than false "
                      "labels' (l. 1209)",
               set_on=ISSUE_44, unit="datasets that replicate", find=sentence_finding(["fig6"], Evidence.shared), notebooks=("04",),
               reads=SENTENCE_ONLY, **FLOW))


register(Claim(id="app_d", claim="Appendix D: the same picture in LLaMA 7B, 13B, 30B",
               paper="label-value MRR and true > false attention in the head with the largest increase, as in GPT-2 large",
               rule="on a Llama-family model, the fig5 and fig6 rules for the single head with the largest mean increase over "
                    "the sentence datasets, on each of them: replicates if all eight judgements replicate; does not "
                    "replicate if none does even partly; partly otherwise",
               source=f"{V1}, Appendix D, Figs. 22-27: 'the head with the largest log probability increase in each model ... "
                      "similar with the results in GPT2 large' (l. 1408)",
               set_on=ISSUE_44, unit="parts that replicate", find=sentence_finding(["fig5", "fig6"], Evidence.top_head, llama_only=True),
               notebooks=("07",), reads=SENTENCE_ONLY, **FLOW))


APP_E = {"rho": 0.8, "partly": 0.5}


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


def app_e(s: Evidence) -> Judgement:
    """Order-insensitivity of the in-context heads' increases (`studies.order`), with where the top 5
    heads' largest position-level increase lies beside it (described, not judged)."""
    ps, heads, rows = s.prompts(FIRST), s.heads(FIRST), s.rows(FIRST)
    increase = order.order_increases(s.m, ps, heads, s.seed)[rows]
    kinds = subvalues.top_position_kinds(subvalues.position_increases(s.m, ps, heads[:5]), ps.positions)[rows]
    shares = subvalues.kind_shares(kinds)  # [5, kinds]
    where = "; ".join(f"{l}-{h}: " + ", ".join(f"{name} {float(x):.1%}" for name, x in zip(subvalues.POSITION_KINDS, row)
                                               if x > 0) for (l, h), row in zip(heads[:5], shares))
    return judge_app_e(increase, heads, f"Where the top 5 heads' largest position-level increase lies: {where}",
                             s.clusters([FIRST]))


register(Claim(id="app_e", claim="Appendix E: a head's increase hardly depends on what was added before it, so increases "
                                 "compare",
               paper="I(attn^n | Lin_0) is similar to I(attn^n | Lin_0 + attn^m): 'the sequence of subvalues do not affect "
                     "the log probability increase score much'",
               rule="in the top {K} heads, the Spearman correlation over (prompt, head) pairs of each head's increase added "
                    "alone on x_l and added after the heads before it in a random order of its layer: replicates: its 95% CI "
                    "at or above {rho}; partly: at or above {partly}; does not replicate: below",
               source=f"{V1}, Appendix E (l. 1628), after Yu and Ananiadou (2024)",
               set_on=ISSUE_44, unit="Spearman's rho", find=app_e, notebooks=("02",), thresholds=APP_E, **FLOW))
