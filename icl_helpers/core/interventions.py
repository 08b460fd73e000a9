"""Interventions during a normal forward pass.

* `ablated`: zero, or set to a dataset mean, the output of any set of heads: a pre-hook on
  the attention output projection replaces the heads' slices of z at every position.
* `balanced_labels`: in chosen heads, the last position's attention weights on label
  positions are divided by their class's count and rescaled to the label positions'
  original total, so a class's weight no longer grows with its number of demonstrations
  (majority-label bias).
* `position_free_labels`: in chosen heads, the last position's scores to label keys are
  computed without the keys' position term (recency bias), with the keys the adapter's
  `position_free_keys` gives. RoPE: every label key is rotated to one common position (by
  default the prompt's last label position). Absolute position embeddings (GPT-2)
  **(choice)**: the label key is recomputed from the layer input minus the position
  embedding of its own position; position information that earlier layers wrote stays.

Both label edits act only on label positions the last position may attend to under the
model's own mask: a label outside a sliding window (Gemma 2 and 3's local layers) keeps its zero
weight and is not counted.

Each is a context manager that changes nothing outside its `with` block: hooks are
removed, and the attention function (registered through transformers'
`AttentionInterface`, see `label_edits.edited_attention`, and put in place by the adapter's
`edited_attention`) is switched back. They compose by nesting
or with `applied(...)`, and act on a right-padded batch of B prompts and T tokens: the
label edits take that batch's `LabelPositions`, row for row in the order the batch runs.
An `Intervention` is one of them given per batch, with the first layer it changes: what the
passes of `core.passes` run each batch under (`Intervention.ablated`, `.balanced_labels`,
`.position_free_labels`).
"""
from __future__ import annotations

import functools
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Callable, ContextManager, Iterator, Sequence
from weakref import WeakKeyDictionary

import torch
from torch import nn

from ..data.positions import LabelPositions
from ..errors import UsageError
from ..model.hooks import Hook, attached
from ..model.loading import ICLModel, check_model, runs_model
from ..model.weights import execution_device
from .batching import chunks, walk
from .heads import Head, head_mask, model_heads
from .label_edits import IMPLEMENTATION, BalanceLabels, LabelEdit, PositionFreeLabels, editing

Heads = Sequence[Head]


@dataclass(frozen=True)
class Intervention:
    """An intervention given per batch: edit(labels) is the context a batch runs in, labels the
    batch's `LabelPositions` [b, D] row for row (None where a pass has bare texts, not prompts);
    start: the first layer it changes (0, any): passes under several interventions run the
    blocks before it once a batch for all of them (`core.passes`)."""

    edit: Callable[[LabelPositions | None], ContextManager[None]]
    start: int = 0
    last_only: bool = False  # it changes the last position alone: a pass may run that token alone over kept keys

    @classmethod
    def ablated(cls, m: ICLModel, heads: Heads, means: torch.Tensor | None = None) -> Intervention:
        """`ablated(m, heads, means)` in every batch."""
        return cls(lambda labels: ablated(m, heads, means), first_layer(heads))

    @classmethod
    def balanced_labels(cls, m: ICLModel, heads: Heads) -> Intervention:
        """`balanced_labels(m, heads, labels)` in every batch, at its prompts' label positions."""
        return cls(lambda labels: balanced_labels(m, heads, labels), first_layer(heads), last_only=True)

    @classmethod
    def position_free_labels(cls, m: ICLModel, heads: Heads) -> Intervention:
        """`position_free_labels(m, heads, labels)` in every batch, at its prompts' label positions;
        last-position only where the position-free keys come from the keys alone (RoPE), not where
        they are recomputed from every position's layer input (GPT-2)."""
        from_keys = not m.arch.position_free_keys(first_layer(heads), torch.zeros(1, dtype=torch.long)).hooks()
        return cls(lambda labels: position_free_labels(m, heads, labels), first_layer(heads), last_only=from_keys)


def first_layer(heads: Heads) -> int:
    """The first layer an intervention on `heads` changes (their lowest; 0 for none)."""
    return min((l for l, _ in heads), default=0)


_ACTIVE: WeakKeyDictionary[nn.Module, int] = WeakKeyDictionary()  # model -> interventions active on it


def intervening(m: ICLModel) -> bool:
    """Whether an intervention of this module is active on the model (results are then not cached)."""
    return _ACTIVE.get(m.model, 0) > 0


@contextmanager
def _active(m: ICLModel) -> Iterator[None]:
    _ACTIVE[m.model] = _ACTIVE.get(m.model, 0) + 1
    try:
        yield
    finally:
        _ACTIVE[m.model] -= 1


def _layer_masks(m: ICLModel, heads: Heads | str) -> dict[int, torch.Tensor]:
    """Layer -> [H] bool mask of its listed heads, for the layers that have any; a UsageError
    where `m` is not a model or a head is not one of its (`model_heads`; a head twice is once)."""
    arch = check_model(m).arch
    mask = head_mask(arch.n_layers, arch.n_heads, model_heads(heads, arch, distinct=False))
    return {l: mask[l] for l in mask.any(1).nonzero().flatten().tolist()}


# --- ablation -----------------------------------------------------------------------


@contextmanager
def ablated(m: ICLModel, heads: Heads, means: torch.Tensor | None = None) -> Iterator[None]:
    """Replace the output of `heads` at every position: by zero, or by `means` [L, H, dh]
    (see `head_means`). Removing z_{l,h} removes exactly z_{l,h} W_O^{l,h} from the
    attention projection's output (ATTN_l, in most families); an output bias b_O stays.
    Where a norm ends the attention branch (Gemma), it then normalises what is left: its
    sigma is the model's own for the ablated output, not the frozen one of a decomposition.
    """
    masks = _layer_masks(m, heads)
    arch = m.arch
    hooks: list[Hook] = []
    for l, drop in masks.items():
        module = arch.attn_out(l)
        fill = torch.zeros(arch.n_heads, arch.d_head) if means is None else means[l]
        device = execution_device(module)
        fill = fill.to(device, module.weight.dtype)  # a dtype even where offloaded
        drop = drop.to(device)
        hooks.append((module, "pre", lambda mod, args, drop=drop, fill=fill: _replace_heads(args, drop, fill)))
    with attached(hooks), _active(m):
        yield


def _replace_heads(args: tuple, drop: torch.Tensor, fill: torch.Tensor) -> tuple:
    """args[0] z [B, T, H*dh] with heads `drop` [H] (or [B, 1, H]: each row's own) set to `fill` [H, dh]."""
    z = args[0]
    per_head = z.view(*z.shape[:-1], *fill.shape)
    return (torch.where(drop[..., None], fill, per_head).flatten(-2), *args[1:])


@contextmanager
def ablated_rows(m: ICLModel, drop: torch.Tensor, means: torch.Tensor | None = None) -> Iterator[None]:
    """`ablated` with heads of each row's own: row r of a batch of R rows has the heads where
    drop[r] [L, H] bool (drop [R, L, H]) replaced at every position, by zero or by `means` [L, H, dh];
    e.g. many head sets ablated at once, a set a row (`core.passes.last_token_passes`)."""
    arch = check_model(m).arch
    if drop.shape[1:] != (arch.n_layers, arch.n_heads):
        raise UsageError(f"Heads to drop a row must be [rows, {arch.n_layers}, {arch.n_heads}], not {tuple(drop.shape)}.")
    hooks: list[Hook] = []
    for l in drop.any(0).any(1).nonzero().flatten().tolist():
        module = arch.attn_out(l)
        device = execution_device(module)
        fill = (torch.zeros(arch.n_heads, arch.d_head) if means is None else means[l]).to(device, module.weight.dtype)
        rows = drop[:, l, None].to(device)  # [R, 1, H]: every position of a row alike
        hooks.append((module, "pre", lambda mod, args, rows=rows, fill=fill: _replace_heads(args, rows, fill)))
    with attached(hooks), _active(m):
        yield


@runs_model
def head_means(m: ICLModel, prompts: list[str], batch_size: int = 32) -> torch.Tensor:
    """[L, H, dh]: each head's z averaged over every real token of `prompts`."""
    arch = m.arch
    total = torch.zeros(arch.n_layers, arch.n_heads * arch.d_head, dtype=torch.float64)
    count = 0
    for _, texts in walk(prompts, chunks(len(prompts), batch_size), progress=False):
        enc = m.encode(texts)
        real = enc["attention_mask"].bool()

        def add(l: int, z: torch.Tensor) -> None:
            total[l] += z[real].double().sum(0).cpu()

        hooks: list[Hook] = [(arch.attn_out(l), "pre", lambda mod, args, l=l: add(l, args[0])) for l in range(arch.n_layers)]
        with attached(hooks):
            m.model.base_model(**enc, use_cache=False)
        count += int(real.sum())
    return (total / count).float().view(arch.n_layers, arch.n_heads, arch.d_head)


# --- attention edits at the last position (`label_edits`) ---------------------------


def _check_labels(labels: LabelPositions) -> LabelPositions:
    """labels, or a UsageError where they are not a `LabelPositions`."""
    if not isinstance(labels, LabelPositions):
        raise UsageError(f"Label positions must be a LabelPositions (find_positions of the prompts), not a "
                         f"{type(labels).__name__}.")
    return labels


def _check_batch(labels: LabelPositions, embeddings: nn.Module, args: tuple) -> None:
    """A pre-hook of the input embeddings: a UsageError where the label positions are not those
    of the batch about to run (input ids args[0] [B, T]), but other prompts' or another batch's.
    A one-token pass over kept keys and values (T = 1) is checked in the attention, which sees
    every position (`LabelEdit`)."""
    if not args:  # ids given by keyword: not checked
        return
    B, T = args[0].shape[:2]
    if len(labels) != B or (T > 1 and int(labels.last.max()) >= T):
        raise UsageError(f"The label positions are of {len(labels)} prompts, the last token at {int(labels.last.max())}, "
                         f"but the batch has {B} prompts of {T} tokens: give each batch its own positions, row for row "
                         "(find_positions of its prompts, or a prompt set's positions[rows]).")


@contextmanager
def _edited(m: ICLModel, edits: dict[int, LabelEdit], labels: LabelPositions, hooks: Sequence[Hook] = ()
            ) -> Iterator[None]:
    """Activate `edits` (layer -> edit) and `hooks`; route the edited modules' attention through
    `label_edits.edited_attention` (the adapter's `edited_attention`). Each batch is first checked
    against `labels` (`_check_batch`), before any layer runs."""
    modules = {l: m.arch.attn(l) for l in edits}
    check: Hook = (m.model.get_input_embeddings(), "pre", functools.partial(_check_batch, labels))
    with (editing({modules[l]: edit for l, edit in edits.items()}),
          m.arch.edited_attention(list(modules.values()), IMPLEMENTATION), attached([check, *hooks]), _active(m)):
        yield


def balanced_labels(m: ICLModel, heads: Heads, labels: LabelPositions) -> ContextManager[None]:
    """In `heads`, the last position's attention on label positions balanced across classes
    (`BalanceLabels`). With equal class counts it changes nothing."""
    masks, labels = _layer_masks(m, heads), _check_labels(labels)
    return _edited(m, {l: BalanceLabels(mask, labels) for l, mask in masks.items()}, labels)


def position_free_labels(
    m: ICLModel, heads: Heads, labels: LabelPositions, target: torch.Tensor | None = None
) -> ContextManager[None]:
    """In `heads`, the last position's scores to label keys without their position term.

    target [B]: the common position RoPE label keys are rotated to; default, each prompt's
    last label position (with one label per prompt the rotation is then the identity).
    Ignored for absolute position embeddings.
    """
    masks, labels = _layer_masks(m, heads), _check_labels(labels)
    target = labels.last_label if target is None else torch.as_tensor(target)
    if target.shape != (len(labels),) or target.dtype.is_floating_point or target.dtype == torch.bool:
        raise UsageError(f"target must be one integer position a prompt, {len(labels)} for these label positions, not "
                         f"{target.dtype} of shape {tuple(target.shape)}.")
    keys = {l: m.arch.position_free_keys(l, target) for l in masks}
    hooks = [hook for k in keys.values() for hook in k.hooks()]
    return _edited(m, {l: PositionFreeLabels(mask, labels, keys[l]) for l, mask in masks.items()}, labels, hooks)


@contextmanager
def applied(*interventions: ContextManager) -> Iterator[None]:
    """Enter several interventions at once (in order), leave them in reverse order."""
    with ExitStack() as stack:
        for intervention in interventions:
            stack.enter_context(intervention)
        yield
