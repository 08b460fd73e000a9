"""Label words as anchors (Wang et al. 2023, "Label Words are Anchors: An Information Flow Perspective
for Understanding In-Context Learning"): how much each attention weight matters to the gold label,
along the flows into and out of the demonstrations' labels, head by head.

Shapes: N prompts, L layers, H heads (query heads), T tokens (right-padded). For one prompt, layer l
and head h, with A_{l,h} [T, T] the head's attention probabilities (the tensor eager attention
multiplies into the values) and Loss = -log p(gold label's first token) at the last position q,
the saliency of each weight is

    I_{l,h}(t, j) = A_{l,h}(t, j) * dLoss/dA_{l,h}(t, j)

(Wang et al.'s: the gradient, at M = 1, of a ones-multiplier M on the attention probabilities).
With P the prompt's label positions (each demonstration's label, its first token, true or false),
three means of |I| over pairs (t, j), row t attending to column j:

    S_wp = mean over p in P and j < p of |I(p, j)|    (the text into the labels)
    S_pq = mean over p in P of |I(q, p)|              (the labels into the target)
    S_ww = mean over every other pair j <= t <= q     (the rest, the diagonal included)

`LabelAnchors` keeps them head-resolved, [N, L, H] each, and, as Wang et al. compute them, of the
layer's saliency |sum_h I_{l,h}| (the heads summed inside the absolute value), [N, L] each. A BOS
token is a column like any other. A prompt without demonstrations has no S_wp or S_pq (NaN).

The model's weights stay frozen: the embedding's output is made to require gradients, so that the
pass builds a graph through every attention; one forward and one backward a batch give every head's
saliency at once (each prompt's loss depends only on its own row, so the batch's summed loss has
each prompt's gradients).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..cache import stored
from ..core.batching import length_batches, walk
from ..data.positions import LabelPositions
from ..data.prompts import prompt_label_ids
from ..model.hooks import Hook, attached
from ..model.loading import ICLModel, check_model, evaluating
from .runner import PromptSet

KIND = "label-anchors"  # the results cache's kind
PARTS = ("wp", "pq", "ww")
Part = Literal["wp", "pq", "ww"]


@dataclass
class LabelAnchors:
    """Wang et al.'s three saliency means on each of N prompts (see the module)."""

    s_wp: torch.Tensor  # [N, L, H]: mean |I| from each label position to the tokens before it
    s_pq: torch.Tensor  # [N, L, H]: mean |I| from the last position to the label positions
    s_ww: torch.Tensor  # [N, L, H]: mean |I| over the other pairs
    layer_wp: torch.Tensor  # [N, L]: S_wp of the layer's saliency |sum_h I_h| (Wang et al.'s)
    layer_pq: torch.Tensor  # [N, L]
    layer_ww: torch.Tensor  # [N, L]

    def mean(self, part: Part) -> torch.Tensor:
        """[L, H]: S_wp, S_pq or S_ww of every head, averaged over the prompts."""
        return getattr(self, f"s_{part}").mean(0)


def pair_masks(positions: LabelPositions, T: int) -> torch.Tensor:
    """[B, 3, T, T] bool: the pairs (t, j) of S_wp, S_pq and S_ww (in `PARTS`' order) of each of B
    prompts, from their label positions in a right-padded encoding T tokens long."""
    pos = torch.arange(T, device=positions.labels.device)
    row, col = pos[None, :, None], pos[None, None, :]  # [1, T, 1], [1, 1, T]
    last = positions.last[:, None, None]  # [B, 1, 1]
    label = positions.class_masks(T).any(1)  # [B, T]
    wp = label[:, :, None] & (col < row)
    pq = (row == last) & label[:, None, :]
    ww = (col <= row) & (row <= last) & ~wp & ~pq
    return torch.stack([wp, pq, ww], 1)


def part_means(saliency: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """[B, H, 3]: the mean |I| over each part's pairs, from saliencies [B, H, T, T] and `pair_masks`
    [B, 3, T, T]."""
    weights = masks.to(saliency.dtype)
    return torch.einsum("bhtj,bktj->bhk", saliency.abs(), weights) / weights.sum((-2, -1))[:, None]


def saliencies(m: ICLModel, texts: list[str], gold: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, [B, H, T, T]: I = A * dLoss/dA of every head on a right-padded batch of B prompts
    (gold [B]: each prompt's gold token id; Loss at its last token), from one forward and one
    backward pass (0 on the padding's rows and columns); in float32, or the model's dtype where wider."""
    arch, site = check_model(m).arch, m.arch.sites["pattern"]
    dtype = torch.promote_types(m.model.dtype, torch.float32)
    enc = m.encode(texts)
    weights: list[torch.Tensor | None] = [None] * arch.n_layers

    def keep(layer: int) -> Hook:
        def retain(module, args, out) -> None:
            weights[layer] = site.read(args, out)
            weights[layer].retain_grad()
        return (arch.attn(layer), "post", retain)

    tracked = (m.model.get_input_embeddings(), "post", lambda module, args, out: out.requires_grad_())
    with torch.enable_grad(), evaluating(m.model), attached([tracked] + [keep(l) for l in range(arch.n_layers)]):
        hidden = m.model.base_model(**enc, use_cache=False).last_hidden_state
        rows, last = torch.arange(len(texts), device=hidden.device), enc["attention_mask"].sum(1).to(hidden.device) - 1
        logits = m.model.get_output_embeddings()(hidden[rows, last]).to(dtype)  # [B, V]
        if arch.final_softcap is not None:
            logits = arch.final_softcap * torch.tanh(logits / arch.final_softcap)
        loss = -logits.log_softmax(-1)[rows, gold.to(logits.device)].sum()
        loss.backward()
    return [(w.to(dtype) * w.grad.to(dtype)).detach() for w in weights]


def label_anchors(m: ICLModel, ps: PromptSet, batch_size: int = 32, cache: bool = True) -> LabelAnchors:
    """S_wp, S_pq and S_ww of every head and layer on each prompt of a set (the gold label each
    prompt's true label), in batches of similar length, one forward and one backward a batch;
    cached under the prompts and their label words (a text alone does not say which is gold)."""
    gold, _ = prompt_label_ids(m.tokenizer, ps.prompts)

    def compute() -> dict[str, torch.Tensor]:
        L, H, N = m.arch.n_layers, m.arch.n_heads, len(ps)
        heads, layers = torch.empty(N, L, H, 3), torch.empty(N, L, 3)
        for rows, texts in walk(ps.texts, length_batches(m, ps.texts, batch_size), ps.title):
            per_layer = saliencies(m, texts, gold[rows])
            T = per_layer[0].shape[-1]
            masks = pair_masks(ps.positions[rows], T)
            for l, saliency in enumerate(per_layer):  # each on its layer's device
                both = torch.cat([saliency, saliency.sum(1, keepdim=True)], 1)
                means = part_means(both, masks.to(saliency.device)).float().cpu()
                heads[rows, l], layers[rows, l] = means[:, :H], means[:, H]  # means: [b, H + 1, 3]
        return {**{f"s_{p}": heads[..., k].contiguous() for k, p in enumerate(PARTS)},
                **{f"layer_{p}": layers[..., k].contiguous() for k, p in enumerate(PARTS)}}

    labels = [(p.true_label, p.false_label) for p in ps.prompts]
    return LabelAnchors(**stored(KIND, m, ps, compute, cache, labels=labels))
