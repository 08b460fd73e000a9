"""Appendix E: position-level (attention subvalues) and neuron-level (FFN subvalues) increases.

For chosen heads, the increase of every position's subvalue alpha_{l,h}(t,p) v_{l,h,p} W_O^{l,h}
toward the model's prediction, and where the largest one lies: a true or false label, a
demonstration, the last position or elsewhere. For the FFN layers with the largest mean
increase, each neuron's increase and the top vocabulary tokens of the best neurons' output rows.
Shapes: N prompts, S heads, T positions (the longest prompt), F FFN layers, d_ffn neurons.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch

from ..core.attribution import heads_position_increase, neuron_increase, readout_of
from ..core.heads import Head
from ..core.projections import top_tokens
from ..data.positions import LabelPositions
from ..model.loading import ICLModel
from .in_context_heads import located
from .runner import PromptSet, cached_study, decomposed, gathered

POSITION_KINDS = ("true label", "false label", "demonstration", "last position", "other")  # what a position is
TRUE_LABEL, FALSE_LABEL, DEMONSTRATION, LAST, OTHER = range(len(POSITION_KINDS))


@cached_study("position-increase", "increase", "heads")
@torch.no_grad()
def position_increases(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 16) -> torch.Tensor:
    """[N, S, T]: the position-level increase of every position's subvalue in each head toward
    the model's prediction (`heads_position_increase`), NaN past a prompt's last position."""
    readout = readout_of(m)
    out = torch.full((len(ps), len(heads), int(ps.positions.last.max()) + 1), torch.nan)
    for rows, dec in decomposed(m, ps, batch_size, record=["pattern", "values"]):
        B, T = dec.input_ids.shape
        every = torch.arange(T, device=dec.last.device).expand(B, T)
        increase = heads_position_increase(readout, dec, heads, every, dec.predictions)  # [B, S, T]
        out[rows, :, :T] = increase.masked_fill((every > dec.last[:, None])[:, None], torch.nan).cpu()
    return out


def position_kinds(positions: LabelPositions, length: int) -> torch.Tensor:
    """[N, length] long: what each position is, an index into POSITION_KINDS (a label before its
    demonstration's span, the last position before anything else)."""
    at = torch.arange(length)
    demos = positions.demos.cpu()  # [N, D, 2]; -1 past a prompt's demonstrations: an empty span
    in_demo = ((at >= demos[..., :1]) & (at < demos[..., 1:])).any(1)  # [N, length]
    kinds = torch.full(in_demo.shape, OTHER).masked_fill(in_demo, DEMONSTRATION)
    kinds = kinds.masked_fill(positions.mask(length, False).cpu(), FALSE_LABEL)
    kinds = kinds.masked_fill(positions.mask(length, True).cpu(), TRUE_LABEL)
    return kinds.scatter(1, positions.last.cpu()[:, None], LAST)


def top_position_kinds(increase: torch.Tensor, positions: LabelPositions) -> torch.Tensor:
    """[N, S] long: the kind (index into POSITION_KINDS) of each head's position with the largest
    increase, from increase [N, S, T] (NaN past a prompt's last position)."""
    top = increase.nan_to_num(-torch.inf).argmax(-1)  # [N, S]
    return position_kinds(positions, increase.shape[-1]).gather(1, top)


def kind_shares(kinds: torch.Tensor) -> torch.Tensor:
    """[S, len(POSITION_KINDS)]: the share of prompts whose top position is of each kind, from kinds [N, S]."""
    return torch.nn.functional.one_hot(kinds, len(POSITION_KINDS)).double().mean(0)


def true_label_chance(positions: LabelPositions) -> torch.Tensor:
    """[N]: the share of a prompt's positions (up to its last) that are true-label positions:
    how often a position drawn at random would be one."""
    return positions.chosen(True).sum(1).cpu().double() / (positions.last.cpu() + 1)


# --- neurons -----------------------------------------------------------------------------
def top_ffn_layers(m: ICLModel, ps: PromptSet, k: int = 3) -> list[int]:
    """The k FFN layers with the largest mean increase on a prompt set (located, cached), best first."""
    return located(m, ps).ffn.mean(0).topk(k).indices.tolist()


@cached_study("neuron-increase", "increase", "layers")
@torch.no_grad()
def neuron_increases(m: ICLModel, ps: PromptSet, layers: Sequence[int], batch_size: int = 32) -> torch.Tensor:
    """[N, F, d_ffn]: the neuron-level increase of every neuron of each FFN layer toward the
    model's prediction (`neuron_increase`). The last positions of all prompts are scored
    together: W_out is folded into the readout once a layer, not once a batch."""
    dec = gathered(m, ps, batch_size, ["neurons"], lambda rows, dec: dec.at_positions(dec.last[:, None]))
    readout = readout_of(m)
    return torch.stack([neuron_increase(readout, dec, l, dec.predictions) for l in layers], 1).cpu()


def top_neurons(m: ICLModel, layers: Sequence[int], increase: torch.Tensor, k: int = 5, tokens: int = 10
                ) -> pd.DataFrame:
    """The k neurons of each layer with the largest mean increase over prompts, increase
    [N, F, d_ffn], best first, with the top tokens of their output rows W_out[k] in the vocabulary."""
    readout, rows = readout_of(m), []
    for layer, mean in zip(layers, increase.mean(0)):
        best = mean.topk(k)
        W_out = m.arch.W_out(layer).float().to(readout.G.device)
        words = top_tokens(readout, m.tokenizer, W_out[best.indices.to(W_out.device)], tokens)
        rows += [{"FFN layer": layer, "neuron": int(n), "mean increase": float(v), "top tokens": tuple(w)}
                 for n, v, w in zip(best.indices, best.values, words)]
    return pd.DataFrame(rows)
