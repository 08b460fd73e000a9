"""Token positions from character offsets, for four real tokenizers: GPT-2, the bundled
SmolLM2's, LLaMA-1/2's SentencePiece (a BOS token, "▁" prefixes, byte fallback) and Llama 3's."""
import pytest
import torch
from transformers import AutoTokenizer

from icl_helpers import ICLModel, UsageError
from icl_helpers.data.positions import find_positions, from_encoding, from_offsets
from icl_helpers.data.prompts import Record, Variant, build_prompt, label_token_ids, parse_prompt
from icl_helpers.model.offline import offline_model_dir
from icl_helpers.paths import BUNDLED
from tests.conftest import small_model, vocab_tokenizer

RECORD = Record("one", "number", "sentiment", ("eight", "two"), ("love", "like"))
MULTI = Record(
    "Is it worth it ?", "DESC", "HUM",
    ("What does a defibrillator do ?", "Why is the sky blue , really ?"),
    ("Who wrote Hamlet and King Lear ?", "Which New Zealand runner won ?"),
)
PROMPTS = [
    build_prompt(RECORD),
    build_prompt(Record("Peru", "country", "animal", ("New Zealand", "Sri Lanka"), ("hippopotamus", "orangutan")), Variant(imbalanced=True)),
    build_prompt(MULTI, Variant(order="ttff", labels=("xylophonist", "zq"))),  # labels of several tokens
    build_prompt(Record("naïve ☃", "sentiment", "number", ("crème brûlée", "😀 great"), ("seven", "12"))),  # byte tokens
]


def as_lists(pos):
    return [t.tolist() for t in (pos.labels, pos.is_true, pos.demos, pos.last)]


@pytest.fixture(scope="module")
def smollm_tokenizer():
    return AutoTokenizer.from_pretrained(offline_model_dir(BUNDLED))


@pytest.fixture(scope="module", params=["gpt2", "smollm2", "llama-spm", "llama-bpe"])
def tokenizer(request, smollm_tokenizer):
    return smollm_tokenizer if request.param == "smollm2" else vocab_tokenizer(request.param)


def test_positions_point_at_labels_demonstrations_and_last(tokenizer):
    pos = find_positions(tokenizer, PROMPTS)
    for b, p in enumerate(PROMPTS):
        ids = tokenizer(p.text)["input_ids"]
        K = len(p.labels)
        words = [p.text[s:e] for s, e in p.labels]
        assert [ids[i] for i in pos.labels[b, :K]] == label_token_ids(tokenizer, words).tolist()
        assert pos.is_true[b, :K].tolist() == list(p.is_true)
        assert [tokenizer.decode(ids[s:e]).strip() for s, e in pos.demos[b, :K].tolist()] == [p.text[s:e] for s, e in p.demos]
        assert (pos.labels[b, K:] == -1).all() and (pos.demos[b, K:] == -1).all() and not pos.is_true[b, K:].any()
        assert int(pos.last[b]) == len(ids) - 1 and tokenizer.convert_ids_to_tokens(ids[-1]) in ("Ġ:", "▁:")  # " :" (GPT-2 bytes or SentencePiece)
    assert len(tokenizer(" xylophonist")["input_ids"]) > 1  # a label of several tokens
    assert (pos.demos[..., 1] - pos.demos[..., 0]).max() > 5  # demonstrations of many tokens


def test_exact_positions_gpt2(gpt2_tokenizer):
    pos = find_positions(gpt2_tokenizer, PROMPTS[:2])
    # love : bar like : bar eight : foo two : foo one :   /   h ipp opot amus : bar or ang utan : bar New Zealand : foo Peru :
    assert pos.labels.tolist() == [[2, 5, 8, 11], [5, 10, 14, -1]]
    assert pos.demos.tolist() == [[[0, 1], [3, 4], [6, 7], [9, 10]], [[0, 4], [6, 9], [11, 13], [-1, -1]]]
    assert pos.last.tolist() == [13, 16]
    true, false = pos.class_masks(17).unbind(1)
    assert torch.equal(true, pos.mask(17, True))
    assert [m.nonzero().flatten().tolist() for m in false] == [[2, 5], [5, 10]]
    assert pos.last_label.tolist() == [11, 14]
    second = pos[1:]
    assert second.labels.tolist() == [[5, 10, 14, -1]] and second.last.tolist() == [16] and len(second) == 1
    expected = torch.zeros(2, 17, dtype=torch.bool)
    expected[0, [8, 11]] = expected[1, 14] = True
    assert torch.equal(pos.mask(17, True), expected)


def test_label_token_is_the_word_after_a_space(tokenizer):
    """The label id is the word's token as it follows " :" in a prompt: "Ġfoo" in byte-level
    BPE (not the bare "foo"), "▁foo" in SentencePiece (which marks every word so)."""
    pos = find_positions(tokenizer, PROMPTS[:1])
    ids = tokenizer(PROMPTS[0].text)["input_ids"]
    in_prompt = {ids[i] for i in pos.labels[pos.chosen(True)].tolist()}
    assert in_prompt == set(label_token_ids(tokenizer, ["foo"]).tolist())
    assert tokenizer.convert_ids_to_tokens(sorted(in_prompt)) in (["Ġfoo"], ["▁foo"])


def test_offset_conventions_and_special_tokens(gpt2_tokenizer):
    """Offsets that leave out a token's leading space, and a BOS token, give the same labels."""
    enc = gpt2_tokenizer([p.text for p in PROMPTS[:1]], return_offsets_mapping=True, return_tensors="pt")
    offsets, mask = enc["offset_mapping"], enc["attention_mask"]
    base = from_offsets(PROMPTS[:1], offsets, mask)
    text = PROMPTS[0].text
    trimmed = offsets.clone()
    trimmed[0, :, 0] += torch.tensor([text[s] == " " for s, _ in offsets[0].tolist()])
    assert as_lists(from_offsets(PROMPTS[:1], trimmed, mask)) == as_lists(base)
    with_bos = from_offsets(PROMPTS[:1], torch.cat([torch.zeros(1, 1, 2, dtype=torch.long), offsets], 1), torch.cat([mask[:, :1], mask], 1))
    assert with_bos.labels.tolist() == (base.labels + 1).tolist() and with_bos.demos.tolist() == (base.demos + 1).tolist()
    assert with_bos.last.tolist() == (base.last + 1).tolist()


def test_batched_encode_matches(gpt2_tokenizer):
    m = ICLModel(small_model("gpt2"), gpt2_tokenizer)
    texts = [p.text for p in PROMPTS]
    pos = from_encoding(PROMPTS, m.encode(texts, offsets=True))
    assert as_lists(pos) == as_lists(find_positions(gpt2_tokenizer, PROMPTS))
    with pytest.raises(UsageError, match=r"^The encoding has no character offsets: encode with offsets=True\.$"):
        from_encoding(PROMPTS, m.encode(texts))
    with pytest.raises(UsageError, match=r"^2 prompts but an encoding of 4: encode exactly these prompts\.$"):
        from_encoding(PROMPTS[:2], m.encode(texts, offsets=True))


def test_parsed_prompt_positions(smollm_tokenizer):
    parsed = parse_prompt("love : bar like : bar New Zealand : foo two : foo one :")
    pos = find_positions(smollm_tokenizer, [parsed])
    assert pos.labels.tolist() == [[2, 5, 9, 12]] and pos.demos[0, 2].tolist() == [6, 8] and pos.last.tolist() == [14]
