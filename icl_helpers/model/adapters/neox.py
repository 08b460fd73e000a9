"""GPT-NeoX (Pythia): parallel attention and FFN, a head-interleaved fused QKV, partial rotary."""
from __future__ import annotations

from torch import nn

from ..weights import weight
from .base import Site
from .llama import LlamaArch


class NeoXArch(LlamaArch):
    """GPT-NeoX (model_type "gpt_neox": Pythia, GPT-NeoX-20B). Differences from Llama, and how
    they are treated:

    * Parallel blocks (use_parallel_residual, the default): attention and FFN both read the
      block input x_l, through their own LayerNorms (input_layernorm, post_attention_layernorm),
      and x_{l+1} = x_l + ATTN_l + FFN_l. Every recorded quantity is read where the model
      computes it, so the decomposition is the model's own; the FFN's increase stays defined
      on the residual, I(FFN_l | x_l + ATTN_l), as for sequential blocks (which a model with
      use_parallel_residual=False has, and which need nothing else).
    * LayerNorms with biases, and biases on every projection: the final norm's bias is a
      constant of the logits folded away by the frozen-norm readout as in GPT-2.
    * One fused query_key_value projection laid out per head, [H, (q, k, v), dh]: the
      queries and values sites take their dh columns of each head's block, W_K its rows.
    * Rotary embedding on the first rotary_pct * dh dimensions of each head (rotate_half
      within them): position-free keys turn those and leave the rest.
    """

    family = "gpt_neox"
    norm_kind = "layer"
    blocks_path = "gpt_neox.layers"
    final_norm_path = "gpt_neox.final_layer_norm"
    rotary_path = "gpt_neox.rotary_emb"

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.parallel = bool(self.config.use_parallel_residual)
        H, dh = self.n_heads, self.d_head
        self.sites = {
            "resid": Site("", "pre"),
            "attn": Site("attention", "post", output=0),
            "pattern": Site("attention", "post", output=1),
            "z": Site("attention.dense", "pre"),
            "mlp": Site("mlp", "post"),
            "neurons": Site("mlp.dense_4h_to_h", "pre"),
            "queries": Site("attention.query_key_value", "post", columns=(0, dh), groups=H),
            "values": Site("attention.query_key_value", "post", columns=(2 * dh, 3 * dh), groups=H),
            "key_input": Site("attention.query_key_value", "pre"),
        }

    def W_K(self, layer):
        w = weight(self.attn(layer).query_key_value)  # [H*3*dh, d]: rows per head q, k, v
        return w.view(self.n_heads, 3, self.d_head, self.d_model)[:, 1]


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"gpt_neox": NeoXArch}
