"""Where each architecture family keeps its weights and activations.

One small adapter per family: the paths of its blocks and final norm, a table of
activation *sites* (site name -> submodule of a block, pre- or post-hook, which part of
the hooked tensor), in the spirit of pyvene's per-family mappings and TransformerLens's
hook names, views of the weights as per-head pieces, its norms' gain, and its keys
without position information. `core.decompose` records any site by name; nothing else in
the package knows which family it is looking at: a new family is one adapter class here
(and its tests).
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

Branch = Literal["attn", "mlp"]  # the two residual branches of a block


@dataclass(frozen=True)
class Site:
    """Where one activation lives in a block.

    path: submodule of the block ("" is the block itself); hook: "pre" reads the module's
    first input, "post" its output; output: the element of a tuple output to read; part:
    (i, n), the i-th of n equal slices of the last dimension (a fused projection);
    heads_first: the tensor is [B, n, T, dh] (heads before positions), read as [B, T, n*dh].
    """

    path: str
    hook: Literal["pre", "post"]
    output: int | None = None
    part: tuple[int, int] = (0, 1)
    heads_first: bool = False

    def read(self, args: tuple, out: object = None) -> torch.Tensor:
        """The site's tensor from a hook's (args) or (args, output)."""
        t = args[0] if self.hook == "pre" else out
        if self.output is not None:
            t = t[self.output]
        if self.heads_first:
            t = t.transpose(1, 2).flatten(2)
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
    """Base adapter: model sizes, module paths and sites, weight views, norms, keys.

    Sites every family names: resid (block input x_l [B, T, d]), attn (ATTN_l, what the
    attention branch adds to the residual [B, T, d]), pattern (attention weights [B, H, T,
    T], read from the attention module), z (input to the attention output projection, [B,
    T, H*dh], head-major), mlp (FFN_l, what the FFN branch adds [B, T, d]), neurons (FFN
    activations [B, T, d_mlp]), queries (the queries dotted with the keys, before any
    rotation, [B, T, H*dh]), values ([B, T, H_kv*dh]).

    Where a norm ends a residual branch (`branch_norm_paths`, Gemma's post-norms), ATTN_l
    and FFN_l are read after it, and a head's share of ATTN_l is attn_scale * z_h @ W_O[h]:
    the norm's gain is folded into W_O (and b_O, W_out, b_out), its 1/sigma at the position
    is recorded per prompt and layer (`Decomposition.attn_scale`, `mlp_scale`), frozen as
    the final norm's sigma is. Without such a norm the scale is 1.
    """

    family: str  # the family's name: "gpt2", "llama", "gemma3" (what a claim about one family checks)
    norm_kind: str  # "layer" (mean-centred) or "rms"
    blocks_path: str
    final_norm_path: str
    sites: dict[str, Site]
    branch_norm_paths: dict[Branch, str] = {}  # branch -> path in a block of the norm that ends it

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
        return norm.weight

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
        return self._gained(self.attn_out(layer).bias, "attn", layer)

    def W_O_stack(self, like: torch.Tensor) -> torch.Tensor:
        """[L, H, dh, d] every layer's W_O, on `like`'s device and dtype."""
        return torch.stack([self.W_O(l).to(like) for l in range(self.n_layers)])

    def W_O_heads(self, heads: list[tuple[int, int]], like: torch.Tensor) -> torch.Tensor:
        """[S, dh, d] W_O^{l,h} of each listed (layer, head), on `like`'s device and dtype."""
        return torch.stack([self.W_O(l)[h] for l, h in heads]).to(like)

    def W_out(self, layer: int) -> torch.Tensor:
        """[d_mlp, d]: neuron k's share of FFN_l is mlp_scale * a_k * W_out[k] (the gain of
        a norm ending the FFN branch folded in)."""
        return self._gained(self._W_out(layer), "mlp", layer)

    def _W_out(self, layer: int) -> torch.Tensor:
        """[d_mlp, d]: the FFN's output projection, one row a neuron."""
        raise NotImplementedError

    def b_out(self, layer: int) -> torch.Tensor | None:
        """[d] or None: the FFN output projection's bias, the FFN branch norm's gain folded in."""
        return self._gained(self.module("neurons", layer).bias, "mlp", layer)

    def W_K(self, layer: int) -> torch.Tensor:
        """[H_kv, dh, d]: key = normed_input @ W_K[g].T (+ bias), before any rotation."""
        raise NotImplementedError

    def W_U(self) -> torch.Tensor:
        """[V, d] unembedding."""
        return self.model.get_output_embeddings().weight

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

    def _W_O(self, layer):
        return self.attn_out(layer).weight.view(self.n_heads, self.d_head, self.d_model)

    def _W_out(self, layer):
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

    def _W_O(self, layer):
        w = self.attn_out(layer).weight  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def _W_out(self, layer):
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


class Gemma3Arch(LlamaArch):
    """Gemma 3 (text; model_type "gemma3_text"). Differences from Llama, and how they are treated:

    * The embedding is scaled by sqrt(d) inside the embedding module: x_0 is the scaled
      embedding, the input of block 0 (as recorded; nothing else to do).
    * RMSNorm multiplies by (1 + w) (`Gemma3RMSNorm`): `norm_gain` is 1 + weight, so the
      readout's frozen final norm, and every folded gain below, use (1 + w).
    * A norm ends each residual branch (post_attention_layernorm after the attention's
      output projection, post_feedforward_layernorm after the FFN): ATTN_l and FFN_l are
      read after those norms, what the block adds to the residual. A head's share of
      ATTN_l is its pre-norm output z_h @ W_O^h times the norm's (1 + w) (folded into
      `W_O`, `b_O`) and its 1/sigma at the position (recorded per prompt and layer as
      `Decomposition.attn_scale`, frozen as the final norm's sigma is), so the heads sum
      exactly to ATTN_l. sigma comes from the sum of all heads' outputs: a head's share,
      and its increase, are conditional on the other heads through sigma. Neurons alike
      (`W_out`, `b_out`, `mlp_scale`). Ablating a head in the model changes sigma: the
      model's own response, which `ablated` keeps.
    * Query and key norms (q_norm, k_norm, RMS over dh with (1 + w)) before the rotation:
      the recorded queries are after q_norm, the vectors dotted with the (rotated) keys;
      `W_K` folds in k_norm's (1 + w), so a query maps into the key-input space as
      q @ W_K (`Decomposition.query_in_key_space`) up to each key's own positive
      1/rms, which is not frozen into it. Position-free keys rotate the model's keys
      (k_norm applied) on to one position with the layer's own RoPE (local and global
      layers have different bases).
    * Sliding-window layers (`layer_types`, `sliding_window`; 512 tokens in the released
      models): the model's own masks act in every recorded pass and intervention, so a
      prompt longer than the window decomposes exactly; the last position gives no weight
      to keys outside a sliding layer's window, and the label edits of `core.interventions`
      leave such keys out.
    * Attention scores are scaled by query_pre_attn_scalar**-0.5, which the model passes
      to the attention function as `scaling` (the edited attention uses it).
    * Tied embeddings and a large vocabulary (262,144 tokens): the readout is streamed
      over vocabulary chunks as for every family.
    * Logit soft-capping (final or attention) would make the readout non-linear: a model
      that sets it, or one with bidirectional attention, is refused in one line.
    """

    family = "gemma3"
    sites = {
        **LlamaArch.sites,
        "attn": Site("post_attention_layernorm", "post"),
        "mlp": Site("post_feedforward_layernorm", "post"),
        "queries": Site("self_attn.q_norm", "post", heads_first=True),
    }
    branch_norm_paths = {"attn": "post_attention_layernorm", "mlp": "post_feedforward_layernorm"}

    def __init__(self, model: nn.Module):
        super().__init__(model)
        cfg = self.config
        for setting in ("final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention"):
            if getattr(cfg, setting, None):
                raise UsageError(f"This Gemma 3 model sets {setting}={getattr(cfg, setting)!r}: the decomposition needs a causal "
                                 "model with linear logits; use a Gemma 3 checkpoint without it.")

    def norm_gain(self, norm):
        """1 + weight (`Gemma3RMSNorm`)."""
        return 1 + norm.weight

    def W_K(self, layer):
        """k_norm's gain folded in: key = k_norm(normed_input @ W_K_raw.T) = normed_input @ W_K.T / rms."""
        gain = self.norm_gain(self.attn(layer).k_norm)  # [dh]
        return super().W_K(layer) * gain[None, :, None]

    def angles(self, layer):
        rope, kind = self.model.get_submodule(self.rotary_path), self.config.layer_types[layer]
        scale = getattr(rope, f"{kind}_attention_scaling")
        return lambda x, positions: tuple(t / scale for t in rope(x, positions, kind))


class Gemma3MultimodalArch(Gemma3Arch):
    """Gemma 3 with its vision tower (model_type "gemma3"), run on text only: the text model
    lives under model.language_model, its sizes in config.text_config."""

    blocks_path = "model.language_model.layers"
    final_norm_path = "model.language_model.norm"
    rotary_path = "model.language_model.rotary_emb"


ARCHITECTURES: dict[str, type[Arch]] = {
    "gpt2": GPT2Arch,
    "llama": LlamaArch,
    "mistral": LlamaArch,
    "qwen2": LlamaArch,
    "gemma3_text": Gemma3Arch,
    "gemma3": Gemma3MultimodalArch,
}


def adapter_class(model_type: str | None) -> type[Arch]:
    """The adapter class for a config's model_type (known before any weights load), or a
    UsageError naming the supported families and the file a new one goes in."""
    if model_type not in ARCHITECTURES:
        raise UsageError(
            f"Model type {model_type!r} is not supported; supported families: "
            f"{', '.join(sorted(ARCHITECTURES))}. Add an adapter in icl_helpers/model/adapters.py."
        )
    return ARCHITECTURES[model_type]


def arch_for(model: nn.Module) -> Arch:
    """The adapter for `model`, or a UsageError naming the supported families."""
    return adapter_class(getattr(getattr(model, "config", None), "model_type", None))(model)
