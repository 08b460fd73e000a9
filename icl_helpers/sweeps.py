"""Dataset-level analyses for the notebooks: a dataset's prompts and label positions, the
per-batch functions of `locate` and `heads` run over N prompts in batches, and the located
heads cached for later notebooks.

Label positions are given per prompt as lists of token indices (ragged: an imbalanced
prompt has fewer true labels). Heads are (layer, head) pairs, S of them.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from .accuracy import Accuracy, accuracy, prompt_label_ids
from .attribution import Readout
from .cache import cache_file, cached, prompts_hash
from .datasets import dataset_records
from .decompose import Decomposition, decompose
from .heads import label_attention, label_value_ranks, project_head
from .locate import LocateResult, locate
from .models import ICLModel
from .positions import find_positions
from .prompts import VARIANTS, Prompt, build_prompts, parse_prompt

Head = tuple[int, int]
Positions = Sequence[Sequence[int]]  # per prompt, token indices


@dataclass
class PromptSet:
    """N prompts of one dataset and variant, with their label positions for one tokenizer."""

    dataset: str
    variant: str
    seed: int
    prompts: list[Prompt]
    directions: list[str]  # per prompt, e.g. "sentiment/number": the true class / the false class
    true: list[list[int]]  # per prompt, token positions of the true labels
    false: list[list[int]]  # per prompt, token positions of the false labels

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.prompts]

    @property
    def labels(self) -> list[list[int]]:
        """Per prompt, every label position in prompt order."""
        return [sorted(t + f) for t, f in zip(self.true, self.false)]


def prompt_set(m: ICLModel, dataset: str, variant: str = "balanced", n: int = 1000, seed: int = 0,
               data_dir: str | Path | None = None) -> PromptSet:
    """The first n prompts of a word dataset (sentiment_number, animal_country: both
    directions alternate) or n prompts of a sentence dataset (sst2, trec, agnews, ethos:
    drawn with `seed` from `data_dir`), under a variant of `prompts.VARIANTS`."""
    records = dataset_records(dataset, n, seed, data_dir)
    return _with_positions(m, dataset, variant, seed, build_prompts(records, VARIANTS[variant]),
                           [r.direction for r in records])


def prompt_set_from_texts(m: ICLModel, texts: list[str], name: str = "custom",
                          labels: tuple[str, str] = ("foo", "bar")) -> PromptSet:
    """Prompts written out as text, `d1 : l1 ... dK : lK x :`; labels: (true, false)."""
    prompts = [parse_prompt(t, labels) for t in texts]
    return _with_positions(m, name, "given", 0, prompts, ["?"] * len(prompts))


def _with_positions(m: ICLModel, dataset: str, variant: str, seed: int, prompts: list[Prompt],
                    directions: list[str]) -> PromptSet:
    pos = find_positions(m.tokenizer, prompts)
    return PromptSet(dataset, variant, seed, prompts, directions, pos.lists(True), pos.lists(False))


def _cache_path(kind: str, m: ICLModel, ps: PromptSet, **extra: object) -> Path:
    """Cache file of a result on a prompt set: model, dtype, dataset, variant, N, seed, and
    a hash of the prompts (and of anything in `extra`)."""
    return cache_file(kind, model=m.name, dtype=str(m.model.dtype).removeprefix("torch."), dataset=ps.dataset,
                      variant=ps.variant, n=len(ps.prompts), seed=ps.seed, prompts=prompts_hash(ps.texts),
                      **{k: prompts_hash([repr(v)]) for k, v in extra.items()})


def located(m: ICLModel, ps: PromptSet, batch_size: int = 32) -> LocateResult:
    """`locate` on a prompt set, cached on disk (so later notebooks reuse 01's work)."""
    return LocateResult(**cached(_cache_path("locate", m, ps), lambda: asdict(locate(m, ps.texts, batch_size=batch_size))))


def attention_on_labels(m: ICLModel, ps: PromptSet) -> LabelAttention:
    """`label_attention_sweep` on a prompt set's true and false labels, cached on disk."""
    compute = lambda: asdict(label_attention_sweep(m, ps.texts, ps.true, ps.false))  # noqa: E731
    return LabelAttention(**cached(_cache_path("attention", m, ps), compute))


def label_ranks(m: ICLModel, ps: PromptSet, heads: Sequence[Head]) -> torch.Tensor:
    """`label_value_ranks_sweep` [N, S, K] on a prompt set's labels, cached on disk."""
    compute = lambda: {"ranks": label_value_ranks_sweep(m, ps.texts, ps.labels, heads)}  # noqa: E731
    return cached(_cache_path("ranks", m, ps, heads=list(heads)), compute)["ranks"]


def top_pairs(loc: LocateResult, k: int = 20) -> list[Head]:
    """The k heads with the largest mean log-probability increase, as (layer, head), best first."""
    return [(l, h) for l, h, _ in loc.top_heads(k)]


def in_context_heads(m: ICLModel, ps: PromptSet, k: int = 20) -> list[Head]:
    """`top_pairs` of the (cached) located heads of a prompt set."""
    return top_pairs(located(m, ps), k)


def prompt_accuracy(m: ICLModel, ps: PromptSet, batch_size: int = 32) -> Accuracy:
    """Accuracy of the model on a prompt set (true label against false label)."""
    return accuracy(m, ps.texts, *prompt_label_ids(m.tokenizer, ps.prompts), batch_size=batch_size)


def accuracy_table(m: ICLModel, datasets: Sequence[str], n: int, batch_size: int = 32) -> pd.DataFrame:
    """Table 2: accuracy per direction (true class / false class) of each word dataset, with
    the true label foo (balanced prompts) and bar (labels swapped); n prompts a dataset,
    half in each direction. Top-1: the argmax is the true label; ranked: the true label
    outscores the false one."""
    rows = []
    for dataset in datasets:
        for variant in ("balanced", "swapped"):
            ps = prompt_set(m, dataset, variant, n)
            acc = prompt_accuracy(m, ps, batch_size)
            top1, ranked = acc.top == acc.true_id, acc.true_logit > acc.false_logit
            for direction in dict.fromkeys(ps.directions):
                keep = torch.tensor([d == direction for d in ps.directions])
                rows.append({"direction": direction, "true label": ps.prompts[0].true_label,
                             "top-1": float(top1[keep].float().mean()), "ranked": float(ranked[keep].float().mean())})
    table = pd.DataFrame(rows)
    wide = table.pivot(index="direction", columns="true label", values=["top-1", "ranked"])
    return wide.reindex(index=list(dict.fromkeys(table["direction"])), columns=["foo", "bar"], level=1)


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
    predictions: torch.Tensor  # [N] long: the model's next token (argmax) at the last position

    def at(self, heads: Sequence[Head]) -> tuple[torch.Tensor, torch.Tensor]:
        """(true, false), each [N, S], for the listed heads."""
        return at_heads(self.true, heads), at_heads(self.false, heads)


@torch.no_grad()
def label_attention_sweep(m: ICLModel, prompts: list[str], true: Positions, false: Positions,
                          batch_size: int = 32) -> LabelAttention:
    """Summed attention of the last position on true and on false labels, every head, and
    the model's predictions."""
    L, H = m.arch.n_layers, m.arch.n_heads
    every = [(l, h) for l in range(L) for h in range(H)]
    parts: dict[str, list[torch.Tensor]] = {"true": [], "false": [], "predictions": []}
    for s in range(0, len(prompts), batch_size):
        dec = decompose(m, prompts[s : s + batch_size], pattern=True)
        T = dec.input_ids.shape[1]
        for name, positions in (("true", true), ("false", false)):
            mask = position_mask(positions[s : s + batch_size], T).to(dec.pattern.device)
            parts[name].append(label_attention(dec, every, mask).view(-1, L, H).float().cpu())
        parts["predictions"].append(dec.predictions.cpu())
    return LabelAttention(**{k: torch.cat(v) for k, v in parts.items()})


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
        # Rank only at the label positions: keep just their values and tokens, [B, K].
        idx = torch.tensor([list(p) + [0] * (K - len(p)) for p in batch], device=dec.input_ids.device)
        ids = dec.input_ids.gather(1, idx)
        values = dec.values.gather(3, idx.to(dec.values.device)[:, None, None, :, None].expand(
            -1, *dec.values.shape[1:3], K, dec.values.shape[-1]))
        mask = position_mask([range(len(p)) for p in batch], K).to(ids.device)
        out[s : s + len(batch)] = label_value_ranks(readout, replace(dec, values=values, input_ids=ids), list(heads), mask).cpu()
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
def decompose_for_projection(m: ICLModel, prompt: str) -> Decomposition:
    """One prompt decomposed with everything Table 1 needs (values, attention outputs, queries)."""
    return decompose(m, [prompt], values=True, attn_all=True, queries=True)


def projection_table(m: ICLModel, dec: Decomposition, labels: Sequence[int], head: Head, k: int = 10) -> pd.DataFrame:
    """Table 1 for one decomposed prompt and head: top tokens (stop words removed) of each
    label value, label key and the last query; one row per vector."""
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


@dataclass
class VariantStudy:
    """Figs. 8-11: the in-context heads of balanced prompts, and the label attention and
    accuracy of balanced prompts and of a variant of the same records."""

    dataset: str
    heads: list[Head]
    attention: dict[str, LabelAttention]  # "balanced" and the variant
    accuracy: dict[str, float]  # top-1 accuracy of each

    @property
    def n(self) -> int:
        """Prompts of each variant."""
        return len(self.attention["balanced"].predictions)

    def at_heads(self) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Per prompt variant, (true, false) attention [N, S] in the in-context heads."""
        return {name: att.at(self.heads) for name, att in self.attention.items()}


def variant_study(m: ICLModel, dataset: str, variant: str, n: int, seed: int = 0,
                  data_dir: str | Path | None = None, k: int = 20) -> VariantStudy:
    """Balanced prompts against `variant` ("imbalanced", "reordered") of the same records."""
    sets = {v: prompt_set(m, dataset, v, n, seed, data_dir) for v in ("balanced", variant)}
    attention = {v: attention_on_labels(m, ps) for v, ps in sets.items()}
    accuracy = {v: float((attention[v].predictions == prompt_label_ids(m.tokenizer, ps.prompts)[0]).float().mean())
                for v, ps in sets.items()}
    return VariantStudy(dataset, in_context_heads(m, sets["balanced"], k), attention, accuracy)
