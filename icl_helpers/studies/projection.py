"""Tables 1 and 3: a head's label values, label keys and last query in the vocabulary.

`projections` records, in one batched pass over a prompt set, what the tables project at
each prompt's label positions and last position; `Projections.table` then projects any
head of any recorded prompt without running the model again.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from ..core.attribution import Readout, readout_of
from ..core.decompose import Decomposition
from ..core.heads import Head
from ..core.projections import concept_forms, project_head, token_strings
from ..model.loading import ICLModel
from .runner import PromptSet, gathered

RECORD = ("values", "key_input", "queries")


@dataclass
class Projections:
    """Label values, label keys and last queries of N prompts, at P = D + 1 positions a
    prompt: its D label positions (as in `positions.labels`), then its last position."""

    ps: PromptSet
    dec: Decomposition  # at the P positions: input_ids [N, P], values [N, L, H_kv, P, dh], key_input [N, L, P, d]
    readout: Readout
    tokenizer: object

    def table(self, prompt: int, head: Head, k: int = 10) -> pd.DataFrame:
        """Table 1 for one prompt and head: the top-k tokens (stop words removed; a tuple of
        texts with their leading spaces) of each label value, label key and the last query;
        one row per vector."""
        positions = self.ps.positions[prompt : prompt + 1]
        D = int(positions.valid.sum())
        tops = project_head(self.readout, self.tokenizer, self.dec, prompt, head, list(range(D)), k)
        where = positions.labels[0, :D].tolist() + [int(positions.last[0])]
        ids = self.dec.input_ids[prompt].tolist()
        columns = [*range(D), *range(D), -1]  # label values and keys at the labels, the query at the last position
        return pd.DataFrame({
            "vector": [kind for kind, rows in tops.items() for _ in rows],
            "position": [where[c] for c in columns],
            "token": token_strings(self.tokenizer, [ids[c] for c in columns]),
            "top tokens": [tuple(top) for rows in tops.values() for top in rows],
        })


@torch.no_grad()
def projections(m: ICLModel, ps: PromptSet, batch_size: int = 8) -> Projections:
    """Record every prompt of `ps` for `Projections.table`, in batches."""
    def at_labels_and_last(rows: torch.Tensor, dec: Decomposition) -> Decomposition:
        positions = ps.positions[rows]
        return dec.at_positions(torch.cat([positions.labels.clamp(min=0), positions.last[:, None]], 1))  # [b, D + 1]

    return Projections(ps, gathered(m, ps, batch_size, RECORD, at_labels_and_last), readout_of(m), m.tokenizer)


def label_value_hits(table: pd.DataFrame) -> float:
    """Share of a projection table's label-value rows whose top tokens include a related concept
    of the label (`concept_forms`: its case forms, alone or after a space), as the paper's Table 1
    shows for GPT-2 large."""
    values = table[table["vector"] == "label value"]
    hits = [bool(concept_forms(token) & set(top)) for token, top in zip(values["token"], values["top tokens"])]
    return sum(hits) / max(len(hits), 1)
