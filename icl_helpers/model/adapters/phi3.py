"""Phi-3: Llama's layout with fused projections (qkv_proj, gate_up_proj)."""
from __future__ import annotations

from torch import nn

from .base import Site
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
    """

    family = "phi3"

    def __init__(self, model: nn.Module):
        super().__init__(model)
        q, kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        self.sites = {**self.sites, "queries": Site("self_attn.qkv_proj", "post", columns=(0, q)),
                      "values": Site("self_attn.qkv_proj", "post", columns=(q + kv, q + 2 * kv))}

    def W_K(self, layer):
        q, kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        w = self.attn(layer).qkv_proj.weight[q : q + kv]  # [H_kv*dh, d]
        return w.reshape(self.n_kv_heads, self.d_head, self.d_model)
