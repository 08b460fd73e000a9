"""Per-head analyses against direct full-vocabulary computations."""
from __future__ import annotations

import pytest
import torch

from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import decompose
from icl_helpers.core.projections import (
    STOP_WORDS,
    concept_forms,
    kept_tokens,
    label_attention,
    label_value_ranks,
    project_head,
    related_concepts,
    token_strings,
    top_tokens,
    value_ranks,
)
from tests.conftest import EPS32, PROMPTS, ULPS, close, rank_slack, vocab_tokenizer

HEADS = [(0, 1), (2, 3), (1, 0)]


@pytest.fixture(scope="module")
def dec(small):
    return decompose(small, PROMPTS, record=["pattern", "values", "key_input", "queries"])


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
    """Against a float64 full sort: every rank equal, but where a token's logit lies within
    float32 rounding of the label's own (it may then count either way, by one at most)."""
    r = Readout(small.arch)
    ranks = label_value_ranks(r, dec, HEADS, labels)
    assert torch.isnan(ranks[:, 0][~labels]).all()
    near = rank_slack(dec, HEADS)  # [B, S, T]: ties within rounding
    for s, (l, h) in enumerate(HEADS):
        v = dec.values[:, l, small.arch.kv_head(h)].double() @ small.arch.W_O(l)[h].double()  # [B, T, d]
        logits = v @ r.G.double().T  # [B, T, V]
        own = logits.gather(-1, dec.input_ids.unsqueeze(-1))
        want = (logits > own).sum(-1) + 1
        got = ranks[:, s][labels]
        assert ((got - want[labels]).abs() <= near[:, s][labels]).all()
        assert (got == want[labels]).float().mean() > 0.9


def test_related_concepts_are_the_labels_case_forms_as_whole_tokens(gpt2_tokenizer):
    """Tables 1 and 3's related concepts: bar, Bar, BAR, each alone or after a space, where the
    vocabulary holds it as one token (GPT-2 has no 'BAR', 'FOO', ' FOO' or 'Foo'; Llama's SentencePiece
    no upper case at all)."""
    assert concept_forms(" Bar") == {"bar", "Bar", "BAR", " bar", " Bar", " BAR"}
    got = {label: token_strings(gpt2_tokenizer, related_concepts(gpt2_tokenizer, label)) for label in ("bar", "foo")}
    assert got == {"bar": [" bar", " Bar", "bar", "Bar", " BAR"], "foo": ["foo", " foo", " Foo"]}
    assert related_concepts(gpt2_tokenizer, "bar") == [2318, 2409, 5657, 10374, 31597]
    spm = vocab_tokenizer("llama-spm")
    assert token_strings(spm, related_concepts(spm, "bar")) == ["bar", " Bar", " bar", "Bar"]


def test_value_ranks_of_several_targets_equal_a_full_sort(small, dec, labels):
    """The best of each position's targets, ranked among the counted tokens that are not targets,
    against a float64 full sort: equal but where another token lies within rounding of the best."""
    r = Readout(small.arch)
    V = r.G.shape[0]
    targets = torch.randint(V, (*dec.input_ids.shape, 3), generator=torch.Generator().manual_seed(1))
    targets[..., 2] = -1  # room for a third target, none there
    targets[0, 2] = torch.tensor([2318, 5657, -1])  # ' bar', 'bar' at the first label
    counted = kept_tokens(small.tokenizer)[:V]
    ranks, every = value_ranks(r, dec, HEADS, targets, counted), value_ranks(r, dec, HEADS, targets)
    assert (ranks <= every).all()  # fewer tokens counted: never a lower rank
    for s, (l, h) in enumerate(HEADS):
        logits = dec.values[:, l, small.arch.kv_head(h)].double() @ small.arch.W_O(l)[h].double() @ r.G.double().T
        at = logits.gather(-1, targets.clamp(min=0)).masked_fill(targets < 0, -torch.inf)  # [B, T, 3]
        best = at.amax(-1, keepdim=True)
        others = counted.clone().expand_as(logits).clone()
        others.scatter_(-1, targets.clamp(min=0), False)  # no target counts (the -1 stand-in id 0 is a '!', not counted)
        want = ((logits > best) & others).sum(-1) + 1
        near = (((logits - best).abs() <= ULPS * EPS32 * logits.abs().amax(-1, keepdim=True)) & others).sum(-1)
        got = ranks[:, s]
        assert ((got - want).abs() <= near).all()
        assert (got == want).float().mean() > 0.9
    assert (ranks < value_ranks(r, dec, HEADS, targets[..., :1], counted)).any()  # the best of three beats the first


def test_label_attention_sums_the_pattern(small, dec, labels):
    got = label_attention(dec, labels)  # [B, L, H]
    for l, h in HEADS:
        close(got[:, l, h], (dec.pattern[:, l, h] * labels).sum(-1))
    everything = torch.ones_like(labels)
    close(label_attention(dec, everything), torch.ones(len(PROMPTS), small.arch.n_layers, small.arch.n_heads))


def test_tokens_read_as_text_with_a_lone_byte_as_the_replacement_character(gpt2_tokenizer):
    """" café" whole, and the first byte of "…" (e2 80 a6) as a decoder shows it: no escapes, no byte stand-ins."""
    cafe = gpt2_tokenizer.encode(" café")
    (lone,) = gpt2_tokenizer.convert_tokens_to_ids(["â"])  # byte-level BPE's stand-in for the byte e2
    assert "".join(token_strings(gpt2_tokenizer, cafe)) == " café"
    assert token_strings(gpt2_tokenizer, [lone]) == ["\ufffd"]


def test_stop_words_and_punctuation_are_filtered(gpt2_tokenizer):
    kept = kept_tokens(gpt2_tokenizer)
    for word, keep in [(" the", False), ("The", False), (",", False), (" :", False), (" foo", True), ("Bar", True)]:
        (i,) = gpt2_tokenizer.encode(word)
        assert bool(kept[i]) == keep, word
    assert "the" in STOP_WORDS


def test_project_head_lists_top_tokens(small, dec):
    r = Readout(small.arch)
    tops = project_head(r, small.tokenizer, dec, 0, (2, 1), [2, 8], k=5)
    assert {kind: len(rows) for kind, rows in tops.items()} == {"label value": 2, "label key": 2, "last query": 1}
    kept, one = kept_tokens(small.tokenizer).to(dec.scale.device), torch.ones(1, device=dec.scale.device)
    logits = r.logits(dec.value_outputs(2, 1)[0, 8:9], one)[0]
    want = logits.masked_fill(~kept, -torch.inf).topk(5).indices
    assert tops["label value"][1] == small.tokenizer.batch_decode([[int(i)] for i in want])
    key = r.logits(dec.key_input[0, 2, 2:3], one)[0].masked_fill(~kept, -torch.inf).topk(5).indices
    assert tops["label key"][0] == small.tokenizer.batch_decode([[int(i)] for i in key])
    assert tops["last query"][0] == top_tokens(r, small.tokenizer, dec.query_in_key_space(2, 1)[:1], 5)[0]
