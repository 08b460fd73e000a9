"""Batched decomposition of the last position's residual stream (METHOD.md section 2).

One forward pass with hooks records, at each prompt's last real token, every layer's
input x_l, attention output ATTN_l, FFN output FFN_l and the heads' pre-projection
vectors z; on request also the last position's attention rows, the values, the
attention outputs at every position, the pre-rotation queries and the FFN activations.
Prompts are right-padded, so padding changes no number at real positions.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .adapters import Arch
from .hooks import Hook, attached
from .models import ICLModel


@dataclass
class Decomposition:
    """B prompts, T padded length, L layers, H heads, H_kv key/value heads, d width.

    All vectors are at each prompt's last real position unless noted.
    """

    arch: Arch
    input_ids: torch.Tensor  # [B, T]
    last: torch.Tensor  # [B] index of the last real token
    resid: torch.Tensor  # [B, L+1, d]: x_0 .. x_{L-1} (layer inputs) and f = x_L
    attn: torch.Tensor  # [B, L, d]: ATTN_l, output bias included
    mlp: torch.Tensor  # [B, L, d]: FFN_l
    z: torch.Tensor  # [B, L, H, dh]: input to the attention output projection
    logits: torch.Tensor  # [B, V]: the model's own next-token logits
    scale: torch.Tensor  # [B]: the final norm's sigma (std for LayerNorm, rms for RMSNorm)
    pattern: torch.Tensor | None = None  # [B, L, H, T]: attention of the last position
    values: torch.Tensor | None = None  # [B, L, H_kv, T, dh]: value vectors, every position
    attn_all: torch.Tensor | None = None  # [B, L, T, d]: ATTN_l at every position
    queries: torch.Tensor | None = None  # [B, L, H, dh]: queries before any rotation
    neurons: torch.Tensor | None = None  # [B, L, d_mlp]: FFN activations

    @property
    def mid(self) -> torch.Tensor:
        """[B, L, d]: m_l = x_l + ATTN_l."""
        return self.resid[:, :-1] + self.attn

    @property
    def predictions(self) -> torch.Tensor:
        """[B]: argmax token of the model's logits."""
        return self.logits.argmax(-1)

    def heads(self) -> torch.Tensor:
        """[B, L, H, d]: head_{l,h} = z_{l,h} @ W_O^{l,h}."""
        return torch.einsum("blhk,lhkd->blhd", self.z, self.arch.W_O_stack(self.z))

    def value_outputs(self, layer: int, head: int) -> torch.Tensor:
        """[B, T, d]: v_{l,h,p} @ W_O^{l,h} at every position p (needs values=True)."""
        v = _need(self.values, "values")[:, layer, self.arch.kv_head(head)]
        return v @ self.arch.W_O(layer)[head].to(v)

    def position_terms(self, layer: int, head: int) -> torch.Tensor:
        """[B, T, d]: alpha_{l,h}(t, p) v_{l,h,p} W_O^{l,h}; sums over p to head_{l,h}."""
        alpha = _need(self.pattern, "pattern")[:, layer, head]
        return alpha.unsqueeze(-1) * self.value_outputs(layer, head)

    def key_inputs(self, layer: int) -> torch.Tensor:
        """[B, T, d]: sum_{j<l} ATTN_j at every position: x_l - x_0 - sum_{j<l} FFN_j."""
        return _need(self.attn_all, "attn_all")[:, :layer].sum(1)

    def query_in_key_space(self, layer: int, head: int) -> torch.Tensor:
        """[B, d]: q_{l,h} @ W_K^{l,h}, the last query mapped back to the key-input space."""
        q = _need(self.queries, "queries")[:, layer, head]
        return q @ self.arch.W_K(layer)[self.arch.kv_head(head)].to(q)


def _need(t: torch.Tensor | None, name: str) -> torch.Tensor:
    if t is None:
        raise ValueError(f"Call decompose(..., {name}=True) to record {name}.")
    return t


def final_scale(arch: Arch, f: torch.Tensor) -> torch.Tensor:
    """[B] sigma of the final norm for final residuals f [B, d], in float32."""
    f = f.float()
    if arch.norm_kind == "layer":
        return (f.var(-1, unbiased=False) + arch.norm_eps()).sqrt()
    return (f.pow(2).mean(-1) + arch.norm_eps()).sqrt()


@torch.no_grad()
def decompose(
    m: ICLModel,
    prompts: list[str],
    *,
    pattern: bool = False,
    values: bool = False,
    attn_all: bool = False,
    queries: bool = False,
    neurons: bool = False,
) -> Decomposition:
    """Run the prompts as one right-padded batch and decompose each last position.

    The keyword flags record the optional fields of `Decomposition` (they cost memory:
    values and attn_all hold every position).
    """
    arch = m.arch
    enc = m.encode(prompts)
    mask = enc["attention_mask"]
    out_device = arch.W_U().device
    last = (mask.sum(1) - 1).to(out_device)
    rows = torch.arange(len(last), device=out_device)
    rec: dict[str, list] = {}

    def at_last(t: torch.Tensor) -> torch.Tensor:
        t = t.to(out_device)
        return t[rows, last]

    def put(name: str, layer: int, value: torch.Tensor) -> None:
        rec.setdefault(name, [None] * arch.n_layers)[layer] = value

    hooks: list[Hook] = []
    for l in range(arch.n_layers):
        hooks += [
            (arch.blocks()[l], "pre", lambda mod, args, l=l: put("resid", l, at_last(args[0]))),
            (arch.attn(l), "post", lambda mod, args, out, l=l: _on_attn(out, l)),
            (arch.attn_out(l), "pre", lambda mod, args, l=l: put("z", l, at_last(args[0]))),
            (arch.mlp(l), "post", lambda mod, args, out, l=l: put("mlp", l, at_last(out))),
        ]
        if neurons:
            hooks.append((arch.mlp_out(l), "pre", lambda mod, args, l=l: put("neurons", l, at_last(args[0]))))
        if queries:
            module, cut = arch.query_tap(l)
            hooks.append((module, "post", lambda mod, args, out, l=l, cut=cut: put("queries", l, at_last(out[..., cut]))))
        if values:
            module, cut = arch.value_tap(l)
            hooks.append((module, "post", lambda mod, args, out, l=l, cut=cut: put("values", l, out[..., cut].to(out_device))))

    def _on_attn(out: tuple, l: int) -> None:
        put("attn", l, at_last(out[0]))
        if attn_all:
            put("attn_all", l, out[0].to(out_device))
        if pattern:
            put("pattern", l, out[1].to(out_device)[rows, :, last])

    final: dict[str, torch.Tensor] = {}
    hooks.append((arch.final_norm(), "pre", lambda mod, args: final.update(f=at_last(args[0]))))
    with attached(hooks):
        hidden = m.model.base_model(**enc, use_cache=False).last_hidden_state
    logits = m.model.get_output_embeddings()(at_last(hidden))

    B, T = enc["input_ids"].shape
    stacked = {name: torch.stack(parts, 1) for name, parts in rec.items()}
    if values:  # [B, L, T, H_kv*dh] -> [B, L, H_kv, T, dh]
        stacked["values"] = stacked["values"].view(B, arch.n_layers, T, arch.n_kv_heads, arch.d_head).transpose(2, 3)
    if queries:
        stacked["queries"] = stacked["queries"].view(B, arch.n_layers, arch.n_heads, arch.d_head)
    return Decomposition(
        arch=arch,
        input_ids=enc["input_ids"].to(out_device),
        last=last,
        resid=torch.cat([stacked.pop("resid"), final["f"].unsqueeze(1)], 1),
        z=stacked.pop("z").view(B, arch.n_layers, arch.n_heads, arch.d_head),
        logits=logits,
        scale=final_scale(arch, final["f"]),
        **stacked,
    )
