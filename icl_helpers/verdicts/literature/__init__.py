"""Claims of the literature on which heads carry in-context learning, judged on our head sets as the
paper's claims are judged on its heads: a registry of its own, `LITERATURE`, apart from the paper's
`claims.CLAIMS`.

Each `LiteratureClaim` cites its paper by name, says what of it we hold (its code, its text, or only its
abstract or a summary: then our measure is a reconstruction of theirs, and says so), and fixes its rule
and thresholds here, and says when (`RULES_SET`: after one trial run had been seen, which it says;
`TR_TL_RULES_SET` for Yang et al.'s, before any of their data had been seen). A judge reads a
`studies.head_sets.HeadSetStudy` and returns a `Judgement`: intervals are 95% bootstrap intervals over
the distinct inputs of the word datasets' EVAL prompts pooled (`stats.mean_ci` with clusters); a
claim judged at the study's two set sizes (the paper's share of heads, then K) holds at both
(replicates), at one (partly) or at neither (does not replicate), its headline number the first's.
"""
from __future__ import annotations

from . import induction_fv, task_heads  # noqa: F401  registers the claims, in this order  isort: skip
from .claim import LITERATURE, LiteratureFinding, claims_of, fewest_prompts, judged, markdown, set_sizes

__all__ = ["LITERATURE", "LiteratureFinding", "claims_of", "fewest_prompts", "judged", "markdown", "set_sizes"]
