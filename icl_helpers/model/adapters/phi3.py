"""Phi-3: Llama's layout with fused projections (qkv_proj, gate_up_proj)."""
from __future__ import annotations

import torch
from torch import nn

from ...errors import UsageError
from ..weights import weight
from .base import Angles, Site
from .llama import LlamaArch


class Phi3Arch(LlamaArch):
    """Phi-3 (model_type "phi3": Phi-3, Phi-3.5 and Phi-4 mini). Differences from Llama, and how
    they are treated:

    * One fused qkv_proj, queries then keys then values, [H*dh | H_kv*dh | H_kv*dh] (parts
      of different widths under grouped-query attention): the queries and values sites
      take their columns, W_K its rows.
    * One fused gate_up_proj, [gate | up]: a neuron is act(gate_k) * up_k, read at
      down_proj's input as in Llama.
    * Rotary embedding on the first partial_rotary_factor * dh dimensions of each head, where
      the config sets it: position-free keys turn those and leave the rest.
    * A long-context RoPE (longrope: Phi-3-128k, Phi-3.5) switches to other frequencies for a
      pass longer than original_max_position_embeddings; the position-free keys would turn
      such keys with the short ones, so they refuse that pass in one line.
    """

    family = "phi3"

    def __init__(self, model: nn.Module):
        super().__init__(model)
        q, kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        self.sites = {**self.sites, "queries": Site("self_attn.qkv_proj", "post", columns=(0, q)),
                      "values": Site("self_attn.qkv_proj", "post", columns=(q + kv, q + 2 * kv)),
                      "key_input": Site("self_attn.qkv_proj", "pre")}

    def W_K(self, layer):
        q, kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        w = weight(self.attn(layer).qkv_proj)[q : q + kv]  # [H_kv*dh, d]
        return w.reshape(self.n_kv_heads, self.d_head, self.d_model)

    def angles(self, layer: int) -> Angles:
        """Llama's, refused where the pass turned its keys with a longrope's long frequencies."""
        rope, angles = self.model.get_submodule(self.rotary_path), super().angles(layer)

        def checked(x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            if not torch.equal(rope.inv_freq, rope.original_inv_freq):
                raise UsageError("This Phi-3 pass is longer than its RoPE's original_max_position_embeddings, so it uses "
                                 "the long-context frequencies, which position-free keys do not support: use shorter prompts.")
            return angles(x, positions)

        return checked


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"phi3": Phi3Arch}
