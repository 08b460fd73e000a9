"""The two towers (the title's claim; Table 1's key and query rows): label keys carry their own
demonstration, the last position's query carries the input.

For each prompt of a word dataset, the rank (1 = top) of a word in the vocabulary projection
of a vector: in each label position's key (the paper's label key, the key's input, x_l minus
the embedding and every earlier FFN output, `Decomposition.key_inputs`: the same for every
head of a layer), the rank of every demonstration's word, its own and the others'; in each
head's last query mapped into the key-input space (q_{l,h} W_K^{l,h},
`Decomposition.query_in_key_space`), the rank of the input word and of every
demonstration's word. A word's rank is that of the best of its first tokens written four
ways (" word", "word", " Word", "Word").
Shapes: N prompts, F layers, K label positions (= demonstrations), S heads.
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..core.attribution import Readout
from ..core.decompose import Decomposition
from ..core.heads import Head
from ..data.prompts import Prompt, split_separator
from ..model.loading import ICLModel
from .runner import PromptSet, decomposed, study_result

SPELLINGS = 4  # first tokens a word is looked for as: " word", "word", " Word", "Word"


def words_of(prompt: Prompt) -> list[str]:
    """The prompt's demonstrations in order, then its input, as text."""
    end = split_separator(prompt.sep)[0]
    return [prompt.text[s:e].strip() for s, e in prompt.demos] + [prompt.text[prompt.labels[-1][1] : -len(end)].strip()]


def spellings(tokenizer, word: str) -> list[int]:
    """The first token of the word written four ways (fewer where two ways share it)."""
    cap = word[:1].upper() + word[1:]
    ids = [tokenizer(w, add_special_tokens=False)["input_ids"][0] for w in (f" {word}", word, f" {cap}", cap)]
    return list(dict.fromkeys(ids))


def candidates(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N, K + 1, SPELLINGS] long: each demonstration's and the input's tokens (-1 pads)."""
    K = ps.positions.labels.shape[1]
    out = torch.full((len(ps), K + 1, SPELLINGS), -1, dtype=torch.long)
    for n, prompt in enumerate(ps.prompts):
        words = words_of(prompt)
        for k, word in enumerate(words[:-1] + [None] * (K - len(words) + 1) + words[-1:]):
            if word:
                ids = spellings(m.tokenizer, word)
                out[n, k, : len(ids)] = torch.tensor(ids)
    return out


def word_ranks(readout: Readout, vectors: torch.Tensor, words: torch.Tensor, W: torch.Tensor | None = None
               ) -> torch.Tensor:
    """[..., J]: the rank of each of J words in bs of each vector, counted over vocabulary chunks.

    vectors: [..., S, e]; W: None (e = d: the vectors are residual vectors) or [S, e, d] mapping
    the vectors of each s into the residual space (folded into each readout chunk once, W @ G_c); words: [..., J,
    SPELLINGS] token ids (-1 pads; a word with none gets NaN). The rank is 1 + the number of
    tokens other than the word's spellings scoring strictly above its best spelling."""
    x = vectors.float()
    G = readout.G.to(x.device)
    own = G[words.clamp(min=0)]  # [..., J, C, d]
    if W is not None:
        own = own @ W.float().transpose(-1, -2).unsqueeze(-3)  # [..., J, C, e]
    best = (own @ x[..., None, :, None]).squeeze(-1).masked_fill(words < 0, -torch.inf).amax(-1)  # [..., J]
    higher = torch.zeros_like(best)
    for start, G_c in readout.chunks():
        if W is None:
            logits = x @ G_c.to(x.device)  # [..., Vc]
        else:
            logits = (x.unsqueeze(-2) @ (W.float() @ G_c.to(x.device))).squeeze(-2)  # [..., S, 1, e] @ [S, e, Vc]
        higher += (logits.unsqueeze(-2) > best.unsqueeze(-1)).sum(-1)
        local = words - start  # [..., J, C]: a spelling's column in this chunk; its own logit here is
        inside = (local >= 0) & (local < G_c.shape[1])  # summed in another order than `best`: not counted
        at = logits.unsqueeze(-2).expand(*local.shape[:-1], -1).gather(-1, local.clamp(0, G_c.shape[1] - 1))
        higher -= ((at > best.unsqueeze(-1)) & inside).sum(-1)
    return (higher + 1).masked_fill(~(words >= 0).any(-1), torch.nan)


@torch.no_grad()
def tower_ranks(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 16,
                cache: bool = True) -> dict[str, torch.Tensor]:
    """The two towers' word ranks in the layers and heads given (e.g. the in-context heads and
    every other head of their layers), from one pass of the prompt set (cached on disk):
    "key" [N, F, K, K]: in layer f's label key at label position k, the rank of demonstration
    j's word (own: j = k), F the distinct layers of `heads` in order; "query" [N, S, K + 1]:
    in head s's last query, the rank of each demonstration's word and, last, the input's.
    NaN past a prompt's demonstrations."""
    heads = [tuple(h) for h in heads]
    layers = sorted({l for l, _ in heads})
    readout = Readout(m.arch)
    words = candidates(m, ps)

    def compute() -> dict[str, torch.Tensor]:
        K = ps.positions.labels.shape[1]
        key = torch.full((len(ps), len(layers), K, K), torch.nan)
        query = torch.full((len(ps), len(heads), K + 1), torch.nan)
        for rows, dec in decomposed(m, ps, batch_size, record=["attn_all", "queries"]):
            key[rows], query[rows] = _batch_ranks(m, readout, dec, ps.positions[rows].labels, words[rows], layers, heads)
        valid = ps.positions.valid
        key = key.masked_fill(~(valid[:, None, :, None] & valid[:, None, None, :]), torch.nan)
        return {"key": key, "query": query.masked_fill(~torch.cat([valid, valid[:, :1]], 1)[:, None], torch.nan)}

    return study_result("towers", m, ps, compute, cache, heads=heads)


def _batch_ranks(m: ICLModel, readout: Readout, dec: Decomposition, labels: torch.Tensor, words: torch.Tensor,
                 layers: list[int], heads: list[Head]) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch's "key" [b, F, K, K] and "query" [b, S, K + 1] ranks (`tower_ranks`)."""
    device = dec.resid.device
    at = labels.clamp(min=0).to(device)  # [b, K]
    words = words.to(device)
    keys = torch.stack([dec.key_inputs(l).gather(1, at[..., None].expand(-1, -1, dec.resid.shape[-1]))
                        for l in layers], 1)  # [b, F, K, d]
    key = word_ranks(readout, keys, words[:, None, None, :-1].expand(-1, len(layers), at.shape[1], -1, -1))
    q = torch.stack([dec.require("queries")[:, l, h] for l, h in heads], 1)  # [b, S, dh]
    W_K = torch.stack([m.arch.W_K(l)[m.arch.kv_head(h)] for l, h in heads]).to(q)  # [S, dh, d]
    query = word_ranks(readout, q, words[:, None].expand(-1, len(heads), -1, -1), W_K)
    return key.cpu(), query.cpu()
