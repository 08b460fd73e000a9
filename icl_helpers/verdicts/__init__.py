"""The verdicts: the paper's claims (`claims`), each judged by a rule fixed in advance
(`rules`) on the studies a finder runs (`finders`) over evidence the claims share
(`evidence`); `findings.report` judges them on one model, `robustness` again with each choice the
paper fixed changed in turn, `compare` puts reports of several models side by side."""
from __future__ import annotations

from .claims import CLAIMS, Claim, Finding, markdown, table
from .evidence import FIRST, SENTENCE, WORD, Evidence
from .findings import report
from .rules import RANDOM_DRAWS, TOP, K

__all__ = ["CLAIMS", "Claim", "Evidence", "FIRST", "Finding", "K", "RANDOM_DRAWS", "SENTENCE", "TOP", "WORD", "markdown",
           "report", "table"]
