"""Loading, and one clear error for each kind of bad input."""
from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM

from icl_helpers import ICLModel, UsageError, load_model
from icl_helpers.core.decompose import decompose
from icl_helpers.core.locate import locate


def test_local_directory_round_trip(small, tmp_path):
    small.model.save_pretrained(tmp_path)
    small.tokenizer.save_pretrained(tmp_path)
    again = load_model(str(tmp_path), device="cpu")
    assert again.model.config._attn_implementation == "eager"
    prompts = ["a : foo b : bar c :"]
    torch.testing.assert_close(decompose(again, prompts).logits, decompose(small, prompts).logits)


def test_unreachable_hub_names_the_offline_model(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # no retries
    with pytest.raises(UsageError, match="smollm2-135m"):
        load_model("no-such-org/no-such-model", device="cpu")


def test_unsupported_architecture(gpt2_tokenizer):
    bert = BertForMaskedLM(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
    with pytest.raises(UsageError, match="not supported.*gpt2.*llama"):
        ICLModel(bert, gpt2_tokenizer)


def test_prompt_longer_than_context(small):
    with pytest.raises(UsageError, match=r"Prompt 1 has \d+ tokens, more than .* context of 64"):
        decompose(small, ["short", "word " * 100])


def test_empty_inputs(small):
    with pytest.raises(UsageError, match="No prompts"):
        decompose(small, [])
    with pytest.raises(UsageError, match="No prompts"):
        locate(small, [])
    with pytest.raises(UsageError, match="Prompt 1 is empty"):
        decompose(small, ["a", ""])


def test_missing_recording_says_what_to_record(small):
    dec = decompose(small, ["a : foo"])
    with pytest.raises(ValueError, match=r"record=\['pattern'\]"):
        dec.position_terms(0, 0)
