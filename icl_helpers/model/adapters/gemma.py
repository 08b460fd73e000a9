"""Gemma 1, 2 and 3: Llama's layout with a scaled embedding and (1 + w) gains; from Gemma 2
post-norms, soft-capping, sliding windows; in Gemma 3 query and key norms (and a vision tower)."""
from __future__ import annotations

from torch import nn

from ...errors import UsageError
from ..weights import weight
from .base import Site
from .llama import POST_NORM_SITES, POST_NORMS, LlamaArch


class GemmaArch(LlamaArch):
    """Gemma 1 (model_type "gemma"). Differences from Llama, and how they are treated:

    * The embedding is scaled by sqrt(d) inside the embedding module
      (`GemmaTextScaledWordEmbedding`): x_0 is the scaled embedding, the input of block 0
      as recorded (nothing else to do).
    * RMSNorm multiplies by (1 + w) (`GemmaRMSNorm`): `norm_gain` is 1 + weight, so the
      readout's frozen final norm, and every folded gain, use (1 + w).
    * Multi-query attention in the 2B model (one key/value head), head_dim set apart from
      the width: both as for Llama.
    * Bidirectional attention (use_bidirectional_attention, embedding models) is refused in one line.
    """

    family = "gemma"
    title = "Gemma"  # the family as the refusals name it
    refused = ("use_bidirectional_attention",)  # config settings the decomposition cannot follow
    needs = "a causal model"  # what it needs instead

    def __init__(self, model: nn.Module):
        super().__init__(model)
        for setting in self.refused:
            if getattr(self.config, setting, None):
                raise UsageError(f"This {self.title} model sets {setting}={getattr(self.config, setting)!r}: the decomposition "
                                 f"needs {self.needs}; use a {self.title} checkpoint without it.")

    def norm_gain(self, norm):
        """1 + weight (Gemma's RMSNorm)."""
        return 1 + weight(norm)


class Gemma2Arch(GemmaArch):
    """Gemma 2 (model_type "gemma2"). Gemma 1's differences from Llama, and:

    * A norm ends each residual branch (post_attention_layernorm after the attention's
      output projection, post_feedforward_layernorm after the FFN; a pre_feedforward_layernorm
      before it): ATTN_l and FFN_l are read after those norms, what the block adds to the
      residual. A head's share of ATTN_l is its pre-norm output z_h @ W_O^h times the norm's
      (1 + w) (folded into `W_O`, `b_O`) and its 1/sigma at the position (recorded per
      prompt and layer as `Decomposition.attn_scale`, frozen as the final norm's sigma is),
      so the heads sum exactly to ATTN_l. sigma comes from the sum of all heads' outputs: a
      head's share, and its increase, are conditional on the other heads through sigma.
      Neurons alike (`W_out`, `b_out`, `ffn_scale`). Ablating a head in the model changes
      sigma: the model's own response, which `ablated` keeps.
    * Sliding-window layers (`layer_types`, `sliding_window`): the model's own masks act in
      every recorded pass and intervention, so a prompt longer than the window decomposes
      exactly; the label edits of `core.interventions` leave keys outside the window out.
    * Attention scores are scaled by query_pre_attn_scalar**-0.5, which the model passes
      to the attention function as `scaling`, and soft-capped, cap * tanh(s / cap)
      (attn_logit_softcapping), which it passes as `softcap`: the decomposition reads the
      model's own weights, and the edited attention of the label edits applies both, so
      its scores are the model's (the position-free scores are capped as any other).
    * Final logit soft-capping (final_logit_softcapping): the model's logits are
      cap * tanh(z / cap) of the linear readout z (`final_softcap`). The readout, every
      log-probability and so every increase I = log p(x + v)[w] - log p(x)[w] apply the
      cap, so increases stay exact differences of the model's log-probabilities; but the
      cap is not linear: the direct logits of the parts (a head's, a layer's) sum to z,
      not to the model's logits (and increases, as in every family, do not add up).
    """

    family = "gemma2"
    title = "Gemma 2"
    sites = {**LlamaArch.sites, **POST_NORM_SITES}
    branch_norm_paths = POST_NORMS

    def __init__(self, model: nn.Module):
        super().__init__(model)
        self.final_softcap = getattr(self.config, "final_logit_softcapping", None)


class Gemma3Arch(Gemma2Arch):
    """Gemma 3 (text; model_type "gemma3_text"). Gemma 2's differences from Llama (the
    scaled embedding, (1 + w) gains, post-norms, sliding windows, query_pre_attn_scalar), and:

    * Query and key norms (q_norm, k_norm, RMS over dh with (1 + w)) before the rotation:
      the recorded queries are after q_norm, the vectors dotted with the (rotated) keys;
      `W_K` folds in k_norm's (1 + w), so a query maps into the key-input space as
      q @ W_K (`Decomposition.query_in_key_space`) up to each key's own positive
      1/rms, which is not frozen into it. Position-free keys rotate the model's keys
      (k_norm applied) on to one position with the layer's own RoPE (local and global
      layers have different bases).
    * Sliding windows of 512 tokens in the released models.
    * Tied embeddings and a large vocabulary (262,144 tokens): the readout is streamed
      over vocabulary chunks as for every family.
    * Logit soft-capping (final or attention), which no released Gemma 3 sets, and
      bidirectional attention are refused in one line.
    """

    family = "gemma3"
    title = "Gemma 3"
    refused = ("final_logit_softcapping", "attn_logit_softcapping", "use_bidirectional_attention")
    needs = "a causal model with linear logits"
    sites = {**Gemma2Arch.sites, "queries": Site("self_attn.q_norm", "post", heads_first=True)}
    k_norm_path = "k_norm"

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


# model_type -> adapter: what the registry (`adapters.architectures`) finds here
FAMILIES = {"gemma": GemmaArch, "gemma2": Gemma2Arch, "gemma3_text": Gemma3Arch, "gemma3": Gemma3MultimodalArch}
