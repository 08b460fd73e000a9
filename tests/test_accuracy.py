"""Label token ids and batched accuracy at each prompt's last real position."""
import pytest
import torch

from icl_helpers import UsageError
from icl_helpers.data.prompts import Variant, build_prompts, label_token_ids, prompt_label_ids
from icl_helpers.data.words import load_word_records
from icl_helpers.studies.accuracy import Accuracy, accuracy
from tests.conftest import close, vocab_tokenizer


@pytest.mark.parametrize("name, ids, tokens", [
    ("gpt2", [22944, 2318, 2124, 22944], ["Ġfoo", "Ġbar", "Ġx", "Ġfoo"]),
    ("llama-spm", [7953, 2594, 921, 7953], ["▁foo", "▁bar", "▁x", "▁foo"]),  # no BOS, no lone "▁"
    ("llama-bpe", [15586, 3703, 31884, 15586], ["Ġfoo", "Ġbar", "Ġxy", "Ġfoo"]),
])
def test_label_token_ids(name, ids, tokens):
    tokenizer = vocab_tokenizer(name)
    got = label_token_ids(tokenizer, ["foo", "bar", "xylophonist", "foo"]).tolist()
    assert (got, tokenizer.convert_ids_to_tokens(got)) == (ids, tokens)


def test_measures():
    acc = Accuracy(
        true_logit=torch.tensor([2.0, 1.0, 0.5, 3.0]),
        false_logit=torch.tensor([1.0, 1.0, 0.7, 0.0]),
        predictions=torch.tensor([7, 7, 9, 8]),
        true_id=torch.tensor([7, 7, 7, 7]),
    )
    assert (acc.ranked, acc.top1) == (0.25 * 2, 0.5)  # a tie does not count as ranked


@pytest.fixture(scope="module")
def word_prompts():
    records = load_word_records("sentiment_number")[:10]  # both directions, lengths 11 to 18 tokens
    return build_prompts(records), build_prompts(records, Variant(labels=("bar", "foo")))


def test_batched_matches_one_prompt_at_a_time(smollm, word_prompts):
    prompts = word_prompts[0]
    true, false = prompt_label_ids(smollm.tokenizer, prompts)
    assert (true.unique().tolist(), false.unique().tolist()) == ([29856], [2753])  # " foo", " bar"
    texts = [p.text for p in prompts]
    assert len({len(smollm.tokenizer(t)["input_ids"]) for t in texts}) > 1  # right padding is exercised
    acc = accuracy(smollm, texts, true, false, batch_size=4)
    with torch.no_grad():
        single = torch.stack([smollm.model(**smollm.encode([t])).logits[0, -1] for t in texts])  # [N, V]
    close(acc.true_logit, single.gather(1, true[:, None])[:, 0])
    close(acc.false_logit, single.gather(1, false[:, None])[:, 0])
    assert torch.equal(acc.predictions, single.argmax(-1))
    assert (acc.ranked, acc.top1) == (1.0, 1.0)


def test_swapped_labels(smollm, word_prompts):
    prompts = word_prompts[1]
    acc = accuracy(smollm, [p.text for p in prompts], *prompt_label_ids(smollm.tokenizer, prompts), batch_size=16)
    assert acc.true_id.unique().tolist() == [2753] and acc.ranked == 1.0 and acc.top1 == 0.9


def test_bad_input(smollm):
    with pytest.raises(UsageError, match=r"share their first token"):
        accuracy(smollm, ["a : foo b :"], 5, torch.tensor([5]))
    with pytest.raises(UsageError, match=r"^No prompts given"):
        accuracy(smollm, [], 1, 2)
    with pytest.raises(UsageError, match=r"^batch_size must be at least 1, not 0\.$"):
        accuracy(smollm, ["a : foo b :"], 1, 2, batch_size=0)
