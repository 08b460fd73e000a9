"""Frozen-norm vocabulary projection and log-probability increase.

bs(v) = (C(v) * gamma) @ W_U.T / sigma is linear in v, so gamma and the centring C fold
into one readout matrix G = C(gamma * W_U) [V, d] (C centres each row over d; for
RMSNorm it is the identity), and any residual-space vector scores against G; 1/sigma is
applied to the (small) vectors before they are projected, never to the logits. A final
LayerNorm's bias beta and an unembedding's bias b_U (GPT-J's lm_head, `Arch.b_U`) add
W_U beta + b_U to the model's logits, one constant a token whatever the input: bs leaves
both out.
I(v | x) = log softmax(bs(x + v))[w] - log softmax(bs(x))[w] needs the log-sum-exp over
the whole vocabulary, so every score streams over vocabulary chunks (outer loop) and
prompt blocks (inner loop) into running log-sum-exps (`logprob.TargetLogProb`): memory stays
bounded whatever the batch, and a per-chunk preparation (folding W_O into G) is paid
once per run, not once per prompt; every head's fold is kept between runs where memory allows
(`Readout.head_fold`). How large the chunks, blocks and kept fold are depends on the device
(`sizes.sizes_for`). Head scores go one layer at a time, so that each
logit tile ([H, b, Vc], a few MB) stays in the CPU's cache through the five passes of
its log-sum-exp.

Final logit soft-capping (Gemma 2, `Arch.final_softcap`): the model's logits are
cap * tanh(bs(v) / cap). Every log-probability here caps its logits first, so every
increase is an exact difference of the model's own log-probabilities; bs itself stays
linear (`Readout.direct`), but the capped logits of x + v are no longer those of x plus
those of v: the direct logits of the parts do not sum to the model's.
"""
from __future__ import annotations

import math
from dataclasses import replace
from functools import cached_property
from typing import Callable, Iterator, Sequence

import torch
from tqdm import tqdm

from ..model.adapters import Arch, softcap_
from ..model.loading import ICLModel
from ..model.weights import execution_device
from ..progress import progress_bar
from .decompose import Decomposition
from .heads import Head
from .logprob import TargetColumns, TargetLogProb
from .sizes import Sizes, sizes_for

# contrib(P, rows) -> [b, *S, n, Vc]: projections of the n vectors of prompts `rows`,
# already divided by sigma, given P = prepare(start, G_c) for the readout chunk G_c [d, Vc] at column start.
Contrib = Callable[[object, slice], torch.Tensor]


class Readout:
    """The frozen-final-norm unembedding of one model (float32, on the unembedding's device).

    `readout_of(m)` gives model m's, kept (with its kept fold) while the weights are unchanged;
    `Readout(arch)` makes a new one."""

    def __init__(self, arch: Arch, vocab_chunk: int | None = None, block_floats: int | None = None,
                 keep_floats: int | None = None):
        """The plan of its scoring (`sizes`) is its device's (`sizes_for`), decided now, but for
        those given: vocab_chunk, vocabulary columns a step; block_floats, floats the logit tiles
        of a prompt block may hold; keep_floats, floats of every head's fold W_O G that may be kept
        between calls."""
        G = arch.W_U().float() * arch.norm_weight().float()
        if arch.norm_kind == "layer":
            G = G - G.mean(1, keepdim=True)
        self.G = G  # [V, d]
        self.arch = arch
        self.cap = arch.final_softcap  # the final logits' soft cap, or None
        device = sizes_for(G.device)
        self.sizes: Sizes = replace(device, vocab_chunk=vocab_chunk or device.vocab_chunk,
                                    block_floats=block_floats or device.block_floats,
                                    keep_floats=device.keep_floats if keep_floats is None else keep_floats)
        self.kept: dict[int, torch.Tensor] = {}  # first column -> W_O G_c [L, H, dh, Vc] of every head

    @cached_property
    def W_O(self) -> torch.Tensor:
        """[L, H, dh, d]: every head's W_O in float32, on the readout's device."""
        return self.arch.W_O_stack(self.G)

    def head_fold(self, start: int, G_c: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        """[L, H, dh, Vc]: W_O^{l,h} G_c of every head, for the chunk G_c [d, Vc] at column
        `start`: kept from an earlier call, else made, and kept where the whole fold (L H dh V
        floats) fits keep_floats; a fold that is not kept goes into `out` where given."""
        if start not in self.kept:
            if self.W_O.numel() // self.G.shape[1] * self.G.shape[0] > self.sizes.keep_floats:
                return torch.matmul(self.W_O, G_c, out=out)
            self.kept[start] = self.W_O @ G_c
        return self.kept[start]

    def heads_W_O(self, heads: Sequence[Head]) -> torch.Tensor:
        """[S, dh, d]: W_O^{l,h} of each listed (layer, head)."""
        return self.W_O[_layers_and_heads(heads)]

    def heads_fold(self, start: int, G_c: torch.Tensor, heads: Sequence[Head]) -> torch.Tensor:
        """[S, dh, Vc]: W_O^{l,h} G_c of each listed head, from the kept fold where it is there."""
        if start in self.kept:
            return self.kept[start][_layers_and_heads(heads)]
        return self.heads_W_O(heads) @ G_c

    def direct(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """bs(v) [B, ..., V], linear in v, for vectors v [B, ..., d] and sigma [B]: the
        direct logits of a part (before any final soft cap)."""
        return (v.float() @ self.G.T) / _expand(scale.float(), v.dim())

    def logits(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """The model's logits [B, ..., V] from residuals v [B, ..., d] and sigma [B]: bs(v),
        soft-capped where the model caps its logits."""
        return softcap_(self.direct(v, scale), self.cap)

    def chunks(self, bar: tqdm | None = None) -> Iterator[tuple[int, torch.Tensor]]:
        """(first column, G_c [d, Vc]) for each vocabulary chunk, `bar` (`chunk_bar`) advanced after each."""
        for start in range(0, self.G.shape[0], self.sizes.vocab_chunk):
            yield start, self.G[start : start + self.sizes.vocab_chunk].T
            if bar is not None:
                bar.update()

    def chunk_bar(self, desc: str, passes: int = 1) -> tqdm:
        """A bar labelled `desc` over `passes` walks through the vocabulary chunks (`chunks`),
        shown now: a step that ranks over the vocabulary makes it as it starts."""
        return progress_bar(passes * -(-self.G.shape[0] // self.sizes.vocab_chunk), desc)

    def blocks(self, n: int, floats_per_prompt: int) -> Iterator[slice]:
        """Slices of n prompts, each block's logits within the plan's block_floats (`Sizes.block_size`)."""
        size = self.sizes.block_size(floats_per_prompt, self.G.shape[0])
        return (slice(start, start + size) for start in range(0, n, size))

    def increase(
        self,
        base: torch.Tensor,
        contrib: Contrib,
        n: int,
        target: torch.Tensor,
        scale: torch.Tensor,
        prepare: Callable[[int, torch.Tensor], object] = lambda start, G_c: G_c,
    ) -> torch.Tensor:
        """I(v_i | x) for n vectors v_i on a base x: [B, *S, n].

        base: [B, *S, d]. target: [B] token ids w. scale: [B] sigma. contrib gives the
        vectors' projections already divided by sigma, [b, *S, n, Vc], which are
        overwritten.
        """
        inv = 1 / scale.float()
        B, S = base.shape[0], base.shape[1:-1]
        device = self.G.device
        before, after = TargetLogProb((B, *S), device, self.cap), TargetLogProb((B, *S, n), device, self.cap)
        columns = TargetColumns(target, device)
        for start, G_c in self.chunks():
            P = prepare(start, G_c)
            for rows in self.blocks(B, math.prod(S) * (n + 1)):
                b = _scaled(base[rows], inv[rows]) @ G_c  # [b, *S, Vc]
                tile = contrib(P, rows).add_(b.unsqueeze(-2))
                after.add((rows,), tile, columns.at(rows, start, G_c.shape[1], dims=len(S) + 1))
                before.add((rows,), b, columns.at(rows, start, G_c.shape[1], dims=len(S)))
        return after.value - before.value.unsqueeze(-1)


def readout_of(m: ICLModel) -> Readout:
    """m's readout at its device's sizes, made once and kept on m while its weights hold the
    same values on the same device (`ICLModel.fingerprint`, and where the unembedding runs),
    so every study reuses its kept fold; any edit of a weight makes a new one."""
    key = m.fingerprint(), execution_device(m.model.get_output_embeddings())
    return m.kept("readout", key, lambda: Readout(m.arch))


def _layers_and_heads(heads: Sequence[Head]) -> tuple[list[int], list[int]]:
    """The index of the listed (layer, head) pairs into an [L, H, ...] tensor."""
    return [l for l, _ in heads], [h for _, h in heads]


def _expand(scale: torch.Tensor, dims: int) -> torch.Tensor:
    """sigma [B] viewed as [B, 1, ..., 1] to broadcast over a dims-dimensional tensor."""
    return scale.view(-1, *([1] * (dims - 1)))


def _scaled(v: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """v [b, ...] * inv [b] or [b, L] (1/sigma; per layer, with v [b, L, ...]), in float32."""
    inv = inv.to(v.device)
    return v.float() * inv.view(*inv.shape, *[1] * (v.dim() - inv.dim()))


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


def _head_logits(readout: Readout, z: torch.Tensor, inv: torch.Tensor, buffers: _Reused) -> tuple[Callable, Callable]:
    """(prepare, logits): prepare(start, G_c) once a vocabulary chunk; logits(P, layer, rows)
    -> [H, b, Vc], bs of each head of one layer for prompts `rows`, divided by sigma.

    z: [B, L, H, dh]; inv: [B, L] attn_scale_l / sigma. For many prompts W_O is folded
    into the readout (z scores against W_O^{l,h} G_c [dh, Vc], `Readout.head_fold`): d/dh
    times fewer operations a prompt, for L*H*dh*d*Vc a chunk, or none where the fold is kept;
    for a few prompts the heads are projected as they are.
    """
    B, L, H, dh = z.shape
    if B * (H - 1) <= readout.arch.d_model:  # folding pays once B > d / (H - 1)
        heads = torch.einsum("blhk,lhkd->lhbd", _scaled(z, inv), readout.W_O)  # [L, H, B, d]
        return (lambda start, G_c: G_c), (lambda G_c, l, rows: heads[l, :, rows] @ G_c)

    def fold(start: int, G_c: torch.Tensor) -> torch.Tensor:  # [L, H, dh, Vc]
        return readout.head_fold(start, G_c, out=buffers.out("fold", (L, H, dh, G_c.shape[1])))

    scaled = _scaled(z, inv).permute(1, 2, 0, 3).contiguous()  # [L, H, B, dh]: scaled once, not once a chunk

    def folded(WG: torch.Tensor, l: int, rows: slice) -> torch.Tensor:
        return scaled[l, :, rows] @ WG[l]  # [H, b, dh] @ [H, dh, Vc]

    return fold, folded


def layer_head_increase(
    readout: Readout, z: torch.Tensor, resid: torch.Tensor, target: torch.Tensor, scale: torch.Tensor,
    attn_scale: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every head's, attention layer's and FFN layer's increase in one pass over the vocabulary.

    z: [B, L, H, dh] head inputs to W_O; resid: [B, L+1, d] layer inputs x_0..x_{L-1} and
    the final residual x_L; target: [B] token ids w; scale: [B] sigma; attn_scale: [B, L]
    the frozen 1/sigma of a norm ending the attention branch (`Decomposition.attn_scale`),
    so head_{l,h} = attn_scale_l z_{l,h} W_O^{l,h}. Returns I(head_{l,h} | x_l) [B, L, H],
    I(ATTN_l | x_l) [B, L] and I(FFN_l | m_l) [B, L].
    Only x_0..x_L are projected besides the heads: ATTN_l's logits are the sum of its
    heads' plus b_O's, so log p(m_l) comes with the heads, and I(FFN_l | m_l) is
    log p(x_{l+1}) - log p(m_l) since x_{l+1} = m_l + FFN_l.
    """
    arch = readout.arch
    B, L, H = z.shape[0], arch.n_layers, arch.n_heads
    device = readout.G.device
    inv, columns = 1 / scale.float().to(device), TargetColumns(target, device)
    head_inv = inv[:, None] * attn_scale.float().to(device)  # [B, L]
    buffers = _Reused(readout.G)
    prepare, head_logits = _head_logits(readout, z, head_inv, buffers)
    b_O = _biases(arch, device)  # [L, d] or None
    r = _scaled(resid.to(device), inv).transpose(0, 1).contiguous()  # [L+1, B, d]: scaled once
    x, mid, heads = (TargetLogProb(shape, device, readout.cap) for shape in ((L + 1, B), (L, B), (L, H, B)))
    for start, G_c in readout.chunks():
        P = prepare(start, G_c)
        bias = None if b_O is None else b_O @ G_c  # [L, Vc], unscaled logits of b_O
        for rows in readout.blocks(B, L + H + 2):  # base [L+1, b, Vc], heads [H, b, Vc], m_l [b, Vc]
            column = columns.at(rows, start, G_c.shape[1])  # [b], or None
            x_b = r[:, rows]  # [L+1, b, d]
            base = torch.matmul(x_b, G_c, out=buffers.out("base", (L + 1, x_b.shape[1], G_c.shape[1])))
            for l in range(L):
                tile = head_logits(P, l, rows)  # [H, b, Vc]
                m = tile.sum(0).add_(base[l])  # [b, Vc]: log p(m_l)'s logits
                if bias is not None:
                    m.addcmul_(head_inv[rows, l, None], bias[l])
                mid.add((l, rows), m, column)
                heads.add((l, slice(None), rows), tile.add_(base[l]), column)
            x.add((slice(None), rows), base, column)
    lp_x, lp_mid = x.value, mid.value  # [L+1, B], [L, B]
    return (heads.value - lp_x[:L, None]).permute(2, 0, 1), (lp_mid - lp_x[:L]).T, (lp_x[1:] - lp_mid).T


def _biases(arch: Arch, device: torch.device) -> torch.Tensor | None:
    """[L, d]: every layer's b_O in float32 (zeros where a layer has none); None where no layer has one."""
    b_O = [arch.b_O(l) for l in range(arch.n_layers)]
    if all(b is None for b in b_O):
        return None
    return torch.stack([torch.zeros(arch.d_model) if b is None else b.float().cpu() for b in b_O]).to(device)


def position_increase(readout: Readout, dec: Decomposition, layer: int, head: int, target: torch.Tensor) -> torch.Tensor:
    """[B, T]: I(attn_scale_l alpha_{l,h}(t,p) v_{l,h,p} W_O^{l,h} | x_l) for every position p of one head.

    Needs decompose(..., record=["pattern", "values"]); positions after the last score 0.
    """
    B, T = dec.input_ids.shape
    every = torch.arange(T, device=target.device).expand(B, T)
    return heads_position_increase(readout, dec, [(layer, head)], every, target)[:, 0]


def heads_position_increase(readout: Readout, dec: Decomposition, heads: Sequence[Head], positions: torch.Tensor,
                            target: torch.Tensor) -> torch.Tensor:
    """[B, S, P]: `position_increase` of S heads at P positions [B, P] of each prompt, one pass
    over the vocabulary for them all (e.g. the label positions, Fig. 7).

    Folded: alpha v [dh] scores against W_O^{l,h} @ G_c [dh, Vc], each head against its own
    layer's input x_l. Needs decompose(..., record=["pattern", "values"]).
    """
    layers = torch.tensor([l for l, _ in heads])
    S, P = len(heads), positions.shape[1]
    at = positions.to(dec.resid.device)[:, None].expand(-1, S, -1)  # [B, S, P]
    alpha = dec.require("pattern")[:, layers, [h for _, h in heads]].gather(-1, at)  # [B, S, P]
    values = dec.head_values(list(heads))  # [B, S, T, dh]
    v = values.gather(2, at.unsqueeze(-1).expand(-1, -1, -1, values.shape[-1]))  # [B, S, P, dh]
    u = _scaled(alpha.unsqueeze(-1) * v, dec.attn_scale[:, layers].float() / dec.scale.float()[:, None])  # [B, S, P, dh]
    return readout.increase(dec.resid[:, layers], lambda WG, rows: torch.einsum("bskh,shv->bskv", u[rows], WG), P,
                            target, dec.scale, prepare=lambda start, G_c: readout.heads_fold(start, G_c, heads))


def neuron_increase(readout: Readout, dec: Decomposition, layer: int, target: torch.Tensor) -> torch.Tensor:
    """[B, d_ffn]: I(ffn_scale_l a_{l,k} W_out^l[k] | m_l) for every neuron k of one layer.

    Needs decompose(..., record=["neurons"]). Folded: a_k scores against W_out[k] @ G_c.
    """
    a = _scaled(dec.require("neurons")[:, layer], dec.ffn_scale[:, layer].float() / dec.scale.float())  # [B, d_ffn]
    W_out = dec.arch.W_out(layer).float()  # [d_ffn, d]
    return readout.increase(
        dec.mid[:, layer], lambda WG, rows: a[rows].unsqueeze(-1) * WG, a.shape[1], target, dec.scale,
        prepare=lambda start, G_c: W_out @ G_c,
    )
