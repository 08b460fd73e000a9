"""The recency control: every order of the demonstrations, the (truth, distance) table, the least-squares
effects on constructed attention, and the orders on a small model against its label attention."""
from __future__ import annotations

import torch

from icl_helpers.data.prompts import ORDERS, prompt_label_ids
from icl_helpers.studies import label_attention, recency
from icl_helpers.studies.runner import prompt_set
from tests.conftest import close

PATTERNS = torch.tensor([[c == "t" for c in o] for o in ORDERS])  # [O, D]


def constructed(truth: float, by_distance: list[float], n: int = 30, noise: float = 0.0) -> recency.RecencyOrders:
    """Records whose attention is 0.1 + truth * [true] + by_distance[rank] (+ noise), in 2 heads."""
    g = torch.Generator().manual_seed(0)
    distance = torch.tensor(by_distance).flip(0)  # prompt order: the farthest label first
    attention = 0.1 + truth * PATTERNS.float() + distance  # [O, D]
    attention = attention[None, :, None].expand(n, -1, 2, -1) + noise * torch.randn(n, len(ORDERS), 2, 4, generator=g)
    top1_hits = torch.ones(n, len(ORDERS), dtype=torch.bool)
    return recency.RecencyOrders("toy", [(0, 0), (1, 1)], attention, PATTERNS, top1_hits, PATTERNS[:, -1].expand(n, -1))


def test_the_orders_are_every_order_of_two_true_and_two_false():
    assert len(set(ORDERS)) == 6 and all(sorted(o) == list("fftt") for o in ORDERS)
    assert recency.ORDER_VARIANTS["fftt"] == "balanced" and recency.ORDER_VARIANTS["ttff"] == "reordered"


def test_cells_and_effects_recover_the_constructed_attention():
    fam = constructed(0.05, [0.3, 0.2, 0.1, 0.0])  # nearest first
    cells = fam.cells()
    assert cells.shape == (30, 2, 4)
    expected = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.45, 0.35, 0.25, 0.15]])
    close(cells[0], expected)
    close(recency.fit(cells), (0.05, 0.3))
    noisy = recency.effects(constructed(0.05, [0.3, 0.2, 0.1, 0.0], n=200, noise=0.05).cells())
    assert noisy.truth_ci[0] < 0.05 < noisy.truth_ci[1] and noisy.distance_ci[0] < 0.3 < noisy.distance_ci[1]
    assert noisy.truth_ci[1] - noisy.truth_ci[0] < 0.01 and noisy.n == 200
    none = recency.effects(constructed(0.0, [0.0] * 4, n=200, noise=0.05).cells())  # nothing to find
    assert none.truth_ci[0] < 0 < none.truth_ci[1] and none.distance_ci[0] < 0 < none.distance_ci[1]


def test_the_closed_form_is_the_least_squares_fit_of_the_crossed_design():
    g = torch.Generator().manual_seed(1)
    cells = torch.rand(10, 2, 4, generator=g)
    table = cells.double().mean(0)
    truth = torch.tensor([0.0, 1.0], dtype=torch.float64)[:, None].expand(2, 4).reshape(-1, 1)
    rank = torch.eye(4, dtype=torch.float64).repeat(2, 1)  # one column a rank: no separate intercept
    coef = torch.linalg.lstsq(torch.cat([truth, rank], 1), table.reshape(-1, 1)).solution.flatten()
    close(recency.fit(cells), (coef[0], coef[1] - coef[4]), scale=float(cells.max()))  # effects of values in [0, 1)
    assert recency.fit(cells) == recency.fit(cells.clone())


def test_orders_table_splits_accuracy_by_the_nearest_label():
    fam = constructed(0.05, [0.3, 0.2, 0.1, 0.0])
    fam.top1_hits = PATTERNS[:, -1].expand(30, -1).clone()  # right exactly when the true label is nearest
    row = recency.orders_table([fam]).loc["toy"]
    assert (row["top-1, true nearest"], row["top-1, false nearest"], row["names the nearest label"]) == (1.0, 0.0, 0.5)
    assert row["N"] == 30
    close(row["truth effect"], 0.05)
    row = recency.orders_table([constructed(0.05, [0.3, 0.2, 0.1, 0.0], n=4)]).loc["toy"]  # effects, but no interval
    assert row["N"] == 4 and row["truth CI"] == row["distance CI"] == "too few prompts"
    close(row["truth effect"], 0.05)


def test_recency_orders_are_the_label_attention_of_each_order(small, tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    heads = [(1, 2), (0, 3)]
    fam = recency.recency_orders(small, "sentiment_number", heads, 6)
    assert fam.attention.shape == (6, 6, 2, 4) and torch.equal(fam.is_true, PATTERNS)
    for o, order in enumerate(ORDERS):
        ps = prompt_set(small, "sentiment_number", recency.ORDER_VARIANTS[order], 6)
        att = label_attention.attention_on_labels(small, ps)
        assert torch.equal(fam.attention[:, o], att.per_label[:, [1, 0], [2, 3]])  # read from the same cached pass
        true_id, false_id = prompt_label_ids(small.tokenizer, ps.prompts)
        nearest = true_id if order.endswith("t") else false_id
        assert torch.equal(fam.nearest[:, o], att.predictions == nearest)
        assert torch.equal(fam.top1_hits[:, o], att.predictions == true_id)
