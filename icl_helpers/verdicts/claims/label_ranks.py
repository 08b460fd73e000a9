"""Section 4.3, Fig. 5: label values rank their labels far above random heads of the same layer
(the rule, `rules.judge_fig5`, is shared with the two towers' queries and Appendices B and D)."""
from __future__ import annotations

from ...studies import mrr
from .. import rules
from ..evidence import FIRST, Evidence
from ..judgement import Judgement
from ..rules import RANDOM_DRAWS
from .claim import FLOW, ISSUE_57, V1, Claim, register


def fig5(s: Evidence) -> Judgement:
    """MRR [N, S] of the in-context heads against RANDOM_DRAWS draws of a random head of each one's layer."""
    ours, random = mrr.layer_matched_mrr(s.m, s.prompts(FIRST), s.heads(FIRST), RANDOM_DRAWS, s.seed)
    rows = s.rows(FIRST)
    return rules.judge_fig5(ours[rows], random[:, rows], s.heads(FIRST), s.clusters([FIRST]))


register(Claim(id="fig5", claim="Label values of in-context heads rank their labels far above random heads of the same "
                                "layer (Fig. 5)",
               paper="much higher MRR than random heads; weakest head 19-11 MRR 0.0033 (mean rank 303)",
               rule="replicates: the in-context heads' mean MRR (95% CI) lies above the {percentile}th percentile of "
                    "{RANDOM_DRAWS} layer-matched random draws and at least {ratio:g}x their mean, and >= {heads:.0%} of the "
                    "heads are each at least {ratio:g}x their layer's random mean; partly: one of the two; does not "
                    "replicate: neither",
               source=f"{V1}, Section 4.3, Fig. 5: 'Compared with random heads, label values have much higher MRR scores "
                      "in in-context heads. The smallest average MRR score 0.0033 is in layer 19, head 11' (l. 458)",
               set_on=f"{ISSUE_57}; its data had been shown by the earlier reports (each head against its layer's random mean, "
                      "counted at 1x)", unit="MRR", find=fig5, notebooks=("03",), thresholds=rules.FIG5, **FLOW))
