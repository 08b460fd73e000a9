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
Shapes: N prompts, F layers, D label positions (= demonstrations), S heads.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch

from ..core.attribution import Readout, readout_of
from ..core.decompose import Decomposition
from ..core.heads import Head, head_name, same_layer_random_heads
from ..data.prompts import Prompt, split_separator
from ..model.loading import ICLModel
from ..model.weights import weight
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
    """[N, D + 1, SPELLINGS] long: each demonstration's and the input's tokens (-1 pads)."""
    D = ps.positions.labels.shape[1]
    out = torch.full((len(ps), D + 1, SPELLINGS), -1, dtype=torch.long)
    for n, prompt in enumerate(ps.prompts):
        words = words_of(prompt)
        for k, word in enumerate(words[:-1] + [None] * (D - len(words) + 1) + words[-1:]):
            if word:
                ids = spellings(m.tokenizer, word)
                out[n, k, : len(ids)] = torch.tensor(ids)
    return out


def word_ranks(readout: Readout, vectors: torch.Tensor, words: torch.Tensor, W: torch.Tensor | None = None
               ) -> torch.Tensor:
    """[B, M, J]: the rank of each of a prompt's J words in bs of each of its M vectors, counted over
    vocabulary chunks, a block of prompts at a time.

    vectors: [B, M, e]; W: None (e = d: residual vectors) or [M, e, d] mapping vector m into the
    residual space, folded into each readout chunk once for all the prompts (W @ G_c); words:
    [B, J, SPELLINGS] token ids (-1 pads; a word with none gets NaN). The rank is 1 + the number of
    tokens other than the word's spellings scoring strictly above its best spelling."""
    x = vectors.float()
    G = readout.G.to(x.device)
    W = None if W is None else W.float()
    xd = x if W is None else per_vector(x, W)  # [B, M, d]
    spelled = torch.einsum("bmd,bjcd->bmjc", xd, G[words.clamp(min=0)])
    best = spelled.masked_fill((words < 0)[:, None], -torch.inf).amax(-1)  # [B, M, J]
    higher = torch.zeros_like(best)
    B, M, J = best.shape
    for start, G_c in readout.chunks():
        G_c = G_c.to(x.device)
        WG = G_c if W is None else W @ G_c  # [d, Vc] or [M, e, Vc]
        local = words - start  # [B, J, C]: each spelling's column in this chunk
        for rows in readout.blocks(B, M * J):
            logits = x[rows] @ WG if W is None else per_vector(x[rows], WG)  # [b, M, Vc]
            higher[rows] += (logits.unsqueeze(-2) > best[rows].unsqueeze(-1)).sum(-1)
            # a spelling's own logit here is summed in another order than `best`: never counted above it
            inside = (local[rows] >= 0) & (local[rows] < G_c.shape[1])  # [b, J, C]
            index = local[rows].clamp(0, G_c.shape[1] - 1).flatten(1)[:, None].expand(-1, M, -1)  # [b, M, J * C]
            at = logits.gather(-1, index).view(len(index), M, J, -1)  # [b, M, J, C]
            higher[rows] -= ((at > best[rows].unsqueeze(-1)) & inside[:, None]).sum(-1)
    return (higher + 1).masked_fill(~(words >= 0).any(-1)[:, None], torch.nan)


def per_vector(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """[B, M, f]: each vector x[:, m] [e] times its own matrix W[m] [e, f], one batched product over m
    (a broadcast matmul would copy W for every prompt)."""
    return torch.bmm(x.transpose(0, 1), W).transpose(0, 1)


@torch.no_grad()
def tower_ranks(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 16,
                cache: bool = True) -> dict[str, torch.Tensor]:
    """The two towers' word ranks in the layers and heads given (e.g. the in-context heads and
    every other head of their layers), from one pass of the prompt set (cached on disk):
    "key" [N, F, D, D]: in layer f's label key at label position k, the rank of demonstration
    j's word (own: j = k), F the distinct layers of `heads` in order; "query" [N, S, D + 1]:
    in head s's last query, the rank of each demonstration's word and, last, the input's.
    NaN past a prompt's demonstrations."""
    heads = [tuple(h) for h in heads]
    layers = sorted({l for l, _ in heads})
    readout = readout_of(m)
    words = candidates(m, ps)

    def compute() -> dict[str, torch.Tensor]:
        D = ps.positions.labels.shape[1]
        key = torch.full((len(ps), len(layers), D, D), torch.nan)
        q = torch.zeros(len(ps), len(heads), m.arch.d_head)
        for rows, dec in decomposed(m, ps, batch_size, record=["attn_all", "queries"]):
            key[rows] = _key_ranks(readout, dec, ps.positions[rows].labels, words[rows], layers)
            q[rows] = torch.stack([dec.require("queries")[:, l, h] for l, h in heads], 1).float().cpu()
        W_K = torch.stack([m.arch.W_K(l)[m.arch.kv_head(h)] for l, h in heads]).float()  # [S, dh, d]
        device = readout.G.device
        query = word_ranks(readout, q.to(device), words.to(device), W_K.to(device)).cpu()
        valid = ps.positions.valid
        key = key.masked_fill(~(valid[:, None, :, None] & valid[:, None, None, :]), torch.nan)
        return {"key": key, "query": query.masked_fill(~torch.cat([valid, valid[:, :1]], 1)[:, None], torch.nan)}

    return study_result("towers", m, ps, compute, cache, heads=heads)


def _key_ranks(readout: Readout, dec: Decomposition, labels: torch.Tensor, words: torch.Tensor, layers: list[int]
               ) -> torch.Tensor:
    """One batch's "key" ranks [b, F, D, D] (`tower_ranks`)."""
    at = labels.clamp(min=0).to(dec.resid.device)  # [b, D]
    keys = torch.stack([dec.key_inputs(l).gather(1, at[..., None].expand(-1, -1, dec.resid.shape[-1]))
                        for l in layers], 1)  # [b, F, D, d]
    ranks = word_ranks(readout, keys.flatten(1, 2), words.to(dec.resid.device)[:, :-1])  # [b, F * D, D]
    return ranks.view(len(keys), len(layers), -1, ranks.shape[-1]).cpu()


def tower_table(m: ICLModel, ps: PromptSet, heads: Sequence[Head], draws: int = 20, seed: int = 0) -> pd.DataFrame:
    """One row a head: the MRR over the prompts of its label keys' own demonstration word and of the
    other demonstrations' words (its layer's key), of the input word in its last query, and in the
    last queries of `draws` random other heads of its layer (`same_layer_random_heads`, seed, seed + 1, ...)."""
    heads = [tuple(h) for h in heads]
    layers = sorted({l for l, _ in heads})
    pool = [(l, h) for l in layers for h in range(m.arch.n_heads)]
    ranks = tower_ranks(m, ps, pool)
    key = ranks["key"].reciprocal()  # [N, F, D, D]
    eye = torch.eye(key.shape[-1], dtype=torch.bool)
    own, others = key[..., eye].nanmean((0, 2)), key[..., ~eye].nanmean((0, 2))  # [F]
    query = ranks["query"][..., -1].reciprocal().mean(0)  # [pool]
    column = {h: i for i, h in enumerate(pool)}
    random = torch.stack([query[[column[h] for h in same_layer_random_heads(heads, m.arch.n_heads, seed + d)]]
                          for d in range(draws)]).mean(0)  # [S]
    return pd.DataFrame({"key: own demonstration": [float(own[layers.index(l)]) for l, _ in heads],
                         "key: other demonstrations": [float(others[layers.index(l)]) for l, _ in heads],
                         "query: input": [float(query[column[h]]) for h in heads],
                         "query: input, random heads of the layer": random.tolist()},
                        index=[head_name(h) for h in heads]).rename_axis("head (MRR)")


def similarity(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N, D]: the cosine similarity of each demonstration to the prompt's input in the model's own
    input embeddings (each text's tokens, written after a space, averaged); NaN past a prompt's
    demonstrations. The metric the paper's two towers would learn, in the model's first space."""
    E = weight(m.model.get_input_embeddings()).detach().float().cpu()

    def embed(text: str) -> torch.Tensor:
        return E[m.tokenizer(f" {text}", add_special_tokens=False)["input_ids"]].mean(0)
    D = ps.positions.labels.shape[1]
    out = torch.full((len(ps), D), torch.nan)
    for n, prompt in enumerate(ps.prompts):
        *demos, query = [embed(w) for w in words_of(prompt)]
        out[n, : len(demos)] = torch.cosine_similarity(torch.stack(demos), query[None], dim=-1)
    return out


def double_centred(x: torch.Tensor) -> torch.Tensor:
    """x [N, ..., D] less its mean over the D positions of each prompt and over the N prompts at each
    position (the grand mean added back): what is left when neither the prompt nor the position
    is allowed to explain it."""
    return x - x.mean(-1, keepdim=True) - x.mean(0, keepdim=True) + x.mean((0, -1), keepdim=True)
