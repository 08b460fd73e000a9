"""Head types the literature ties to in-context learning, scored on random token sequences, and the
prompts of the halves by input that keep their scores apart from the prompts they are judged on.

Every score is [L, H], one number a head, from one batched pass of seeded sequences that reads
every head's attention (the adapter's `pattern` site) and keeps only the attention on each
query's targets:

* `induction_scores`: the stripe score (Olsson et al. 2022, "In-context learning and induction
  heads"; TransformerLens's demo): on S sequences P + R + R, R = n token ids, the attention from
  each token of the second copy to the token after its first occurrence, alpha(i, i - n + 1),
  averaged over those n queries and the sequences. At most 1.
* `prefix_matching_scores`: Bansal et al. 2023's and Crosbie & Shutova 2025's score: on P + four
  copies of R, at every query of copies 2-4, the attention summed over the tokens that followed
  each earlier occurrence of the query's token, averaged. At most 1.
* `previous_token_scores`: the mean attention on the previous token (TransformerLens's
  previous-token target) over the queries whose previous token is not the prefix P.

P is what the tokenizer puts before any text (a BOS, or nothing: GPT-2), as in every prompt of
the package. R is n distinct ids drawn with the seed from the ordinary tokens (`ordinary_ids`:
no special, added, unused or byte-fallback token), written as ids, never decoded and re-encoded.
`null=True` scores the same target positions on sequences whose copies are fresh draws sharing
no id (P + R + R'), where a head can score only by its position pattern: the chance level a
threshold is set against.

Scores read one half of a dataset's records (SCORE), ablations and signatures the other (EVAL): the
split by distinct input, `data.split.input_halves`; `score_and_eval` builds both halves' prompts.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import torch

from ..cache import stored
from ..core.batching import Tensors
from ..data.positions import find_positions
from ..data.prompts import Prompt, Record, build_prompt
from ..data.setting import MAIN, Setting
from ..data.split import input_halves, records_in
from ..errors import UsageError, check_count
from ..model.hooks import Hook, attached
from ..model.loading import ICLModel, runs_model
from ..progress import progress_bar
from .runner import PromptSet

UNUSED = re.compile(r"<unused\d+>|<0x[0-9A-Fa-f]{2}>|\[unused\d+\]")  # unused and byte-fallback tokens


def ordinary_ids(m: ICLModel) -> torch.Tensor:
    """[V'] long, ascending: the ids random sequences draw from: tokens of both the tokenizer and
    the embedding, none of them special, added (Qwen's top ids), unused (Gemma's `<unused*>`) or a
    byte fallback (`<0x0A>`)."""
    tok = m.tokenizer
    n = min(len(tok), m.model.get_input_embeddings().weight.shape[0])
    excluded = set(tok.all_special_ids) | set(getattr(tok, "added_tokens_decoder", {}))
    names = tok.convert_ids_to_tokens(list(range(n)))
    return torch.tensor([i for i, t in enumerate(names) if i not in excluded and t is not None and not UNUSED.fullmatch(t)])


def text_prefix(m: ICLModel) -> list[int]:
    """The ids the tokenizer puts before any text (its BOS; [] for GPT-2)."""
    with_special = m.tokenizer("a")["input_ids"]
    plain = m.tokenizer("a", add_special_tokens=False)["input_ids"]
    for k in range(len(with_special) - len(plain) + 1):
        if with_special[k:k + len(plain)] == plain:
            return with_special[:k]
    raise UsageError(f"{m.name}'s tokenizer changes a text's own tokens when it adds its special ones: "
                     "random sequences cannot be given its prefix.")


def random_sequences(m: ICLModel, n_sequences: int = 200, length: int = 50, copies: int = 2, seed: int = 0,
                     null: bool = False) -> torch.Tensor:
    """[S, P + copies * length] long: the tokenizer's prefix, then `copies` copies of `length`
    distinct ordinary ids drawn with the seed (null: each copy a fresh draw, no id shared
    between copies)."""
    check_count(n_sequences, "n_sequences")
    check_count(length, "length")
    if copies < 2:
        raise UsageError(f"Repeated sequences need at least 2 copies, not {copies}.")
    pool = ordinary_ids(m)
    drawn = length * (copies if null else 1)
    if drawn > len(pool):
        raise UsageError(f"{m.name} has {len(pool)} ordinary tokens: draw at most that many a sequence, not {drawn}.")
    g = torch.Generator().manual_seed(seed)
    prefix = torch.tensor(text_prefix(m), dtype=torch.long)
    rows = []
    for _ in range(n_sequences):
        ids = pool[torch.randperm(len(pool), generator=g)[:drawn]]
        rows.append(torch.cat([prefix, ids if null else ids.repeat(copies)]))
    return torch.stack(rows)


def repeat_targets(T: int, prefix: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets [T, T] bool, queries [T] bool) of a sequence of `prefix` ids then copies of
    `length` ids: query i = prefix + c * length + k (copy c >= 1) targets prefix + c' * length + k + 1
    for every earlier copy c' < c, the token after each earlier occurrence of its own token."""
    pos = torch.arange(T)
    copy, k = (pos - prefix).div(length, rounding_mode="floor"), (pos - prefix) % length  # [T] each
    queries = (pos >= prefix) & (copy >= 1)
    before = (pos - 1).clamp(min=0)  # each key's previous position: an earlier occurrence where it holds the query's token
    targets = ((pos[None, :] - 1 >= prefix) & (k[before][None, :] == k[:, None]) & (copy[before][None, :] < copy[:, None])
               & queries[:, None])
    return targets, queries


def previous_targets(T: int, prefix: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(targets [T, T] bool, queries [T] bool): query i >= prefix + 1 targets i - 1."""
    pos = torch.arange(T)
    queries = pos >= prefix + 1
    return (pos[None, :] == pos[:, None] - 1) & queries[:, None], queries


@runs_model
def target_attention(m: ICLModel, ids: torch.Tensor, targets: dict[str, tuple[torch.Tensor, torch.Tensor]],
                     batch_size: int = 32, bar: str | None = None) -> Tensors:
    """name -> [L, H]: each head's attention summed over a query's targets, averaged over the
    queries and the sequences, for each (targets [T, T] bool, queries [T] bool) of `targets`, from
    one pass a batch of the sequences `ids` [S, T] (no padding) reading every head's attention.
    bar: a progress bar's label, over the batches (None: none)."""
    check_count(batch_size, "batch_size")
    arch, S = m.arch, len(ids)
    site = arch.sites["pattern"]
    sums = {name: torch.zeros(arch.n_layers, arch.n_heads, dtype=torch.float64) for name in targets}
    on = {name: (t.to(m.device), q.sum()) for name, (t, q) in targets.items()}

    def read(layer: int) -> Hook:
        def store(module, args, out) -> None:
            weights = site.read(args, out)  # [b, H, T, T]
            for name, (t, n_queries) in on.items():
                per_query = (weights * t).sum(-1)  # [b, H, T]: 0 off the queries
                sums[name][layer] += (per_query.sum(-1) / n_queries).double().sum(0).cpu()
        return (arch.attn(layer), "post", store)

    batches = ids.split(batch_size)
    shown = progress_bar(len(batches), bar or "", bar is not None)
    with attached([read(l) for l in range(arch.n_layers)]), shown:
        for batch in batches:
            batch = batch.to(m.device)
            m.model.base_model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False)
            shown.update()
    return {name: (s / S).float() for name, s in sums.items()}


def repeated_sequence_scores(m: ICLModel, n_sequences: int = 200, length: int = 50, copies: int = 2, seed: int = 0,
                             null: bool = False, batch_size: int = 32, cache: bool = True) -> Tensors:
    """{"repeat": [L, H], "previous": [L, H]} on `random_sequences(m, n_sequences, length, copies,
    seed, null)`: the attention on the repeat targets (`repeat_targets`: the stripe with 2 copies,
    the prefix-matching score with 4) and on the previous token (`previous_targets`), one pass
    for both, cached under the sequences themselves."""
    ids = random_sequences(m, n_sequences, length, copies, seed, null)
    prefix, T = len(text_prefix(m)), ids.shape[1]
    targets = {"repeat": repeat_targets(T, prefix, length), "previous": previous_targets(T, prefix)}
    bar = f"attention on {n_sequences} random sequences, {copies} copies{' (the null)' if null else ''}"
    return stored("repeated-sequences", m, ids, lambda: target_attention(m, ids, targets, batch_size, bar), cache)


def induction_scores(m: ICLModel, n_sequences: int = 200, length: int = 50, seed: int = 0, null: bool = False,
                     batch_size: int = 32, cache: bool = True) -> torch.Tensor:
    """[L, H]: the stripe score on P + R + R (null: P + R + R'), see the module."""
    return repeated_sequence_scores(m, n_sequences, length, 2, seed, null, batch_size, cache)["repeat"]


def prefix_matching_scores(m: ICLModel, n_sequences: int = 200, length: int = 50, seed: int = 0, null: bool = False,
                           batch_size: int = 32, cache: bool = True) -> torch.Tensor:
    """[L, H]: the prefix-matching score on P + four copies of R (null: four fresh draws)."""
    return repeated_sequence_scores(m, n_sequences, length, 4, seed, null, batch_size, cache)["repeat"]


def previous_token_scores(m: ICLModel, n_sequences: int = 200, length: int = 50, seed: int = 0,
                          batch_size: int = 32, cache: bool = True) -> torch.Tensor:
    """[L, H]: mean attention on the previous token, read in `induction_scores`'s pass."""
    return repeated_sequence_scores(m, n_sequences, length, 2, seed, False, batch_size, cache)["previous"]


# --- the SCORE and EVAL halves' prompts ----------------------------------------------------


def mapped_prompts(records: Sequence[Record], setting: Setting = MAIN) -> list[Prompt]:
    """The balanced prompt of each record, its label pair swapped on every other record of its
    direction, so that each label mapping (class -> label word) meets queries of both classes."""
    seen: dict[str, int] = {}
    base = setting.variant("balanced")
    swapped = replace(base, labels=base.labels[::-1])
    out = []
    for r in records:
        k = seen[r.direction] = seen.get(r.direction, -1) + 1
        out.append(build_prompt(r, swapped if k % 2 else base))
    return out


def half_set(m: ICLModel, dataset: str, records: Sequence[Record], keep: torch.Tensor, name: str, seed: int = 0,
             setting: Setting = MAIN) -> PromptSet:
    """The records where keep [N] bool, as the prompt set `name` of their `mapped_prompts`; a UsageError
    where none is kept."""
    chosen = records_in(records, keep)
    if not chosen:
        raise UsageError(f"{len(records)} records of {dataset} leave its {name} half empty (the split takes half the "
                         "distinct inputs of each class, rounded down): give more records.")
    prompts = mapped_prompts(chosen, setting)
    return PromptSet(dataset, name, seed, prompts, [r.direction for r in chosen], find_positions(m.tokenizer, prompts))


def score_and_eval(m: ICLModel, dataset: str, n: int = 1000, seed: int = 0, data_dir: str | Path | None = None,
                   setting: Setting = MAIN) -> tuple[PromptSet, PromptSet]:
    """(SCORE, EVAL): the n records of a dataset split by input (`input_halves`), each half's
    prompts `mapped_prompts` (variant "mapped-score" and "mapped-eval")."""
    records = setting.records(dataset, n, seed, data_dir)
    score = input_halves(records, seed)
    return (half_set(m, dataset, records, score, "mapped-score", seed, setting),
            half_set(m, dataset, records, ~score, "mapped-eval", seed, setting))


def eval_half(m: ICLModel, dataset: str, n: int = 1000, seed: int = 0, data_dir: str | Path | None = None,
              setting: Setting = MAIN) -> PromptSet:
    """`score_and_eval`'s EVAL half alone (a dataset only evaluated on, whose SCORE half may be empty)."""
    records = setting.records(dataset, n, seed, data_dir)
    return half_set(m, dataset, records, ~input_halves(records, seed), "mapped-eval", seed, setting)
