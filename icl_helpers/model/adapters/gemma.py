"""Gemma 3, text only and with its vision tower: Llama's layout with post-norms, (1 + w) gains,
query and key norms and sliding windows."""
from __future__ import annotations

from ...errors import UsageError
from .base import Site
from .llama import LlamaArch


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
