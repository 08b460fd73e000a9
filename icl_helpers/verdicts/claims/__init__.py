"""The paper's claims, one `Claim` each, registered by the module of the paper's section it belongs
to: there its statement, the paper's number and source, its thresholds, its judge and its finder sit
side by side, so that a new claim is one `register(Claim(...))` in one module. The rules several
claims share, and the protocol (K, RANDOM_DRAWS, TOP), are in `verdicts.rules`.

`CLAIMS` holds them in the report's order, the order they are registered: the sections below are
imported in this order, each registering its claims in its own order (Table 2; where the increase
lies; the label values in the vocabulary; the two towers; Fig. 5; Figs. 6-7; Figs. 8-11; the prediction shift; the appendices;
the EMNLP version's interventions). A section imports no other section, so the order is this list's.
`claims_of` gives a notebook its claims; `table` and `markdown` show findings."""
from __future__ import annotations

from . import accuracy, location, vocabulary, towers, label_ranks, attention, variants, prediction_shift, appendices, interventions  # noqa: F401  isort: skip
from .claim import CLAIMS, EMNLP, V1, Claim, Finding, claims_of, register
from .tables import VIEWS, intro, markdown, table, view_text

__all__ = ["CLAIMS", "EMNLP", "V1", "VIEWS", "Claim", "Finding", "claims_of", "intro", "markdown", "register", "table", "view_text"]
