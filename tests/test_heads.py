"""Heads as (layer, head) pairs: selection, per-head values, and the layer-matched random sampler."""
from __future__ import annotations

import torch

from icl_helpers.core.heads import at_heads, head_mask, head_name, same_layer_random_heads, top_heads


def test_top_heads_and_at_heads():
    scores = torch.tensor([[0.125, 0.875, 0.0], [0.5, -1.0, 0.75]])  # [L=2, H=3], exact in float32
    top = top_heads(scores, 3)
    assert top == [(0, 1), (1, 2), (1, 0)] and [head_name(h) for h in top] == ["0-1", "1-2", "1-0"]
    assert at_heads(scores, top).tolist() == [0.875, 0.75, 0.5]
    assert at_heads(torch.stack([scores, -scores]), top).tolist() == [[0.875, 0.75, 0.5], [-0.875, -0.75, -0.5]]
    assert head_mask(2, 3, top).nonzero().tolist() == [[0, 1], [1, 0], [1, 2]]


def test_same_layer_random_heads_share_the_layer_and_avoid_the_listed_heads():
    heads = [(3, 0), (3, 1), (5, 2)]
    picks = same_layer_random_heads(heads, n_heads=4, seed=1)
    assert [l for l, _ in picks] == [3, 3, 5]
    assert not set(picks) & set(heads)
    assert same_layer_random_heads([(0, 0), (0, 1)], n_heads=2) == [(0, 1), (0, 0)]  # layer full: any other head


def test_same_layer_random_heads_draw_distinct_heads():
    heads = [(3, 0), (3, 1), (3, 2)]  # two free heads in layer 3 for three listed ones
    for seed in range(20):
        picks = same_layer_random_heads(heads, n_heads=5, seed=seed)
        assert len(set(picks)) == 3 and {(3, 3), (3, 4)} <= set(picks)
        assert all(pick != head for pick, head in zip(picks, heads))
