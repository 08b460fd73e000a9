"""Cross-check against TransformerLens: same weights, same per-head outputs and attention rows."""
from __future__ import annotations

import copy

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers.core.decompose import decompose
from tests.conftest import PROMPTS, close, small_model

bridge_module = pytest.importorskip("transformer_lens.model_bridge", reason="transformer_lens is not installed")


@pytest.fixture(scope="module")
def both(gpt2_tokenizer):
    """Our ICLModel and a TransformerLens bridge around a copy of the same random GPT-2.

    The bridge is built from the in-memory model (hf_model=...), so it needs no hub access;
    it rewires the model it is given, hence the copy (in eval mode: no dropout).
    """
    hf = small_model("gpt2")
    bridge = bridge_module.TransformerBridge.boot_transformers(
        "gpt2", hf_model=copy.deepcopy(hf).eval(), tokenizer=copy.deepcopy(gpt2_tokenizer), device="cpu"
    )
    bridge.requires_grad_(False)
    return ICLModel(hf, gpt2_tokenizer), bridge


@pytest.fixture(scope="module")
def runs(both):
    """(our decomposition, TransformerLens's cache) for the same right-padded token batch."""
    ours, bridge = both
    enc = ours.encode(PROMPTS)  # token ids, so the bridge prepends no BOS of its own
    with torch.no_grad():
        _, cache = bridge.run_with_cache(enc["input_ids"], attention_mask=enc["attention_mask"])
    return decompose(ours, PROMPTS, record=["pattern"]), cache


def test_head_outputs_at_last_position_match(runs):
    dec, cache = runs
    L, H = dec.z.shape[1:3]
    rows = torch.arange(len(PROMPTS))
    heads = cache.stack_head_results(layer=-1)[:, rows, dec.last]  # [L*H, B, d], layer-major
    close(dec.heads(), heads.view(L, H, len(PROMPTS), -1).permute(2, 0, 1, 3))


def test_attention_rows_and_final_scale_match(runs):
    dec, cache = runs
    rows = torch.arange(len(PROMPTS))
    pattern = torch.stack([cache["pattern", l][rows, :, dec.last] for l in range(dec.z.shape[1])], 1)
    close(dec.pattern, pattern)  # [B, L, H, T]
    close(dec.scale, cache["ln_final.hook_scale"][rows, dec.last, 0])
