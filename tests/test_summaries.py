"""Summary numbers the notebooks print."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from icl_helpers import summaries


def test_true_vs_false_counts_heads_with_more_true_attention():
    true = torch.tensor([[0.5, 0.1], [0.3, 0.1]])
    false = torch.tensor([[0.1, 0.2], [0.1, 0.2]])
    got = summaries.true_vs_false(true, false)
    assert (got.heads_true_above, got.heads) == (1, 2)
    assert got.true == pytest.approx(0.25) and got.false == pytest.approx(0.15)


def test_variant_change_counts_heads_that_move():
    before = (torch.tensor([[0.6, 0.2]]), torch.tensor([[0.1, 0.1]]))
    after = (torch.tensor([[0.4, 0.3]]), torch.tensor([[0.2, 0.1]]))
    got = summaries.variant_change(before, after)
    assert (got.heads_true_down, got.heads_false_up, got.heads) == (1, 1, 2)
    assert (got.true_before, got.true_after) == pytest.approx((0.4, 0.35))


def test_correlation_of_a_monotone_relation():
    x = torch.arange(10.0)
    pearson, spearman = summaries.correlation(x, x**3)
    assert 0.9 < pearson < 1 and spearman == pytest.approx(1.0)


def test_layer_range_and_label_value_hits():
    assert summaries.layer_range([(5, 0), (2, 1), (9, 3)]) == (2, 9)
    table = pd.DataFrame({"vector": ["label value", "label value", "label key"],
                          "token": [" bar", " foo", " bar"],
                          "top tokens": ["BAR, Bar, bars", "one, two", "bar"]})
    assert summaries.label_value_hits(table) == 0.5
