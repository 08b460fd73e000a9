"""Section 3.2, Tables 1 and 3: what in-context heads' label values project to in the vocabulary, related
concepts of their labels across the heads, with our row beside each: the top head by the label's exact
token (the two towers, the keys and query of the same tables, are `towers`)."""
from __future__ import annotations

from typing import Sequence

import torch

from ...core.heads import Head, head_name
from ...stats import mean_ci, unweighted, weighted_ci, weighted_nanmean
from ...studies import mrr, projection
from ...studies.in_context_heads import first_correct
from ...studies.runner import prompt_set_of
from .. import rules
from ..evidence import Evidence, agnews_rows, example
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, all_hold
from ..rules import TOP, Clusters
from ..whose import OURS
from .registry import SENTENCE_ONLY, Claim, register
from .sources import FLOW, OVER_N, RESTATED, V1

TABLE1 = {"values": 0.5, "heads": 0.5}  # a head passes where half its label values show a related concept; half the heads
STRICT = {"share": 0.5}  # the earlier rule: the top head's prompts whose every label value ranks its own token


def concept_hits(s: Evidence, dataset: str, rows: torch.Tensor) -> torch.Tensor:
    """[N, S, D] float for the N records `rows` picks, the dataset's S in-context heads and each
    prompt's D label positions: 1 where the label value's top TOP tokens (stop words left out)
    hold a related concept of its label (`mrr.concept_ranks`), 0 where not, nan past its labels."""
    return rules.in_top(mrr.concept_ranks(s.m, s.prompts(dataset), s.heads(dataset))[rows])


def head_shares(hits: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """[S]: each head's share of label values (every prompt and label position) that pass, from hits [N, S, D];
    [d, S] in the d resamples w [d, N] weighs (`weighted_nanmean`)."""
    return weighted_nanmean(hits, w)


def passing_heads(hits: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[d]: the share of heads whose label values pass at least TABLE1's `values` of the time, from hits [N, S, D],
    in each resample w [d, N] weighs."""
    return (head_shares(hits, w) >= TABLE1["values"]).double().mean(-1)


def judge_concepts(hits: torch.Tensor, heads: Sequence[Head], where: str, example: str,
                   clusters: Clusters = None) -> Judgement:
    """hits: [N, S, D] `concept_hits` in the S in-context heads, best located first; example: the
    paper's one-prompt illustration, in words. Ours: the share of heads that pass."""
    shares = head_shares(hits)
    ours, ci = unweighted(passing_heads, hits), weighted_ci(hits, passing_heads, clusters=clusters)
    best = int(shares.argmax())
    best_ci = weighted_ci(hits[:, best:best + 1], lambda x, w: head_shares(x, w)[:, 0], clusters=clusters)
    verdict = all_hold(ours >= TABLE1["heads"], best_ci[0] > TABLE1["values"])
    each = ", ".join(f"{head_name(h)}: {float(x):.0%}" for h, x in zip(heads, shares))
    return Judgement(ours, ci, len(hits), verdict,
                     f"{where}: {int((shares >= TABLE1['values']).sum())} of {len(heads)} heads show a related concept of "
                     f"the label (its case forms, whole tokens) among the top {TOP} tokens (stop words out) of at least "
                     f"{TABLE1['values']:.0%} of their label values; the best, {head_name(heads[best])}, of "
                     f"{float(shares[best]):.0%} ({best_ci[0]:.0%} to {best_ci[1]:.0%}); each head, in located order: "
                     f"{each}; {example}")


def judge_strict(hits: torch.Tensor, heads: Sequence[Head], where: str, clusters: Clusters = None) -> Judgement:
    """hits: [N, S] bool, the top S (5) heads in order: every label value of a prompt ranks its own
    label token among the top TOP of the vocabulary."""
    cis = [mean_ci(h.double(), clusters=clusters) for h in hits.T]
    above = [ci[0] > STRICT["share"] for ci in cis]
    verdict = REPLICATES if above[0] else PARTLY if any(above) else FAILS
    shown = ", ".join(f"{head_name(h)}: {float(x.double().mean()):.0%}" for h, x in zip(heads, hits.T))
    return Judgement(float(hits[:, 0].double().mean()), cis[0], len(hits), verdict,
                     f"{where}: share of prompts whose every label value ranks its own label token in the top {TOP} "
                     f"of the vocabulary, top 5 heads: {shown}")


def strict_hits(s: Evidence, dataset: str, rows: torch.Tensor) -> torch.Tensor:
    """[N, S] bool, the records `rows` picks and the dataset's top S = 5 heads: every label value of
    the prompt ranks its own label token among the top TOP of the vocabulary (`mrr.label_ranks`)."""
    ranks = mrr.label_ranks(s.m, s.prompts(dataset), s.heads(dataset)[:5])[rows]  # [N, S, labels]
    return ((ranks <= TOP) | ranks.isnan()).all(2)


def example_hits(proj: projection.Projections, heads: Sequence[Head]) -> str:
    """The paper's illustration on one prompt (`proj` holds it alone): for the first 5 heads, the
    share of its label values with a related concept of their label in their top TOP tokens, stop
    words left out (`Projections.table`)."""
    return ", ".join(f"{head_name(h)}: {projection.label_value_hits(proj.table(0, h, TOP)):.0%}" for h in heads[:5])


def table1(s: Evidence) -> Judgement:
    """Table 1's label values over every prompt of `s.first` (FIRST, or a task), in its in-context heads, with the paper's
    example prompt (in the setting) as the illustration."""
    heads, rows = s.heads(s.first), s.rows(s.first)
    shown = projection.projections(s.m, prompt_set_of(s.m, [example(s.setting)], "example"))
    return judge_concepts(concept_hits(s, s.first, rows), heads, f"{s.first} prompts, {s.heads_named(s.first)}",
                          f"the example prompt: {example_hits(shown, heads)}", s.inputs(s.first)[rows])


CONCEPTS_RULE = ("a label value passes where a related concept of its label (its lower-case, capitalized and upper-case "
                 "spellings, alone or after a space, as whole tokens of the vocabulary: bar, Bar, BAR, ' bar', ...) is "
                 "among the top {TOP} tokens of its projection, stop words left out as the paper's tables leave them; a "
                 "head passes where at least {values:.0%} of its label values (every prompt, every label position) "
                 "pass. Replicates: at least {heads:.0%} of the in-context heads pass (the paper's head is 'an "
                 "example' of them) and the best head's share has its 95% CI above {values:.0%}; partly: one of the "
                 "two (the paper shows one head); does not replicate: neither. Ours: the share of heads that pass")
TABLES_SET = (f"{RESTATED}; the measure it reads (related concepts across the in-context heads) had not been computed "
              "on any model, but the earlier reports had shown the top 5 heads' shares by the exact label token")

register(Claim(id="table1", claim="Label values' top words have related concepts with the labels ('bar' and 'foo'), in an "
                                  "in-context head taken as an example (Table 1)",
               paper="head 22-0, one prompt: the label values' top words hold BAR, Bar / foo, Foo",
               rule=CONCEPTS_RULE + "; the one prompt the paper shows is the illustration",
               source=f"{V1}, Section 3.2, Table 1 (GPT-2 large, layer 22 head 0, l. 331-351): 'We take layer 22, head 0 "
                      "as an example' (l. 353); 'Label values' top words have related concepts with the labels' (l. 389)",
               set_on=TABLES_SET, unit="share of in-context heads", find=table1, notebooks=("02",), thresholds=TABLE1,
               views=FLOW))


def table1_strict(s: Evidence) -> Judgement:
    """The earlier rule over every prompt of `s.first`: the top head, the exact label token, every label value."""
    rows = s.rows(s.first)
    return judge_strict(strict_hits(s, s.first, rows), s.heads(s.first)[:5], f"{s.first} prompts, {s.heads_named(s.first)}",
                        s.inputs(s.first)[rows])


STRICT_RULE = ("replicates: in the top head, the share of prompts whose every label value ranks its own label token "
               "(exactly, e.g. ' bar') among the top {TOP} of the vocabulary has its 95% CI above {share:.0%}; partly: "
               "not in the top head, but in one of the top 5; does not replicate: in none of the top 5")

register(Claim(id="table1_strict", whose=OURS, claim="Our row: Table 1's label values in the top head alone, by the label's exact token, "
                                         "every label value of a prompt",
               paper="head 22-0 lists BAR, Bar for 'bar' (l. 332-335), not the exact token",
               rule=STRICT_RULE, source=f"ours, beside {V1}, Section 3.2, Table 1 (l. 331-351, l. 389)", set_on=OVER_N,
               unit="share of prompts, in the top head", find=table1_strict, notebooks=("02",), thresholds=STRICT, views=FLOW))


def table3(s: Evidence) -> Judgement:
    """The table1 rule on the AG News prompts (Appendix C), with the first one predicted correctly
    as the illustration."""
    rows = agnews_rows(s)
    ps, heads = s.prompts("agnews"), s.heads("agnews")
    first = first_correct(s.m, ps)
    if first is None:
        shown = f"no AG News prompt of {len(ps)} is predicted correctly"
    else:
        one = projection.projections(s.m, prompt_set_of(s.m, [ps.prompts[first]], "agnews-correct"))
        shown = f"AG News prompt {first} (the first predicted correctly): {example_hits(one, heads)}"
    where = f"{int(rows.sum())} AG News prompts, {s.heads_named('AG News')}"
    return judge_concepts(concept_hits(s, "agnews", rows), heads, where, shown, s.inputs("agnews")[rows])


register(Claim(id="table3", claim="On label values, 'bar' and 'foo' have top rankings, on a correctly predicted AG News "
                                  "prompt (Table 3, Appendix C)",
               paper="head 23-13, one prompt predicted 'foo': the label values' top words hold BAR, bars / foo, Foo",
               rule="the table1 rule on the AG News prompts, in AG News's in-context heads (headlined on the prompts the "
                    "model predicts correctly; the paper's case is one): " + CONCEPTS_RULE,
               source=f"{V1}, Appendix C, Table 3 (l. 1268-1298): 'We take head 23-13 as example. With the prediction "
                      "\"foo\"' (l. 1268); 'On label values, \"bar\" and \"foo\" have top rankings' (l. 1300)",
               set_on=TABLES_SET, unit="share of in-context heads", find=table3, notebooks=("02",), reads=SENTENCE_ONLY,
               thresholds=TABLE1, views=FLOW))


def table3_strict(s: Evidence) -> Judgement:
    """The earlier rule on the AG News prompts."""
    rows = agnews_rows(s)
    where = f"{int(rows.sum())} AG News prompts, {s.heads_named('AG News')}"
    return judge_strict(strict_hits(s, "agnews", rows), s.heads("agnews")[:5], where, s.inputs("agnews")[rows])


register(Claim(id="table3_strict", whose=OURS, claim="Our row: Table 3's label values in the top head alone, by the label's exact token, "
                                         "every label value of a prompt",
               paper="head 23-13, one prompt: the bar values list BAR, Bar and bar among other words (l. 1273-1276)",
               rule="on the AG News prompts (headlined on those the model predicts correctly), " + STRICT_RULE,
               source=f"ours, beside {V1}, Appendix C, Table 3 (l. 1268-1300)", set_on=OVER_N,
               unit="share of prompts, in the top head", find=table3_strict, notebooks=("02",), reads=SENTENCE_ONLY,
               thresholds=STRICT, views=FLOW))
