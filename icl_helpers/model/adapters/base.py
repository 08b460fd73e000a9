"""The adapters' common ground: activation sites, keys without positions, and the base `Arch`.

One small adapter per family: the paths of its blocks and final norm, a table of
activation *sites* (site name -> submodule of a block, pre- or post-hook, which part of
the hooked tensor), in the spirit of pyvene's per-family mappings and TransformerLens's
hook names, views of the weights as per-head pieces, its norms' gain, and its keys
without position information. `core.decompose` records any site by name; nothing else in
the package knows which family it is looking at: a new family is one adapter module in
this folder, which declares the model types it adapts (`FAMILIES`) for the registry to find.
Shapes: L layers, H query heads, H_kv key/value heads, d model width, dh head width,
d_ffn FFN width, V vocabulary, B batch, T tokens.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Literal

import torch
from torch import nn
from transformers.models.llama.modeling_llama import rotate_half

from ..hooks import Hook
from ..weights import weight

Branch = Literal["attn", "mlp"]  # the two residual branches of a block


@dataclass(frozen=True)
class Site:
    """Where one activation lives in a block.

    path: submodule of the block ("" is the block itself); hook: "pre" reads the module's
    first input, "post" its output; output: the element of a tuple output to read;
    columns: (start, stop), the slice of the last dimension that holds one part of a fused
    projection (GPT-2's c_attn, Phi-3's qkv_proj), taken in each of `groups` equal blocks
    where the projection interleaves its parts by head (GPT-NeoX's [H, 3, dh]);
    heads_first: the tensor is [B, n, T, dh] (heads before positions), read as [B, T, n*dh];
    heads_last: the tensor is [B, T, n, dh] (a per-head norm's output), read as [B, T, n*dh].
    """

    path: str
    hook: Literal["pre", "post"]
    output: int | None = None
    columns: tuple[int, int] | None = None
    groups: int = 1
    heads_first: bool = False
    heads_last: bool = False

    def read(self, args: tuple, out: object = None) -> torch.Tensor:
        """The site's tensor from a hook's (args) or (args, output)."""
        t = args[0] if self.hook == "pre" else out
        if self.output is not None:
            t = t[self.output]
        if self.heads_first:
            t = t.transpose(1, 2)
        if self.heads_first or self.heads_last:
            t = t.flatten(2)
        return self.select(t)

    def select(self, t: torch.Tensor) -> torch.Tensor:
        """[..., n] -> [..., groups * (stop - start)]: the site's part of the last dimension."""
        if self.columns is None:
            return t
        start, stop = self.columns
        return t.unflatten(-1, (self.groups, -1))[..., start:stop].flatten(-2)


class PositionFreeKeys:
    """The keys of one attention layer without their position term.

    Called on the keys the attention computed, [B, H_kv, T, dh] (rotated, where the family
    rotates them), it returns position-free keys of the same shape; `hooks()` are the
    forward hooks it needs while it is in use. One that needs none computes them from the keys
    alone, so from kept keys and values too (a one-token pass, `Intervention.position_free_labels`).
    """

    def hooks(self) -> list[Hook]:
        return []

    def __call__(self, key: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def softcap_(logits: torch.Tensor, cap: float | None) -> torch.Tensor:
    """cap * tanh(logits / cap) computed in place, as the model caps its logits; logits as
    they are where cap is None."""
    return logits if cap is None else logits.div_(cap).tanh_().mul_(cap)


# (x, positions [B, T]) -> (cos, sin) [B, T, dh] of a RoPE at those positions, without any attention scaling
Angles = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class RotaryKeys(PositionFreeKeys):
    """RoPE keys (already rotated to their own positions) rotated on to `target` [B]: every
    key then carries one common position, so scores no longer depend on where a key is.

    Only the first r dimensions of each key turn, r the width of the angles' cos (partial
    rotary: GPT-NeoX, GPT-J, some Phi-3); the rest carry no position and pass unchanged.
    rotate: how the family pairs the turning dimensions (`rotate_half`: i with i + r/2;
    GPT-J's `rotate_every_two`: 2i with 2i + 1), matching the layout of the angles.
    """

    def __init__(self, angles: Angles, target: torch.Tensor,
                 rotate: Callable[[torch.Tensor], torch.Tensor] = rotate_half):
        self.angles = angles
        self.target = target
        self.rotate = rotate

    def __call__(self, key: torch.Tensor) -> torch.Tensor:
        T = key.shape[2]
        offset = self.target.to(key.device)[:, None] - torch.arange(T, device=key.device)  # [B, T]
        return turned(key, offset, self.angles, self.rotate)


def turned(x: torch.Tensor, offset: torch.Tensor, angles: Angles,
           rotate: Callable[[torch.Tensor], torch.Tensor] = rotate_half) -> torch.Tensor:
    """x [B, n, P, dh] turned as a RoPE turns a vector at position offset [B, P] (any integer,
    negative ones turning back): only its first r dimensions, r the width of the angles' cos, in
    the pairing `rotate` gives (`RotaryKeys`)."""
    cos, sin = angles(x, offset)
    cos, sin = cos[:, None], sin[:, None]
    r = cos.shape[-1]
    turning = x[..., :r]
    return torch.cat([turning * cos + rotate(turning) * sin, x[..., r:]], -1)


class Arch:
    """Base adapter: model sizes, module paths and sites, weight views, norms, keys.

    Sites every family names: resid (block input x_l [B, T, d]), attn (ATTN_l, what the
    attention branch adds to the residual [B, T, d]), pattern (attention weights [B, H, T,
    T], read from the attention module), z (input to the attention output projection, [B,
    T, H*dh], head-major), mlp (FFN_l, what the FFN branch adds [B, T, d]), neurons (FFN
    activations [B, T, d_ffn]), queries (the queries dotted with the keys, before any
    rotation, [B, T, H*dh]), values ([B, T, H_kv*dh]), key_input (what the key projection reads:
    the layer's normed input, [B, T, d]). Sites that slice a fused projection
    depend on the sizes: such an adapter completes its table in `__init__`.

    Where a norm ends a residual branch (`branch_norm_paths`: Gemma 2 and 3, OLMo 2), ATTN_l
    and FFN_l are read after it, and a head's share of ATTN_l is attn_scale * z_h @ W_O[h]:
    the norm's gain is folded into W_O (and b_O, W_out, b_out), its 1/sigma at the position
    is recorded per prompt and layer (`Decomposition.attn_scale`, `ffn_scale`), frozen as
    the final norm's sigma is. Without such a norm the scale is 1.

    `final_softcap` (Gemma 2): the model's logits are cap * tanh(z / cap) of the linear
    readout z; None where the family's logits are linear.
    """

    family: str  # the family's name: "gpt2", "llama", "qwen3", "gemma3"... (what a claim about one family checks)
    norm_kind: str  # "layer" (mean-centred) or "rms"
    blocks_path: str
    final_norm_path: str
    sites: dict[str, Site]
    branch_norm_paths: dict[Branch, str] = {}  # branch -> path in a block of the norm that ends it
    # Attention and FFN read the same block input x_l (GPT-NeoX's parallel residual): the
    # model sums x_{l+1} = (FFN_l + ATTN_l) + x_l, equal to m_l + FFN_l to rounding, not to the
    # bit. Nothing else changes: every branch is read where the model computes it, and the
    # FFN's increase stays defined on the residual, I(FFN_l | x_l + ATTN_l).
    parallel: bool = False
    final_softcap: float | None = None  # the cap of the final logits' soft-capping, if any
    block_returns_tuple: bool = False  # a block returns (x_{l+1}, ...) rather than x_{l+1} alone (GPT-J)

    def __init__(self, model: nn.Module):
        self.model = model
        cfg = self.config = model.config.get_text_config()
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
        """The attention module; its output is (its projection's output [B,T,d], weights [B,H,T,T] or None)."""
        return self.module("pattern", layer)

    def attn_out(self, layer: int) -> nn.Module:
        """Output projection; its input is z, [B, T, H*dh] in head-major order."""
        return self.module("z", layer)

    def final_norm(self) -> nn.Module:
        return self.model.get_submodule(self.final_norm_path)

    def branch_norm(self, branch: Branch, layer: int) -> nn.Module | None:
        """The norm that ends `branch` of block `layer` (inside it, before the residual sum), or None."""
        path = self.branch_norm_paths.get(branch)
        return None if path is None else self.blocks()[layer].get_submodule(path)

    # --- norms ------------------------------------------------------------------------
    def norm_gain(self, norm: nn.Module) -> torch.Tensor:
        """[d] the gain gamma a norm of this family multiplies by."""
        return weight(norm)

    def norm_weight(self) -> torch.Tensor:
        """[d] final-norm gain gamma."""
        return self.norm_gain(self.final_norm())

    def norm_eps(self, norm: nn.Module | None = None) -> float:
        """The eps of `norm` (default: the final norm)."""
        norm = self.final_norm() if norm is None else norm
        return float(getattr(norm, "eps", None) or getattr(norm, "variance_epsilon"))

    def sigma(self, x: torch.Tensor, norm: nn.Module | None = None) -> torch.Tensor:
        """[...] the sigma `norm` (default: the final norm) divides x [..., d] by: the std
        (LayerNorm) or the root mean square (RMSNorm), its eps included; in float32."""
        x, eps = x.float(), self.norm_eps(norm)
        if self.norm_kind == "layer":
            return (x.var(-1, unbiased=False) + eps).sqrt()
        return (x.pow(2).mean(-1) + eps).sqrt()

    def _gained(self, w: torch.Tensor | None, branch: Branch, layer: int) -> torch.Tensor | None:
        """w [..., d] times the gain of the norm that ends `branch` of `layer`; w itself (a
        view of the model's weights) without such a norm, or if w is None."""
        norm = self.branch_norm(branch, layer)
        return w if w is None or norm is None else w * self.norm_gain(norm)

    # --- weights (views of the model's parameters) ------------------------------------
    def W_O(self, layer: int) -> torch.Tensor:
        """[H, dh, d]: head h's share of ATTN_l is attn_scale * z_h @ W_O[h] (attn_scale is 1
        without a norm ending the attention branch; that norm's gain is folded in here)."""
        return self._gained(self._W_O(layer), "attn", layer)

    def _W_O(self, layer: int) -> torch.Tensor:
        """[H, dh, d]: the output projection split by head: it maps z_h to z_h @ W_O[h]."""
        raise NotImplementedError

    def b_O(self, layer: int) -> torch.Tensor | None:
        """[d] or None: the output projection's bias, the attention branch norm's gain folded in."""
        return self._gained(weight(self.attn_out(layer), "bias"), "attn", layer)

    def W_O_stack(self, like: torch.Tensor) -> torch.Tensor:
        """[L, H, dh, d] every layer's W_O, on `like`'s device and dtype."""
        return torch.stack([self.W_O(l).to(like) for l in range(self.n_layers)])

    def W_out(self, layer: int) -> torch.Tensor:
        """[d_ffn, d]: neuron k's share of FFN_l is ffn_scale * a_k * W_out[k] (the gain of
        a norm ending the FFN branch folded in)."""
        return self._gained(self._W_out(layer), "mlp", layer)

    def _W_out(self, layer: int) -> torch.Tensor:
        """[d_ffn, d]: the FFN's output projection, one row a neuron."""
        raise NotImplementedError

    def b_out(self, layer: int) -> torch.Tensor | None:
        """[d] or None: the FFN output projection's bias, the FFN branch norm's gain folded in."""
        return self._gained(weight(self.module("neurons", layer), "bias"), "mlp", layer)

    def W_K(self, layer: int) -> torch.Tensor:
        """[H_kv, dh, d]: key = normed_input @ W_K[g].T (+ bias), before any rotation."""
        raise NotImplementedError

    def W_U(self) -> torch.Tensor:
        """[V, d] unembedding."""
        return weight(self.model.get_output_embeddings())

    def b_U(self) -> torch.Tensor | None:
        """[V] or None: the unembedding's bias (GPT-J's lm_head), the same for every input;
        the frozen-norm readout leaves it out, as it does a final LayerNorm's W_U beta."""
        return weight(self.model.get_output_embeddings(), "bias")

    def kv_head(self, head: int) -> int:
        """The key/value head that query head `head` reads (grouped-query attention)."""
        return head // (self.n_heads // self.n_kv_heads)

    # --- attention edits -------------------------------------------------------------
    @contextmanager
    def edited_attention(self, modules: list[nn.Module], implementation: str) -> Iterator[None]:
        """While active, the attention `modules` compute their scores, weights and output
        through `implementation`, an attention function registered by that name with
        transformers' `AttentionInterface`. Here: the model's attention implementation switched
        to it (every layer; it is plain eager attention where no edit acts); a family whose
        attention does not go through those functions routes `modules` to it its own way."""
        previous = self.model.config._attn_implementation
        self.model.set_attn_implementation(implementation)
        try:
            yield
        finally:
            self.model.set_attn_implementation(previous)

    # --- positions --------------------------------------------------------------------
    def rotated(self, layer: int, x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        """x [B, n, P, dh], queries or keys as projected (after any query or key norm, before any
        rotation), turned by offset [B, P] positions as `layer` turns them (`turned`): a query
        turned by its distance to a key, q R(t - p), dots with the key unturned as the model's
        turned pair do, (q R(t)) . (k R(p)) (up to the square of a RoPE's attention scaling, 1 in
        plain RoPE). x itself where the family puts no position into queries and keys."""
        raise NotImplementedError

    def position_free_keys(self, layer: int, target: torch.Tensor) -> PositionFreeKeys:
        """The keys of `layer` without their position term (`PositionFreeKeys`); target [B]:
        the one position every key is given, where the family encodes positions in the keys."""
        raise NotImplementedError
