"""Per-head analyses against direct full-vocabulary computations."""
from __future__ import annotations

import pytest
import torch

from icl_helpers.attribution import Readout
from icl_helpers.decompose import decompose
from icl_helpers.heads import STOP_WORDS, _kept_tokens, label_attention, label_value_ranks, project_head, top_tokens
from tests.conftest import PROMPTS
from tests.test_decompose import close

HEADS = [(0, 1), (2, 3), (1, 0)]


@pytest.fixture(scope="module")
def dec(small):
    return decompose(small, PROMPTS, pattern=True, values=True, attn_all=True, queries=True)


@pytest.fixture(scope="module")
def labels(dec):
    mask = torch.zeros_like(dec.input_ids, dtype=torch.bool)
    mask[0, [2, 5, 8, 11]] = True  # ' bar' ' bar' ' foo' ' foo' in PROMPTS[0] (GPT-2 tokens)
    mask[1, 2] = True
    return mask


def test_label_masks_point_at_labels(small, dec, labels):
    words = small.tokenizer.convert_ids_to_tokens(dec.input_ids[labels])
    assert words == ["Ġbar", "Ġbar", "Ġfoo", "Ġfoo", "Ġfoo"]


def test_label_value_ranks_equal_a_full_sort(small, dec, labels):
    r = Readout(small.arch)
    ranks = label_value_ranks(r, dec, HEADS, labels)
    assert torch.isnan(ranks[:, 0][~labels]).all()
    for s, (l, h) in enumerate(HEADS):
        logits = r.logits(dec.value_outputs(l, h), torch.ones(len(PROMPTS)))  # [B, T, V]
        own = logits.gather(-1, dec.input_ids.unsqueeze(-1))
        want = (logits > own).sum(-1) + 1
        assert torch.equal(ranks[:, s][labels], want[labels].float())


def test_label_attention_sums_the_pattern(dec, labels):
    got = label_attention(dec, HEADS, labels)
    for s, (l, h) in enumerate(HEADS):
        close(got[:, s], (dec.pattern[:, l, h] * labels).sum(-1))
    everything = torch.ones_like(labels)
    close(label_attention(dec, HEADS, everything), torch.ones(len(PROMPTS), len(HEADS)))


def test_stop_words_and_punctuation_are_filtered(gpt2_tokenizer):
    kept = _kept_tokens(gpt2_tokenizer)
    for word, keep in [(" the", False), ("The", False), (",", False), (" :", False), (" foo", True), ("Bar", True)]:
        (i,) = gpt2_tokenizer.encode(word)
        assert bool(kept[i]) == keep, word
    assert "the" in STOP_WORDS


def test_project_head_lists_top_tokens(small, dec):
    r = Readout(small.arch)
    rows = project_head(r, small.tokenizer, dec, 0, 2, 1, [2, 8], k=5)
    assert [(row.kind, row.position, row.token) for row in rows] == [
        ("label value", 2, " bar"), ("label value", 8, " foo"),
        ("label key", 2, " bar"), ("label key", 8, " foo"), ("last query", 13, " :")]
    kept = _kept_tokens(small.tokenizer)
    logits = r.logits(dec.value_outputs(2, 1)[0, 8:9], torch.ones(1))[0]
    want = logits.masked_fill(~kept, -torch.inf).topk(5).indices
    assert rows[1].top == small.tokenizer.batch_decode([[int(i)] for i in want])
    assert rows[4].top == top_tokens(r, small.tokenizer, dec.query_in_key_space(2, 1)[:1], 5)[0]
