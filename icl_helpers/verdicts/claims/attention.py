"""Section 4.4, Figs. 6 and 7: the last position attends to the true labels more than to the false
ones, and more to the positions that raise the label; and our control, truth at equal distance."""
from __future__ import annotations

import torch

from ...core.heads import at_heads
from ...stats import bootstrap_ci, spearman
from ...studies import label_attention
from ...studies.recency import Effects
from .. import rules
from ..evidence import WORD, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement
from ..rules import Clusters
from .claim import FIG7_REMEASURED, FLOW, ISSUE_44, RECENCY_CONTROL, V1, Claim, register


def word_attention(s: Evidence, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed attention on the true and on the false labels [N, K] in the dataset's heads, judged rows."""
    true, false = label_attention.attention_on_labels(s.m, s.prompts(dataset)).at(s.heads(dataset))
    return true[s.rows(dataset)], false[s.rows(dataset)]


def fig6(s: Evidence) -> Judgement:
    true, false = (torch.cat(parts) for parts in zip(*(word_attention(s, d) for d in WORD)))
    return rules.judge_fig6(true, false, s.clusters(WORD))


register(Claim(id="fig6", claim="In-context heads attend much more to the true labels than to the false ones (Fig. 6)",
               paper="true-label weight much larger than false-label weight in all in-context heads",
               rule="replicates: mean (true - false) summed attention in the top {K} heads has its 95% CI above 0 and is at "
                    "least {min_attention}, and true > false in >= {heads:.0%} of heads; partly: one of the two; does not "
                    "replicate: neither",
               source=f"{V1}, Section 4.4, Fig. 6: 'In all in-context heads, the attention weights between last token query "
                      "and true label keys are much larger than those ... false label keys' (l. 469, 507)",
               set_on=ISSUE_44, unit="summed attention, true minus false labels", find=fig6, notebooks=("04",), thresholds=rules.FIG6, **FLOW))


def judge_truth_control(effects: Effects) -> Judgement:
    """The recency family's truth effect: attention a label position gets for being true, at equal distance."""
    return rules.judge_sign(effects.truth, effects.truth_ci, effects.n, effects.text())


def fig6_control(s: Evidence) -> Judgement:
    return judge_truth_control(s.effects(tuple(WORD)))


register(Claim(id="fig6_control", claim="Our control: a label gets more attention for being true, at equal distance from "
                                        "the input (the recency family)",
               paper="not separated: the paper's true labels are always nearest the input (l. 421)",
               rule="replicates: the truth effect (attention a label position gets for being true, at equal distance) has its "
                    "95% CI above 0; does not replicate: below 0; partly: otherwise",
               source=f"ours, beside {V1} Fig. 6 (l. 469)", set_on=RECENCY_CONTROL,
               unit="attention a label position: truth effect", find=fig6_control,
               notebooks=("04",), **FLOW))


FIG7 = {"rho": 0.3}


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


def fig7(s: Evidence) -> Judgement:
    """Each label position's attention weight and its subvalue's increase [N, S, K] in each word
    dataset's heads, beside ours: a head's summed true-label attention and its increase [N, S]."""
    attention, increase = [], []
    for d in WORD:
        ps, heads, rows = s.prompts(d), s.heads(d), s.rows(d)
        attention.append(label_attention.attention_on_labels(s.m, ps).per_label_at(heads)[rows])
        increase.append(label_attention.label_increases(s.m, ps, heads)[rows])
    summed = (torch.cat([word_attention(s, d)[0] for d in WORD]),
              torch.cat([at_heads(s.loc(d).head[s.rows(d)], s.heads(d)) for d in WORD]))
    return judge_fig7(torch.cat(attention), torch.cat(increase), summed, s.clusters(WORD))


register(Claim(id="fig7", claim="A label position's attention weight rises with the log-probability increase of its "
                                "subvalue (Fig. 7)",
               paper="not linear, but an increasing trend (three top heads, one random prompt)",
               rule="replicates: Spearman >= {rho} with its 95% CI above 0; partly: CI above 0; does not replicate: otherwise",
               source=f"{V1}, Section 4.4, Fig. 7: 'It is not a linear relationship, but it has a increasing trend' (l. 507)",
               set_on=FIG7_REMEASURED, unit="Spearman's rho", find=fig7, notebooks=("04",), thresholds=FIG7, **FLOW))
