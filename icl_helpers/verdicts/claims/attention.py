"""Section 4.4, Figs. 6 and 7: the last position attends to the true labels more than to the false
ones, and more to the positions that raise the label; and our control, truth at equal distance."""
from __future__ import annotations

import math

import torch

from ...core.heads import at_heads
from ...stats import spearman, unweighted, weighted_ci, weighted_spearman
from ...studies import label_attention
from ...studies.recency import Effects
from .. import rules
from ..evidence import Evidence
from ..judgement import Judgement, all_hold
from ..rules import Clusters
from ..whose import OURS
from .registry import Claim, register
from .sources import FLOW, RESTATED, V1


def word_attention(s: Evidence, dataset: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed attention on the true and on the false labels [N, S] in the dataset's S heads, judged rows."""
    true, false = label_attention.attention_on_labels(s.m, s.prompts(dataset)).at(s.heads(dataset))
    return true[s.rows(dataset)], false[s.rows(dataset)]


def fig6(s: Evidence) -> Judgement:
    true, false = (torch.cat(parts) for parts in zip(*(word_attention(s, d) for d in s.word)))
    return rules.judge_fig6(true, false, s.clusters(s.word))


register(Claim(id="fig6", claim="In-context heads attend much more to the true labels than to the false ones (Fig. 6)",
               paper="true-label weight much larger than false-label weight in all in-context heads",
               rule="replicates: mean (true - false) summed attention in the top {K} heads has its 95% CI above 0 and is at "
                    "least {min_attention}, and true exceeds false by at least {min_attention} in >= {heads:.0%} of heads; "
                    "partly: one of the two; does not replicate: neither",
               source=f"{V1}, Section 4.4, Fig. 6: 'In all in-context heads, the attention weights between last token query "
                      "and true label keys are much larger than those ... false label keys' (l. 469, 507)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (fig6's true and false sums, heads "
                      "counted at true > false)", unit="summed attention, true minus false labels", find=fig6, notebooks=("04",),
               thresholds=rules.FIG6, views=FLOW))


FIG6_CONTROL = {"min_effect": rules.FIG6["min_attention"] / 2}  # fig6's minimum, over two labels, a label position


def judge_truth_control(effects: Effects) -> Judgement:
    """The truth effect over the recency orders (each record in every order of its true and false
    demonstrations): attention a label position gets for being true, at equal distance."""
    return rules.judge_at_least(effects.truth, effects.truth_ci, effects.n, effects.text(), FIG6_CONTROL["min_effect"])


def fig6_control(s: Evidence) -> Judgement:
    return judge_truth_control(s.effects(tuple(s.word)))


register(Claim(id="fig6_control", whose=OURS, claim="Our control: a label gets more attention for being true, at equal distance from "
                                        "the input (the recency family)",
               paper="not separated: the paper's true labels are always nearest the input (l. 421)",
               rule="replicates: the truth effect (attention a label position gets for being true, at equal distance) is at "
                    "least {min_effect:g} (fig6's minimum, which sums two labels, a label position) with its 95% CI above 0; "
                    "partly: at least {min_effect:g}, its CI reaching 0; does not replicate: smaller",
               source=f"ours, beside {V1} Fig. 6 (l. 469)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (the truth effect and its interval)",
               unit="attention a label position: truth effect", find=fig6_control,
               notebooks=("04",), thresholds=FIG6_CONTROL, views=FLOW))


FIG7 = {"heads": 3, "rho": 0.3, "min_increase": 0.1}
BINS = {"high": (0.9, 1.0), "middle": (0.4, 0.6)}  # the paper's: 'between 0.9 and 1.0 ... than those between 0.4 and 0.6'


def _rho(points: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """points: [N, S, D, 2] (weight, increase), NaN weight where no true label; w [d, N] each prompt's multiplicity
    in d resamples: [d] Spearman over the true labels."""
    weight, increase = points.unbind(-1)
    return weighted_spearman(weight, increase, ~weight.isnan(), w)


def _in_bin(weight: torch.Tensor, bin: str) -> torch.Tensor:
    low, high = BINS[bin]
    return (weight >= low) & (weight <= high)  # NaN: in no bin


def _bin_gap(points: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """points, w: as `_rho`'s: [d] the mean increase of the weights in the high bin minus the middle bin's (NaN where
    one is empty)."""
    weight, increase = (v.flatten(1).double() for v in points.unbind(-1))  # [N, P] each

    def mean(bin: str) -> torch.Tensor:
        inside = _in_bin(weight, bin)
        return w @ torch.where(inside, increase, 0).sum(1) / (w @ inside.double().sum(1))
    return mean("high") - mean("middle")


def _bin_text(attention: torch.Tensor, increase: torch.Tensor, bin: str) -> str:
    """A bin's mean increase and its count of positions, in words."""
    inside = _in_bin(attention, bin)
    low, high = BINS[bin]
    mean = f"mean increase {float(increase[inside].mean()):+.3f}" if inside.any() else "none"
    return f"weights {low:g}-{high:g}: {mean} ({int(inside.sum())} positions)"


def judge_fig7(attention: torch.Tensor, increase: torch.Tensor, summed: tuple[torch.Tensor, torch.Tensor],
               clusters: Clusters = None) -> Judgement:
    """attention, increase: [N, S, D] each true label position's attention weight in each of S top
    heads and the position-level increase of its subvalue (NaN weight at false labels and past a
    prompt's labels); summed: ours beside it, ([N, S], [N, S]) a head's summed true-label
    attention and the whole head's increase."""
    points = torch.stack([attention, increase], -1)  # [N, S, D, 2]: resampled together, by prompt
    rho, rho_ci = unweighted(_rho, points), weighted_ci(points, _rho, clusters=clusters)
    gap, gap_ci = unweighted(_bin_gap, points), weighted_ci(points, _bin_gap, clusters=clusters)
    verdict = all_hold(rho >= FIG7["rho"] and rho_ci[0] > 0, gap >= FIG7["min_increase"] and gap_ci[0] > 0)
    bins = "; ".join(_bin_text(attention, increase, b) for b in BINS)
    gap_text = "not comparable" if math.isnan(gap) else f"{gap:+.3f} (CI {gap_ci[0]:+.3f} to {gap_ci[1]:+.3f})"
    return Judgement(rho, rho_ci, len(points), verdict,
                     f"true label positions of the top {attention.shape[1]} heads: Spearman over "
                     f"{int((~attention.isnan()).sum())} (prompt, head, position) triples, each position's attention "
                     f"weight against its subvalue's increase; {bins}; high minus middle {gap_text}; ours beside it, a "
                     f"head's summed true-label attention against the whole head's increase: {spearman(*summed):.3f}")


def fig7(s: Evidence) -> Judgement:
    """Each true label position's attention weight and its subvalue's increase [N, S, D] in each word
    dataset's top S = 3 heads, beside ours: a head's summed true-label attention and its increase [N, S]."""
    attention, increase, summed = [], [], []
    for d in s.word:
        ps, heads, rows = s.prompts(d), s.heads(d), s.rows(d)
        top = heads[:FIG7["heads"]]
        true = ps.positions.is_true[:, None]  # [N, 1, D]
        attention.append(label_attention.attention_on_labels(s.m, ps).per_label_at(top).where(true, torch.nan)[rows])
        increase.append(label_attention.label_increases(s.m, ps, heads)[:, :len(top)][rows])  # the K heads' cached study
        summed.append((word_attention(s, d)[0][:, :len(top)], at_heads(s.loc(d).head[rows], top)))
    return judge_fig7(torch.cat(attention), torch.cat(increase), tuple(torch.cat(x) for x in zip(*summed)), s.clusters(s.word))


register(Claim(id="fig7", claim="A true label's attention weight rises with the log-probability increase of its subvalue: "
                                "weights between 0.9 and 1.0 have larger increases than those between 0.4 and 0.6 (Fig. 7)",
               paper="not linear, but an increasing trend; weights 0.9-1.0 above 0.4-0.6 (true labels, top 3 heads, one "
                     "random prompt)",
               rule="on the true label positions of each word dataset's top {heads:g} heads: replicates: the Spearman "
                    "correlation of a position's attention weight and its subvalue's increase is at least {rho} with its 95% "
                    "CI above 0, and the mean increase at weights 0.9-1.0 exceeds that at weights 0.4-0.6 by at least "
                    "{min_increase:g} with its CI above 0; partly: one of the two; does not replicate: neither",
               source=f"{V1}, Section 4.4, Fig. 7: 'calculate the attention weights of true labels and the label values' "
                      "log probability increases in top3 important in-context heads ... It is not a linear relationship, "
                      "but it has a increasing trend. Attention weights between 0.9 and 1.0 have larger log probability "
                      "increase than those between 0.4 and 0.6' (l. 507)",
               set_on=f"{RESTATED}; its data had been shown: notebook 04 charts the label positions' weights and increases, "
                      "and the earlier reports pooled them with the false labels",
               unit="Spearman's rho", find=fig7, notebooks=("04",), thresholds=FIG7, views=FLOW))
