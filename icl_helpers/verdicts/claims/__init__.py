"""Every claim we judge, one `Claim` each in one registry (`registry.CLAIMS`), registered by the module it
belongs to: there its statement, whose it is, the paper's number and source, its thresholds, its judge and
its finder sit side by side, so that a new claim is one `register(Claim(...))` in one module. The rules
several claims share, and the protocol (K, RANDOM_DRAWS, TOP), are in `verdicts.rules`.

`CLAIMS` holds them in the order they are registered: the paper's sections below are imported in this
order, each registering its claims in its own order (Table 2; where the increase lies; the label values in
the vocabulary; the two towers; Fig. 5; Figs. 6-7; Figs. 8-11; the prediction shift; the appendices; the
EMNLP version's interventions), then the literature's (`literature`). A module imports no other claim
module, so the order is this list's. `reported` gives the report its claims, `claims_of` a notebook its
own; `table` and `markdown` show findings."""
from __future__ import annotations

from . import accuracy, location, vocabulary, towers, label_ranks, attention, variants, prediction_shift, appendices, interventions  # noqa: F401  isort: skip
from . import literature  # noqa: F401  isort: skip
from .registry import CLAIMS, Claim, Finding, claims_of, fewest_prompts, ids_of, register, reported
from .sources import EMNLP, V1
from .tables import VIEWS, intro, markdown, side_by_side, table, view_text

__all__ = ["CLAIMS", "EMNLP", "V1", "VIEWS", "Claim", "Finding", "claims_of", "fewest_prompts", "ids_of",
           "intro", "markdown", "register", "reported", "side_by_side", "table", "view_text"]
