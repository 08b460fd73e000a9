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
    return ICLModel(hf, gpt2_tokenizer), bridge_of("gpt2", hf, gpt2_tokenizer)


def bridge_of(name: str, hf: torch.nn.Module, tokenizer):
    """A TransformerLens bridge around a copy of `hf`, TransformerLens's adapter picked by the
    model class a hub config would name."""
    twin = copy.deepcopy(hf).eval()
    twin.config.architectures = [type(hf).__name__]
    bridge = bridge_module.TransformerBridge.boot_transformers(name, hf_model=twin, tokenizer=copy.deepcopy(tokenizer),
                                                               device="cpu")
    return bridge.requires_grad_(False)


def run_both(ours: ICLModel, bridge) -> tuple:
    """(our decomposition, TransformerLens's logits and cache) for the same right-padded token batch."""
    enc = ours.encode(PROMPTS)  # token ids, so the bridge prepends no BOS of its own
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(enc["input_ids"], attention_mask=enc["attention_mask"])
    return decompose(ours, PROMPTS, record=["pattern"]), logits, cache


@pytest.fixture(scope="module")
def runs(both):
    """(our decomposition, TransformerLens's cache) of the GPT-2."""
    dec, _, cache = run_both(*both)
    return dec, cache


def head_results(dec, cache) -> torch.Tensor:
    """[B, L, H, d]: TransformerLens's per-head outputs at each prompt's last position."""
    L, H = dec.z.shape[1:3]
    heads = cache.stack_head_results(layer=-1)[:, torch.arange(len(PROMPTS)), dec.last]  # [L*H, B, d], layer-major
    return heads.view(L, H, len(PROMPTS), -1).permute(2, 0, 1, 3)


def test_head_outputs_at_last_position_match(runs):
    dec, cache = runs
    close(dec.heads(), head_results(dec, cache))


@pytest.mark.parametrize("kind", ["qwen3", "olmo2", "gemma", "gemma2"])
def test_the_families_with_norms_match(gpt2_tokenizer, kind):
    """Qwen 3, OLMo 2, Gemma 1 and 2: the same logits (Gemma 2's soft-capped), attention rows
    and heads. TransformerLens's heads are before a norm that ends the attention branch (OLMo 2,
    Gemma 2); ours after it, so divided by its gain and its frozen 1/sigma here."""
    ours = ICLModel(small_model(kind), gpt2_tokenizer)
    dec, logits, cache = run_both(ours, bridge_of(kind, ours.model, gpt2_tokenizer))
    rows, arch = torch.arange(len(PROMPTS)), ours.arch
    close(dec.logits, logits[rows, dec.last])
    close(dec.pattern, torch.stack([cache["pattern", l][rows, :, dec.last] for l in range(arch.n_layers)], 1))
    heads = dec.heads() / dec.attn_scale[..., None, None]
    if arch.branch_norm("attn", 0) is not None:
        heads = heads / torch.stack([arch.norm_gain(arch.branch_norm("attn", l)) for l in range(arch.n_layers)])[:, None]
    close(heads, head_results(dec, cache))


def test_attention_rows_and_final_scale_match(runs):
    dec, cache = runs
    rows = torch.arange(len(PROMPTS))
    pattern = torch.stack([cache["pattern", l][rows, :, dec.last] for l in range(dec.z.shape[1])], 1)
    close(dec.pattern, pattern)  # [B, L, H, T]
    close(dec.scale, cache["ln_final.hook_scale"][rows, dec.last, 0])
