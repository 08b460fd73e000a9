"""Sections 3.1 and 4.2, Figs. 2-4 and 12-15: where the increase of the predicted label lies (attention
layers, deep heads), and how alike the datasets' in-context heads are."""
from __future__ import annotations

import torch

from ...core.heads import top_heads
from ...stats import bootstrap_ci, mean_ci
from ..evidence import FIRST, WORD, Evidence
from ..judgement import FAILS, PARTLY, REPLICATES, Judgement
from ..rules import Clusters, K
from .claim import BOTH, FIRST_RULES, OVER_N, V1, Claim, register

FIG2 = {"deep": 0.5}


def judge_fig2(attn: torch.Tensor, ffn: torch.Tensor, clusters: Clusters = None) -> Judgement:
    """attn, ffn: [N, L] layer-level increases of N prompts."""
    L = attn.shape[1]
    diff = attn.sum(1) - ffn.sum(1)
    ci = mean_ci(diff, clusters=clusters)
    total = float(attn.sum())
    deep = float(attn[:, L // 2:].sum()) / total if total > 0 else float("nan")
    verdict = REPLICATES if ci[0] > 0 and deep > FIG2["deep"] else FAILS if ci[1] < 0 else PARTLY
    share = f"{deep:.0%}" if total > 0 else "none (the attention layers' total is not positive)"
    return Judgement(float(diff.mean()), ci, len(diff), verdict,
                     f"ours is the mean over prompts of (summed attention-layer increase - summed FFN increase): "
                     f"attention {float(attn.sum(1).mean()):+.2f}, FFN {float(ffn.sum(1).mean()):+.2f} a prompt; "
                     f"deeper half's share of the attention increase {share}; the paper shows one prompt, we average N")


def fig2(s: Evidence) -> Judgement:
    return judge_fig2(s.loc(FIRST).attn[s.rows(FIRST)], s.loc(FIRST).ffn[s.rows(FIRST)], s.clusters([FIRST]))


register(Claim(id="fig2", claim="Attention layers, deep ones above all, carry the increase of the predicted label; FFN layers "
                                "little (Fig. 2)",
               paper="almost all of the increase in deep attention layers (one example prompt)",
               rule="replicates: the summed attention-layer increase exceeds the summed FFN increase (95% CI of the difference "
                    "above 0) and the deeper half of the layers carries most of the attention increase; does not replicate: "
                    "the CI lies below 0; partly: otherwise",
               source=f"{V1}, Section 3.1, Fig. 2: 'Almost all the improvements are caused by deep attention layers' (l. 275)",
               set_on=f"{FIRST_RULES}; {OVER_N}", unit="log-probability a prompt, attention minus FFN", find=fig2, notebooks=("01",), thresholds=FIG2,
               label_flow=True))


FIG3_4 = {"replicates": 0.8, "partly": 0.5}


def _deep_share(head: torch.Tensor, k: int) -> float:
    """Share of the top k heads of head [N, L, H] in the deeper half of the layers."""
    L = head.shape[1]
    return sum(l >= L / 2 for l, _ in top_heads(head.mean(0), k)) / k


def _head_sets(heads: dict[str, torch.Tensor], statistic, rule: dict[str, float], why: str,
               clusters: dict[str, torch.Tensor] | None) -> Judgement:
    """A statistic of the datasets' top heads (resampled 200 times: each re-ranks every head),
    judged by the rule's two thresholds."""
    ours = statistic(*heads.values())
    ci = bootstrap_ci(list(heads.values()), statistic, draws=200,
                      clusters=None if clusters is None else [clusters[d] for d in heads])
    verdict = REPLICATES if ours >= rule["replicates"] else PARTLY if ours >= rule["partly"] else FAILS
    return Judgement(ours, ci, sum(len(h) for h in heads.values()), verdict, why)


def judge_fig3_4(heads: dict[str, torch.Tensor], k: int = K, clusters: dict[str, torch.Tensor] | None = None
                 ) -> Judgement:
    """heads: per dataset, head-level increases [N, L, H]; clusters: per dataset, each prompt's input."""
    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, lambda *hs: sum(_deep_share(h, k) for h in hs) / len(hs), FIG3_4,
                      f"share of each dataset's top {k} in layers >= {L / 2:g} of {L}, mean over {len(heads)} datasets; "
                      f"top {k} of {L * H} heads is {k / (L * H):.1%} (paper 2.8%)", clusters)


def fig3_4(s: Evidence) -> Judgement:
    return judge_fig3_4({d: s.loc(d).head[s.rows(d)] for d in WORD}, s.setting.heads,
                              {d: s.clusters([d]) for d in WORD})


register(Claim(id="fig3_4", claim="The in-context heads (top 20 by increase) lie in deep layers (Figs. 3, 4)",
               paper="top 20 of 720 heads (2.8%) in layers 18-31 of 36",
               rule="replicates: >= {replicates:.0%} of the top {K} in the deeper half of the layers; partly: >= {partly:.0%}; "
                    "does not replicate: fewer",
               source=f"{V1}, Section 4.2, Figs. 3 and 4 (GPT-2 large, 36 layers x 20 heads): 'The important heads are in "
                      "deep layers (18-31)' (l. 449)",
               set_on=FIRST_RULES,
               unit="share of the top heads in the deeper half", find=fig3_4, notebooks=("01",), thresholds=FIG3_4, label_flow=True))


FIG12_15 = {"replicates": 0.5, "partly": 0.25}


def judge_fig12_15(heads: dict[str, torch.Tensor], k: int = K, clusters: dict[str, torch.Tensor] | None = None
                   ) -> Judgement:
    """heads: per dataset (two or more), head-level increases [N, L, H]."""
    def shared(*hs: torch.Tensor) -> float:
        tops = [set(top_heads(h.mean(0), k)) for h in hs]
        pairs = [(a, b) for i, a in enumerate(tops) for b in tops[i + 1:]]
        return sum(len(a & b) for a, b in pairs) / len(pairs) / k

    L, H = next(iter(heads.values())).shape[1:]
    return _head_sets(heads, shared, FIG12_15,
                      f"mean share of top {k} heads two of {len(heads)} datasets have in common ({', '.join(heads)}); "
                      f"chance {k / (L * H):.1%}", clusters)


def fig12_15(s: Evidence) -> Judgement:
    return judge_fig12_15({d: s.loc(d).head[s.rows(d)] for d in WORD + s.sentence}, s.setting.heads,
                                {d: s.clusters([d]) for d in WORD + s.sentence})


register(Claim(id="fig12_15", claim="The in-context heads are largely the same across datasets (Figs. 12-15)",
               paper="similar head indexes on every dataset; a large overlap between sentence and word datasets",
               rule="replicates: two datasets share >= {replicates:.0%} of their top {K} on average; partly: >= {partly:.0%}; "
                    "does not replicate: fewer",
               source=f"{V1}, Section 4.2 ('The head indexes are similar on these datasets', l. 449) and Appendix A, Figs. "
                      "12-15 (l. 1153, 1165)",
               set_on=FIRST_RULES,
               unit="share of the top heads two datasets share", find=fig12_15, notebooks=("01",), reads=BOTH, thresholds=FIG12_15,
               label_flow=True))
