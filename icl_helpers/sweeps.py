"""Dataset-level analyses for the notebooks: the per-batch functions of `locate` and `heads`
run over N prompts in batches, and the located heads cached for later notebooks.

Label positions are given per prompt as lists of token indices (ragged: an imbalanced
prompt has fewer true labels). Heads are (layer, head) pairs, S of them.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Sequence

import pandas as pd
import torch

from .attribution import Readout
from .cache import cache_file, cached, prompts_hash
from .decompose import decompose
from .heads import label_attention, label_value_ranks, project_head
from .locate import LocateResult, locate
from .models import ICLModel

Head = tuple[int, int]
Positions = Sequence[Sequence[int]]  # per prompt, token indices


def located(m: ICLModel, prompts: list[str], dataset: str, variant: str = "balanced", seed: int = 0,
            batch_size: int = 32) -> LocateResult:
    """`locate` on the prompts, cached on disk under the model, its dtype, the dataset, the
    variant, N, the seed and a hash of the prompts (so notebooks 02-08 reuse 01's work)."""
    path = cache_file("locate", model=m.name, dtype=str(m.model.dtype).removeprefix("torch."), dataset=dataset,
                      variant=variant, n=len(prompts), seed=seed, prompts=prompts_hash(prompts))
    return LocateResult(**cached(path, lambda: asdict(locate(m, prompts, batch_size=batch_size))))


def at_heads(values: torch.Tensor, heads: Sequence[Head]) -> torch.Tensor:
    """[N, S] from per-head values [N, L, H]."""
    layers, hs = zip(*heads)
    return values[:, list(layers), list(hs)]


def position_mask(positions: Positions, length: int) -> torch.Tensor:
    """[N, length] bool, True at each prompt's listed positions."""
    mask = torch.zeros(len(positions), length, dtype=torch.bool)
    for i, pos in enumerate(positions):
        mask[i, list(pos)] = True
    return mask


@dataclass
class LabelAttention:
    """Attention from the last position summed over label positions, for every head."""

    true: torch.Tensor  # [N, L, H]: on the true labels
    false: torch.Tensor  # [N, L, H]: on the false labels

    def at(self, heads: Sequence[Head]) -> tuple[torch.Tensor, torch.Tensor]:
        """(true, false), each [N, S], for the listed heads."""
        return at_heads(self.true, heads), at_heads(self.false, heads)


@torch.no_grad()
def label_attention_sweep(m: ICLModel, prompts: list[str], true: Positions, false: Positions,
                          batch_size: int = 32) -> LabelAttention:
    """Summed attention of the last position on true and on false labels, every head."""
    L, H = m.arch.n_layers, m.arch.n_heads
    every = [(l, h) for l in range(L) for h in range(H)]
    parts: dict[str, list[torch.Tensor]] = {"true": [], "false": []}
    for s in range(0, len(prompts), batch_size):
        dec = decompose(m, prompts[s : s + batch_size], pattern=True)
        T = dec.input_ids.shape[1]
        for name, positions in (("true", true), ("false", false)):
            mask = position_mask(positions[s : s + batch_size], T).to(dec.pattern.device)
            parts[name].append(label_attention(dec, every, mask).view(-1, L, H).float().cpu())
    return LabelAttention(torch.cat(parts["true"]), torch.cat(parts["false"]))


@torch.no_grad()
def label_value_ranks_sweep(m: ICLModel, prompts: list[str], labels: Positions, heads: Sequence[Head],
                            batch_size: int = 8) -> torch.Tensor:
    """[N, S, K]: rank (1 = top) of each label's own token in bs of its value in each head,
    for the K label positions of each prompt, in prompt order (nan-padded if K varies)."""
    readout = Readout(m.arch)
    K = max(len(p) for p in labels)
    out = torch.full((len(prompts), len(heads), K), torch.nan)
    for s in range(0, len(prompts), batch_size):
        dec = decompose(m, prompts[s : s + batch_size], values=True)
        batch = labels[s : s + batch_size]
        mask = position_mask(batch, dec.input_ids.shape[1]).to(dec.input_ids.device)
        ranks = label_value_ranks(readout, dec, list(heads), mask).cpu()  # [B, S, T]
        for i, pos in enumerate(batch):
            out[s + i, :, : len(pos)] = ranks[i][:, list(pos)]
    return out


def mrr(ranks: torch.Tensor) -> torch.Tensor:
    """[S]: mean reciprocal rank over prompts and label positions, from ranks [N, S, K]."""
    return ranks.reciprocal().transpose(0, 1).flatten(1).nanmean(1)


def random_heads(heads: Sequence[Head], n_heads: int, seed: int = 0) -> list[Head]:
    """For each head, a random other head of the same layer, outside `heads` where possible."""
    rng = random.Random(seed)
    taken = set(map(tuple, heads))
    picks = []
    for l, h in heads:
        free = [g for g in range(n_heads) if (l, g) not in taken] or [g for g in range(n_heads) if g != h]
        picks.append((l, rng.choice(free)))
    return picks


def overlap(top: dict[str, Sequence[Head]]) -> torch.Tensor:
    """[D, D]: how many heads the top sets of each pair of datasets share."""
    sets = [set(map(tuple, heads)) for heads in top.values()]
    return torch.tensor([[len(a & b) for b in sets] for a in sets])


@torch.no_grad()
def projection_table(m: ICLModel, prompt: str, labels: Sequence[int], head: Head, k: int = 10) -> pd.DataFrame:
    """Table 1 for one prompt and head: top tokens (stop words removed) of each label value,
    label key and the last query; one row per vector."""
    dec = decompose(m, [prompt], values=True, attn_all=True, queries=True)
    rows = project_head(Readout(m.arch), m.tokenizer, dec, 0, head[0], head[1], list(labels), k)
    return pd.DataFrame({
        "vector": [r.kind for r in rows],
        "position": [r.position for r in rows],
        "token": [r.token for r in rows],
        "top tokens": [", ".join(t.strip() for t in r.top) for r in rows],
    })


@dataclass
class PromptAttention:
    """One prompt's attention from the last position, every head."""

    tokens: list[str]  # [T]
    pattern: torch.Tensor  # [L, H, T]
    true: torch.Tensor  # [T] bool: true-label positions
    false: torch.Tensor  # [T] bool: false-label positions


@torch.no_grad()
def prompt_attention(m: ICLModel, prompt: str, true: Sequence[int], false: Sequence[int]) -> PromptAttention:
    """The last position's attention rows of one prompt, with its label masks."""
    dec = decompose(m, [prompt], pattern=True)
    T = int(dec.last[0]) + 1
    ids = dec.input_ids[0, :T].tolist()
    tokens = [m.tokenizer.decode([i]) for i in ids]
    masks = position_mask([true, false], T)
    return PromptAttention(tokens, dec.pattern[0, :, :, :T].float().cpu(), masks[0], masks[1])
