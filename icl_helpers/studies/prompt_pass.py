"""One pass of a prompt set through the model, for every study that reads its last position.

`prompt_pass` decomposes each batch once, recording the attention rows and the values,
and keeps from it three results: the located scores of every head and layer ("locate",
Figs. 2-4), the last position's attention on the labels ("label-attention", Figs. 6-11)
and a `LabelRecord` ("label-record"): what the label-position analyses (Fig. 5's label
value ranks, Fig. 7's position-level increase) need, for any heads, without the model.
`from_pass` caches what a pass recorded: locating a prompt set stores all three, so each
located prompt set goes through the model once however many of them the studies ask for.
Shapes: N prompts, L layers, H heads, H_kv key/value heads, D label positions, d width.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Iterator, Sequence

import torch

from ..cache import forget, stored_together
from ..core.attribution import readout_of
from ..core.batching import Tensors, chunks, in_prompt_order, length_batches, walk
from ..core.decompose import Decomposition, decompose
from ..core.locate import Scoring
from ..core.projections import attention_at, label_attention
from ..data.positions import LabelPositions
from ..errors import UsageError
from ..model.loading import ICLModel
from .runner import PromptSet

KINDS = ("locate", "label-attention", "label-record")


@dataclass
class LabelRecord:
    """The last position's residuals and every head's attention on, and value at, each label
    position: enough to score or project label subvalues of any head without the model."""

    resid: torch.Tensor  # [N, L+1, d]: layer inputs x_0 .. x_{L-1} and f = x_L
    scale: torch.Tensor  # [N]: the final norm's sigma
    attn_scale: torch.Tensor  # [N, L]: 1/sigma of a norm ending the attention branch (`Decomposition.attn_scale`)
    predictions: torch.Tensor  # [N] long: the model's next token
    label_ids: torch.Tensor  # [N, D] long: the token at each label position (that of position 0 past a prompt's labels)
    pattern: torch.Tensor  # [N, L, H, D]: attention of the last position on each label position
    values: torch.Tensor  # [N, L, H_kv, D, dh]: values at each label position

    def decompositions(self, m: ICLModel, batch_size: int) -> Iterator[tuple[torch.Tensor, Decomposition]]:
        """(rows [b], those prompts as a decomposition whose positions are the D label positions,
        as `Decomposition.at_positions` gives) for batch_size prompts at a time in prompt order
        (`chunks`), for `label_value_ranks` and `heads_position_increase`, on the device of the
        model's readout (the record is kept on the CPU)."""
        device = m.arch.W_U().device
        for rows in chunks(len(self.scale), batch_size):
            fields = {name: getattr(self, name)[rows].to(device)
                      for name in ("scale", "attn_scale", "resid", "pattern", "values")}
            yield rows, Decomposition(m.arch, input_ids=self.label_ids[rows].to(device), last=None, logits=None, **fields)


def label_attention_of(dec: Decomposition, positions: LabelPositions) -> Tensors:
    """`label_attention.LabelAttention`'s fields for one batch: attention from the last position
    summed over the true and over the false labels [B, L, H], on each label [B, L, H, D]
    (NaN past a prompt's labels), and the predictions [B], on the CPU."""
    positions, T = positions.to(dec.input_ids.device), dec.input_ids.shape[1]
    return {"true": label_attention(dec, positions.mask(T, True)).float().cpu(),
            "false": label_attention(dec, positions.mask(T, False)).float().cpu(),
            "predictions": dec.predictions.cpu(),
            "per_label": attention_at(dec, positions.labels).float().cpu()}


def _record_of(dec: Decomposition, positions: LabelPositions) -> Tensors:
    """`LabelRecord`'s fields for one batch, on the CPU."""
    at = dec.at_positions(positions.labels.clamp(min=0).to(dec.input_ids.device))
    return {"resid": dec.resid.cpu(), "scale": dec.scale.cpu(), "attn_scale": dec.attn_scale.cpu(),
            "predictions": dec.predictions.cpu(), "label_ids": at.input_ids.cpu(), "pattern": at.pattern.cpu(),
            "values": at.values.cpu()}


@torch.no_grad()
def prompt_pass(m: ICLModel, ps: PromptSet, kinds: Sequence[str] = KINDS, batch_size: int = 32) -> dict[str, Tensors]:
    """Results `kinds` (of `KINDS`) of a prompt set, in prompt order, from one pass through the
    model in batches of prompts of similar length (`length_batches`); the located scores are
    taken a group at a time, as `core.locate.locate` does."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise UsageError(f"A prompt pass records {', '.join(KINDS)}, not {', '.join(unknown)}.")
    record = ["pattern"] + ["values"] * ("label-record" in kinds)
    batches = length_batches(m, ps.texts, batch_size)
    scoring = Scoring(readout_of(m), batches, batch_size) if "locate" in kinds else None  # only to score heads
    of = {"label-attention": label_attention_of, "label-record": _record_of}
    kept: dict[str, list[Tensors]] = {kind: [] for kind in of if kind in kinds}
    for rows, texts in walk(ps.texts, batches, ps.title):
        dec = decompose(m, texts, record=record)
        for kind, parts in kept.items():
            parts.append(of[kind](dec, ps.positions[rows]))
        if scoring is not None:
            scoring.add(dec)
    results = {kind: in_prompt_order(parts, batches) for kind, parts in kept.items()}
    if scoring is not None:
        results["locate"] = asdict(scoring.result())
    return results


def from_pass(kind: str, m: ICLModel, ps: PromptSet, batch_size: int = 32, cache: bool = True) -> Tensors:
    """Result `kind` of `prompt_pass` on a prompt set, cached on disk (cache=False: computed
    afresh, nothing stored). Locating a prompt set (the balanced sets every study reads)
    records all of `KINDS` in its pass and stores those not yet stored; a label-only kind (as
    the prompt variants of Figs. 8-11 need) is recorded alone, with no scoring of heads."""
    kinds = KINDS if kind == "locate" else (kind,)
    return stored_together(kind, kinds, m, ps, lambda: prompt_pass(m, ps, kinds, batch_size), cache)


def label_record(m: ICLModel, ps: PromptSet) -> LabelRecord:
    """The `LabelRecord` of a prompt set (from its one cached pass; recorded again where the
    cached one was written before a field was added)."""
    record = from_pass("label-record", m, ps)
    names = [f.name for f in fields(LabelRecord)]
    if not set(names) <= record.keys():
        forget("label-record", m, ps)
        record = from_pass("label-record", m, ps)
    return LabelRecord(**{name: record[name] for name in names})
