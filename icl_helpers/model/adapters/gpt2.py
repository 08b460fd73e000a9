"""GPT-2: fused Conv1D c_attn, LayerNorm, biases, learned absolute positions."""
from __future__ import annotations

import torch
from torch import nn

from ..hooks import Hook
from ..weights import weight
from .base import Arch, PositionFreeKeys, Site


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
        "key_input": Site("attn.c_attn", "pre"),
    }

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.n_ctx = model.config.n_positions
        d = self.d_model
        self.sites = {**self.sites, "queries": Site("attn.c_attn", "post", columns=(0, d)),
                      "values": Site("attn.c_attn", "post", columns=(2 * d, 3 * d))}

    def _W_O(self, layer):
        return weight(self.attn_out(layer)).view(self.n_heads, self.d_head, self.d_model)

    def _W_out(self, layer):
        return weight(self.module("neurons", layer))

    def W_K(self, layer):
        w = weight(self.attn(layer).c_attn)[:, self.d_model : 2 * self.d_model]  # [d, H*dh]
        return w.T.reshape(self.n_heads, self.d_head, self.d_model)

    def rotated(self, layer, x, offset):
        """x itself: the positions are in the residual stream (wpe), not turned into queries and keys."""
        return x

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
        x = self.x - weight(self.wpe)[:T]
        k = self.block.attn.c_attn(self.block.ln_1(x))[..., self.d : 2 * self.d]
        return k.view(B, T, H, dh).transpose(1, 2)


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"gpt2": GPT2Arch}
