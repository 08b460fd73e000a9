"""Appendices B, D and E: the fig5 and fig6 rules in the sentence datasets' shared heads and in a
Llama-family model's top head, and the order-insensitivity of the increases."""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ...core.heads import Head, head_name, top_heads
from ...model.loading import ICLModel
from ...stats import spearman, unweighted, weighted_ci
from ...studies import label_attention, mrr, order, subvalues
from .. import rules
from ..evidence import NO_SENTENCE_DATA, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement, not_tested
from ..rules import RANDOM_DRAWS, Clusters
from .registry import SENTENCE_ONLY, Claim, register
from .sources import FLOW, RESTATED, V1


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


# The fig5 and fig6 rules these apply gained their minimum effect head by head when the rules were restated.
FIG5_FIG6_SEEN = f"{RESTATED}; its data had been shown by the earlier reports (the fig5 and fig6 parts on each dataset)"


register(Claim(id="app_b_mrr", claim="Appendix B: label-value MRR in the heads shared by the sentence datasets (Figs. 16-18)",
               paper="in-context heads above random heads on all four datasets (heads 26-14, 28-10, 29-17)",
               rule="the fig5 rule in the heads in all four sentence datasets' top {K} (the top {K} of their mean increase if "
                    "none is), on each sentence dataset: replicates if it replicates on every dataset; does not replicate if "
                    "on none even partly; partly otherwise (a part's partly holds its rule's minimum effects)",
               source=f"{V1}, Appendix B, Figs. 16-18: 'In all datasets, the labels in in-context heads have larger MRR "
                      "scores than random heads' (l. 1209)",
               set_on=FIG5_FIG6_SEEN,
               unit="datasets that replicate", find=sentence_finding(["fig5"], Evidence.shared), notebooks=("03",),
               reads=SENTENCE_ONLY, views=FLOW))


register(Claim(id="app_b_attention", claim="Appendix B: true/false attention in the shared heads (Figs. 19-21)",
               paper="true much larger than false on all four datasets (heads 26-14, 28-10, 29-17)",
               rule="the fig6 rule in app_b_mrr's heads on each sentence dataset, judged together as app_b_mrr",
               source=f"{V1}, Appendix B, Figs. 19-21: 'the attention scores on true labels are much larger than false "
                      "labels' (l. 1209)",
               set_on=FIG5_FIG6_SEEN,
               unit="datasets that replicate", find=sentence_finding(["fig6"], Evidence.shared), notebooks=("04",),
               reads=SENTENCE_ONLY, views=FLOW))


register(Claim(id="app_d", claim="Appendix D: the same picture in LLaMA 7B, 13B, 30B",
               paper="label-value MRR and true > false attention in the head with the largest increase, as in GPT-2 large",
               rule="on a Llama-family model, the fig5 and fig6 rules for the single head with the largest mean increase over "
                    "the sentence datasets, on each of them: replicates if all eight judgements replicate; does not "
                    "replicate if none does even partly; partly otherwise (a part's partly holds its rule's minimum effects)",
               source=f"{V1}, Appendix D, Figs. 22-27: 'the head with the largest log probability increase in each model ... "
                      "similar with the results in GPT2 large' (l. 1408)",
               set_on=FIG5_FIG6_SEEN,
               unit="parts that replicate", find=sentence_finding(["fig5", "fig6"], Evidence.top_head, llama_only=True),
               notebooks=("07",), reads=SENTENCE_ONLY, views=FLOW))


APP_E = {"similar": 0.2, "partly": 0.5}


def _relative_change(increase: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """increase: [N, S, 2] each head's increase alone and after other heads; w [d, N] each prompt's multiplicity in
    d resamples: [d] the median over the S heads of |mean after - mean alone| / |mean alone|, the means over the
    prompts."""
    alone, after = (torch.einsum("dn,nsk->dsk", w, increase.double()) / w.sum(1)[:, None, None]).unbind(-1)  # [d, S]
    return torch.quantile((after - alone).abs() / alone.abs(), 0.5, dim=-1)


def judge_app_e(increase: torch.Tensor, heads: Sequence[Head], positions: str, clusters: Clusters = None) -> Judgement:
    """increase: [N, S, 3] each of S heads' increase added alone, in a random order and last
    (`studies.order.ORDERS`); positions: the position-level description, a line."""
    last = increase[..., [0, 2]]  # [N, S, 2]: alone, last
    ours, ci = unweighted(_relative_change, last), weighted_ci(last, _relative_change, clusters=clusters)
    verdict = REPLICATES if ci[1] <= APP_E["similar"] else PARTLY if ours <= APP_E["partly"] else FAILS
    alone, random, after_all = increase.mean(0).unbind(-1)  # [S] each
    moved = ((after_all - alone).abs() / alone.abs()).argmax()
    k = max(1, len(heads) // 2)
    kept = len(set(top_heads(alone[None], k)) & set(top_heads(random[None], k)))
    return Judgement(ours, ci, len(increase), verdict,
                     f"ours is the median over the top {len(heads)} heads of |last - alone| / |alone|, each head's mean "
                     f"increase added alone on x_l and added last (after the other heads of its layer); added after the "
                     f"heads before it in a random order of its layer instead of last, "
                     f"{unweighted(_relative_change, increase[..., :2]):.1%}; the head moving most, {head_name(heads[moved])}, "
                     f"{float(alone[moved]):+.3f} alone, {float(after_all[moved]):+.3f} last; mean increase alone "
                     f"{float(alone.mean()):+.3f}, random order {float(random.mean()):+.3f}, last {float(after_all.mean()):+.3f}; "
                     f"the top {k} by mean increase keep {kept} of {k} heads in a random order; ours beside it, not judged (the "
                     f"earlier rule's measure), the Spearman over (prompt, head) pairs, alone against random order: "
                     f"{spearman(increase[..., 0], increase[..., 1]):.3f}. {positions}")


def app_e(s: Evidence) -> Judgement:
    """Order-insensitivity of the in-context heads' increases (`studies.order`), with where the top 5
    heads' largest position-level increase lies beside it (described, not judged)."""
    ps, heads, rows = s.prompts(s.first), s.heads(s.first), s.rows(s.first)
    increase = order.order_increases(s.m, ps, heads, s.seed)[rows]
    kinds = subvalues.top_position_kinds(subvalues.position_increases(s.m, ps, heads[:5]), ps.positions)[rows]
    shares = subvalues.kind_shares(kinds)  # [5, kinds]
    where = "; ".join(f"{l}-{h}: " + ", ".join(f"{name} {float(x):.1%}" for name, x in zip(subvalues.POSITION_KINDS, row)
                                               if x > 0) for (l, h), row in zip(heads[:5], shares))
    return judge_app_e(increase, heads, f"Where the top 5 heads' largest position-level increase lies: {where}",
                             s.clusters([s.first]))


register(Claim(id="app_e", claim="Appendix E: a head's increase hardly depends on what was added before it, so increases "
                                 "compare",
               paper="I(attn^n | Lin_0) is similar to I(attn^n | Lin_0 + attn^m): 'the sequence of subvalues do not affect "
                     "the log probability increase score much'",
               rule="in the top {K} heads, each head's mean increase over the prompts added alone on x_l and added last "
                    "(after every other head of its layer); the median over the heads of |last - alone| / |alone|: "
                    "replicates: its 95% CI at or below {similar:.0%}; partly: the median at or below {partly:.0%} (the "
                    "value within half of itself); does not replicate: above",
               source=f"{V1}, Appendix E: 'log(w|Lin_0 + attn_0^n) - log(w|Lin_0) is similar to log(w|Lin_0 + attn_0^m + "
                      "attn_0^n) - log(w|Lin_0 + attn_0^m). Therefore, the significance scores of all subvalues can be "
                      "compared together' (l. 1628), after Yu and Ananiadou (2024)",
               set_on=f"{RESTATED}; its data had been shown by the earlier reports (the mean increase alone, in a random "
                      "order and last) and the restated rules' first reports (Qwen's mean moving 27%), not its per-head changes",
               unit="median relative change of a head's increase", find=app_e, notebooks=("02",), thresholds=APP_E, views=FLOW))
