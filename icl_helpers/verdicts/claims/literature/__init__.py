"""Claims of the literature on which heads carry in-context learning, judged on our head sets as the
paper's claims are judged on its heads: `Claim`s of `whose` LITERATURE in the one registry, `claims.CLAIMS`,
judged by the heads report (`head_report`) on a `studies.head_sets.HeadSetStudy`.

Each claim cites its paper by name, says what of it we hold (its code, its text, or only its abstract or a
summary: then our measure is a reconstruction of theirs, `reconstructed`), and fixes its rule and thresholds
here, and says when (`RULES_SET`: after one trial run had been seen, which it says; `TR_TL_RULES_SET` for
Yang et al.'s, before any of their data had been seen). Intervals are 95% bootstrap intervals over the
distinct inputs of the word datasets' EVAL prompts pooled (`stats.mean_ci` with clusters); a claim judged at
the study's two set sizes (the paper's share of heads, then K) holds at both (replicates), at one (partly)
or at neither (does not replicate), its headline number the first's.
"""
from __future__ import annotations

from . import induction_fv, task_heads  # noqa: F401  registers the claims, in this order  isort: skip
from .sources import set_sizes

__all__ = ["set_sizes"]
