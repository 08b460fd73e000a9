"""Function-vector heads (Todd et al., ICLR 2024, "Function vectors in large language models"):
each head's average indirect effect on the gold label when its mean output is patched into
prompts whose label mapping is broken.

A *cell* is one label mapping of one dataset, e.g. "number:foo sentiment:bar" (`cell_of`): its
clean prompts hold demonstrations labelled by that mapping and queries of either class. For
each cell, a_bar_{l,h} [dh] is head (l, h)'s z at the last position averaged over the cell's
clean prompts (those answered correctly, top-1, where `correct_only`, as Todd et al. do). Each
of those prompts is corrupted (`corrupted_prompts`): the same demonstrations and query, the
labels re-dealt so that every class's demonstrations carry both labels (with two a class, the 4
mixed of the 6 arrangements: neither the original nor the full flip, which keeps a mapping).
The causal indirect effect of a head on a corrupted prompt is

    CIE(l, h | p~) = P(y | p~, z_{l,h,last} := a_bar_{l,h}) - P(y | p~),

y the gold label (the clean mapping's label of the query), P the next-token probability over
the vocabulary; also in log-probability, which small, unsure models need. The score is the
average indirect effect AIE(l, h): the CIE averaged over a cell's prompts, then over the cells.
Signed: a head that pushes the gold label down scores below 0.

Heads ride on the batch axis: each prompt is repeated once a head of a layer, row h patching
head h, one pass a layer (`patched_probs`). A patch at the last position changes nothing at the
positions before it, so by default (`reuse_keys`) each prompt's keys and values are computed once
and every patched pass is a one-token pass of the last position through the blocks from the
patched layer up (the blocks below it are computed once: `model.prefix`); reuse_keys=False runs
the engine of the ablations instead (`core.passes.accuracies`: every position, one
`Intervention` a layer), the same numbers to rounding at about 10 times the cost.
"""
from __future__ import annotations

import itertools
import random
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator, Sequence

import torch

from ..cache import stored
from ..core.batching import length_batches, walk
from ..core.decompose import decompose
from ..core.interventions import Intervention
from ..core.passes import LastRun, accuracies, last_token_passes
from ..data.prompts import Prompt, prompt_label_ids
from ..errors import UsageError
from ..model.hooks import attached
from ..model.loading import ICLModel, runs_model
from ..model.weights import execution_device
from .runner import PromptSet


def cell_of(prompt: Prompt, direction: str) -> str:
    """The label mapping a prompt shows, classes sorted: "number:foo sentiment:bar" for a
    number input labelled foo (direction "number/sentiment") or a sentiment input labelled bar."""
    true_class, false_class = direction.split("/")
    pairs = sorted([(true_class, prompt.true_label), (false_class, prompt.false_label)])
    return " ".join(f"{c}:{w}" for c, w in pairs)


def mixed_arrangements(is_true: Sequence[bool]) -> list[tuple[bool, ...]]:
    """Every labelling of a clean prompt's demonstrations (True: the true label; as many as it
    has) under which each class's demonstrations carry both labels; is_true: the clean labels,
    which follow the classes. With two a class, 4 of the 6."""
    n_true = sum(is_true)
    out = []
    for chosen in itertools.combinations(range(len(is_true)), n_true):
        labels = tuple(i in chosen for i in range(len(is_true)))
        if all(len({lab for lab, c in zip(labels, is_true) if c == cls}) == 2 for cls in (True, False)):
            out.append(labels)
    return out


def relabelled(prompt: Prompt, is_true: Sequence[bool]) -> Prompt:
    """The prompt with demonstration i labelled by its true label where is_true[i], its false
    label elsewhere: the same demonstrations and query, spans moved with the words."""
    text, demos, labels, at = "", [], [], 0
    for (d0, d1), (l0, l1), t in zip(prompt.demos, prompt.labels, is_true):
        shift = len(text) - at  # where the original's position `at` lands
        text += prompt.text[at:l0]
        demos.append((d0 + shift, d1 + shift))
        word = prompt.true_label if t else prompt.false_label
        labels.append((len(text), len(text) + len(word)))
        text += word
        at = l1
    return replace(prompt, text=text + prompt.text[at:], demos=tuple(demos), labels=tuple(labels),
                   is_true=tuple(bool(t) for t in is_true))


def corrupted_prompts(prompts: Sequence[Prompt], seed: int = 0) -> list[Prompt]:
    """Each clean prompt relabelled by one of its `mixed_arrangements`, drawn with
    random.Random(f"{seed} {row}"): its label mapping broken, its gold label its true label."""
    out = []
    for row, p in enumerate(prompts):
        choices = mixed_arrangements(p.is_true)
        if not choices:
            raise UsageError(f"Prompt {row} has {sum(p.is_true)} true and {len(p.is_true) - sum(p.is_true)} false "
                             "demonstrations: breaking its label mapping needs at least two of each class.")
        out.append(relabelled(p, random.Random(f"{seed} {row}").choice(choices)))
    return out


@contextmanager
def patched(m: ICLModel, layer: int, heads: torch.Tensor, last: torch.Tensor, fill: torch.Tensor) -> Iterator[None]:
    """Inside, row r of a batch has head heads[r]'s z in `layer` set to fill[r] [dh] at position
    last[r] (heads, last [b] long, fill [b, dh]); every other head and position as it was."""
    module = m.arch.attn_out(layer)
    device = execution_device(module)
    H, dh = m.arch.n_heads, m.arch.d_head
    rows, heads, last = torch.arange(len(heads), device=device), heads.to(device), last.to(device)
    fill = fill.to(device, module.weight.dtype)

    def patch(mod, args):
        z = args[0]
        per_head = z.view(*z.shape[:-1], H, dh).clone()
        per_head[rows, last, heads] = fill
        return (per_head.flatten(-2), *args[1:])

    with attached([(module, "pre", patch)]):
        yield


@runs_model
def last_outputs(m: ICLModel, texts: Sequence[str], batch_size: int = 32, bar: str | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """(z [N, L, H, dh], predictions [N] long): every head's z at each prompt's last position and
    the model's argmax there, in prompt order. bar: a progress bar's label (None: none)."""
    arch = m.arch
    z = torch.empty(len(texts), arch.n_layers, arch.n_heads, arch.d_head)
    predictions = torch.empty(len(texts), dtype=torch.long)
    for rows, batch in walk(list(texts), length_batches(m, texts, batch_size), bar or "", bar is not None):
        dec = decompose(m, batch)
        z[rows], predictions[rows] = dec.z.float().cpu(), dec.predictions.cpu()
    return z, predictions


@dataclass
class FunctionVectorScores:
    """Every head's average indirect effect, C cells, n corrupted prompts, N prompts of the set."""

    prob: torch.Tensor  # [L, H]: AIE on the gold label's probability (Todd et al.'s)
    logprob: torch.Tensor  # [L, H]: AIE on its log-probability
    cells: list[str]  # the cells, sorted (`cell_of`)
    counts: torch.Tensor  # [C] long: prompts a cell (averaged and corrupted)
    cell_prob: torch.Tensor  # [C, L, H]: the mean CIE of each cell (NaN for a cell without prompts)
    cell_logprob: torch.Tensor  # [C, L, H]
    scored: torch.Tensor  # [N] bool: the prompts averaged and corrupted (the correct ones, or all)
    corrupted_prob: torch.Tensor  # [n]: the gold label's probability on each corrupted prompt, unpatched


def function_vector_scores(m: ICLModel, ps: PromptSet, seed: int = 0, correct_only: bool = True,
                           batch_size: int = 32, reuse_keys: bool = True, cache: bool = True) -> FunctionVectorScores:
    """The function-vector score of every head on a prompt set of clean prompts (labels that
    follow the classes, two or more demonstrations a class; e.g. `head_types.score_and_eval`'s
    SCORE set), cached under the prompts, their cells, seed and correct_only. See the module."""
    cells = [cell_of(p, d) for p, d in zip(ps.prompts, ps.directions)]  # in the key: the texts do not say them
    result = stored("function-vectors", m, ps, lambda: _effects(m, ps, seed, correct_only, batch_size, reuse_keys),
                          cache, cells=cells, corruption_seed=seed, correct_only=correct_only)
    return FunctionVectorScores(cells=sorted(set(cells)), **result)


def _effects(m: ICLModel, ps: PromptSet, seed: int, correct_only: bool, batch_size: int, reuse_keys: bool
             ) -> dict[str, torch.Tensor]:
    """`FunctionVectorScores`'s tensors (all but cells)."""
    arch = m.arch
    L, H = arch.n_layers, arch.n_heads
    names = sorted({cell_of(p, d) for p, d in zip(ps.prompts, ps.directions)})
    cell = torch.tensor([names.index(cell_of(p, d)) for p, d in zip(ps.prompts, ps.directions)], dtype=torch.long)
    gold, _ = prompt_label_ids(m.tokenizer, ps.prompts)
    z, predictions = last_outputs(m, ps.texts, batch_size, f"function vectors: {ps.title}, the clean prompts")
    scored = predictions == gold if correct_only else torch.ones(len(ps), dtype=torch.bool)
    rows = scored.nonzero().flatten()
    if not len(rows):
        raise UsageError(f"No prompt of {ps.title} is answered correctly: score on all of them (correct_only=False).")
    C = len(names)
    counts = torch.bincount(cell[rows], minlength=C)
    means = torch.zeros(C, L, H, arch.d_head, dtype=torch.float64).index_add_(0, cell[rows], z[rows].double())
    means = (means / counts.clamp(min=1)[:, None, None, None]).float()  # [C, L, H, dh]

    corrupted = corrupted_prompts([ps.prompts[i] for i in rows.tolist()], seed)
    plain, patched_ = patched_probs(m, [p.text for p in corrupted], gold[rows], means[cell[rows]], batch_size,
                                    reuse_keys, f"function vectors: {ps.title}")
    effects = {"prob": patched_.exp() - plain.exp()[:, None, None], "logprob": patched_ - plain[:, None, None]}
    out = {}
    for name, effect in effects.items():
        per_cell = torch.zeros(C, L, H, dtype=torch.float64).index_add_(0, cell[rows], effect.double())
        per_cell = (per_cell / counts[:, None, None]).float()  # NaN where a cell has no prompt
        out[name], out[f"cell_{name}"] = per_cell[counts > 0].mean(0), per_cell
    return {**out, "counts": counts, "scored": scored, "corrupted_prob": plain.exp()}


def patched_probs(m: ICLModel, texts: Sequence[str], gold: torch.Tensor, fill: torch.Tensor, batch_size: int = 32,
                  reuse_keys: bool = True, bar: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(plain [n], patched [n, L, H]): the log-probability of gold[i] [n] after prompt i of
    `texts`, as it is and with head (l, h)'s z at its last position set to fill[i, l, h]
    (fill [n, L, H, dh]). Heads on the batch axis, one pass a layer; reuse_keys: one-token passes
    over each prompt's keys and values (`last_token_probs`), else the ablations' engine (`accuracies`).
    bar: a progress bar's label (None: none)."""
    if reuse_keys:
        return last_token_probs(m, texts, gold, fill, batch_size, bar)
    L, H = m.arch.n_layers, m.arch.n_heads
    n = len(texts)
    wide = [t for t in texts for _ in range(H)]  # row i * H + h patches head h of prompt i
    last = torch.tensor([len(ids) - 1 for ids in m.tokenizer(wide)["input_ids"]])
    head = torch.arange(n * H) % H
    flat = fill.transpose(1, 2).flatten(0, 1)  # [n * H, L, dh]

    def at(layer: int) -> Intervention:
        return Intervention(lambda r, layer=layer: patched(m, layer, head[r], last[r], flat[r, layer]), layer)

    other = (gold + 1) % m.arch.W_U().shape[0]  # `accuracies` wants a second label; only the gold one is read
    runs = accuracies(m, wide, gold.repeat_interleave(H), other.repeat_interleave(H), [None, *map(at, range(L))],
                      batch_size, bar=bar, labels=lambda r: torch.tensor(r))
    plain = runs[0].true_prob.view(n, H)[:, 0].log()  # every row of a prompt runs alike unpatched
    return plain, torch.stack([run.true_prob.view(n, H) for run in runs[1:]], 1).log()


def last_token_probs(m: ICLModel, texts: Sequence[str], gold: torch.Tensor, fill: torch.Tensor,
                     batch_size: int = 32, bar: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """`patched_probs` by one-token passes (`core.passes.last_token_passes`): for each layer l, the
    last token of each prompt repeated once a head, row h patching head h, through blocks l..L-1
    over the prompt's kept keys and values."""
    L, H = m.arch.n_layers, m.arch.n_heads

    def at(layer: int) -> LastRun:
        def edit(rows: torch.Tensor):
            b = len(rows)
            return patched(m, layer, torch.arange(b * H) % H, torch.zeros(b * H, dtype=torch.long),
                           fill[rows, layer].flatten(0, 1))
        return LastRun(H, layer, edit)

    def read(logits: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:  # [b, r, V] -> [b, r]
        target = gold[rows].to(logits.device)[:, None, None].expand(-1, logits.shape[1], 1)
        return logits.log_softmax(-1).gather(-1, target)[..., 0]

    plain, per_layer = last_token_passes(m, texts, [at(l) for l in range(L)], read, batch_size, bar)
    return plain, torch.stack(per_layer, 1)
