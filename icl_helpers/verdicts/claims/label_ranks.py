"""Section 4.3, Fig. 5: label values rank their labels far above random heads of the same layer
(the rule, `rules.judge_fig5`, is shared with the two towers' queries and Appendices B and D); and
the value-output matrix does not decide which label flows: some heads favour the false label, some
project one label only (Fig. 5 read per label, Section 6.1)."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ...core.heads import Head, head_name
from ...stats import weighted_ci, weighted_nanmean
from ...studies import mrr
from .. import rules
from ..evidence import FIRST, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement
from ..rules import RANDOM_DRAWS, Clusters
from .registry import Claim, register
from .sources import FLOW, RESTATED, V1


def fig5(s: Evidence) -> Judgement:
    """MRR [N, S] of the in-context heads against RANDOM_DRAWS draws of a random head of each one's layer."""
    ours, random = mrr.layer_matched_mrr(s.m, s.prompts(s.first), s.heads(s.first), RANDOM_DRAWS, s.seed)
    rows = s.rows(s.first)
    return rules.judge_fig5(ours[rows], random[:, rows], s.heads(s.first), s.clusters([s.first]))


register(Claim(id="fig5", claim="Label values of in-context heads rank their labels far above random heads of the same "
                                "layer (Fig. 5)",
               paper="much higher MRR than random heads; weakest head 19-11 MRR 0.0033 (mean rank 303)",
               rule="replicates: the in-context heads' mean MRR (95% CI) lies above the {percentile}th percentile of "
                    "{RANDOM_DRAWS} layer-matched random draws and at least {ratio:g}x their mean, and >= {heads:.0%} of the "
                    "heads are each at least {ratio:g}x their layer's random mean; partly: one of the two; does not "
                    "replicate: neither",
               source=f"{V1}, Section 4.3, Fig. 5: 'Compared with random heads, label values have much higher MRR scores "
                      "in in-context heads. The smallest average MRR score 0.0033 is in layer 19, head 11' (l. 458)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (each head against its layer's random mean, "
                      "counted at 1x)", unit="MRR", find=fig5, notebooks=("03",), thresholds=rules.FIG5, views=FLOW))


ONE_LABEL = {"ratio": 1.5, "projects": 0.5, "other": 0.1, "heads": 2}  # the paper names two heads for each finding


def by_truth(x: torch.Tensor, is_true: torch.Tensor, w: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each head's mean of x [N, S, D] (nan past a prompt's labels) over the true-label positions and over the
    false-label positions, is_true [N, D]: ([S], [S]); with w [d, N] (each prompt's multiplicity in d resamples)
    each resample's, ([d, S], [d, S]) (`weighted_nanmean`)."""
    return tuple(weighted_nanmean(x.masked_fill(~where[:, None], torch.nan), w) for where in (is_true, ~is_true))


def false_ahead(pairs: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """[S] bool, from pairs [N, S, D, 2] (reciprocal rank of the label's own token, is_true): the
    false label's MRR at least ONE_LABEL's ratio times the true label's; [d, S] with `by_truth`'s w."""
    true, false = by_truth(pairs[..., 0], pairs[:, 0, :, 1].bool(), w)
    return false >= ONE_LABEL["ratio"] * true


def one_label(pairs: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """[S] bool, from pairs [N, S, D, 2] (related concept in the top TOP, is_true): one label's values
    show it in at least ONE_LABEL's `projects` share, the other label's in at most its `other` share;
    [d, S] with `by_truth`'s w."""
    shares = torch.stack(by_truth(pairs[..., 0], pairs[:, 0, :, 1].bool(), w))  # [2, S] or [2, d, S]
    return (shares.amax(0) >= ONE_LABEL["projects"]) & (shares.amin(0) <= ONE_LABEL["other"])


def judge_heads_that(which: Callable[..., torch.Tensor], pairs: torch.Tensor, heads: Sequence[Head],
                     what: str, clusters: Clusters = None) -> Judgement:
    """The number of the S heads that `which` picks from pairs [N, S, D, 2] (a measure and
    is_true at each label position; which(pairs, w) picks in each resample w weighs): replicates at
    ONE_LABEL's `heads` with the 95% CI of the count at 1 or more, partly at one head, does not replicate at none."""
    picked = which(pairs)
    ours = float(picked.sum())
    ci = weighted_ci(pairs, lambda p, w: which(p, w).sum(-1).double(), clusters=clusters)
    verdict = REPLICATES if ours >= ONE_LABEL["heads"] and ci[0] >= 1 else PARTLY if ours >= 1 else FAILS
    named = [head_name(h) for h, hit in zip(heads, picked.tolist()) if hit]
    return Judgement(ours, ci, len(pairs), verdict, f"{what} in {int(ours)} of {len(heads)} heads"
                                                    + (f" ({', '.join(named)})" if named else ""))


def fig5_labels(s: Evidence) -> Judgement:
    """In `s.first`'s in-context heads: the false label's values outrank the true label's (Fig. 5's
    MRR, from its cached ranks), and heads whose values project one label only (`concept_ranks`)."""
    ps, heads, rows = s.prompts(s.first), s.heads(s.first), s.rows(s.first)
    is_true = ps.positions.is_true[rows][:, None, :, None].double()  # [N, 1, D, 1]

    def paired(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x[..., None], is_true.expand(*x.shape, 1)], -1)  # [N, S, D, 2]
    mrr_pairs = paired(mrr.ranks_in_layers(s.m, ps, heads, heads)[rows].reciprocal().double())
    concept_pairs = paired(rules.in_top(mrr.concept_ranks(s.m, ps, heads)[rows]))
    clusters = s.inputs(s.first)[rows]
    ratio, projects, other, top = ONE_LABEL["ratio"], ONE_LABEL["projects"], ONE_LABEL["other"], rules.TOP
    parts = {
        "false label ahead (l. 458)": judge_heads_that(
            false_ahead, mrr_pairs, heads, f"the false label's values rank it (MRR) at least {ratio:g}x as high as the "
                                           "true label's rank theirs", clusters),
        "one label only (l. 666)": judge_heads_that(
            one_label, concept_pairs, heads, f"one label's values show a related concept in their top {top} at least "
                                             f"{projects:.0%} of the time, the other label's at most {other:.0%}", clusters),
    }
    return rules.judge_together(parts, int(rows.sum()), f"{s.first} prompts, {s.heads_named(s.first)}")


register(Claim(id="fig5_labels", claim="The value-output matrix does not control the label information flow: in some "
                                       "in-context heads the false label 'bar' has the higher MRR, and several heads can "
                                       "only project 'foo' or 'bar' (Fig. 5, Section 6.1)",
               paper="'bar' above 'foo' (the true label) in heads 29-17 and 30-16; 19-11 and 30-16 project only one label",
               rule=f"in {FIRST}'s in-context heads (Fig. 5's dataset), two parts: (l. 458) heads whose false-label values "
                    "rank their own token (Fig. 5's MRR) at least {ratio:g}x as high as the true-label values rank theirs; "
                    "(l. 666) heads that project one label only: a related concept of one label (Table 1's measure) among "
                    "the top {TOP} tokens of at least {projects:.0%} of that label's values, and of the other label in at "
                    "most {other:.0%} of its values. A part replicates where at least {heads:g} heads qualify (the paper "
                    "names two) and the 95% CI of that count is 1 or more, partly where one head does, does not replicate "
                    "where none does; the claim replicates where both parts do, does not replicate where neither does "
                    "even partly, partly otherwise",
               source=f"{V1}, Section 4.3, Fig. 5: 'the value-output matrix does not control the label information flow, "
                      "because in in-context heads 29-17 and 30-16, MRR scores of \"bar\" is higher than \"foo\"' (l. 458; "
                      "'foo' is the true label, l. 445); Section 6.1: 'several in-context heads (such as 19-11 and 30-16) "
                      "can only project \"foo\" or \"bar\"' (l. 666)",
               set_on=(f"{RESTATED}; the measure its second part reads had not been computed on any model; the first "
                       "part's, each label's MRR a head, had been drawn by notebook 03 on the bundled model"),
               unit="parts that replicate", find=fig5_labels, notebooks=("03",), thresholds=ONE_LABEL,
               views=FLOW))
