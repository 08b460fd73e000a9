"""Per-head analyses of in-context heads (METHOD.md sections 5-7).

Label positions are given as boolean masks [B, T] over the decomposed batch; a label's own
token is the token at its position. A head list is [(layer, head), ...] of length S.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache

import torch

from .attribution import Readout
from .decompose import Decomposition

# English stop words removed from projection lists, as the paper does (our own list).
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves s t d ll m o re ve y
""".split())


@lru_cache(maxsize=8)
def _kept_tokens(tokenizer) -> torch.Tensor:
    """[V] bool: tokens that are not stop words, punctuation, digits-free blanks or special."""
    words = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    special = set(tokenizer.all_special_ids)

    def keep(i: int, w: str) -> bool:
        w = w.strip().lower()
        return bool(w) and i not in special and w not in STOP_WORDS and not all(c in string.punctuation for c in w)

    return torch.tensor([keep(i, w) for i, w in enumerate(words)])


def top_tokens(readout: Readout, tokenizer, vectors: torch.Tensor, k: int = 10, filter_stop_words: bool = True) -> list[list[str]]:
    """The k best tokens of bs(v) for each of n vectors [n, d] (sigma does not change the order)."""
    logits = readout.logits(vectors, torch.ones(len(vectors), device=vectors.device))  # [n, V]
    if filter_stop_words:
        kept = _kept_tokens(tokenizer).to(logits.device)
        logits = logits[:, : len(kept)].masked_fill(~kept[: logits.shape[-1]], -torch.inf)
    ids = logits.topk(k, dim=-1).indices.tolist()
    return [tokenizer.batch_decode([[i] for i in row]) for row in ids]


@dataclass
class ProjectionRow:
    """One line of Table 1 / Table 3: what one vector of a head projects to."""

    kind: str  # "label value", "label key" or "last query"
    position: int
    token: str  # the prompt's token at that position
    top: list[str]


def project_head(readout: Readout, tokenizer, dec: Decomposition, prompt: int, layer: int, head: int,
                 label_positions: list[int], k: int = 10) -> list[ProjectionRow]:
    """Table 1 for one head of one prompt of `dec`: its label values, label keys and last query.

    dec needs decompose(..., values=True, attn_all=True, queries=True).
    """
    pos = torch.tensor(label_positions, device=dec.input_ids.device)
    last = int(dec.last[prompt])
    groups = [
        ("label value", dec.value_outputs(layer, head)[prompt, pos], label_positions),
        ("label key", dec.key_inputs(layer)[prompt, pos], label_positions),
        ("last query", dec.query_in_key_space(layer, head)[prompt : prompt + 1], [last]),
    ]
    rows = []
    for kind, vectors, positions in groups:
        tops = top_tokens(readout, tokenizer, vectors, k)
        rows += [ProjectionRow(kind, p, tokenizer.decode(dec.input_ids[prompt, p]), top) for p, top in zip(positions, tops)]
    return rows


def _value_outputs(dec: Decomposition, heads: list[tuple[int, int]]) -> torch.Tensor:
    """[B, S, T, d]: v_{l,h,p} W_O^{l,h} for every listed head and position."""
    arch = dec.arch
    layers = torch.tensor([l for l, _ in heads])
    kv = torch.tensor([arch.kv_head(h) for _, h in heads])
    v = dec.values[:, layers, kv]  # [B, S, T, dh]
    W_O = torch.stack([arch.W_O(l)[h] for l, h in heads]).to(v)  # [S, dh, d]
    return torch.einsum("bstk,skd->bstd", v, W_O)


def label_value_ranks(readout: Readout, dec: Decomposition, heads: list[tuple[int, int]], labels: torch.Tensor) -> torch.Tensor:
    """[B, S, T]: rank (1 = top) of each label's own token in bs of its value, nan off labels.

    labels: [B, T] bool mask of label positions. dec needs values=True. The rank is 1 + the
    number of other tokens scoring strictly higher, counted over vocabulary chunks.
    """
    vec = _value_outputs(dec, heads).float()  # [B, S, T, d]
    own = readout.G[dec.input_ids]  # [B, T, d]: readout row of each position's token
    own_logit = (vec * own[:, None]).sum(-1)  # [B, S, T]
    higher = torch.zeros_like(own_logit)
    for start, G_c in readout.chunks():  # G_c [d, Vc]
        ids = torch.arange(start, start + G_c.shape[1], device=vec.device)
        is_own = (ids == dec.input_ids[..., None])[:, None]  # [B, 1, T, Vc]; never outranks itself
        higher += ((vec @ G_c > own_logit.unsqueeze(-1)) & ~is_own).sum(-1)
    ranks = higher + 1
    return ranks.masked_fill(~labels[:, None].to(ranks.device), torch.nan)


def label_attention(dec: Decomposition, heads: list[tuple[int, int]], mask: torch.Tensor) -> torch.Tensor:
    """[B, S]: attention from the last position summed over the positions in mask [B, T].

    dec needs pattern=True.
    """
    layers = torch.tensor([l for l, _ in heads])
    hs = torch.tensor([h for _, h in heads])
    alpha = dec.pattern[:, layers, hs]  # [B, S, T]
    return (alpha * mask[:, None].to(alpha)).sum(-1)
