"""Shared fixtures and helpers: small randomly initialised models of each family, the
bundled model, the prompts most tests use, and `close` for float comparisons."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from icl_helpers import ICLModel, load_model

SHARED = Path(os.environ.get("ICL_SHARED_DIR", Path(__file__).resolve().parents[1].parent / "shared"))
GPT2_TOKENIZER = SHARED / "tokenizers" / "gpt2"
PROMPTS = [
    "love : bar like : bar eight : foo two : foo one :",
    "cat : foo",
    "The quick brown fox jumps over the lazy dog : bar hello world : foo",
]


def close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-5) -> None:
    """Equal to `rel` of the larger tensor's scale (sums of many terms lose a few ulps)."""
    atol = rel * max(1.0, float(b.abs().max()))
    torch.testing.assert_close(a, b, rtol=0, atol=atol)


@pytest.fixture(scope="session")
def gpt2_tokenizer():
    return GPT2TokenizerFast.from_pretrained(GPT2_TOKENIZER)


def _randomise(model: torch.nn.Module, seed: int) -> torch.nn.Module:
    """Every parameter drawn at random (HF zero-initialises biases and sets norm gains to 1)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_gain = name.endswith("weight") and ("norm" in name or "ln_" in name)
            p.copy_(torch.randn(p.shape, generator=g) * 0.1 + float(is_gain))
    return model


def small_model(kind: str) -> torch.nn.Module:
    """A 3-layer model of width 64 with the GPT-2 vocabulary, every weight random."""
    torch.manual_seed(0)
    common = dict(vocab_size=50257, num_hidden_layers=3, hidden_size=64, intermediate_size=128,
                  max_position_embeddings=64, num_attention_heads=4)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_layer=3, n_embd=64, n_head=4, n_positions=64))
    elif kind == "llama-gqa":
        model = LlamaForCausalLM(LlamaConfig(num_key_value_heads=2, **common))
    elif kind == "llama-bias":
        model = LlamaForCausalLM(LlamaConfig(num_key_value_heads=4, attention_bias=True, mlp_bias=True, **common))
    elif kind == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(num_key_value_heads=2, tie_word_embeddings=False, **common))
    return _randomise(model, seed=len(kind))


KINDS = ["gpt2", "llama-gqa", "llama-bias", "qwen2"]


@pytest.fixture(scope="session", params=KINDS)
def small(request, gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model(request.param), gpt2_tokenizer, name=request.param)


@pytest.fixture(scope="session")
def smollm() -> ICLModel:
    return load_model("smollm2-135m", device="cpu")
