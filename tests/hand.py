"""The models' own computation written out by hand from each family's HF source, independent
of the adapters: norms, queries and keys, RoPE, the attention row, the capped log-probabilities;
and the checks of the decomposition and the recency intervention against them (`assert_*`).
Shapes as in the package: B prompts, T tokens, H heads, H_kv key/value heads, dh head width."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from transformers.models.llama.modeling_llama import rotate_half

from icl_helpers import ICLModel
from icl_helpers.core.attribution import Readout
from icl_helpers.core.decompose import Decomposition, decompose
from icl_helpers.core.interventions import position_free_labels
from tests.conftest import close, exact, logit_constant
from tests.test_interventions import EXAMPLES, labels_of


@dataclass(frozen=True)
class Family:
    """What a family's attention computes, read from its HF modeling file."""

    plus_one: bool  # RMSNorm multiplies by 1 + w (Gemma) rather than w
    input_norm: bool  # a norm before the attention (input_layernorm); OLMo 2 has none
    qk_norm: Literal["head", "full"] | None  # RMS norms of queries and keys over each head, over all heads, or none


FAMILIES = {  # by model_type
    "qwen3": Family(plus_one=False, input_norm=True, qk_norm="head"),
    "olmo2": Family(plus_one=False, input_norm=False, qk_norm="full"),
    "gemma": Family(plus_one=True, input_norm=True, qk_norm=None),
    "gemma2": Family(plus_one=True, input_norm=True, qk_norm=None),
    "gemma3_text": Family(plus_one=True, input_norm=True, qk_norm="head"),
}


def family(m: ICLModel) -> Family:
    return FAMILIES[m.model.config.model_type]


def gain(m: ICLModel, w: torch.Tensor) -> torch.Tensor:
    """The gain an RMSNorm of weight w multiplies by."""
    return 1 + w if family(m).plus_one else w


def rms(m: ICLModel, t: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
    """t [..., n] / its root mean square over n (eps included), times the norm's gain if w is given."""
    out = t / (t.pow(2).mean(-1, keepdim=True) + m.model.config.rms_norm_eps).sqrt()
    return out if w is None else out * gain(m, w)


@dataclass
class Attention:
    """One layer's attention inputs from its block input, before the rotation."""

    normed: torch.Tensor  # [B, T, d]: what q_proj and k_proj read (the block input itself without an input norm)
    queries: torch.Tensor  # [B, H, T, dh], after any query norm
    keys: torch.Tensor  # [B, H_kv, T, dh], after any key norm
    key_rms: torch.Tensor  # [B, H_kv, T]: the rms a key norm divides each head's raw key by (1 without one)
    key_gain: torch.Tensor  # [H_kv, dh]: the gain it multiplies them by (1 without one)


def attention_inputs(m: ICLModel, x: torch.Tensor, layer: int) -> Attention:
    """By hand from the block input x [B, T, d]."""
    block, fam, dh, n_kv = m.model.model.layers[layer], family(m), m.arch.d_head, m.arch.n_kv_heads
    attn, (B, T, _) = block.self_attn, x.shape
    normed = rms(m, x, block.input_layernorm.weight) if fam.input_norm else x
    q, k = attn.q_proj(normed).view(B, T, -1, dh), attn.k_proj(normed).view(B, T, -1, dh)
    key_rms, key_gain = torch.ones(B, T, n_kv, device=x.device), torch.ones(n_kv, dh, device=x.device)
    if fam.qk_norm is not None:
        over = (-1,) if fam.qk_norm == "head" else (-2, -1)  # each head's dh, or every head's together

        def norm(t: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            r = (t.pow(2).mean(over, keepdim=True) + m.model.config.rms_norm_eps).sqrt()  # [B, T, n or 1, 1]
            return t / r * gain(m, w).view(-1, dh), r[..., 0].expand(B, T, t.shape[2])

        (q, _), (k, key_rms) = norm(q, attn.q_norm.weight), norm(k, attn.k_norm.weight)
        key_gain = gain(m, attn.k_norm.weight).view(-1, dh).expand(n_kv, dh)
    return Attention(normed, q.transpose(1, 2), k.transpose(1, 2), key_rms.transpose(1, 2), key_gain)


def rope(x: torch.Tensor, positions: torch.Tensor, base: float, rotary_dim: int | None = None,
         pairs: bool = False) -> torch.Tensor:
    """x [..., T, dh] rotated to positions [T] (or [B, T] against x [B, n, T, dh]) with RoPE base
    `base` on its first rotary_dim (default all) dimensions: in the half layout (dimension i
    with i + r/2), or where `pairs` in GPT-J's (dimension 2i with 2i + 1)."""
    r, positions = rotary_dim or x.shape[-1], positions.to(x.device)
    angle = positions[..., None].double() / base ** (torch.arange(0, r, 2, device=x.device).double() / r)  # [.., T, r/2]
    angle = angle.repeat_interleave(2, -1) if pairs else torch.cat([angle, angle], -1)
    if angle.dim() == 3:
        angle = angle[:, None]
    turning = x[..., :r]
    turned = torch.stack([-turning[..., 1::2], turning[..., ::2]], -1).flatten(-2) if pairs else rotate_half(turning)
    return torch.cat([turning * angle.cos().float() + turned * angle.sin().float(), x[..., r:]], -1)


def layer_type(m: ICLModel, layer: int) -> str:
    return (getattr(m.model.config, "layer_types", None) or ["full_attention"] * (layer + 1))[layer]


def base_of(m: ICLModel, layer: int) -> float:
    """The RoPE base of `layer` (Gemma 3: one for each layer type)."""
    params = m.model.config.rope_parameters
    return params.get(layer_type(m, layer), params)["rope_theta"]


def scaled_scores(m: ICLModel, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """[B, H, T]: q . k_p of rotated queries q [B, H, dh] and rotated keys k [B, H_kv, T, dh],
    scaled by query_pre_attn_scalar**-0.5 (Gemma 2, 3) or dh**-0.5."""
    scaling = (getattr(m.model.config, "query_pre_attn_scalar", None) or m.arch.d_head) ** -0.5
    return torch.einsum("bhd,bhtd->bht", q, k.repeat_interleave(q.shape[1] // k.shape[1], 1)) * scaling


def attention_row(m: ICLModel, q: torch.Tensor, k: torch.Tensor, last: torch.Tensor, layer: int) -> torch.Tensor:
    """[B, H, T]: the last position's attention from rotated queries q [B, H, dh] (at `last`)
    and rotated keys k [B, H_kv, T, dh]: `scaled_scores`, soft-capped where the model caps
    (Gemma 2), masked causally, to the prompt's real tokens and, in a sliding layer, to its window."""
    cfg = m.model.config
    scores = scaled_scores(m, q, k)
    cap = getattr(cfg, "attn_logit_softcapping", None)
    if cap is not None:
        scores = cap * torch.tanh(scores / cap)
    p = torch.arange(k.shape[2], device=last.device)
    allowed = p[None] <= last[:, None]
    if layer_type(m, layer) == "sliding_attention":
        allowed &= p[None] > last[:, None] - cfg.sliding_window
    return scores.masked_fill(~allowed[:, None], -torch.inf).softmax(-1)


def log_prob(m: ICLModel, v: torch.Tensor, sigma: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """[B, ...]: log p(target) of residuals v [B, ..., d] under the final norm frozen at sigma
    [B]: its gain, the unembedding, the final soft cap where the model caps its logits."""
    normed = v / sigma.view(-1, *[1] * (v.dim() - 1)) * gain(m, m.model.model.norm.weight)
    logits = normed @ m.model.get_output_embeddings().weight.T
    cap = getattr(m.model.config, "final_logit_softcapping", None)
    if cap is not None:
        logits = cap * torch.tanh(logits / cap)
    return logits.log_softmax(-1).gather(-1, target.to(logits.device).view(-1, *[1] * (v.dim() - 1)).expand(*v.shape[:-1], 1))[..., 0]


def assert_exact(m: ICLModel, prompts: list[str]) -> None:
    """The decomposition of `prompts` against the model's own pass: hidden states, the
    residual chain, heads (with b_O) summing to ATTN_l, neurons (with b_out) to FFN_l, the
    readout (plus the logits' constant, `logit_constant`) and the recorded logits equal to the
    model's, each at the scale of its terms."""
    dec = decompose(m, prompts, record=["neurons"])
    with torch.no_grad():
        out = m.model(**m.encode(prompts), output_hidden_states=True)
    rows, arch = torch.arange(len(prompts)), m.arch
    for l in range(arch.n_layers):
        exact(dec.resid[:, l], out.hidden_states[l][rows, dec.last])  # the same forward pass of the same batch
    terms = dec.resid[:, 0].abs() + dec.attn.abs().sum(1) + dec.ffn.abs().sum(1)
    close(dec.resid[:, 0] + dec.attn.sum(1) + dec.ffn.sum(1), dec.resid[:, -1], scale=float(terms.max()))
    heads = dec.heads()
    for l in range(arch.n_layers):
        b_O, b_out = (torch.zeros(arch.d_model, device=dec.attn.device) if b is None else b for b in (arch.b_O(l), arch.b_out(l)))
        attn_scale, ffn_scale = dec.attn_scale[:, l, None], dec.ffn_scale[:, l, None]
        close(heads[:, l].sum(1) + b_O * attn_scale, dec.attn[:, l],
              scale=float((heads[:, l].abs().sum(1) + b_O.abs() * attn_scale).max()))
        a, W_out = dec.neurons[:, l], arch.W_out(l)
        close((a @ W_out + b_out) * ffn_scale, dec.ffn[:, l], scale=float(((a.abs() @ W_out.abs() + b_out.abs()) * ffn_scale).max()))
    want = out.logits[rows, dec.last]
    readout = Readout(arch)
    constant = logit_constant(arch)  # the same for every input, left out of the readout (no such family caps)
    close(readout.logits(dec.resid[:, -1], dec.scale) + constant, want,
          scale=float((dec.resid[:, -1].abs() @ readout.G.abs().T / dec.scale[:, None] + abs(constant)).max()))
    close(dec.logits, want)


def assert_attention_rows(m: ICLModel, dec: Decomposition, hidden: tuple[torch.Tensor, ...]) -> None:
    """The recorded queries (dec of PROMPTS, with queries and pattern) against queries made by
    hand from the model's block inputs `hidden` ([B, T, d] a layer); rotated, against keys made
    by hand, scaled, soft-capped and masked: the model's attention rows."""
    rows, last = torch.arange(len(dec.last)), dec.last
    for l in range(m.arch.n_layers):
        by_hand = attention_inputs(m, hidden[l], l)
        close(dec.queries[:, l], by_hand.queries[rows, :, last])
        T, base = by_hand.keys.shape[2], base_of(m, l)
        q_rot = rope(dec.queries[:, l, :, None], last[:, None], base)[:, :, 0]
        close(attention_row(m, q_rot, rope(by_hand.keys, torch.arange(T), base), last, l), dec.pattern[:, l])


def assert_query_in_key_space(m: ICLModel, dec: Decomposition, hidden: tuple[torch.Tensor, ...]) -> None:
    """q . k_p = ((q @ W_K) . n_p + (q * gain) . b_K) / rms_p at every position p, n_p the key
    input (normed, where a norm precedes the attention): W_K carries the key norm's gain, and
    each key's own 1/rms (over its head, or over every key head in OLMo 2; 1 without a key
    norm) stays outside. dec: with queries; hidden: the block inputs."""
    arch = m.arch
    for l in range(arch.n_layers):
        by_hand = attention_inputs(m, hidden[l], l)
        b_K = arch.attn(l).k_proj.bias.view(arch.n_kv_heads, arch.d_head) * by_hand.key_gain
        for h in range(arch.n_heads):
            g, q = arch.kv_head(h), dec.queries[:, l, h]
            want = torch.einsum("bd,btd->bt", q, by_hand.keys[:, g])
            from_input = torch.einsum("bd,btd->bt", dec.query_in_key_space(l, h), by_hand.normed)
            close((from_input + (q @ b_K[g])[:, None]) / by_hand.key_rms[:, g], want)


def assert_position_free_row(m: ICLModel, layer: int, head: int = 3) -> None:
    """The row `position_free_labels` gives `head` of `layer` on EXAMPLES, by hand: label keys
    (after any key norm) rotated to a target position, the other keys at their own, scaled,
    soft-capped and masked as the model does (labels outside a window stay masked); the other
    heads' rows unchanged, this one's changed."""
    labels = labels_of(m, EXAMPLES)
    target = torch.tensor([2, 9, 5])
    with position_free_labels(m, [(layer, head)], labels, target=target):
        edited = decompose(m, EXAMPLES, record=["pattern", "queries"])
    with torch.no_grad():
        x = m.model(**m.encode(EXAMPLES), output_hidden_states=True).hidden_states[layer]
    k = attention_inputs(m, x, layer).keys
    T, base = k.shape[2], base_of(m, layer)
    at = torch.where(labels.class_masks(T).any(1), target[:, None], torch.arange(T))  # each key's position
    q_rot = rope(edited.queries[:, layer, :, None], edited.last[:, None], base)[:, :, 0]
    close(edited.pattern[:, layer, head], attention_row(m, q_rot, rope(k, at, base), edited.last, layer)[:, head])
    plain = decompose(m, EXAMPLES, record=["pattern"])
    others = [h for h in range(m.arch.n_heads) if h != head]
    close(edited.pattern[:, layer, others], plain.pattern[:, layer, others])
    assert (edited.pattern[:, layer, head] - plain.pattern[:, layer, head]).abs().max() > 1e-3
