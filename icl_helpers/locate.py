"""Locate: score every layer and head of many prompts (METHOD.md section 4)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from .attribution import Readout, head_increase
from .decompose import decompose
from .models import ICLModel


@dataclass
class LocateResult:
    """Per-prompt scores for N prompts, L layers, H heads (on the CPU)."""

    head: torch.Tensor  # [N, L, H]: I(head_{l,h} | x_l)
    attn: torch.Tensor  # [N, L]: I(ATTN_l | x_l)
    ffn: torch.Tensor  # [N, L]: I(FFN_l | m_l)
    targets: torch.Tensor  # [N]: the token w each prompt was scored for

    @property
    def head_mean(self) -> torch.Tensor:
        """[L, H]: mean over prompts of the head scores."""
        return self.head.mean(0)

    def top_heads(self, k: int = 20) -> list[tuple[int, int, float]]:
        """The k best heads by mean score, as (layer, head, score), best first."""
        mean = self.head_mean
        top = mean.flatten().topk(min(k, mean.numel()))
        H = mean.shape[1]
        return [(i // H, i % H, v) for v, i in zip(top.values.tolist(), top.indices.tolist())]


@torch.no_grad()
def locate(
    m: ICLModel,
    prompts: list[str],
    targets: torch.Tensor | None = None,
    batch_size: int = 32,
    progress: bool = False,
) -> LocateResult:
    """Score every attention layer, FFN layer and head of every prompt.

    targets: [N] token ids to score; default, each prompt's predicted token.
    The prompts run through the model in batches of `batch_size`; the scoring then runs
    over all of them at once, so folding W_O into the readout is paid once a run.
    """
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in ("z", "base", "attn", "mlp", "scale", "w")}
    for start in tqdm(range(0, len(prompts), batch_size), desc="forward", disable=not progress):
        dec = decompose(m, prompts[start : start + batch_size])
        for key, value in zip(parts, (dec.z, dec.resid[:, :-1], dec.attn, dec.mlp, dec.scale, dec.predictions)):
            parts[key].append(value)
    if len(prompts) == 0:
        m.encode(prompts)  # raises the empty-list error
    z, base, attn, mlp, scale, w = (torch.cat(v) for v in parts.values())
    if targets is not None:
        w = torch.as_tensor(targets, device=w.device)
    readout = Readout(m.arch)
    head = head_increase(readout, m.arch, z, base, w, scale)
    attn_inc = readout.vector_increase(base, attn.unsqueeze(2), w, scale).squeeze(-1)
    ffn_inc = readout.vector_increase(base + attn, mlp.unsqueeze(2), w, scale).squeeze(-1)
    return LocateResult(head.cpu(), attn_inc.cpu(), ffn_inc.cpu(), w.cpu())
