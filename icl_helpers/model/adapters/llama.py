"""The Llama family (Llama 1-3, Mistral, Qwen2, SmolLM): RMSNorm, RoPE, grouped-query attention."""
from __future__ import annotations

from transformers.models.llama.modeling_llama import rotate_half

from ..weights import weight
from .base import Angles, Arch, Branch, RotaryKeys, Site, turned

# The norms that end the residual branches in Gemma 2, Gemma 3 and OLMo 2, and the sites read after them
POST_NORMS: dict[Branch, str] = {"attn": "post_attention_layernorm", "mlp": "post_feedforward_layernorm"}
POST_NORM_SITES = {branch: Site(path, "post") for branch, path in POST_NORMS.items()}


class LlamaArch(Arch):
    """Llama family (Llama 1-3, Mistral, Qwen2, SmolLM): RMSNorm, RoPE, GQA, optional biases."""

    family = "llama"
    norm_kind = "rms"
    blocks_path = "model.layers"
    final_norm_path = "model.norm"
    rotary_path = "model.rotary_emb"
    k_norm_path: str | None = None  # a norm of the keys before the rotation (in the attention module), if any
    rotate = staticmethod(rotate_half)  # how RoPE pairs the dimensions it turns: i with i + r/2
    sites = {
        "resid": Site("", "pre"),
        "attn": Site("self_attn", "post", output=0),
        "pattern": Site("self_attn", "post", output=1),
        "z": Site("self_attn.o_proj", "pre"),
        "mlp": Site("mlp", "post"),
        "neurons": Site("mlp.down_proj", "pre"),
        "queries": Site("self_attn.q_proj", "post"),
        "values": Site("self_attn.v_proj", "post"),
        "key_input": Site("self_attn.k_proj", "pre"),
    }

    def _W_O(self, layer):
        w = weight(self.attn_out(layer))  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def _W_out(self, layer):
        return weight(self.module("neurons", layer)).T

    def W_K(self, layer):
        """A key norm's gain folded in: key = k_norm(normed_input @ W_K_raw.T) = normed_input @ W_K.T / rms,
        its gain [dh] (one for every head) or [H_kv*dh] (one for each head's own)."""
        w = weight(self.attn(layer).k_proj).reshape(self.n_kv_heads, self.d_head, self.d_model)  # [H_kv, dh, d]
        if self.k_norm_path is None:
            return w
        gain = self.norm_gain(self.attn(layer).get_submodule(self.k_norm_path))
        return w * gain.view(-1, self.d_head, 1)

    def angles(self, layer: int) -> Angles:
        """The RoPE of `layer` (one for every layer), without its attention scaling (the
        keys it rotates already carry it once)."""
        rope = self.model.get_submodule(self.rotary_path)
        scale = getattr(rope, "attention_scaling", 1.0)
        return lambda x, positions: tuple(t / scale for t in rope(x, positions))

    def rotated(self, layer, x, offset):
        """`turned` by the layer's RoPE, in the family's pairing."""
        return turned(x, offset, self.angles(layer), self.rotate)

    def position_free_keys(self, layer, target):
        """`RotaryKeys`: every key rotated on to position target [B]."""
        return RotaryKeys(self.angles(layer), target, self.rotate)


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"llama": LlamaArch, "mistral": LlamaArch, "qwen2": LlamaArch}
