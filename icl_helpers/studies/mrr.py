"""Fig. 5: label values point at their labels. For each head and prompt, every label's
value is projected into the vocabulary and the rank of the label's own token is taken;
the mean reciprocal rank (MRR) of in-context heads is compared with random heads of the
same layer (`core.heads.same_layer_random_heads`). Tables 1 and 3 read the same values for
their labels' related concepts (`concept_ranks`)."""
from __future__ import annotations

from typing import Sequence

import torch

from ..core.attribution import readout_of
from ..core.heads import Head, same_layer_random_heads
from ..core.projections import kept_tokens, related_concepts, value_ranks
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
    return _ranks_at_labels(m, ps, heads, batch_size)


@cached_study("concept-ranks", "ranks", "heads")
@torch.no_grad()
def concept_ranks(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 1024) -> torch.Tensor:
    """[N, S, D]: rank (1 = top) of the best related concept of each label (`label_concepts`) in
    bs of its value in each head, among the tokens a projection table shows (`kept_tokens`: stop
    words, punctuation and special tokens left out, as the paper's Table 1 leaves them), nan off
    labels; from the `LabelRecord` as `label_ranks` is."""
    V = readout_of(m).G.shape[0]
    kept = kept_tokens(m.tokenizer)[:V]
    shown = torch.cat([kept, kept.new_zeros(V - len(kept))])  # ids past the tokenizer's (padding rows) are never shown
    return _ranks_at_labels(m, ps, heads, batch_size, label_concepts(m, ps), shown)


def _ranks_at_labels(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int,
                     targets: torch.Tensor | None = None, counted: torch.Tensor | None = None) -> torch.Tensor:
    """[N, S, D]: `value_ranks` at the label positions of the prompt set's `LabelRecord`, batch_size
    prompts a call, under one bar over their vocabulary chunks; targets [N, D, C] (each label's own
    token where None), counted [V] bool."""
    readout, record = readout_of(m), label_record(m, ps)
    out = torch.full((len(ps), len(heads), ps.positions.labels.shape[1]), torch.nan)
    what = "label" if targets is None else "related concept"
    with readout.chunk_bar(f"{ps.title}: {what} ranks in {len(heads)} heads", -(-len(ps) // batch_size)) as bar:
        for rows, dec in record.decompositions(m, batch_size):
            own = dec.input_ids[..., None] if targets is None else targets[rows]
            ranks = value_ranks(readout, dec, list(heads), own, counted, bar).cpu()
            out[rows] = ranks.masked_fill(~ps.positions[rows].valid[:, None], torch.nan)
    return out


def label_concepts(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N, D, C]: the related concepts (`related_concepts`) of the label word at each label
    position, -1 past them and past a prompt's labels."""
    labels = {w for p in ps.prompts for w in (p.true_label, p.false_label)}  # each word's vocabulary scan once
    words = {w: related_concepts(m.tokenizer, w) for w in sorted(labels)}
    C = max(map(len, words.values()))
    padded = {w: torch.tensor(ids + [-1] * (C - len(ids)), dtype=torch.long) for w, ids in words.items()}
    true, false = (torch.stack([padded[getattr(p, f"{kind}_label")] for p in ps.prompts]) for kind in ("true", "false"))
    concepts = torch.where(ps.positions.is_true[..., None], true[:, None], false[:, None])  # [N, D, C]
    return concepts.masked_fill(~ps.positions.valid[..., None], -1)


def layer_matched_mrr(m: ICLModel, ps: PromptSet, heads: Sequence[Head], draws: int, seed: int = 0
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Reciprocal rank a prompt (mean over its labels) [N, S] in the S heads, and [D, N, S] in
    D draws of a random other head of each one's layer (`same_layer_random_heads`, seeds seed,
    seed + 1, ...): one cached pass ranks every head of those layers (`layer_pool`)."""
    pool = layer_pool(heads, m.arch.n_heads)
    reciprocal = label_ranks(m, ps, pool).reciprocal().nanmean(2)  # [N, heads of the layers]
    column = {head: i for i, head in enumerate(pool)}

    def at(hs: Sequence[Head]) -> torch.Tensor:
        return reciprocal[:, [column[tuple(h)] for h in hs]]
    random = [same_layer_random_heads(heads, m.arch.n_heads, seed + d) for d in range(draws)]
    return at(heads), torch.stack([at(hs) for hs in random])


def layer_pool(heads: Sequence[Head], n_heads: int) -> list[Head]:
    """Every head of the heads' layers, layer by layer: the heads Fig. 5's one cached pass ranks."""
    return [(l, h) for l in sorted({l for l, _ in heads}) for h in range(n_heads)]


def ranks_in_layers(m: ICLModel, ps: PromptSet, heads: Sequence[Head], pooled: Sequence[Head]) -> torch.Tensor:
    """[N, S, D]: `label_ranks` of the S heads (in the layers of `pooled`), read from the cached
    ranks of `layer_pool(pooled)` (Fig. 5's, where pooled are its in-context heads): no new pass."""
    pool = layer_pool(pooled, m.arch.n_heads)
    return label_ranks(m, ps, pool)[:, [pool.index(tuple(h)) for h in heads]]


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
