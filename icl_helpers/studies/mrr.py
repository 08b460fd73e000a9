"""Fig. 5: label values point at their labels. For each head and prompt, every label's
value is projected into the vocabulary and the rank of the label's own token is taken;
the mean reciprocal rank (MRR) of in-context heads is compared with random heads of the
same layer (`core.heads.same_layer_random_heads`)."""
from __future__ import annotations

from typing import Sequence

import torch

from ..core.attribution import readout_of
from ..core.heads import Head, same_layer_random_heads
from ..core.projections import label_value_ranks
from ..data.prompts import prompt_label_ids
from ..model.loading import ICLModel
from .prompt_pass import label_record
from .runner import PromptSet, cached_study


@cached_study("ranks", "ranks", "heads")
@torch.no_grad()
def label_ranks(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 1024) -> torch.Tensor:
    """[N, S, D]: rank (1 = top) of each label's own token in bs of its value in each head,
    for the D label positions of each prompt, in prompt order (nan-padded if D varies). Read
    from the prompt set's `LabelRecord` (the values at its label positions), batch_size prompts
    a call to `label_value_ranks` (which folds W_O into the readout once a call): no model pass."""
    readout, record = readout_of(m), label_record(m, ps)
    out = torch.full((len(ps), len(heads), ps.positions.labels.shape[1]), torch.nan)
    for rows, dec in record.decompositions(m, batch_size):
        out[rows] = label_value_ranks(readout, dec, list(heads), ps.positions[rows].valid).cpu()
    return out


def layer_matched_mrr(m: ICLModel, ps: PromptSet, heads: Sequence[Head], draws: int, seed: int = 0
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Reciprocal rank a prompt (mean over its labels) [N, S] in the S heads, and [D, N, S] in
    D draws of a random other head of each one's layer (`same_layer_random_heads`, seeds seed,
    seed + 1, ...): one cached pass ranks every head of those layers."""
    layers = sorted({l for l, _ in heads})
    pool = [(l, h) for l in layers for h in range(m.arch.n_heads)]
    reciprocal = label_ranks(m, ps, pool).reciprocal().nanmean(2)  # [N, heads of the layers]
    column = {head: i for i, head in enumerate(pool)}

    def at(hs: Sequence[Head]) -> torch.Tensor:
        return reciprocal[:, [column[tuple(h)] for h in hs]]
    random = [same_layer_random_heads(heads, m.arch.n_heads, seed + d) for d in range(draws)]
    return at(heads), torch.stack([at(hs) for hs in random])


def mrr(ranks: torch.Tensor) -> torch.Tensor:
    """[S]: mean reciprocal rank over prompts and label positions, from ranks [N, S, D]."""
    return ranks.reciprocal().transpose(0, 1).flatten(1).nanmean(1)


def position_label_ids(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N, D]: the label token id at each label position (-1 where a prompt has fewer labels)."""
    true, false = prompt_label_ids(m.tokenizer, ps.prompts)
    ids = torch.where(ps.positions.is_true, true[:, None], false[:, None])
    return ids.masked_fill(~ps.positions.valid, -1)


def mrr_by_label(m: ICLModel, ps: PromptSet, ranks: torch.Tensor) -> dict[str, torch.Tensor]:
    """Fig. 5 as the paper draws it: MRR [S] of each label word (e.g. "foo", "bar"), over the
    label positions that hold it, from ranks [N, S, D] of `label_ranks` on `ps`."""
    ids = position_label_ids(m, ps)
    reciprocal = ranks.reciprocal().transpose(0, 1)  # [S, N, D]
    return {m.tokenizer.decode([int(t)]).strip(): reciprocal[:, ids == t].nanmean(1) for t in ids[ids >= 0].unique()}
