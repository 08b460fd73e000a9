"""Heads as (layer, head) pairs: selection, per-head values, and the layer-matched random sampler."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from icl_helpers import LocateResult, UsageError
from icl_helpers.core.heads import (
    at_heads,
    check_heads,
    head_mask,
    head_name,
    heads_text,
    parse_heads,
    same_layer_random_heads,
    top_heads,
)


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


def test_parse_heads_reads_the_papers_notation_and_pairs():
    assert parse_heads("19-11,20-11, 22-0") == ((19, 11), (20, 11), (22, 0))
    assert parse_heads([(26, 14), "28-10", [29, 17]]) == ((26, 14), (28, 10), (29, 17))
    assert parse_heads(None) is None
    assert heads_text(parse_heads("19-11,22-0")) == "19-11,22-0"


@pytest.mark.parametrize("value, bad", [("19.11", "'19.11'"), ("19-11,", "''"), ("19-11;20-11", "'19-11;20-11'"),
                                        ("-1-2", "'-1-2'"), ([(1, 2, 3)], r"\(1, 2, 3\)"), ([19], "19"),
                                        ([(1.0, 2)], r"\(1.0, 2\)")])
def test_bad_head_syntax_is_one_line_saying_what_to_write(value, bad):
    with pytest.raises(UsageError, match=rf"^ICL_HEADS: {bad} is not a head: write layer-head pairs separated by "
                                         r"commas, e.g. 19-11,20-11\.$"):
        parse_heads(value, "ICL_HEADS")


@pytest.mark.parametrize("value", ["", []])
def test_no_heads_is_refused(value):
    with pytest.raises(UsageError, match="^heads: no heads given: write layer-head pairs"):
        parse_heads(value)


@pytest.mark.parametrize("heads, message", [
    ([(30, 0)], "Head 30-0 is not in this model: it has 30 layers x 9 heads (layer-head from 0-0 to 29-8)."),
    ([(29, 8), (0, 9)], "Head 0-9 is not in this model: it has 30 layers x 9 heads"),
    ([(-1, 0)], "Head -1-0 is not in this model"),
    ([(19, 1), (20, 2), (19, 1)], "Head 19-1 is given twice: give each head once."),
])
def test_check_heads_names_the_bad_head_and_the_models_shape(heads, message):
    arch = SimpleNamespace(n_layers=30, n_heads=9)  # SmolLM2-135M's shape
    with pytest.raises(UsageError) as err:
        check_heads(heads, arch)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert check_heads([(29, 8), (0, 0)], arch) == ((29, 8), (0, 0)) and check_heads(None, arch) is None


def scored(L: int = 3, H: int = 4) -> LocateResult:
    """A located result of 2 prompts whose mean head scores are 0, 1, ..., L*H - 1 in row order."""
    head = torch.arange(float(L * H)).view(1, L, H).expand(2, L, H)
    return LocateResult(head, torch.zeros(2, L), torch.zeros(2, L), torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("heads, message", [
    ([(-1, -1)], r"^Head -1--1 is not in this model: it has 3 layers x 4 heads \(layer-head from 0-0 to 2-3\)\.$"),
    ([(0, 4)], r"^Head 0-4 is not in this model"),
    ("0.1", r"^heads: '0.1' is not a head: write layer-head pairs"),
    ([], r"^heads: no heads given"),
])
def test_head_scores_check_their_heads(heads, message):
    with pytest.raises(UsageError, match=message):
        scored().head_scores(heads)


def test_head_scores_read_the_papers_notation():
    assert scored().head_scores("2-3,0-1").tolist() == scored().head_scores([(2, 3), (0, 1)]).tolist() == [11.0, 1.0]


@pytest.mark.parametrize("k, message", [(-1, r"^k must be at least 1, not -1\.$"), (0, r"^k must be at least 1, not 0\.$"),
                                        (2.5, r"^k must be a whole number, not 2\.5\.$")])
def test_top_heads_needs_a_count_of_at_least_one(k, message):
    with pytest.raises(UsageError, match=message):
        scored().top_heads(k)
    assert scored().top_heads(2) == [(2, 3), (2, 2)] and len(scored().top_heads(100)) == 12
