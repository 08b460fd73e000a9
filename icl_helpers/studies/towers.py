"""The two towers (the title's claim; Tables 1 and 3's key and query rows): label keys carry their own
demonstration, the last position's query carries the input.

For each prompt, the rank (1 = top) of each text of the prompt (its demonstrations, then its input)
in the vocabulary projection of a vector: in each label position's key, as the paper builds it (l.
279: what the key projection reads, the layer's normed input, `Decomposition.key_input`; the same
for every head of a layer) and as the attention outputs written into the label position alone (ours,
x_l less the embedding and every earlier FFN output, `Decomposition.attention_sums`); in each head's
last query mapped into the key-input space (q_{l,h} W_K^{l,h}), as it is and turned by each label's
distance to the last position, the vector that label's key is scored against on a rotary model
(`Arch.rotated`; the same on GPT-2). A word's tokens are its first token written four ways (" word",
"word", " Word", "Word"), a sentence's its content tokens; a text ranks as its best token, among the
tokens the paper's lists keep (stop words, punctuation and special tokens left out, `kept_tokens`).
Shapes: N prompts, F layers, D label positions (= demonstrations), J = D + 1 texts, S heads.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch
from tqdm import tqdm

from ..cache import stored_parts
from ..core.attribution import Readout, readout_of
from ..core.heads import Head, head_name, same_layer_random_heads
from ..core.projections import kept_tokens
from ..data.prompts import Prompt, split_separator
from ..data.sources import SOURCES
from ..data.tasks import TASKS
from ..model.adapters import Arch
from ..model.loading import ICLModel
from ..model.weights import weight
from .runner import PromptSet, decomposed

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


def content_tokens(tokenizer, text: str) -> list[int]:
    """The distinct tokens of the text written after a space, stop words, punctuation and special
    tokens left out (`kept_tokens`)."""
    kept = kept_tokens(tokenizer)
    return [i for i in dict.fromkeys(tokenizer(f" {text}", add_special_tokens=False)["input_ids"]) if kept[i]]


def candidates(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N, D + 1, C] long: the tokens of each demonstration and, last, of the input (-1 pads): a word's
    `spellings` (word datasets), a sentence's `content_tokens` (sentence datasets, and a task of sentences)."""
    D = ps.positions.labels.shape[1]
    sentences = ps.dataset in SOURCES or (ps.dataset in TASKS and TASKS[ps.dataset].sentences)
    tokens = content_tokens if sentences else spellings
    found = [[tokens(m.tokenizer, w) for w in words_of(p)] for p in ps.prompts]
    out = torch.full((len(ps), D + 1, max(1, *(len(t) for texts in found for t in texts))), -1, dtype=torch.long)
    for n, texts in enumerate(found):
        for k, ids in zip([*range(len(texts) - 1), D], texts):
            out[n, k, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def kept_of(readout: Readout, tokenizer) -> torch.Tensor:
    """[V] bool, on the readout's device: the vocabulary's tokens the ranks count (`kept_tokens`;
    rows past the tokenizer's never)."""
    kept, V = kept_tokens(tokenizer), readout.G.shape[0]
    out = torch.zeros(V, dtype=torch.bool)
    out[: min(V, len(kept))] = kept[:V]
    return out.to(readout.G.device)


def word_ranks(readout: Readout, vectors: torch.Tensor, words: torch.Tensor, kept: torch.Tensor,
               W: torch.Tensor | None = None, bar: tqdm | None = None) -> torch.Tensor:
    """[B, M, J]: the rank of each of a prompt's J texts in bs of each of its M vectors, counted over
    vocabulary chunks, a block of prompts at a time.

    vectors: [B, M, e]; W: None (e = d: residual vectors) or [G, e, d], G dividing M, mapping vector
    m into the residual space by W[m // (M / G)] (consecutive vectors share a matrix), folded into
    each readout chunk once for all the prompts (W @ G_c); words: [B, J, C] token ids (-1 pads; a
    text with none gets NaN); kept: [V] bool, the tokens counted; bar: advanced a chunk at a time
    (`Readout.chunk_bar`). A text's rank is 1 + the number of kept tokens other than its own scoring
    strictly above its best token."""
    x = vectors.float()
    G = readout.G.to(x.device)
    W = None if W is None else W.float()
    words, kept = words.to(x.device), kept.to(x.device)
    B, M, J = x.shape[0], x.shape[1], words.shape[1]
    best = torch.empty(B, M, J, device=x.device)
    for rows in readout.blocks(B, M * J):
        xd = x[rows] if W is None else per_vector(x[rows], W)  # [b, M, d]
        spelled = torch.einsum("bmd,bjcd->bmjc", xd, G[words[rows].clamp(min=0)])
        best[rows] = spelled.masked_fill((words[rows] < 0)[:, None], -torch.inf).amax(-1)
    counted = kept[words.clamp(min=0)] & (words >= 0)  # [B, J, C]: a text's own tokens that the count would hold
    higher = torch.zeros_like(best)
    for start, G_c in readout.chunks(bar):
        G_c = G_c.to(x.device)
        WG = G_c if W is None else W @ G_c  # [d, Vc] or [G, e, Vc]
        kept_c, local = kept[start : start + G_c.shape[1]], words - start  # local [B, J, C]: each token's column here
        for rows in readout.blocks(B, M * J):
            logits = x[rows] @ WG if W is None else per_vector(x[rows], WG)  # [b, M, Vc]
            higher[rows] += ((logits.unsqueeze(-2) > best[rows].unsqueeze(-1)) & kept_c).sum(-1)
            # a text's own token here is summed in another order than `best`: never counted above it
            inside = (local[rows] >= 0) & (local[rows] < G_c.shape[1]) & counted[rows]  # [b, J, C]
            index = local[rows].clamp(0, G_c.shape[1] - 1).flatten(1)[:, None].expand(-1, M, -1)  # [b, M, J * C]
            at = logits.gather(-1, index).view(len(index), M, J, -1)  # [b, M, J, C]
            higher[rows] -= ((at > best[rows].unsqueeze(-1)) & inside[:, None]).sum(-1)
    return (higher + 1).masked_fill(~(words >= 0).any(-1)[:, None], torch.nan)


def per_vector(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """[B, M, f]: vector m of x [B, M, e] times its matrix W[m // P] [e, f], W [G, e, f] and P = M / G
    consecutive vectors a matrix, one batched product over the G matrices (a broadcast matmul would
    copy W for every prompt)."""
    (B, M, e), G = x.shape, W.shape[0]
    grouped = x.reshape(B, G, M // G, e).transpose(0, 1).reshape(G, B * (M // G), e)
    return torch.bmm(grouped, W).view(G, B, M // G, -1).transpose(0, 1).reshape(B, M, -1)


def rotated_queries(arch: Arch, queries: torch.Tensor, heads: Sequence[Head], distance: torch.Tensor) -> torch.Tensor:
    """[N, S, D, dh]: each head's last query [N, S, dh] turned by each label's distance [N, D] to the
    last position (`Arch.rotated`, one call a layer): the vector that label's unturned key is scored
    against; the query itself, D times, where the family turns none (GPT-2)."""
    out = queries[:, :, None].expand(-1, -1, distance.shape[1], -1).contiguous()
    for layer in sorted({l for l, _ in heads}):
        at = [s for s, (l, _) in enumerate(heads) if l == layer]
        out[:, at] = arch.rotated(layer, out[:, at], distance.to(out.device))
    return out


LAYER_RANKS = "layer-tower-ranks"  # `tower_ranks`' entries, one a layer


@torch.no_grad()
def tower_ranks(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 16,
                cache: bool = True) -> dict[str, torch.Tensor]:
    """The two towers' ranks of every text (the D demonstrations, then the input) in the layers and
    heads given (e.g. the in-context heads and every other head of their layers), F the distinct
    layers of `heads` in order:
    "key" [N, F, D, J]: in layer f's label key at label position k (the key projection's input);
    "key_attention" [N, F, D, J]: the same in the attention outputs written there (ours);
    "query" [N, S]: the input's alone, in head s's last query, unturned;
    "query_rotated" [N, S, D]: the input's, in head s's last query turned by label k's distance.
    NaN past a prompt's demonstrations. Kept on disk a layer at a time, every head of it
    (`layer_tower_ranks`): head sets that share layers (a report's views) rank each layer once, the
    layers not yet kept in one pass of the prompt set."""
    heads = [tuple(h) for h in heads]
    layers = sorted({l for l, _ in heads})
    kept = stored_parts(LAYER_RANKS, m, ps, layers, lambda missing: layer_tower_ranks(m, ps, missing, batch_size), cache,
                        part="layer")
    return {**{kind: torch.cat([kept[l][kind] for l in layers], 1) for kind in ("key", "key_attention")},
            **{kind: torch.stack([kept[l][kind][:, h] for l, h in heads], 1) for kind in ("query", "query_rotated")}}


def layer_tower_ranks(m: ICLModel, ps: PromptSet, layers: Sequence[int], batch_size: int = 16
                      ) -> dict[int, dict[str, torch.Tensor]]:
    """`tower_ranks` of every head of each layer given, by layer, from one pass of the prompt set (the
    keys ranked under its bar over batches, then the queries under one over the vocabulary chunks):
    "key", "key_attention" [N, 1, D, J], "query" [N, H], "query_rotated" [N, H, D]."""
    layers = sorted(layers)
    H = m.arch.n_heads
    heads = [(l, h) for l in layers for h in range(H)]
    readout = readout_of(m)
    words, kept = candidates(m, ps), kept_of(readout, m.tokenizer)
    (N, D), J, F = ps.positions.labels.shape, words.shape[1], len(layers)
    key, key_attention = torch.full((N, F, D, J), torch.nan), torch.full((N, F, D, J), torch.nan)
    q = torch.zeros(N, len(heads), m.arch.d_head)
    for rows, dec in decomposed(m, ps, batch_size, record=["attn_all", "key_input", "queries"]):
        at = ps.positions[rows].labels.clamp(min=0)
        key[rows] = _key_ranks(readout, dec.require("key_input")[:, layers], at, words[rows], kept)
        sums = torch.stack([dec.attention_sums(l) for l in layers], 1)  # [b, F, T, d]
        key_attention[rows] = _key_ranks(readout, sums, at, words[rows], kept)
        q[rows] = dec.require("queries")[:, [l for l, _ in heads], [h for _, h in heads]].float().cpu()
    with readout.chunk_bar(f"{ps.title}: the input's ranks in {len(heads)} heads' last queries") as bar:
        device = readout.G.device
        W_K = torch.stack([m.arch.W_K(l)[m.arch.kv_head(h)] for l, h in heads]).float().to(device)  # [F * H, dh, d]
        distance = ps.positions.last[:, None] - ps.positions.labels.clamp(min=0)  # [N, D]
        turned = rotated_queries(m.arch, q.to(device), heads, distance)  # [N, F * H, D, dh]
        both = torch.cat([q.to(device)[:, :, None], turned], 2).flatten(1, 2)  # each head's query, then turned D times
        given = words[:, -1:]  # [N, 1, C]: the input's tokens
        ranks = word_ranks(readout, both, given, kept, W_K, bar)[..., 0].cpu().view(N, F, H, D + 1)  # W_K folded once
    real = torch.cat([ps.positions.valid, torch.ones(N, 1, dtype=torch.bool)], 1)  # [N, J]
    pair = ps.positions.valid[:, None, :, None] & real[:, None, None, :]  # [N, 1, D, J]
    query = ranks[..., 0]
    rotated = ranks[..., 1:].masked_fill(~ps.positions.valid[:, None, None], torch.nan)
    key, key_attention = key.masked_fill(~pair, torch.nan), key_attention.masked_fill(~pair, torch.nan)
    return {l: {"key": key[:, f : f + 1].clone(), "key_attention": key_attention[:, f : f + 1].clone(),
                "query": query[:, f].clone(), "query_rotated": rotated[:, f].clone()} for f, l in enumerate(layers)}


def _key_ranks(readout: Readout, keys: torch.Tensor, at: torch.Tensor, words: torch.Tensor, kept: torch.Tensor
               ) -> torch.Tensor:
    """One batch's key ranks [b, F, D, J] (`tower_ranks`) from keys [b, F, T, d] at every position and
    the label positions at [b, D]."""
    b, F, _, d = keys.shape
    index = at.to(keys.device)[:, None, :, None].expand(-1, F, -1, d)
    labelled = keys.gather(2, index)  # [b, F, D, d]
    ranks = word_ranks(readout, labelled.flatten(1, 2), words, kept)  # [b, F * D, J]
    return ranks.view(b, F, -1, ranks.shape[-1]).cpu()


def adjacent_texts(ps: PromptSet, side: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For label key k of each prompt: the text just `side` of its demonstration (-1: the demonstration
    before it; +1: the text after it, the next demonstration or, after the last label, the input), and
    the texts farther on that side that stand to the key's demonstration as that adjacent text does
    (both of its class, or both of the other: the input is of the true class), so that class alone
    makes no difference between them. ([N, D, J] bool adjacent, [N, D, J] bool farther), J's texts
    as in `tower_ranks`; a key with either empty has neither."""
    (N, D), valid = ps.positions.labels.shape, ps.positions.valid
    real = torch.cat([valid, torch.ones(N, 1, dtype=torch.bool)], 1)  # [N, J]
    order = torch.cat([torch.arange(D).expand(N, D), valid.sum(1, keepdim=True)], 1)  # [N, J]: each text's place
    true = torch.tensor([[*p.is_true, *[False] * (D - len(p.is_true)), True] for p in ps.prompts])  # [N, J]
    step = (order[:, None, :] - torch.arange(D)[None, :, None]) * side  # [N, D, J]: places away on that side
    pair = real[:, None, :] & valid[:, :, None]
    same = true[:, None, :] == true[:, :D, None]  # [N, D, J]: of the key's demonstration's class
    adjacent = pair & (step == 1)
    alike = same == (same & adjacent).any(-1, keepdim=True)  # stands to it as the adjacent text does
    farther = pair & (step >= 2) & alike
    both = (adjacent.any(-1) & farther.any(-1))[..., None]  # [N, D, 1]
    return adjacent & both, farther & both


def tower_table(m: ICLModel, ps: PromptSet, heads: Sequence[Head], draws: int = 20, seed: int = 0) -> pd.DataFrame:
    """One row a head: the MRR over the prompts of its layer's label keys' own demonstration and of the
    other demonstrations (the paper's key), of the input in its last query turned to each label, and
    in the last queries of `draws` random other heads of its layer (`same_layer_random_heads`,
    seed, seed + 1, ...)."""
    heads = [tuple(h) for h in heads]
    layers = sorted({l for l, _ in heads})
    pool = [(l, h) for l in layers for h in range(m.arch.n_heads)]
    ranks = tower_ranks(m, ps, pool)
    key = ranks["key"][..., :-1].reciprocal()  # [N, F, D, D]: the demonstrations
    eye = torch.eye(key.shape[-1], dtype=torch.bool)
    own, others = key[..., eye].nanmean((0, 2)), key[..., ~eye].nanmean((0, 2))  # [F]
    query = ranks["query_rotated"].reciprocal().nanmean(2).mean(0)  # [pool]
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
