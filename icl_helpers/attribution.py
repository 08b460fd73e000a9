"""Frozen-norm vocabulary projection and log-probability increase (METHOD.md sections 3-4).

bs(v) = (C(v) * gamma) @ W_U.T / sigma is linear in v, so gamma and the centring C fold
into one readout matrix G = C(gamma * W_U) [V, d] (C centres each row over d; for
RMSNorm it is the identity), and any residual-space vector scores against G.
I(v | x) = log softmax(bs(x + v))[w] - log softmax(bs(x))[w] needs the log-sum-exp over
the whole vocabulary: we accumulate it over vocabulary chunks (outer loop) and prompt
blocks (inner loop), so memory stays bounded whatever the batch and a per-chunk
preparation (folding W_O into G) is paid once per run, not once per prompt.
"""
from __future__ import annotations

from typing import Callable

import torch

from .adapters import Arch
from .decompose import Decomposition

# contrib(P, rows) -> [b, *S, n, Vc]: unscaled projections of the n vectors of prompts
# `rows`, given P = prepare(G_c) for a readout chunk G_c [d, Vc].
Contrib = Callable[[torch.Tensor, slice], torch.Tensor]


class Readout:
    """The frozen-final-norm unembedding of one model (float32, on the unembedding's device)."""

    def __init__(self, arch: Arch, vocab_chunk: int = 4096, block_floats: int = 2**25):
        """vocab_chunk: vocabulary columns a step; block_floats: floats a prompt block may hold."""
        G = arch.W_U().float() * arch.norm_weight().float()
        if arch.norm_kind == "layer":
            G = G - G.mean(1, keepdim=True)
        self.G = G  # [V, d]
        self.vocab_chunk = vocab_chunk
        self.block_floats = block_floats

    def logits(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """bs(v) [B, ..., V] for vectors v [B, ..., d] and sigma [B]."""
        return (v.float() @ self.G.T) / _expand(scale.float(), v.dim())

    def increase(
        self,
        base: torch.Tensor,
        contrib: Contrib,
        n: int,
        target: torch.Tensor,
        scale: torch.Tensor,
        prepare: Callable[[torch.Tensor], torch.Tensor] = lambda G_c: G_c,
    ) -> torch.Tensor:
        """I(v_i | x) for n vectors v_i on a base x: [B, *S, n].

        base: [B, *S, d]. target: [B] token ids w. scale: [B] sigma.
        """
        base, scale = base.float(), scale.float()
        B, S = base.shape[0], base.shape[1:-1]
        V, Vc = self.G.shape[0], min(self.vocab_chunk, self.G.shape[0])
        per_prompt = 3 * Vc * (n + 1) * max(1, base[0, ..., 0].numel())
        block = max(1, self.block_floats // per_prompt)
        lse_base = torch.full((B, *S), -torch.inf, device=base.device)
        lse_new = torch.full((B, *S, n), -torch.inf, device=base.device)
        target_logit = torch.zeros((B, *S, n), device=base.device)
        for start in range(0, V, Vc):
            G_c = self.G[start : start + Vc].T  # [d, Vc]
            P = prepare(G_c)
            for r0 in range(0, B, block):
                rows = slice(r0, r0 + block)
                s = _expand(scale[rows], base.dim())  # [b, 1, ..., 1]
                b = (base[rows] @ G_c) / s  # [b, *S, Vc]
                c = contrib(P, rows) / s.unsqueeze(-1)  # [b, *S, n, Vc]
                lse_base[rows] = torch.logaddexp(lse_base[rows], b.logsumexp(-1))
                lse_new[rows] = torch.logaddexp(lse_new[rows], (b.unsqueeze(-2) + c).logsumexp(-1))
                target_logit[rows] += _pick(c, target[rows] - start)
        return target_logit - lse_new + lse_base.unsqueeze(-1)

    def vector_increase(self, base, vectors, target, scale) -> torch.Tensor:
        """I(v_i | x) for explicit vectors [B, *S, n, d] on a base [B, *S, d]: [B, *S, n]."""
        vectors = vectors.float()
        return self.increase(base, lambda G_c, rows: vectors[rows] @ G_c, vectors.shape[-2], target, scale)


def _expand(scale: torch.Tensor, dims: int) -> torch.Tensor:
    """sigma [B] viewed as [B, 1, ..., 1] to broadcast over a dims-dimensional tensor."""
    return scale.view(-1, *([1] * (dims - 1)))


def _pick(c: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """c[b, ..., idx[b]] where 0 <= idx[b] < Vc, else 0: [b, *S, n] from c [b, *S, n, Vc]."""
    inside = (idx >= 0) & (idx < c.shape[-1])
    i = idx.clamp(0, c.shape[-1] - 1).view(-1, *([1] * (c.dim() - 1))).expand(*c.shape[:-1], 1)
    return c.gather(-1, i).squeeze(-1) * _expand(inside.to(c), c.dim() - 1)


def head_increase(
    readout: Readout, arch: Arch, z: torch.Tensor, base: torch.Tensor, target: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """[B, L, H]: I(head_{l,h} | x_l) for every head.

    z: [B, L, H, dh] head inputs to W_O; base: [B, L, d] layer inputs x_l.
    For many prompts the projection is folded through W_O once a vocabulary chunk
    (z scores against W_O^{l,h} G [dh, Vc]), d/dh times fewer operations a prompt.
    """
    z = z.float()
    W_O = arch.W_O_stack(z)
    if z.shape[0] * (arch.n_heads - 1) > arch.d_model:  # folding pays once B > d / (H - 1)
        return readout.increase(
            base, lambda WG, rows: torch.einsum("blhk,lhkv->blhv", z[rows], WG),
            arch.n_heads, target, scale, prepare=lambda G_c: W_O @ G_c,
        )
    heads = torch.einsum("blhk,lhkd->blhd", z, W_O)
    return readout.vector_increase(base, heads, target, scale)


def position_increase(readout: Readout, dec: Decomposition, layer: int, head: int, target: torch.Tensor) -> torch.Tensor:
    """[B, T]: I(alpha_{l,h}(t,p) v_{l,h,p} W_O^{l,h} | x_l) for every position p of one head.

    Needs decompose(..., pattern=True, values=True); positions after the last score 0.
    """
    return readout.vector_increase(dec.resid[:, layer], dec.position_terms(layer, head), target, dec.scale)


def neuron_increase(readout: Readout, dec: Decomposition, layer: int, target: torch.Tensor) -> torch.Tensor:
    """[B, d_mlp]: I(a_{l,k} W_out^l[k] | m_l) for every neuron k of one layer.

    Needs decompose(..., neurons=True). Folded: a_k scores against W_out[k] @ G_c.
    """
    a = dec.neurons[:, layer].float()  # [B, K]
    W_out = dec.arch.W_out(layer).float()  # [K, d]
    return readout.increase(
        dec.mid[:, layer], lambda WG, rows: a[rows].unsqueeze(-1) * WG,
        a.shape[1], target, dec.scale, prepare=lambda G_c: W_out @ G_c,
    )
