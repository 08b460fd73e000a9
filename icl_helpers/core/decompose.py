"""Batched decomposition of the last position's residual stream.

One forward pass with hooks records, at each prompt's last real token, every layer's
input x_l, attention output ATTN_l, FFN output FFN_l, the heads' pre-projection
vectors z and, where a norm ends a residual branch (Gemma), that norm's 1/sigma; on
request (`record=`) any other field of `Decomposition`. Each field names an
activation site of the adapter's table (`model.adapters`) and says which positions to
keep and how to split heads, so a new quantity is one site row plus one field here.
Prompts are right-padded, so padding changes no number at real positions.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace
from typing import Iterable, Literal

import torch

from ..errors import UsageError
from ..model.adapters import Arch, softcap_
from ..model.hooks import Hook, attached
from ..model.loading import ICLModel, check_model, runs_model

Keep = Literal["last", "all", "last_row"]  # last position; every position; last query row of [.., T, T]


def _recorded(site: str | None = None, keep: Keep = "last", heads: Literal["q", "kv"] | None = None):
    """A field recorded from an adapter site (default: the field's own name); keep: which
    positions; heads: split the last dim into query heads [H, dh] or key/value heads [H_kv, dh]."""
    return field(default=None, metadata={"site": site, "keep": keep, "heads": heads})


@dataclass
class Decomposition:
    """B prompts, T padded length, L layers, H heads, H_kv key/value heads, d width.

    All vectors are at each prompt's last real position unless noted.
    """

    arch: Arch
    input_ids: torch.Tensor  # [B, T]
    last: torch.Tensor | None  # [B] index of the last real token (None in a `LabelRecord`'s)
    # [B, V]: the model's own next-token logits, soft-capped where it caps them (None in a `LabelRecord`'s)
    logits: torch.Tensor | None
    scale: torch.Tensor  # [B]: the final norm's sigma (std for LayerNorm, rms for RMSNorm)
    # [B, L]: 1/sigma of the norm that ends the attention branch (Gemma 2, 3, OLMo 2), frozen like `scale`, so that
    # head_{l,h} = attn_scale_l z_{l,h} W_O^{l,h} (W_O holds that norm's gain); 1 where the family has none
    attn_scale: torch.Tensor | None = None
    ffn_scale: torch.Tensor | None = None  # [B, L]: the same for the FFN branch (None in a `LabelRecord`'s)
    resid: torch.Tensor = _recorded()  # [B, L+1, d]: x_0 .. x_{L-1} (layer inputs) and f = x_L
    attn: torch.Tensor = _recorded()  # [B, L, d]: ATTN_l, output bias included
    ffn: torch.Tensor = _recorded(site="mlp")  # [B, L, d]: FFN_l
    z: torch.Tensor = _recorded(heads="q")  # [B, L, H, dh]: input to the attention output projection
    pattern: torch.Tensor | None = _recorded(keep="last_row")  # [B, L, H, T]: attention of the last position
    values: torch.Tensor | None = _recorded(keep="all", heads="kv")  # [B, L, H_kv, T, dh]: every position
    attn_all: torch.Tensor | None = _recorded(site="attn", keep="all")  # [B, L, T, d]: ATTN_l at every position
    # [B, L, T, d]: what the key projection reads at every position (the layer's normed input; x_l without a norm)
    key_input: torch.Tensor | None = _recorded(keep="all")
    queries: torch.Tensor | None = _recorded(heads="q")  # [B, L, H, dh]: queries before any rotation, after any q_norm
    neurons: torch.Tensor | None = _recorded()  # [B, L, d_ffn]: FFN activations

    @property
    def mid(self) -> torch.Tensor:
        """[B, L, d]: m_l = x_l + ATTN_l."""
        return self.resid[:, :-1] + self.attn

    @property
    def predictions(self) -> torch.Tensor:
        """[B]: argmax token of the model's logits."""
        return self.logits.argmax(-1)

    def at_positions(self, index: torch.Tensor) -> "Decomposition":
        """This decomposition with its every-position fields (input_ids, pattern, values,
        attn_all, key_input) kept at positions `index` [B, P] only: position p of the result is
        position index[:, p] of this one. Last-position fields are unchanged."""
        B, P = index.shape

        def take(t: torch.Tensor | None, dim: int) -> torch.Tensor | None:
            if t is None:
                return None
            at = index.to(t.device).view(B, *[1] * (dim - 1), P, *[1] * (t.dim() - dim - 1))
            return t.gather(dim, at.expand(*t.shape[:dim], P, *t.shape[dim + 1 :]))

        return replace(self, input_ids=take(self.input_ids, 1), pattern=take(self.pattern, 3),
                       values=take(self.values, 3), attn_all=take(self.attn_all, 2), key_input=take(self.key_input, 2))

    def select(self, rows: torch.Tensor) -> "Decomposition":
        """The prompts `rows` [n] of this decomposition, in that order."""
        return replace(self, **{f.name: getattr(self, f.name)[rows.to(self.input_ids.device)] for f in fields(self)
                                if f.name != "arch" and getattr(self, f.name) is not None})

    def require(self, name: str) -> torch.Tensor:
        """The recorded field `name`, or a ValueError saying how to record it."""
        value = getattr(self, name)
        if value is None:
            raise ValueError(f"Call decompose(..., record=[{name!r}]) to record {name}.")
        return value

    def heads(self) -> torch.Tensor:
        """[B, L, H, d]: head_{l,h} = attn_scale_l z_{l,h} @ W_O^{l,h}; they sum to ATTN_l less its bias."""
        heads = torch.einsum("blhk,lhkd->blhd", self.z, self.arch.W_O_stack(self.z))
        return heads * self.attn_scale[:, :, None, None].to(heads)

    def value_outputs(self, layer: int, head: int) -> torch.Tensor:
        """[B, T, d]: attn_scale_l v_{l,h,p} @ W_O^{l,h} at every position p, what the head
        would write to the last position's residual from p alone (needs values)."""
        v = self.require("values")[:, layer, self.arch.kv_head(head)]
        return (v @ self.arch.W_O(layer)[head].to(v)) * self.attn_scale[:, layer, None, None].to(v)

    def head_values(self, heads: list[tuple[int, int]]) -> torch.Tensor:
        """[B, S, T, dh]: the values v_{l,h,p} each listed (layer, head) reads, every position
        (its key/value head's, with grouped-query attention; needs values)."""
        layers = torch.tensor([l for l, _ in heads])
        return self.require("values")[:, layers, torch.tensor([self.arch.kv_head(h) for _, h in heads])]

    def position_terms(self, layer: int, head: int) -> torch.Tensor:
        """[B, T, d]: alpha_{l,h}(t, p) v_{l,h,p} W_O^{l,h}; sums over p to head_{l,h}."""
        alpha = self.require("pattern")[:, layer, head]
        return alpha.unsqueeze(-1) * self.value_outputs(layer, head)

    def attention_sums(self, layer: int) -> torch.Tensor:
        """[B, T, d]: sum_{j<l} ATTN_j at every position: x_l - x_0 - sum_{j<l} FFN_j, what the
        attention layers before `layer` wrote (needs attn_all)."""
        return self.require("attn_all")[:, :layer].sum(1)

    def query_in_key_space(self, layer: int, head: int) -> torch.Tensor:
        """[B, d]: q_{l,h} @ W_K^{l,h}, the last query mapped back to the key-input space."""
        q = self.require("queries")[:, layer, head]
        return q @ self.arch.W_K(layer)[self.arch.kv_head(head)].to(q)


def concat(parts: list[Decomposition]) -> Decomposition:
    """One decomposition of the prompts of all `parts`, in order (every-position fields must
    have one length, as after `at_positions` with the same P)."""
    tensors = {f.name: [getattr(d, f.name) for d in parts] for f in fields(Decomposition) if f.name != "arch"}
    return Decomposition(parts[0].arch, **{k: None if v[0] is None else torch.cat(v) for k, v in tensors.items()})


ALWAYS = ("resid", "attn", "ffn", "z")
BRANCHES = {"attn_scale": "attn", "ffn_scale": "mlp"}  # field -> the residual branch whose ending norm's 1/sigma it holds
OPTIONAL = tuple(f.name for f in fields(Decomposition) if f.metadata and f.name not in ALWAYS)


def _split_heads(t: torch.Tensor, arch: Arch, heads: str | None, keep: Keep) -> torch.Tensor:
    """[B, L, ..., n*dh] -> [B, L, n, dh] (last position) or [B, L, n, T, dh] (every position)."""
    if heads is None:
        return t
    n = arch.n_heads if heads == "q" else arch.n_kv_heads
    t = t.view(*t.shape[:-1], n, arch.d_head)
    return t.transpose(2, 3) if keep == "all" else t


@runs_model
def decompose(m: ICLModel, prompts: list[str], *, record: Iterable[str] = ()) -> Decomposition:
    """Run the prompts as one right-padded batch and decompose each last position.

    record: optional fields of `Decomposition` to record as well (pattern, values,
    attn_all, queries, neurons, key_input); values, attn_all and key_input hold every position
    and cost memory.
    """
    record = tuple(record)
    unknown = sorted(set(record) - set(OPTIONAL))
    if unknown:
        raise UsageError(f"decompose cannot record {', '.join(unknown)}; choose from {', '.join(OPTIONAL)}.")
    arch = check_model(m).arch
    enc = m.encode(prompts)
    out_device = arch.W_U().device
    last = (enc["attention_mask"].sum(1) - 1).to(out_device)
    rows = torch.arange(len(last), device=out_device)
    keep_rows = {
        "last": lambda t: t.to(out_device)[rows, last],
        "all": lambda t: t.to(out_device),
        "last_row": lambda t: t.to(out_device)[rows, :, last],
    }
    wanted = [f for f in fields(Decomposition) if f.name in ALWAYS + record]
    parts: dict[str, list] = {f.name: [None] * arch.n_layers for f in wanted}

    def hook(name: str, site_name: str, layer: int, keep: Keep) -> Hook:
        """Store field `name`'s part of `layer` from the hook on its site."""
        site = arch.sites[site_name]

        def store(module, *call) -> None:  # call: (args,) for a pre-hook, (args, output) for a post-hook
            parts[name][layer] = keep_rows[keep](site.read(*call))

        return (arch.module(site_name, layer), site.hook, store)

    hooks = [
        hook(f.name, f.metadata["site"] or f.name, l, f.metadata["keep"]) for f in wanted for l in range(arch.n_layers)
    ]
    final: dict[str, torch.Tensor] = {}
    hooks.append((arch.final_norm(), "pre", lambda mod, args: final.update(f=keep_rows["last"](args[0]))))
    branch_scales: dict[tuple[str, int], torch.Tensor] = {}  # (branch, layer) -> [B]: 1/sigma at the last position
    for branch, layer in itertools.product(BRANCHES.values(), range(arch.n_layers)):
        norm = arch.branch_norm(branch, layer)
        if norm is not None:
            hooks.append((norm, "pre", lambda mod, args, key=(branch, layer):
                          branch_scales.update({key: 1 / arch.sigma(keep_rows["last"](args[0]), mod)})))
    with attached(hooks):
        hidden = m.model.base_model(**enc, use_cache=False).last_hidden_state
    logits = softcap_(m.model.get_output_embeddings()(keep_rows["last"](hidden)), arch.final_softcap)

    stacked = {
        f.name: _split_heads(torch.stack(parts[f.name], 1), arch, f.metadata["heads"], f.metadata["keep"]) for f in wanted
    }
    stacked["resid"] = torch.cat([stacked["resid"], final["f"].unsqueeze(1)], 1)
    one = torch.ones(len(last), device=out_device)
    branch = {name: torch.stack([branch_scales.get((b, l), one) for l in range(arch.n_layers)], 1) for name, b in BRANCHES.items()}
    return Decomposition(
        arch=arch,
        input_ids=enc["input_ids"].to(out_device),
        last=last,
        logits=logits,
        scale=arch.sigma(final["f"]),
        **branch,
        **stacked,
    )
