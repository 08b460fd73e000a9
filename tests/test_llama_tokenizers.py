"""The real LLaMA-1/2 SentencePiece tokenizer (a BOS token, "▁" word prefixes, byte fallback)
and Llama 3's byte-level BPE, each driving a randomly initialised Llama model (GQA) of its
own vocabulary size: label token ids, label, demonstration and last positions asserted token
by token in the package's padded batch, on prompts with labels and demonstrations of several
tokens; a BOS token moving every position by one; and the decomposition and increases exact
against the model's forward pass and the naive full-vocabulary increase, as for the other models."""
from __future__ import annotations

import copy

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.core.attribution import Readout, heads_position_increase
from icl_helpers.core.decompose import Decomposition, decompose
from icl_helpers.core.locate import locate
from icl_helpers.data.positions import LabelPositions, find_positions, from_encoding
from icl_helpers.data.prompts import label_token_ids, prompt_label_ids
from tests.conftest import close, exact, logprob_scale, small_model, vocab_tokenizer
from tests.test_attribution import naive_increase
from tests.test_positions import PROMPTS

TEXTS = [p.text for p in PROMPTS]
# Each label word's tokens after " :"; the package's label id is the first one.
LABEL_TOKENS = {
    "llama-spm": {"foo": ["▁foo"], "bar": ["▁bar"], "xylophonist": ["▁x", "y", "lo", "phon", "ist"], "zq": ["▁z", "q"]},
    "llama-bpe": {"foo": ["Ġfoo"], "bar": ["Ġbar"], "xylophonist": ["Ġxy", "lo", "phon", "ist"], "zq": ["Ġz", "q"]},
}
COLON = {"llama-spm": "▁:", "llama-bpe": "Ġ:"}
# PROMPTS[1:3]'s labels, demonstrations [start, stop) and last positions.
EXACT = {
    # <s> ▁hi pp op ot am us ▁: ▁bar ▁or ang ut an ▁: ▁bar ▁New ▁Zealand ▁: ▁foo ▁Peru ▁:
    # <s> ▁What ▁does ▁a ▁def ibr ill ator ▁do ▁? ▁: ▁x y lo phon ist ▁Why ... ▁: ▁z q ▁Which ... ▁: ▁z q ▁Is ... ▁:
    "llama-spm": ([[8, 14, 18, -1], [11, 25, 39, 48]],
                  [[[1, 7], [9, 13], [15, 17], [-1, -1]], [[1, 10], [16, 24], [30, 38], [41, 47]]], [20, 55]),
    # hip pop ot amus Ġ: Ġbar Ġorang utan Ġ: Ġbar ĠNew ĠZealand Ġ: Ġfoo ĠPeru Ġ:
    # What Ġdoes Ġa Ġdef ibr illator Ġdo Ġ? Ġ: Ġxy lo phon ist ĠWhy ... Ġ: Ġz q ĠWhich ... Ġ: Ġz q ĠIs ... Ġ:
    "llama-bpe": ([[5, 9, 13, -1], [9, 22, 35, 44]],
                  [[[0, 4], [6, 8], [10, 12], [-1, -1]], [[0, 8], [13, 21], [26, 34], [37, 43]]], [15, 51]),
}


@pytest.fixture(scope="module", params=["llama-spm", "llama-bpe"])
def llama(request) -> ICLModel:
    tokenizer = vocab_tokenizer(request.param)
    return ICLModel(small_model("llama-gqa", vocab_size=len(tokenizer)), tokenizer, name=request.param)


@pytest.fixture(scope="module")
def dec(llama) -> Decomposition:
    return decompose(llama, TEXTS, record=["pattern", "values"])


@pytest.fixture(scope="module")
def pos(llama) -> LabelPositions:
    """As a prompt set finds them: unpadded, from the tokenizer alone."""
    return find_positions(llama.tokenizer, PROMPTS)


def test_model_has_the_tokenizers_vocabulary(llama, dec):
    assert llama.arch.W_U().shape[0] == len(llama.tokenizer) == {"llama-spm": 32000, "llama-bpe": 128257}[llama.name]
    assert dec.logits.shape == (len(TEXTS), len(llama.tokenizer))


def test_label_id_is_the_first_token_of_the_label(llama):
    tokenizer, expected = llama.tokenizer, LABEL_TOKENS[llama.name]
    for word, tokens in expected.items():
        assert tokenizer.convert_ids_to_tokens(tokenizer(" " + word, add_special_tokens=False)["input_ids"]) == tokens
    ids = label_token_ids(tokenizer, list(expected)).tolist()
    assert tokenizer.convert_ids_to_tokens(ids) == [tokens[0] for tokens in expected.values()]
    true, false = prompt_label_ids(tokenizer, PROMPTS)
    assert tokenizer.convert_ids_to_tokens(true.tolist()) == [expected[w][0] for w in ("foo", "foo", "xylophonist", "foo")]
    assert tokenizer.convert_ids_to_tokens(false.tolist()) == [expected[w][0] for w in ("bar", "bar", "zq", "bar")]


def test_exact_positions_in_the_models_batch(llama):
    labels, demos, last = EXACT[llama.name]
    enc = llama.encode(TEXTS[1:3], offsets=True)
    got = from_encoding(PROMPTS[1:3], enc)
    assert (got.labels.tolist(), got.demos.tolist(), got.last.tolist()) == (labels, demos, last)


def test_labels_demonstrations_and_last_token_by_token(llama, dec, pos):
    """In the decomposition's padded batch, at the positions found from the tokenizer alone."""
    tokenizer, expected, colon = llama.tokenizer, LABEL_TOKENS[llama.name], COLON[llama.name]
    assert dec.last.tolist() == pos.last.tolist()
    for b, p in enumerate(PROMPTS):
        tokens = tokenizer.convert_ids_to_tokens(dec.input_ids[b].tolist())
        words = [p.true_label if t else p.false_label for t in p.is_true]
        for k, word in enumerate(words):
            at = int(pos.labels[b, k])
            assert tokens[at : at + len(expected[word])] == expected[word]
            assert tokens[at - 1] == colon and int(pos.demos[b, k, 1]) == at - 1  # a demonstration stops at its " :"
        assert dec.input_ids[b, pos.labels[b, : len(words)]].tolist() == label_token_ids(tokenizer, words).tolist()
        last = int(pos.last[b])
        assert tokens[last] == colon and tokens[last + 1 :] == [tokenizer.pad_token] * (len(tokens) - last - 1)
        bos = llama.name == "llama-spm"  # only SentencePiece's file adds a BOS token
        assert (tokens[0] == "<s>") == bos and int(pos.demos[b, 0, 0]) == int(bos)  # the first demonstration follows it


def test_a_bos_token_moves_every_position_by_one(llama):
    """LLaMA-1/2 start with <s>; Llama 3 with <|begin_of_text|> as its hub tokenizer does
    (this vocabulary file adds none): the same positions with and without, one further on."""
    toggled = copy.deepcopy(llama.tokenizer)
    toggled.add_bos_token = not toggled.add_bos_token
    models = {m.tokenizer.add_bos_token: m for m in (llama, ICLModel(llama.model, toggled))}
    enc = {bos: m.encode(TEXTS, offsets=True) for bos, m in models.items()}
    with_bos, without = (from_encoding(PROMPTS, enc[bos]) for bos in (True, False))
    assert enc[True]["input_ids"][:, 0].tolist() == [llama.tokenizer.bos_token_id] * len(TEXTS)
    assert torch.equal(enc[True]["input_ids"][:, 1:], enc[False]["input_ids"])
    shifted = lambda t: torch.where(t >= 0, t + 1, -1)  # noqa: E731
    assert torch.equal(with_bos.labels, shifted(without.labels)) and torch.equal(with_bos.demos, shifted(without.demos))
    assert torch.equal(with_bos.last, without.last + 1) and torch.equal(with_bos.is_true, without.is_true)


def test_decomposition_rebuilds_the_forward_pass(llama, dec):
    with torch.no_grad():
        hf = llama.model(**llama.encode(TEXTS), output_hidden_states=True)
    rows, arch = torch.arange(len(TEXTS)), llama.arch
    for l in range(arch.n_layers):
        exact(dec.resid[:, l], hf.hidden_states[l][rows, dec.last])  # the same forward pass of the same batch
    terms = dec.resid[:, 0].abs() + dec.attn.abs().sum(1) + dec.ffn.abs().sum(1)  # the scales: sums of |terms|
    close(dec.resid[:, 0] + dec.attn.sum(1) + dec.ffn.sum(1), dec.resid[:, -1], scale=float(terms.max()))
    close(dec.logits, hf.logits[rows, dec.last])  # the unembedding of B rows, not of B * T
    close(Readout(arch).logits(dec.resid[:, -1], dec.scale), dec.logits)
    heads = dec.heads()
    close(heads.sum(2), dec.attn, scale=float(heads.abs().sum(2).max()))  # no output bias in Llama
    for l in range(arch.n_layers):
        for h in range(arch.n_heads):
            terms = dec.position_terms(l, h)
            close(terms.sum(1), heads[:, l, h], scale=float(terms.abs().sum(1).max()))


def test_increases_toward_the_true_label_equal_the_naive_ones(llama, dec, pos):
    """Every layer and head, at the last position and at each label position, for the
    true label's first token."""
    arch, r = llama.arch, Readout(llama.arch)
    true, _ = prompt_label_ids(llama.tokenizer, PROMPTS)
    located = locate(llama, TEXTS, targets=true, progress=False)
    heads, at = dec.heads(), logprob_scale(dec)
    for l in range(arch.n_layers):
        close(located.head[:, l], naive_increase(r, dec.resid[:, l], heads[:, l], true, dec.scale), scale=at)
        close(located.attn[:, l], naive_increase(r, dec.resid[:, l], dec.attn[:, l, None], true, dec.scale)[:, 0], scale=at)
        close(located.ffn[:, l], naive_increase(r, dec.mid[:, l], dec.ffn[:, l, None], true, dec.scale)[:, 0], scale=at)
    every = [(l, h) for l in range(arch.n_layers) for h in range(arch.n_heads)]
    labels = pos.labels.clamp(min=0)
    got = heads_position_increase(r, dec, every, labels, true)  # [B, S, D]
    rows = torch.arange(len(TEXTS))[:, None]
    for s, (l, h) in enumerate(every):
        want = naive_increase(r, dec.resid[:, l], dec.position_terms(l, h)[rows, labels], true, dec.scale)
        close(got[:, s], want, scale=at)
