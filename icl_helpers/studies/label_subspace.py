"""Task-recognition (TR) and task-learning (TL) heads (Yang, Cho & Inoue 2025): how much of a head's
output at the last position lies in the plane of the prompt's two labels' unembeddings, and how much
of that points to the gold label.

Shapes: N prompts, L layers, H heads, d width, V vocabulary. For prompt i, a_{l,h} [d] is head
(l, h)'s output at the last position in the residual stream (`Decomposition.heads`: attn_scale_l
z_{l,h} @ W_O^{l,h}, exact: the heads of a layer sum to its attention output less the bias). It is
read through the frozen final norm, as the paper's decomposition reads every part
(`core.attribution`): u = gamma * C(a) / sigma [d], sigma the final norm's scale of the full
residual at the last position (C centres over d for LayerNorm; the identity for RMSNorm), so that
u @ W_U.T are the head's direct logits, where the model's logits live. With g and o the first
tokens of the prompt's gold and other label and W = W_U[[g, o]] [2, d],

    TR(l, h) = || P_W u ||                     (P_W: the orthogonal projection onto span(W's rows))
    TL(l, h) = u . (W_U[g] - W_U[o]) / TR(l, h)   (signed; 0 where TR is 0)

(Yang et al.'s TL averages over the wrong labels; here there is one.) Both need only the head's
direct logits of the two labels, c = W u = a @ G[[g, o]].T / sigma [2] (G = C(gamma W_U), the
readout's fold, `Readout.G`): TR^2 = c^T (W W^T)^{-1} c and the TL numerator is c_g - c_o, the
head's direct gold-minus-other logit. So every head of a batch is scored at once from the z that one
decomposition pass records ([B, L, H, dh] -> [B, L, H, 2]), with no [V]-sized product. TL lies in
[-||W_U[g] - W_U[o]||, +||W_U[g] - W_U[o]||]: it says where a head points within the plane, not how
far (a head with a tiny output can score high on it; TR says how far). Neither depends on a final
soft cap, which acts on the summed logits.

`label_subspace_scores` keeps both per prompt ([N, L, H] each, cached under the prompts and their
labels); the head-set study averages them over the prompts the model answers correctly (all of them
where it answers none) and then over the word datasets, as the in-context and function-vector
scores (`head_sets.head_scores`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..cache import stored
from ..core.attribution import readout_of
from ..core.decompose import Decomposition
from ..data.prompts import prompt_label_ids
from ..model.loading import ICLModel
from .runner import PromptSet, decomposed

KIND = "label-subspace-scores"  # the results cache's kind


@dataclass
class LabelSubspaceScores:
    """Every head's TR and TL score on each of N prompts (see the module)."""

    tr: torch.Tensor  # [N, L, H]: the norm of the head's normed output projected onto the labels' plane
    tl: torch.Tensor  # [N, L, H]: its gold-minus-other direct logit over TR (signed)


def label_logits(m: ICLModel, dec: Decomposition, gold: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """[B, L, H, 2] float32: every head's direct logits (frozen final norm) of the gold and the other
    label of each of the B prompts of a decomposition of m (gold, other: [B] token ids)."""
    readout = readout_of(m)
    heads = torch.einsum("blhk,lhkd->blhd", dec.z.float(), readout.W_O) * dec.attn_scale.float()[:, :, None, None]
    pair = readout.G[torch.stack([gold, other], 1).to(readout.G.device)]  # [B, 2, d]
    return torch.einsum("blhd,byd->blhy", heads, pair) / dec.scale.float()[:, None, None, None]


def subspace_scores(logits: torch.Tensor, unembedding: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(TR, TL) [B, ...] from the direct logits c of (gold, other) [B, ..., 2] and those labels'
    unembedding rows W [B, 2, d]: TR = sqrt(c^T (W W^T)^{-1} c), TL = (c_g - c_o) / TR (0 where TR is 0)."""
    W = unembedding.double()
    gram = (W @ W.transpose(1, 2)).view(len(W), *[1] * (logits.dim() - 2), 2, 2)  # [B, 1.., 2, 2]
    c = logits.double()
    tr = (c * torch.linalg.solve(gram, c.unsqueeze(-1)).squeeze(-1)).sum(-1).clamp(min=0).sqrt()
    gap = c[..., 0] - c[..., 1]
    tl = torch.where(tr > 0, gap / tr.clamp(min=torch.finfo(torch.float64).tiny), torch.zeros_like(gap))
    return tr.float(), tl.float()


def label_subspace_scores(m: ICLModel, ps: PromptSet, batch_size: int = 32, cache: bool = True) -> LabelSubspaceScores:
    """Every head's TR and TL on each prompt of a set (the prompt's true label gold), from one
    decomposition pass in batches of similar length, every head of a batch at once; cached under the
    prompts and their label words (a text alone does not say which label is gold). See the module."""
    gold, other = prompt_label_ids(m.tokenizer, ps.prompts)

    @torch.no_grad()
    def compute() -> dict[str, torch.Tensor]:
        L, H = m.arch.n_layers, m.arch.n_heads
        out = {"tr": torch.empty(len(ps), L, H), "tl": torch.empty(len(ps), L, H)}
        W_U = m.arch.W_U()
        for rows, dec in decomposed(m, ps, batch_size):
            pair = torch.stack([gold[rows], other[rows]], 1)  # [b, 2]
            tr, tl = subspace_scores(label_logits(m, dec, gold[rows], other[rows]), W_U[pair.to(W_U.device)])
            out["tr"][rows], out["tl"][rows] = tr.cpu(), tl.cpu()
        return out

    labels = [(p.true_label, p.false_label) for p in ps.prompts]
    return LabelSubspaceScores(**stored(KIND, m, ps, compute, cache, labels=labels))
