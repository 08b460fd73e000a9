"""Batches of prompts and the walk over them: every prompt once, within the limits, results
back in prompt order, and a walk in batches equal to one prompt at a time."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from icl_helpers import ICLModel, UsageError
from icl_helpers.core import batching
from icl_helpers.core.batching import chunks, in_prompt_order, length_batches, token_batches, walk
from icl_helpers.core.decompose import decompose
from icl_helpers.core.sizes import scoring_groups
from tests.conftest import PROMPTS, close, small_model


def test_token_batches_go_from_the_shortest_prompt_within_both_limits(monkeypatch):
    lengths = [5, 3, 9, 3, 7, 1000, 4]
    assert [b.tolist() for b in token_batches(lengths, 3)] == [[1, 3, 6], [0, 4, 2], [5]]  # batch_size a batch
    monkeypatch.setattr(batching, "BATCH_TOKENS", 20)  # 3 of 9 tokens do not fit, nor 2 of 1000: alone
    assert [b.tolist() for b in token_batches(lengths, 3)] == [[1, 3, 6], [0, 4], [2], [5]]


def test_length_batches_count_the_models_tokens(gpt2_tokenizer, monkeypatch):
    m = SimpleNamespace(tokenizer=gpt2_tokenizer)
    prompts = PROMPTS * 2
    lengths = [len(ids) for ids in gpt2_tokenizer(prompts)["input_ids"]]
    batches = length_batches(m, prompts, batch_size=4)
    order = torch.cat(batches)
    assert [len(b) for b in batches] == [4, 2]  # short prompts: batch_size a batch
    assert [lengths[i] for i in order] == sorted(lengths)  # shortest first
    monkeypatch.setattr(batching, "BATCH_TOKENS", 2 * max(lengths) - 1)  # two of the longest do not fit
    batches = length_batches(m, prompts, batch_size=4)
    assert sorted(torch.cat(batches).tolist()) == list(range(len(prompts)))  # every prompt once
    assert all(len(b) == 1 or len(b) * max(lengths[i] for i in b) <= batching.BATCH_TOKENS for b in batches)
    assert len(batches[-1]) == 1 and lengths[int(batches[-1])] == max(lengths)
    with pytest.raises(UsageError, match=r"^batch_size must be at least 1, not 0\.$"):
        length_batches(m, prompts, batch_size=0)


def test_chunks_take_the_prompts_in_order():
    assert [c.tolist() for c in chunks(7, 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [c.tolist() for c in chunks(2, 1024)] == [[0, 1]]
    with pytest.raises(UsageError, match=r"^batch_size must be at least 1, not 0\.$"):
        chunks(3, 0)


def test_scoring_groups_join_consecutive_batches_up_to_their_size():
    batches = [torch.arange(0, 3), torch.arange(3, 5), torch.arange(5, 9), torch.arange(9, 10)]
    groups = [[b.tolist() for b in g] for g in scoring_groups(batches, 5)]
    assert groups == [[[0, 1, 2], [3, 4]], [[5, 6, 7, 8], [9]]]
    assert [len(g) for g in scoring_groups(batches, 2)] == [1, 1, 1, 1]  # a batch above the size: alone


def test_in_prompt_order_undoes_the_batches_order():
    batches = [torch.tensor([2, 0]), torch.tensor([3]), torch.tensor([1, 4])]
    parts = [{"x": 10 * b, "pair": torch.stack([b, -b], 1)} for b in batches]
    got = in_prompt_order(parts, batches)
    assert got["x"].tolist() == [0, 10, 20, 30, 40] and got["pair"].tolist() == [[i, -i] for i in range(5)]
    groups = [{"x": torch.cat([10 * b for b in batches[:2]])}, {"x": 10 * batches[2]}]  # parts of groups of batches
    assert in_prompt_order(groups, batches)["x"].tolist() == [0, 10, 20, 30, 40]


def test_walk_gives_each_batch_its_prompts_in_turn():
    prompts = [f"p{i}" for i in range(5)]
    batches = [torch.tensor([3, 1]), torch.tensor([0, 4, 2])]
    steps = [(rows.tolist(), texts) for rows, texts in walk(prompts, batches, progress=False)]
    assert steps == [([3, 1], ["p3", "p1"]), ([0, 4, 2], ["p0", "p4", "p2"])]


def test_a_walk_in_length_batches_equals_one_prompt_at_a_time(gpt2_tokenizer):
    m = ICLModel(small_model("gpt2"), gpt2_tokenizer, name="gpt2")
    prompts = [p + " x :" * i for i in range(3) for p in PROMPTS]  # 9 prompts of 3 to 19 tokens
    batches = length_batches(m, prompts, batch_size=4)
    assert len(batches) == 3 and torch.cat(batches).tolist() != list(range(9))  # not prompt order
    parts = []
    for rows, texts in walk(prompts, batches, progress=False):
        dec = decompose(m, texts)
        parts.append({"rows": rows, "resid": dec.resid, "logits": dec.logits})
    got = in_prompt_order(parts, batches)
    assert got["rows"].tolist() == list(range(9))
    for i, text in enumerate(prompts):
        alone = decompose(m, [text])  # one prompt, no padding: another summation order
        close(got["resid"][i], alone.resid[0])
        close(got["logits"][i], alone.logits[0])
