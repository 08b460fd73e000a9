"""Figs. 6-11: attention from the last position to the true and false labels.

Per head, the attention summed over the true-label positions and over the false-label
positions (Fig. 6), against the head's increase (Fig. 7), and balanced prompts against a
variant of the same records: imbalanced (Figs. 8, 10) or re-ordered (Figs. 9, 11), and which
label each prompt's prediction names (the EMNLP abstract's prediction shift).
Attention tensors over heads are [N, L, H] (every head) or [N, S] (listed heads).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from ..core.attribution import heads_position_increase, readout_of
from ..core.heads import Head, at_heads
from ..core.projections import token_strings
from ..data.prompts import prompt_label_ids
from ..model.loading import ICLModel
from .in_context_heads import in_context_heads
from .prompt_pass import from_pass, label_record
from .runner import PromptSet, cached_study, decomposed, prompt_set


@dataclass
class LabelAttention:
    """Attention from the last position summed over label positions, for every head."""

    true: torch.Tensor  # [N, L, H]: on the true labels
    false: torch.Tensor  # [N, L, H]: on the false labels
    predictions: torch.Tensor  # [N] long: the model's next token (argmax) at the last position
    per_label: torch.Tensor  # [N, L, H, D]: on each label position, prompt order (NaN past a prompt's labels)

    def at(self, heads: Sequence[Head]) -> tuple[torch.Tensor, torch.Tensor]:
        """(true, false), each [N, S], for the listed heads."""
        return at_heads(self.true, heads), at_heads(self.false, heads)

    def per_label_at(self, heads: Sequence[Head]) -> torch.Tensor:
        """[N, S, D]: the attention on each label position in the listed heads."""
        layers, hs = zip(*heads)
        return self.per_label[:, list(layers), list(hs)]


def attention_on_labels(m: ICLModel, ps: PromptSet, batch_size: int = 32, cache: bool = True) -> LabelAttention:
    """Attention of the last position on each label and summed over true and over false
    labels, every head, and the model's predictions, from the prompt set's one cached pass
    (`prompt_pass`; cache=False: a pass of its own)."""
    return LabelAttention(**from_pass("label-attention", m, ps, batch_size, cache))


def summed_true_attention(m: ICLModel, ps: PromptSet, heads: Sequence[Head]) -> torch.Tensor:
    """[N, S]: the last position's attention summed over the prompt's true labels, in each head: Figs. 8,
    10 and 11's measure."""
    return attention_on_labels(m, ps).at(heads)[0]


def true_label_weight(m: ICLModel, ps: PromptSet, heads: Sequence[Head]) -> torch.Tensor:
    """[N, S]: the mean attention a true-label position gets in each head (`summed_true_attention` over
    the prompt's number of true labels): Figs. 10 and 11 read per label, comparable between prompts with
    two true labels and the imbalanced ones with one."""
    return summed_true_attention(m, ps, heads) / ps.positions.chosen(True).sum(1, keepdim=True)


def predicted_labels(m: ICLModel, ps: PromptSet) -> torch.Tensor:
    """[N] long: the label each prompt's top-1 prediction names: 0 its true label, 1 its false
    one, -1 neither (from the prompt set's cached pass)."""
    predictions = attention_on_labels(m, ps).predictions
    true, false = prompt_label_ids(m.tokenizer, ps.prompts)
    return torch.where(predictions == true, 0, torch.where(predictions == false, 1, -1))


def label_shift(before: torch.Tensor, after: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """[N, 2]: the change from `before` to `after` ([N, 2] each: the summed attention on the
    true labels, then on the false ones) on the positions of the label `predicted` [N] names
    (0 the true, 1 the false), then on the other label's."""
    return (after - before).gather(1, torch.stack([predicted, 1 - predicted], 1))


@cached_study("label-increase", "increase", "heads")
@torch.no_grad()
def label_increases(m: ICLModel, ps: PromptSet, heads: Sequence[Head], batch_size: int = 1024) -> torch.Tensor:
    """[N, S, D]: the position-level increase (`heads_position_increase`) of each label
    position's subvalue in each head, toward the model's prediction; prompt order of the
    labels as in `LabelAttention.per_label` (NaN past a prompt's labels). Fig. 7's y-axis.
    Read from the prompt set's `LabelRecord`, batch_size prompts a call to
    `heads_position_increase` (which folds W_O into the readout once a call): no model pass."""
    readout, record = readout_of(m), label_record(m, ps)
    D = ps.positions.labels.shape[1]
    out = torch.full((len(ps), len(heads), D), torch.nan)
    for rows, dec in record.decompositions(m, batch_size):
        increase = heads_position_increase(readout, dec, heads, torch.arange(D).expand(len(rows), D), record.predictions[rows])
        out[rows] = increase.cpu().masked_fill(~ps.positions[rows].valid[:, None], torch.nan)
    return out


@dataclass
class TrueVsFalse:
    """Mean summed attention on true and false labels over prompts and heads."""

    true: float
    false: float
    heads_true_above: int  # heads whose mean true-label attention exceeds the false-label one
    heads: int


def true_vs_false(true: torch.Tensor, false: torch.Tensor) -> TrueVsFalse:
    """Compare the attention on true and false labels, [N, S] each."""
    above = int((true.mean(0) > false.mean(0)).sum())
    return TrueVsFalse(float(true.mean()), float(false.mean()), above, true.shape[1])


def label_points(m: ICLModel, ps: PromptSet, heads: Sequence[Head]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Fig. 7's points, one per (prompt, head, label position) of the listed heads: the
    position's attention weight, its subvalue's increase and whether its label is true, [n] each."""
    weight, increase = attention_on_labels(m, ps).per_label_at(heads), label_increases(m, ps, heads)  # [N, S, D]
    kept = ~weight.isnan()
    return weight[kept], increase[kept], ps.positions.is_true[:, None].expand_as(kept)[kept]


@dataclass
class PromptAttention:
    """The last position's attention rows of N prompts, every head."""

    tokens: list[list[str]]  # per prompt, its T_i tokens
    pattern: torch.Tensor  # [N, L, H, T]: zero past a prompt's last token
    true: torch.Tensor  # [N, T] bool: true-label positions
    false: torch.Tensor  # [N, T] bool: false-label positions


@torch.no_grad()
def prompt_attention(m: ICLModel, ps: PromptSet, batch_size: int = 32) -> PromptAttention:
    """The last position's attention rows of every prompt of a set, with its label masks."""
    T = int(ps.positions.last.max()) + 1
    pattern = torch.zeros(len(ps), m.arch.n_layers, m.arch.n_heads, T)
    tokens: list[list[str]] = [[] for _ in range(len(ps))]
    for rows, dec in decomposed(m, ps, batch_size, record=["pattern"]):
        pattern[rows, ..., : dec.pattern.shape[-1]] = dec.pattern.float().cpu()
        for row, ids, last in zip(rows.tolist(), dec.input_ids, dec.last):
            tokens[row] = token_strings(m.tokenizer, ids[: int(last) + 1].tolist())
    return PromptAttention(tokens, pattern, ps.positions.mask(T, True), ps.positions.mask(T, False))


# --- prompt variants (Figs. 8-11) ---------------------------------------------------------
@dataclass
class VariantStudy:
    """The in-context heads of balanced prompts, and the label attention and accuracy of
    balanced prompts and of a variant of the same records."""

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


def variant_study(m: ICLModel, dataset: str, variant: str, n: int, seed: int = 0, data_dir: str | Path | None = None,
                  k: int = 20, heads: Sequence[Head] | None = None) -> VariantStudy:
    """Balanced prompts against `variant` ("imbalanced", "reordered") of the same records, in
    the heads given, else the top k located on the balanced prompts."""
    sets = {v: prompt_set(m, dataset, v, n, seed, data_dir) for v in ("balanced", variant)}
    attention = {v: attention_on_labels(m, ps) for v, ps in sets.items()}
    accuracy = {v: float((attention[v].predictions == prompt_label_ids(m.tokenizer, ps.prompts)[0]).float().mean())
                for v, ps in sets.items()}
    return VariantStudy(dataset, in_context_heads(m, sets["balanced"], k, heads), attention, accuracy)


def variant_studies(m: ICLModel, variant: str, word: Sequence[str], sentence: Sequence[str], n_word: int,
                    n_sentence: int, seed: int = 0, data_dir: str | Path | None = None, k: int = 20,
                    heads: Sequence[Head] | None = None) -> list[VariantStudy]:
    """`variant_study` of every word dataset (n_word prompts) and sentence dataset (n_sentence)."""
    return [variant_study(m, d, variant, n, seed, data_dir, k, heads)
            for datasets, n in ((word, n_word), (sentence, n_sentence)) for d in datasets]


@dataclass
class VariantChange:
    """How a prompt variant moves the summed label attention of each head."""

    true_before: float
    true_after: float
    false_before: float
    false_after: float
    heads_true_down: int  # heads whose mean true-label attention drops
    heads_false_up: int  # heads whose mean false-label attention rises
    heads: int


def variant_change(before: tuple[torch.Tensor, torch.Tensor], after: tuple[torch.Tensor, torch.Tensor]) -> VariantChange:
    """(true, false) attention of the base prompts against a variant's, [N, S] each."""
    (t0, f0), (t1, f1) = before, after
    return VariantChange(
        float(t0.mean()), float(t1.mean()), float(f0.mean()), float(f1.mean()),
        int((t1.mean(0) < t0.mean(0)).sum()), int((f1.mean(0) > f0.mean(0)).sum()), t0.shape[1],
    )


def variant_table(studies: Sequence[VariantStudy], variant: str) -> pd.DataFrame:
    """One row per dataset: mean true/false label attention in its in-context heads, balanced
    and under the variant, how many heads move as the paper reports, and the accuracy."""
    rows = []
    for st in studies:
        c = variant_change(*(st.at_heads()[v] for v in ("balanced", variant)))
        rows.append({"dataset": st.dataset, "true, balanced": c.true_before, f"true, {variant}": c.true_after,
                     "false, balanced": c.false_before, f"false, {variant}": c.false_after,
                     "heads: true down": f"{c.heads_true_down}/{c.heads}", "heads: false up": f"{c.heads_false_up}/{c.heads}",
                     "accuracy, balanced": st.accuracy["balanced"], f"accuracy, {variant}": st.accuracy[variant]})
    return pd.DataFrame(rows).set_index("dataset")
