"""The recency control: is a label attended because it is true, or because it is near the input?

The paper's balanced prompt always puts the true demonstrations next to the input, so its
true-versus-false attention (Figs. 6-9) cannot tell the two apart. The recency control shows
the same records in every order of two true and two false demonstrations
(`data.prompts.ORDERS`: fftt is the balanced prompt, ttff the re-ordered one; under a setting
of p demonstrations a class, every order of p and p, `data.setting`). Each label
position then has a truth (true or false) and a distance rank (1: the demonstration next
to the input, D: the first, of D demonstrations), and across the six orders every label slot is true in three:
truth and distance are crossed, so their effects on the attention a label gets can be told
apart. Per record, the attention a label position gets in the dataset's in-context heads is
averaged over orders and heads into a [2, D] table (false/true by distance rank); an
additive least-squares fit of the table over records gives the *truth effect* (true minus
false at equal distance) and the *distance effect* (nearest minus farthest at equal truth).
Intervals: the percentile bootstrap over records.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch

from ..core.heads import Head
from ..data.prompts import orders, prompt_label_ids
from ..data.setting import MAIN, Setting
from ..errors import CannotMeasure
from ..model.loading import ICLModel
from ..stats import mean_ci
from .label_attention import attention_on_labels
from .runner import prompt_set


def order_variants(per_class: int = 2) -> dict[str, str]:
    """Each order of per_class true and per_class false demonstrations (`orders`) -> its variant's
    name: the balanced prompt (the true ones next to the input), the re-ordered one, "order-ftft"..."""
    near, far = "f" * per_class + "t" * per_class, "t" * per_class + "f" * per_class
    return {o: {near: "balanced", far: "reordered"}.get(o, f"order-{o}") for o in orders(per_class)}


ORDER_VARIANTS = order_variants()  # the paper's prompts in every order: six


@dataclass
class RecencyOrders:
    """One dataset's records in every order, seen through its in-context heads.

    N records, O orders (`order_variants`), S heads, D = 2p label positions (one a demonstration) in
    prompt order (p a class).
    """

    dataset: str
    heads: list[Head]
    attention: torch.Tensor  # [N, O, S, D]: the last position's attention on each label position
    is_true: torch.Tensor  # [O, D] bool: the label at that position is the true one
    top1_hits: torch.Tensor  # [N, O] bool: the argmax is the true label
    nearest: torch.Tensor  # [N, O] bool: the argmax is the label of the demonstration next to the input

    def cells(self) -> torch.Tensor:
        """[N, 2, D]: per record, mean attention on a label position over orders and heads, by
        truth (0 false, 1 true) and distance rank (index 0: next to the input, D-1: the first)."""
        per_order = self.attention.mean(2).flip(-1)  # [N, O, D], nearest first
        truth = self.is_true.flip(-1)  # [O, D]
        return torch.stack([(per_order * (truth == t)).sum(1) / (truth == t).sum(0) for t in (False, True)], 1)

    def accuracy(self) -> pd.Series:
        """Top-1 accuracy in each order."""
        names = ["".join("t" if t else "f" for t in row) for row in self.is_true.tolist()]
        return pd.Series(self.top1_hits.double().mean(0).numpy(), index=names, name="top-1")


def fit(cells: torch.Tensor) -> tuple[float, float]:
    """(truth effect, distance effect) of the additive least-squares fit attention = b +
    truth * [true] + d_r to the mean [2, D] table of cells [N, 2, D]; the distance effect is
    d_nearest - d_farthest. The table is a complete crossed design with one value a cell, so
    the fit's effects are differences of its margins (true row minus false row; nearest column
    minus farthest column): a closed form, the same to the bit on every run, which a solver's
    result is not."""
    table = cells.double().mean(0)  # [2, D]
    return float(table[1].mean() - table[0].mean()), float(table[:, 0].mean() - table[:, -1].mean())


@dataclass(frozen=True)
class Effects:
    """The truth and distance effects with their 95% bootstrap intervals over N records."""

    truth: float
    truth_ci: tuple[float, float]
    distance: float
    distance_ci: tuple[float, float]
    n: int

    def text(self) -> str:
        """Both effects with their intervals and N, in one line."""
        lo, hi = self.truth_ci
        dlo, dhi = self.distance_ci
        return (f"truth effect {self.truth:+.3f} ({lo:+.3f} to {hi:+.3f}), distance effect (nearest minus farthest) "
                f"{self.distance:+.3f} ({dlo:+.3f} to {dhi:+.3f}), per label position, N={self.n} records")


def effects(cells: torch.Tensor, clusters: torch.Tensor | None = None) -> Effects:
    """`fit` of cells [N, 2, D] with the bootstrap interval of each effect (over the records, or
    over their distinct inputs where clusters [N] gives each record's)."""
    truth, distance = fit(cells)
    x = cells.double()  # the fit is linear in the mean table: each effect is the mean of the records' own
    each_truth, each_distance = x[:, 1].mean(1) - x[:, 0].mean(1), x[:, :, 0].mean(1) - x[:, :, -1].mean(1)  # [N]
    return Effects(truth, mean_ci(each_truth, clusters=clusters), distance, mean_ci(each_distance, clusters=clusters),
                   len(cells))


def recency_orders(m: ICLModel, dataset: str, heads: Sequence[Head], n: int, seed: int = 0,
                   data_dir: str | Path | None = None, setting: Setting = MAIN) -> RecencyOrders:
    """The first n records of `dataset` in every order of the setting's demonstrations
    (`order_variants`), attention in `heads`."""
    attention, is_true, top1_hits, nearest = [], [], [], []
    for variant in order_variants(setting.per_class).values():
        ps = prompt_set(m, dataset, variant, n, seed, data_dir, setting)
        att = attention_on_labels(m, ps)
        attention.append(att.per_label_at(heads))
        truth = ps.positions.is_true[0]
        true_id, false_id = prompt_label_ids(m.tokenizer, ps.prompts)
        is_true.append(truth)
        top1_hits.append(att.predictions == true_id)
        nearest.append(att.predictions == torch.where(truth[-1], true_id, false_id))
    return RecencyOrders(dataset, list(heads), torch.stack(attention, 1), torch.stack(is_true), torch.stack(top1_hits, 1),
                         torch.stack(nearest, 1))


def orders_table(records: Sequence[RecencyOrders]) -> pd.DataFrame:
    """One row a dataset: the truth and distance effects with intervals ("too few prompts" where an
    interval cannot be drawn), and top-1 accuracy and the share of prompts naming the nearest label
    when a true or a false demonstration is nearest."""
    rows = []
    for f in records:
        truth, distance = fit(f.cells())
        try:
            e = effects(f.cells())
            cis = _ci(e.truth_ci), _ci(e.distance_ci)
        except CannotMeasure:
            cis = ("too few prompts",) * 2
        true_nearest = f.is_true[:, -1]
        rows.append({"dataset": f.dataset, "N": len(f.cells()), "truth effect": truth, "truth CI": cis[0],
                     "distance effect": distance, "distance CI": cis[1],
                     "top-1, true nearest": float(f.top1_hits[:, true_nearest].double().mean()),
                     "top-1, false nearest": float(f.top1_hits[:, ~true_nearest].double().mean()),
                     "names the nearest label": float(f.nearest.double().mean())})
    return pd.DataFrame(rows).set_index("dataset")


def _ci(ci: tuple[float, float]) -> str:
    return f"{ci[0]:+.3f} to {ci[1]:+.3f}"

