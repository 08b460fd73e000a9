"""Qwen 3: Llama's layout with query and key RMS norms over each head before the rotation."""
from __future__ import annotations

from .base import Site
from .llama import LlamaArch


class Qwen3Arch(LlamaArch):
    """Qwen 3 (model_type "qwen3"). Differences from Llama, and how they are treated:

    * Query and key norms (q_norm, k_norm: RMS over each head's dh, plain w gain, one gain
      for every head) before the rotation: the recorded queries are q_norm's output, the
      vectors dotted with the (rotated) keys, [B, T, H, dh] read as [B, T, H*dh]; `W_K`
      folds in k_norm's gain, so a query maps into the key-input space as q @ W_K
      (`Decomposition.query_in_key_space`) up to each key's own positive 1/rms, which is
      not frozen into it. Position-free keys rotate the model's keys (k_norm applied) on to
      one position, as for Llama.
    * Optional sliding-window layers (use_sliding_window, layer_types): the model's own
      masks act in every recorded pass and intervention.
    """

    family = "qwen3"
    sites = {**LlamaArch.sites, "queries": Site("self_attn.q_norm", "post", heads_last=True)}
    k_norm_path = "k_norm"


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"qwen3": Qwen3Arch}
