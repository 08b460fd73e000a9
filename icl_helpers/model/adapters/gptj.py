"""GPT-J: parallel blocks under one LayerNorm, rotary in interleaved pairs, its own attention code."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.gptj.modeling_gptj import rotate_every_two

from .base import Angles, Site
from .llama import LlamaArch

BASE = 10000.0  # GPT-J's rotary base, fixed in its code (create_sinusoidal_positions), not in its config


class GPTJArch(LlamaArch):
    """GPT-J (model_type "gptj": GPT-J-6B and its fine-tunes). Differences from Llama, and how
    they are treated:

    * Parallel blocks, always: one LayerNorm, ln_1, feeds both the attention and the FFN, and
      x_{l+1} = ATTN_l + FFN_l + x_l. Every branch is read where the model computes it; the
      FFN's increase stays defined on the residual, I(FFN_l | x_l + ATTN_l) (see `Arch.parallel`).
    * LayerNorms with biases; q_proj, k_proj, v_proj and out_proj without biases (b_O is None),
      fc_in and fc_out with them. The final norm's bias adds W_U beta to the logits, and the
      untied lm_head its bias b_U (`b_U`): both the same for every input, both left out of the
      frozen-norm readout bs, as GPT-2's W_U beta is (core/attribution.py).
    * Rotary embedding on the first rotary_dim dimensions of each head, in interleaved pairs
      (rotate_every_two: 2i turns with 2i + 1, at frequency BASE**(-2i / rotary_dim)): the
      position-free keys turn those pairs, with angles from the frequencies themselves.
    * Its attention is its own `_attn`, not one of transformers' attention functions: the
      label edits replace the edited modules' `_attn` while they act (`edited_attention`).
    * A block returns (x_{l+1}, weights), not x_{l+1} alone (`block_returns_tuple`).
    """

    family = "gptj"
    norm_kind = "layer"
    blocks_path = "transformer.h"
    final_norm_path = "transformer.ln_f"
    parallel = True
    block_returns_tuple = True
    rotate = staticmethod(rotate_every_two)  # RoPE turns 2i with 2i + 1 (rotated, position-free keys)
    sites = {
        "resid": Site("", "pre"),
        "attn": Site("attn", "post", output=0),
        "pattern": Site("attn", "post", output=1),
        "z": Site("attn.out_proj", "pre"),
        "mlp": Site("mlp", "post"),
        "neurons": Site("mlp.fc_out", "pre"),
        "queries": Site("attn.q_proj", "post"),
        "values": Site("attn.v_proj", "post"),
        "key_input": Site("attn.k_proj", "pre"),
    }

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.n_kv_heads = self.n_heads  # no grouped-query attention, whatever a config's num_key_value_heads says
        # rotary_dim None turns whole heads (the model's own pass needs one head then)
        self.rotary_dim: int = self.config.rotary_dim or self.d_head

    def angles(self, layer: int) -> Angles:
        """(cos, sin) [B, T, rotary_dim] at any positions [B, T] (negative ones too), in GPT-J's
        pair layout: each pair's angle twice, as apply_rotary_pos_emb repeats its table's halves.
        The frequencies are computed as create_sinusoidal_positions computes them."""
        r = self.rotary_dim
        inv_freq = 1.0 / (BASE ** (torch.arange(0, r, 2, dtype=torch.int64) / r))  # [r/2]

        def at(x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            angle = (positions.float()[..., None] * inv_freq.to(positions.device)).repeat_interleave(2, -1)
            return angle.cos().to(x.dtype), angle.sin().to(x.dtype)

        return at

    @contextmanager
    def edited_attention(self, modules: list[nn.Module], implementation: str) -> Iterator[None]:
        """While active, each of `modules` (GPTJAttention) computes its `_attn` through the
        registered attention function `implementation` (`_gptj_attn`); its previous `_attn`
        is put back afterwards, so edits nest."""
        function = ALL_ATTENTION_FUNCTIONS[implementation]
        previous = [module.__dict__.get("_attn") for module in modules]  # an outer edit's, or None
        for module in modules:
            module._attn = _gptj_attn(module, function)
        try:
            yield
        finally:
            for module, before in zip(modules, previous):
                if before is None:
                    del module._attn
                else:
                    module._attn = before


def _gptj_attn(module: nn.Module, function: Callable) -> Callable:
    """GPTJAttention._attn through an attention function of transformers' signature: queries and
    keys in float32 as the model takes them, its scaling 1 / sqrt(dh) (the model divides by
    sqrt(dh): the same to the bit where that is a power of two, as in GPT-J-6B's dh = 256), its
    additive mask and its dropout. query, key, value [B, H, T, dh] -> (output [B, H, T, dh],
    weights [B, H, T, T]), in the values' dtype, as `_attn` returns them."""

    def attn(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
             attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        out, weights = function(module, query.float(), key.float(), value.float(), attention_mask,
                                scaling=1 / module.scale_attn, dropout=module.attn_dropout.p)
        return out.transpose(1, 2).to(value.dtype), weights.to(value.dtype)

    return attn


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"gptj": GPTJArch}
