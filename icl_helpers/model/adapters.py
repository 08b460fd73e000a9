"""Where each architecture family keeps its weights and activations.

One small adapter per family: the paths of its blocks and final norm, a table of
activation *sites* (site name -> submodule of a block, pre- or post-hook, which part of
the hooked tensor), in the spirit of pyvene's per-family mappings and TransformerLens's
hook names, views of the weights as per-head pieces, and its keys without position
information. `core.decompose` records any site by name; nothing else in the package knows
which family it is looking at: a new family is one adapter class here (and its tests).
Shapes: L layers, H query heads, H_kv key/value heads, d model width, dh head width,
d_mlp FFN width, V vocabulary, B batch, T tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import torch
from torch import nn
from transformers.models.llama.modeling_llama import rotate_half

from ..errors import UsageError
from .hooks import Hook


@dataclass(frozen=True)
class Site:
    """Where one activation lives in a block.

    path: submodule of the block ("" is the block itself); hook: "pre" reads the module's
    first input, "post" its output; output: the element of a tuple output to read; part:
    (i, n), the i-th of n equal slices of the last dimension (a fused projection).
    """

    path: str
    hook: Literal["pre", "post"]
    output: int | None = None
    part: tuple[int, int] = (0, 1)

    def read(self, args: tuple, out: object = None) -> torch.Tensor:
        """The site's tensor from a hook's (args) or (args, output)."""
        t = args[0] if self.hook == "pre" else out
        if self.output is not None:
            t = t[self.output]
        i, n = self.part
        if n > 1:
            width = t.shape[-1] // n
            t = t[..., i * width : (i + 1) * width]
        return t


class PositionFreeKeys:
    """The keys of one attention layer without their position term.

    Called on the keys the attention computed, [B, H_kv, T, dh] (rotated, where the family
    rotates them), it returns position-free keys of the same shape; `hooks()` are the
    forward hooks it needs while it is in use.
    """

    def hooks(self) -> list[Hook]:
        return []

    def __call__(self, key: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


# (x, positions [B, T]) -> (cos, sin) [B, T, dh] of a RoPE at those positions, without any attention scaling
Angles = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class RotaryKeys(PositionFreeKeys):
    """RoPE keys (already rotated to their own positions) rotated on to `target` [B]: every
    key then carries one common position, so scores no longer depend on where a key is."""

    def __init__(self, angles: Angles, target: torch.Tensor):
        self.angles = angles
        self.target = target

    def __call__(self, key: torch.Tensor) -> torch.Tensor:
        T = key.shape[2]
        offset = self.target.to(key.device)[:, None] - torch.arange(T, device=key.device)  # [B, T]
        cos, sin = self.angles(key, offset)
        cos, sin = cos[:, None], sin[:, None]
        return key * cos + rotate_half(key) * sin


class Arch:
    """Base adapter: model sizes, module paths and sites, and weight views.

    Sites every family names: resid (block input x_l [B, T, d]), attn (ATTN_l [B, T, d]),
    pattern (attention weights [B, H, T, T]), z (input to the attention output projection,
    [B, T, H*dh], head-major), mlp (FFN_l [B, T, d]), neurons (FFN activations [B, T,
    d_mlp]), queries (before any rotation, [B, T, H*dh]), values ([B, T, H_kv*dh]).
    """

    family: str  # the family's name: "gpt2", "llama" (what a claim about one family checks)
    norm_kind: str  # "layer" (mean-centred) or "rms"
    blocks_path: str
    final_norm_path: str
    sites: dict[str, Site]

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
        return self.model.get_submodule(self.blocks_path)

    def module(self, site: str, layer: int) -> nn.Module:
        """The module that holds `site` in block `layer`."""
        return self.blocks()[layer].get_submodule(self.sites[site].path)

    def attn(self, layer: int) -> nn.Module:
        """The attention module; its output is (ATTN_l [B,T,d], weights [B,H,T,T] or None)."""
        return self.module("attn", layer)

    def attn_out(self, layer: int) -> nn.Module:
        """Output projection; its input is z, [B, T, H*dh] in head-major order."""
        return self.module("z", layer)

    def final_norm(self) -> nn.Module:
        return self.model.get_submodule(self.final_norm_path)

    # --- weights (views of the model's parameters) ------------------------------------
    def W_O(self, layer: int) -> torch.Tensor:
        """[H, dh, d]: head h writes z_h @ W_O[h]."""
        raise NotImplementedError

    def b_O(self, layer: int) -> torch.Tensor | None:
        """[d] or None."""
        return self.attn_out(layer).bias

    def W_O_stack(self, like: torch.Tensor) -> torch.Tensor:
        """[L, H, dh, d] every layer's W_O, on `like`'s device and dtype."""
        return torch.stack([self.W_O(l).to(like) for l in range(self.n_layers)])

    def W_O_heads(self, heads: list[tuple[int, int]], like: torch.Tensor) -> torch.Tensor:
        """[S, dh, d] W_O^{l,h} of each listed (layer, head), on `like`'s device and dtype."""
        return torch.stack([self.W_O(l)[h] for l, h in heads]).to(like)

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

    # --- positions --------------------------------------------------------------------
    def position_free_keys(self, layer: int, target: torch.Tensor) -> PositionFreeKeys:
        """The keys of `layer` without their position term (`PositionFreeKeys`); target [B]:
        the one position every key is given, where the family encodes positions in the keys."""
        raise NotImplementedError


class GPT2Arch(Arch):
    """GPT-2: fused Conv1D c_attn (weights stored [in, out]), LayerNorm, absolute positions."""

    family = "gpt2"
    norm_kind = "layer"
    blocks_path = "transformer.h"
    final_norm_path = "transformer.ln_f"
    sites = {
        "resid": Site("", "pre"),
        "attn": Site("attn", "post", output=0),
        "pattern": Site("attn", "post", output=1),
        "z": Site("attn.c_proj", "pre"),
        "mlp": Site("mlp", "post"),
        "neurons": Site("mlp.c_proj", "pre"),
        "queries": Site("attn.c_attn", "post", part=(0, 3)),
        "values": Site("attn.c_attn", "post", part=(2, 3)),
    }

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.n_ctx = model.config.n_positions

    def W_O(self, layer):
        return self.attn_out(layer).weight.view(self.n_heads, self.d_head, self.d_model)

    def W_out(self, layer):
        return self.module("neurons", layer).weight

    def W_K(self, layer):
        w = self.attn(layer).c_attn.weight[:, self.d_model : 2 * self.d_model]  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def position_free_keys(self, layer, target):
        """`AbsoluteKeys`: target is not used."""
        return AbsoluteKeys(self, layer)


class AbsoluteKeys(PositionFreeKeys):
    """GPT-2 keys recomputed from the layer input minus its position embedding,
    x_p - wpe[p], through ln_1 and the key projection **(choice)**: position information
    that earlier layers wrote into x_p stays.

    `x` [B, T, d], the layer input, is set by a pre-hook on the block (`hooks`).
    """

    def __init__(self, arch: GPT2Arch, layer: int):
        self.block = arch.blocks()[layer]
        self.wpe = arch.model.transformer.wpe
        self.d = arch.d_model
        self.x: torch.Tensor | None = None

    def hooks(self) -> list[Hook]:
        return [(self.block, "pre", lambda mod, args: setattr(self, "x", args[0]))]

    def __call__(self, key: torch.Tensor) -> torch.Tensor:
        B, H, T, dh = key.shape
        x = self.x - self.wpe.weight[:T]
        k = self.block.attn.c_attn(self.block.ln_1(x))[..., self.d : 2 * self.d]
        return k.view(B, T, H, dh).transpose(1, 2)


class LlamaArch(Arch):
    """Llama family (Llama 1-3, Mistral, Qwen2, SmolLM): RMSNorm, RoPE, GQA, optional biases."""

    family = "llama"
    norm_kind = "rms"
    blocks_path = "model.layers"
    final_norm_path = "model.norm"
    rotary_path = "model.rotary_emb"
    sites = {
        "resid": Site("", "pre"),
        "attn": Site("self_attn", "post", output=0),
        "pattern": Site("self_attn", "post", output=1),
        "z": Site("self_attn.o_proj", "pre"),
        "mlp": Site("mlp", "post"),
        "neurons": Site("mlp.down_proj", "pre"),
        "queries": Site("self_attn.q_proj", "post"),
        "values": Site("self_attn.v_proj", "post"),
    }

    def W_O(self, layer):
        w = self.attn_out(layer).weight  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def W_out(self, layer):
        return self.module("neurons", layer).weight.T

    def W_K(self, layer):
        w = self.attn(layer).k_proj.weight  # [H_kv*dh, d]
        return w.reshape(self.n_kv_heads, self.d_head, self.d_model)

    def angles(self, layer: int) -> Angles:
        """The RoPE of `layer` (one for every layer), without its attention scaling (the
        keys it rotates already carry it once)."""
        rope = self.model.get_submodule(self.rotary_path)
        scale = getattr(rope, "attention_scaling", 1.0)
        return lambda x, positions: tuple(t / scale for t in rope(x, positions))

    def position_free_keys(self, layer, target):
        """`RotaryKeys`: every key rotated on to position target [B]."""
        return RotaryKeys(self.angles(layer), target)


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
            f"{', '.join(sorted(ARCHITECTURES))}. Add an adapter in icl_helpers/model/adapters.py."
        )
    return ARCHITECTURES[model_type](model)
