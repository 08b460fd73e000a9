"""The verdicts: the paper's claims (`claims`, one module a section of the paper), each judged by
a rule that says when it was set, on the studies its finder runs over evidence the claims share
(`evidence`); `findings.report` judges them on one model, `robustness` again with each choice the
paper fixed changed in turn, `compare` puts reports of several models side by side.

Names are imported on first use, so `compare`, which needs no torch, answers at once."""
from __future__ import annotations

from ..lazy import lazy_exports

_WHERE = {  # public name -> module that defines it
    **dict.fromkeys(["CLAIMS", "Claim", "Finding", "claims_of", "intro", "markdown", "side_by_side", "table"], "claims"),
    **dict.fromkeys(["Evidence", "FIRST"], "evidence"), **dict.fromkeys(["SENTENCE", "WORD"], "common"),
    "report": "findings", **dict.fromkeys(["K", "RANDOM_DRAWS", "TOP"], "rules"),
}
__all__, __getattr__, __dir__ = lazy_exports(__name__, _WHERE)

