"""OLMo 2: Llama's layout with its norms moved to the end of each residual branch, and
query and key norms over the full projected width."""
from __future__ import annotations

from .base import Site
from .llama import POST_NORM_SITES, POST_NORMS, LlamaArch


class Olmo2Arch(LlamaArch):
    """OLMo 2 (model_type "olmo2"). Differences from Llama, and how they are treated:

    * No norm before the attention or the FFN: each reads the residual stream x_l (m_l) as
      it is. A norm ends each residual branch instead (post_attention_layernorm after the
      output projection, post_feedforward_layernorm after the FFN, plain w gain): as for
      Gemma 3, ATTN_l and FFN_l are read after them, the gain is folded into `W_O`, `b_O`,
      `W_out`, `b_out` and the norm's 1/sigma at the position recorded
      (`Decomposition.attn_scale`, `ffn_scale`), so heads and neurons sum exactly to
      ATTN_l and FFN_l, a head's share conditional on the others through that sigma.
    * Query and key norms (q_norm, k_norm) act over the full projected width, H*dh and
      H_kv*dh, before the split into heads and the rotation, not over each head: head g's
      key at position p is (x_p @ W_K[g].T + b_K[g] * gain[g]) / rms_p, where `W_K` folds
      in the slice gain[g] of k_norm's gain [H_kv*dh] that head g's coordinates get, and
      rms_p, the root mean square of *every* key head's raw key at p, is one positive
      scalar shared by all heads. So a key still factorises per head as for Gemma 3 and
      Qwen 3 (a weight of its own head, times a positive per-position scalar), but that
      scalar depends on the other heads' keys; queries alike. The recorded queries are
      q_norm's output, the vectors dotted with the keys; `query_in_key_space` is q @ W_K,
      exact up to the key's 1/rms_p, which is not frozen into it (and the key input is
      x_p itself, there being no norm before the attention).
    """

    family = "olmo2"
    sites = {**LlamaArch.sites, **POST_NORM_SITES, "queries": Site("self_attn.q_norm", "post")}
    branch_norm_paths = POST_NORMS
    k_norm_path = "k_norm"


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"olmo2": Olmo2Arch}
