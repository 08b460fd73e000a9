"""Frozen-norm vocabulary projection and log-probability increase (METHOD.md sections 3-4).

bs(v) = (C(v) * gamma) @ W_U.T / sigma is linear in v, so gamma and the centring C fold
into one readout matrix G = C(gamma * W_U) [V, d] (C centres each row over d; for
RMSNorm it is the identity), and any residual-space vector scores against G; 1/sigma is
applied to the vectors before they are projected.
I(v | x) = log softmax(bs(x + v))[w] - log softmax(bs(x))[w] needs the log-sum-exp over
the whole vocabulary: `Readout.log_probs` streams it over vocabulary chunks (outer loop)
and prompt blocks (inner loop), so memory stays bounded whatever the batch and a
per-chunk preparation (folding W_O into G) is paid once per run, not once per prompt.
Each block's logits are reduced in place into running log-sum-exps, and the largest
intermediates are written into buffers reused from step to step: on the CPU a fresh
allocation of many megabytes costs page faults that can exceed the arithmetic.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from .adapters import Arch
from .decompose import Decomposition, _need

# contrib(P, rows) -> [b, *S, n, Vc]: projections of the n vectors of prompts `rows`,
# given P = prepare(G_c) for a readout chunk G_c [d, Vc].
Contrib = Callable[[torch.Tensor, slice], torch.Tensor]
# tiles(P, rows, base_logits [b, *S, Vc]) -> logit tiles [b, *Q_i, Vc], overwritten when read.
Tiles = Callable[[object, slice, torch.Tensor], list[torch.Tensor]]


class Readout:
    """The frozen-final-norm unembedding of one model (float32, on the unembedding's device)."""

    def __init__(self, arch: Arch, vocab_chunk: int = 1024, block_floats: int = 2**24):
        """vocab_chunk: vocabulary columns a step; block_floats: floats a prompt block's logits may hold."""
        G = arch.W_U().float() * arch.norm_weight().float()
        if arch.norm_kind == "layer":
            G = G - G.mean(1, keepdim=True)
        self.G = G  # [V, d]
        self.vocab_chunk = vocab_chunk
        self.block_floats = block_floats

    def logits(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """bs(v) [B, ..., V] for vectors v [B, ..., d] and sigma [B]."""
        return (v.float() @ self.G.T) / _expand(scale.float(), v.dim())

    def log_probs(
        self,
        base: torch.Tensor,
        tiles: Tiles,
        shapes: list[tuple[int, ...]],
        target: torch.Tensor,
        prepare: Callable[[torch.Tensor], object] = lambda G_c: G_c,
    ) -> list[torch.Tensor]:
        """log softmax(.)[w] of the base vectors, [B, *S], then of each tile, [B, *Q_i].

        base: [B, *S, d], already divided by sigma. target: [B] token ids w.
        tiles(prepare(G_c), rows, base logits) gives the logits of tile i, [b, *Q_i, Vc],
        for shapes[i] = Q_i; the tiles (and the base logits) are overwritten when reduced.
        """
        B, S = base.shape[0], base.shape[1:-1]
        V, Vc = self.G.shape[0], min(self.vocab_chunk, self.G.shape[0])
        per_prompt = Vc * (math.prod(S) + sum(math.prod(q) for q in shapes))
        block = max(1, self.block_floats // per_prompt)
        acc = [_TargetLogProb(target, (B, *q)) for q in [S, *shapes]]
        for start in range(0, V, Vc):
            G_c = self.G[start : start + Vc].T  # [d, Vc]
            P = prepare(G_c)
            for r0 in range(0, B, block):
                rows = slice(r0, r0 + block)
                b = base[rows] @ G_c  # [b, *S, Vc]
                for a, tile in zip(acc[1:], tiles(P, rows, b)):
                    a.add(rows, start, tile)
                acc[0].add(rows, start, b)
        return [a.value for a in acc]

    def scaled_increase(
        self,
        base: torch.Tensor,
        contrib: Contrib,
        n: int,
        target: torch.Tensor,
        prepare: Callable[[torch.Tensor], object] = lambda G_c: G_c,
    ) -> torch.Tensor:
        """I(v_i | x) [B, *S, n] for a base [B, *S, d] and contrib, both already divided by sigma;
        contrib's output may be overwritten."""
        before, after = self.log_probs(
            base, lambda P, rows, b: [contrib(P, rows).add_(b.unsqueeze(-2))], [(*base.shape[1:-1], n)], target, prepare
        )
        return after - before.unsqueeze(-1)

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

        base: [B, *S, d]. target: [B] token ids w. scale: [B] sigma. contrib gives the
        vectors' unscaled projections, [b, *S, n, Vc].
        """
        scale = scale.float()
        return self.scaled_increase(
            _scaled(base, scale), lambda P, rows: contrib(P, rows) / _expand(scale[rows], base.dim() + 1),
            n, target, prepare,
        )

    def vector_increase(self, base, vectors, target, scale) -> torch.Tensor:
        """I(v_i | x) for explicit vectors [B, *S, n, d] on a base [B, *S, d]: [B, *S, n]."""
        vectors = _scaled(vectors, scale)
        return self.scaled_increase(_scaled(base, scale), lambda G_c, rows: vectors[rows] @ G_c, vectors.shape[-2], target)


class _TargetLogProb:
    """log softmax(logits)[w] of logits streamed over vocabulary chunks, [B, *Q]."""

    def __init__(self, target: torch.Tensor, shape: tuple[int, ...]):
        self.target = target
        self.lse = torch.full(shape, -torch.inf, device=target.device)
        self.logit = torch.zeros(shape, device=target.device)

    def add(self, rows: slice, start: int, logits: torch.Tensor) -> None:
        """Take in logits [b, *Q, Vc] of vocabulary columns start.. for prompts rows (overwrites them)."""
        self.logit[rows] += _pick(logits, self.target[rows] - start)
        self.lse[rows] = torch.logaddexp(self.lse[rows], _logsumexp_(logits))

    @property
    def value(self) -> torch.Tensor:
        return self.logit - self.lse


def _logsumexp_(x: torch.Tensor) -> torch.Tensor:
    """logsumexp over the last dim, computed in place: [...] from x [..., Vc], which it overwrites."""
    top = x.amax(-1, keepdim=True)
    return x.sub_(top).exp_().sum(-1).log_().add_(top.squeeze(-1))


def _expand(scale: torch.Tensor, dims: int) -> torch.Tensor:
    """sigma [B] viewed as [B, 1, ..., 1] to broadcast over a dims-dimensional tensor."""
    return scale.view(-1, *([1] * (dims - 1)))


def _scaled(v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """v [B, ...] / sigma [B], in float32."""
    return v.float() / _expand(scale.float(), v.dim())


def _pick(c: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """c[b, ..., idx[b]] where 0 <= idx[b] < Vc, else 0: [b, *Q] from c [b, *Q, Vc]."""
    inside = (idx >= 0) & (idx < c.shape[-1])
    i = idx.clamp(0, c.shape[-1] - 1).view(-1, *([1] * (c.dim() - 1))).expand(*c.shape[:-1], 1)
    return c.gather(-1, i).squeeze(-1) * _expand(inside.to(c), c.dim() - 1)


class _Reused:
    """Buffers reused from step to step: `out(name, shape)` is a [shape] view of buffer `name`."""

    def __init__(self, like: torch.Tensor):
        self.like = like
        self.buffers: dict[str, torch.Tensor] = {}

    def out(self, name: str, shape: tuple[int, ...]) -> torch.Tensor:
        n = math.prod(shape)
        if name not in self.buffers or self.buffers[name].numel() < n:
            self.buffers[name] = torch.empty(n, dtype=self.like.dtype, device=self.like.device)
        return self.buffers[name][:n].view(shape)


def _head_logits(arch: Arch, z: torch.Tensor) -> tuple[Callable[[torch.Tensor], torch.Tensor], Contrib]:
    """(prepare, contrib) scoring every head: contrib(P, rows) -> [b, L, H, Vc].

    z: [B, L, H, dh], already divided by sigma. For many prompts W_O is folded into the
    readout once a vocabulary chunk (z scores against W_O^{l,h} G_c [dh, Vc]): d/dh times
    fewer operations a prompt, for L*d*d*Vc a chunk.
    """
    B, L, H, dh = z.shape
    W_O = arch.W_O_stack(z)  # [L, H, dh, d]
    if B * (H - 1) <= arch.d_model:  # folding pays once B > d / (H - 1)
        heads = torch.einsum("blhk,lhkd->blhd", z, W_O)
        return lambda G_c: G_c, lambda G_c, rows: heads[rows] @ G_c
    z = z.permute(1, 2, 0, 3)  # [L, H, B, dh]: one matrix product per head
    reused = _Reused(z)

    def fold(G_c: torch.Tensor) -> torch.Tensor:  # [L, H, dh, Vc]
        return torch.matmul(W_O, G_c, out=reused.out("fold", (L, H, dh, G_c.shape[1])))

    def contrib(WG: torch.Tensor, rows: slice) -> torch.Tensor:
        zr = z[:, :, rows]
        out = reused.out("tile", (L, H, zr.shape[2], WG.shape[-1]))
        return torch.matmul(zr, WG, out=out).permute(2, 0, 1, 3)

    return fold, contrib


def head_increase(
    readout: Readout, arch: Arch, z: torch.Tensor, base: torch.Tensor, target: torch.Tensor, scale: torch.Tensor
) -> torch.Tensor:
    """[B, L, H]: I(head_{l,h} | x_l) for every head.

    z: [B, L, H, dh] head inputs to W_O; base: [B, L, d] layer inputs x_l.
    """
    prepare, contrib = _head_logits(arch, _scaled(z, scale))
    return readout.scaled_increase(_scaled(base, scale), contrib, arch.n_heads, target, prepare)


def layer_head_increase(
    readout: Readout, arch: Arch, z: torch.Tensor, resid: torch.Tensor, target: torch.Tensor, scale: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every head's, attention layer's and FFN layer's increase in one pass over the vocabulary.

    z: [B, L, H, dh] head inputs to W_O; resid: [B, L+1, d] layer inputs x_0..x_{L-1} and
    the final residual x_L. Returns I(head_{l,h} | x_l) [B, L, H], I(ATTN_l | x_l) [B, L]
    and I(FFN_l | m_l) [B, L]. Only x_0..x_L are projected: ATTN_l's logits are the sum of
    its heads' plus b_O's, so log p(m_l) comes with the heads, and I(FFN_l | m_l) is
    log p(x_{l+1}) - log p(m_l) since x_{l+1} = m_l + FFN_l.
    """
    L = arch.n_layers
    prepare, contrib = _head_logits(arch, _scaled(z, scale))
    b_O = torch.stack([_bias(arch, l, resid) for l in range(L)])  # [L, d]
    inv_scale = 1 / scale.float()

    def tiles(P: tuple, rows: slice, base: torch.Tensor) -> list[torch.Tensor]:
        heads_P, bias = P  # bias: [L, Vc] unscaled logits of b_O
        heads = contrib(heads_P, rows)  # [b, L, H, Vc]
        attn = heads.sum(2).add_(base[:, :L]).add_(bias * _expand(inv_scale[rows], 3))  # [b, L, Vc]
        return [heads.add_(base[:, :L].unsqueeze(2)), attn]

    lp_resid, lp_heads, lp_mid = readout.log_probs(
        _scaled(resid, scale), tiles, [(L, arch.n_heads), (L,)], target, lambda G_c: (prepare(G_c), b_O @ G_c)
    )
    lp_x = lp_resid[:, :L]
    return lp_heads - lp_x.unsqueeze(-1), lp_mid - lp_x, lp_resid[:, 1:] - lp_mid


def _bias(arch: Arch, layer: int, like: torch.Tensor) -> torch.Tensor:
    """[d]: b_O of a layer in float32, zeros where the model has none."""
    b = arch.b_O(layer)
    return torch.zeros(arch.d_model, device=like.device) if b is None else b.float().to(like.device)


def position_increase(readout: Readout, dec: Decomposition, layer: int, head: int, target: torch.Tensor) -> torch.Tensor:
    """[B, T]: I(alpha_{l,h}(t,p) v_{l,h,p} W_O^{l,h} | x_l) for every position p of one head.

    Needs decompose(..., pattern=True, values=True); positions after the last score 0.
    Folded: alpha v [dh] scores against W_O^{l,h} @ G_c [dh, Vc].
    """
    alpha = _need(dec.pattern, "pattern")[:, layer, head]  # [B, T]
    v = _need(dec.values, "values")[:, layer, dec.arch.kv_head(head)]  # [B, T, dh]
    u = _scaled(alpha.unsqueeze(-1) * v, dec.scale)
    W_O = dec.arch.W_O(layer)[head].to(u)  # [dh, d]
    return readout.scaled_increase(
        _scaled(dec.resid[:, layer], dec.scale), lambda WG, rows: u[rows] @ WG, u.shape[1], target,
        prepare=lambda G_c: W_O @ G_c,
    )


def neuron_increase(readout: Readout, dec: Decomposition, layer: int, target: torch.Tensor) -> torch.Tensor:
    """[B, d_mlp]: I(a_{l,k} W_out^l[k] | m_l) for every neuron k of one layer.

    Needs decompose(..., neurons=True). Folded: a_k scores against W_out[k] @ G_c.
    """
    a = _scaled(_need(dec.neurons, "neurons")[:, layer], dec.scale)  # [B, K]
    W_out = dec.arch.W_out(layer).float()  # [K, d]
    return readout.scaled_increase(
        _scaled(dec.mid[:, layer], dec.scale), lambda WG, rows: a[rows].unsqueeze(-1) * WG,
        a.shape[1], target, prepare=lambda G_c: W_out @ G_c,
    )
