"""Where each architecture family keeps its weights and activations.

One small adapter per family names the modules to hook and slices the weights into
per-head pieces; nothing else in the package knows which family it is looking at.
Shapes: L layers, H query heads, H_kv key/value heads, d model width, dh head width,
d_mlp FFN width, V vocabulary, B batch, T tokens.
"""
from __future__ import annotations

import torch
from torch import nn

from .errors import UsageError


class Arch:
    """Base adapter: model sizes plus the family-specific accessors below."""

    norm_kind: str  # "layer" (mean-centred) or "rms"

    def __init__(self, model: nn.Module):
        self.model = model
        cfg = model.config
        self.n_layers: int = cfg.num_hidden_layers
        self.n_heads: int = cfg.num_attention_heads
        self.n_kv_heads: int = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.d_model: int = cfg.hidden_size
        self.d_head: int = getattr(cfg, "head_dim", None) or self.d_model // self.n_heads
        self.n_ctx: int = cfg.max_position_embeddings

    # --- modules -------------------------------------------------------------------
    def blocks(self) -> nn.ModuleList:
        raise NotImplementedError

    def attn(self, layer: int) -> nn.Module:
        """The attention module; its output is (ATTN_l [B,T,d], weights [B,H,T,T] or None)."""
        raise NotImplementedError

    def attn_out(self, layer: int) -> nn.Module:
        """Output projection; its input is z, [B, T, H*dh] in head-major order."""
        raise NotImplementedError

    def mlp(self, layer: int) -> nn.Module:
        """The FFN module; its output is FFN_l, [B, T, d]."""
        raise NotImplementedError

    def mlp_out(self, layer: int) -> nn.Module:
        """FFN output projection; its input is the neuron activations, [B, T, d_mlp]."""
        raise NotImplementedError

    def final_norm(self) -> nn.Module:
        raise NotImplementedError

    def query_tap(self, layer: int) -> tuple[nn.Module, slice]:
        """Module whose output holds the pre-rotation queries, and their slice of its last dim."""
        raise NotImplementedError

    def value_tap(self, layer: int) -> tuple[nn.Module, slice]:
        """Module whose output holds the values, and their slice of its last dim."""
        raise NotImplementedError

    # --- weights (views of the model's parameters) ------------------------------------
    def W_O(self, layer: int) -> torch.Tensor:
        """[H, dh, d]: head h writes z_h @ W_O[h]."""
        raise NotImplementedError

    def b_O(self, layer: int) -> torch.Tensor | None:
        """[d] or None."""
        raise NotImplementedError

    def W_O_stack(self, like: torch.Tensor) -> torch.Tensor:
        """[L, H, dh, d] every layer's W_O, on `like`'s device and dtype."""
        return torch.stack([self.W_O(l).to(like) for l in range(self.n_layers)])

    def W_out(self, layer: int) -> torch.Tensor:
        """[d_mlp, d]: neuron k writes a_k * W_out[k]."""
        raise NotImplementedError

    def W_K(self, layer: int) -> torch.Tensor:
        """[H_kv, dh, d]: key = normed_input @ W_K[g].T (+ bias), before any rotation."""
        raise NotImplementedError

    def W_U(self) -> torch.Tensor:
        """[V, d] unembedding."""
        return self.model.get_output_embeddings().weight

    def norm_weight(self) -> torch.Tensor:
        """[d] final-norm gain gamma."""
        return self.final_norm().weight

    def norm_eps(self) -> float:
        norm = self.final_norm()
        return float(getattr(norm, "eps", None) or getattr(norm, "variance_epsilon"))

    def kv_head(self, head: int) -> int:
        """The key/value head that query head `head` reads (grouped-query attention)."""
        return head // (self.n_heads // self.n_kv_heads)


class GPT2Arch(Arch):
    """GPT-2: fused Conv1D c_attn (weights stored [in, out]), LayerNorm, absolute positions."""

    norm_kind = "layer"

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.n_ctx = model.config.n_positions

    def blocks(self):
        return self.model.transformer.h

    def attn(self, layer):
        return self.blocks()[layer].attn

    def attn_out(self, layer):
        return self.attn(layer).c_proj

    def mlp(self, layer):
        return self.blocks()[layer].mlp

    def mlp_out(self, layer):
        return self.mlp(layer).c_proj

    def final_norm(self):
        return self.model.transformer.ln_f

    def query_tap(self, layer):
        return self.attn(layer).c_attn, slice(0, self.d_model)

    def value_tap(self, layer):
        return self.attn(layer).c_attn, slice(2 * self.d_model, 3 * self.d_model)

    def W_O(self, layer):
        return self.attn_out(layer).weight.view(self.n_heads, self.d_head, self.d_model)

    def b_O(self, layer):
        return self.attn_out(layer).bias

    def W_out(self, layer):
        return self.mlp_out(layer).weight

    def W_K(self, layer):
        w = self.attn(layer).c_attn.weight[:, self.d_model : 2 * self.d_model]  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def position_embedding(self) -> nn.Embedding:
        return self.model.transformer.wpe


class LlamaArch(Arch):
    """Llama family (Llama 1-3, Mistral, Qwen2, SmolLM): RMSNorm, RoPE, GQA, optional biases."""

    norm_kind = "rms"

    def blocks(self):
        return self.model.model.layers

    def attn(self, layer):
        return self.blocks()[layer].self_attn

    def attn_out(self, layer):
        return self.attn(layer).o_proj

    def mlp(self, layer):
        return self.blocks()[layer].mlp

    def mlp_out(self, layer):
        return self.mlp(layer).down_proj

    def final_norm(self):
        return self.model.model.norm

    def query_tap(self, layer):
        return self.attn(layer).q_proj, slice(None)

    def value_tap(self, layer):
        return self.attn(layer).v_proj, slice(None)

    def W_O(self, layer):
        w = self.attn_out(layer).weight  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def b_O(self, layer):
        return self.attn_out(layer).bias

    def W_out(self, layer):
        return self.mlp_out(layer).weight.T

    def W_K(self, layer):
        w = self.attn(layer).k_proj.weight  # [H_kv*dh, d]
        return w.reshape(self.n_kv_heads, self.d_head, self.d_model)


ARCHITECTURES: dict[str, type[Arch]] = {
    "gpt2": GPT2Arch,
    "llama": LlamaArch,
    "mistral": LlamaArch,
    "qwen2": LlamaArch,
}


def arch_for(model: nn.Module) -> Arch:
    """The adapter for `model`, or a UsageError naming the supported families."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    if model_type not in ARCHITECTURES:
        raise UsageError(
            f"Model type {model_type!r} is not supported; supported families: "
            f"{', '.join(sorted(ARCHITECTURES))}. Add an adapter in icl_helpers/adapters.py."
        )
    return ARCHITECTURES[model_type](model)
