"""Vocabulary projections and label measures of heads.

Label positions are given as indices or boolean masks over a decomposition's position
axis; a label's own token is the token at its position. Heads are (layer, head) pairs, S
of them.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache

import torch
from tqdm import tqdm

from .attribution import Readout
from .decompose import Decomposition
from .heads import Head

# English stop words removed from projection lists, as the paper does (our own list).
STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves s t d ll m o re ve y
""".split())


@lru_cache(maxsize=8)
def kept_tokens(tokenizer) -> torch.Tensor:
    """[V] bool: tokens that are not stop words, punctuation, digits-free blanks or special."""
    words = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    special = set(tokenizer.all_special_ids)

    def keep(i: int, w: str) -> bool:
        w = w.strip().lower()
        return bool(w) and i not in special and w not in STOP_WORDS and not all(c in string.punctuation for c in w)

    return torch.tensor([keep(i, w) for i, w in enumerate(words)])


def top_tokens(readout: Readout, tokenizer, vectors: torch.Tensor, k: int = 10, filter_stop_words: bool = True) -> list[list[str]]:
    """The k best tokens of bs(v) for each of n vectors [n, d] (sigma does not change the order)."""
    logits = readout.direct(vectors, torch.ones(len(vectors), device=vectors.device))  # [n, V]
    if filter_stop_words:
        kept = kept_tokens(tokenizer).to(logits.device)
        logits = logits[:, : len(kept)].masked_fill(~kept[: logits.shape[-1]], -torch.inf)
    ids = logits.topk(k, dim=-1).indices.tolist()
    return [token_strings(tokenizer, row) for row in ids]


def token_strings(tokenizer, ids: list[int]) -> list[str]:
    """Each token id as its text with its leading space; bytes that are not a whole UTF-8
    character (byte-level BPE pieces, SentencePiece's byte fallback) as "�" (U+FFFD), as a decoder shows them."""
    raws = tokenizer.convert_ids_to_tokens(ids)
    byte_level = tokenizer.convert_ids_to_tokens(tokenizer(" the", add_special_tokens=False)["input_ids"])[0].startswith("Ġ")
    out = []
    for raw in raws:
        if re.fullmatch(r"(<0x[0-9A-Fa-f]{2}>)+", raw):  # SentencePiece byte fallback
            out.append(bytes(int(h, 16) for h in re.findall(r"<0x(..)>", raw)).decode("utf-8", "replace"))
        elif byte_level and all(c in _BYTE_OF for c in raw):
            out.append(bytes(_BYTE_OF[c] for c in raw).decode("utf-8", "replace"))
        else:
            out.append(raw.replace("▁", " "))
    return out


def concept_forms(label: str) -> frozenset[str]:
    """A label's related concepts as texts (Tables 1 and 3, l. 389): its lower-case, capitalized
    and upper-case spellings, each alone and after a space ("bar", "Bar", "BAR", " bar", " Bar", " BAR")."""
    word = label.strip()
    return frozenset(f"{space}{case}" for case in (word.lower(), word.capitalize(), word.upper()) for space in ("", " "))


def related_concepts(tokenizer, label: str) -> list[int]:
    """The ids of the vocabulary's whole tokens whose text (`token_strings`) is one of the label's
    `concept_forms`, in id order: its related concepts as the model can project them."""
    forms = concept_forms(label)
    return [i for i, text in enumerate(vocabulary_texts(tokenizer)) if text in forms]


@lru_cache(maxsize=8)
def vocabulary_texts(tokenizer) -> tuple[str, ...]:
    """Every token's text (`token_strings`), in id order."""
    return tuple(token_strings(tokenizer, list(range(len(tokenizer)))))


def _gpt2_byte_map() -> dict[str, int]:
    """Byte-level BPE's printable stand-in character -> the byte it stands for (GPT-2, Llama 3)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = kept + [256 + n for n in range(256 - len(kept))]
    return dict(zip(map(chr, chars), kept + [b for b in range(256) if b not in kept]))


_BYTE_OF = _gpt2_byte_map()


def project_head(readout: Readout, tokenizer, dec: Decomposition, prompt: int, head: Head, labels: list[int],
                 k: int = 10) -> dict[str, list[list[str]]]:
    """Tables 1 and 3 for one head of one prompt of `dec`: the top-k tokens of each label value,
    each label key (the paper's: what the key projection reads, l. 279), and the last query
    (unturned, q W_K), by kind ("label value", "label key", "last query").

    labels: indices of the prompt's label positions on dec's position axis. dec needs
    decompose(..., record=["values", "key_input", "queries"]) (or those fields at chosen
    positions, `Decomposition.at_positions`).
    """
    layer, h = head
    vectors = {
        "label value": dec.value_outputs(layer, h)[prompt, labels],
        "label key": dec.require("key_input")[prompt, layer, labels],
        "last query": dec.query_in_key_space(layer, h)[prompt : prompt + 1],
    }
    return {kind: top_tokens(readout, tokenizer, v, k) for kind, v in vectors.items()}


def label_value_ranks(readout: Readout, dec: Decomposition, heads: list[Head], labels: torch.Tensor) -> torch.Tensor:
    """[B, S, T]: rank (1 = top) of each label's own token in bs of its value, nan off labels
    (`value_ranks` of each position's own token, every token counted).

    labels: [B, T] bool mask of label positions on dec's position axis. dec needs values.
    """
    ranks = value_ranks(readout, dec, heads, dec.input_ids[..., None])
    return ranks.masked_fill(~labels[:, None].to(ranks.device), torch.nan)


def value_ranks(readout: Readout, dec: Decomposition, heads: list[Head], targets: torch.Tensor,
                counted: torch.Tensor | None = None, bar: tqdm | None = None) -> torch.Tensor:
    """[B, S, T]: rank (1 = top) of the best of each position's target tokens in bs of its value
    in each head: 1 + the number of counted tokens that are not targets and score strictly
    higher than the best target (every token counted where counted is None).

    targets: [B, T, C] token ids (-1: none; a position with none ranks below every token);
    counted: [V] bool; bar: advanced a chunk at a time (`Readout.chunk_bar`). dec needs values.
    Counted over vocabulary chunks. Folded: a value v [dh] scores against W_O^{l,h} @ G_c [dh, Vc],
    made once a chunk for all the prompts (d/dh times fewer operations a prompt), a block of
    prompts at a time. A positive scale of the value (sigma, `Decomposition.attn_scale`) changes
    no rank, so none is applied.
    """
    v = dec.head_values(heads).float().transpose(0, 1)  # [S, B, T, dh]
    S, B, T, dh = v.shape
    targets = targets.to(v.device)
    W_O = readout.heads_W_O(heads)  # [S, dh, d]
    target_logits = torch.einsum("sbtk,skd,btcd->sbtc", v, W_O, readout.G[targets.clamp(min=0)])  # [S, B, T, C]
    best = target_logits.masked_fill(targets < 0, -torch.inf).amax(-1)  # [S, B, T]
    higher = torch.zeros_like(best)
    for start, G_c in readout.chunks(bar):  # G_c [d, Vc]
        WG = readout.heads_fold(start, G_c, heads)  # [S, dh, Vc]
        ids = torch.arange(start, start + G_c.shape[1], device=v.device)
        kept = torch.ones_like(ids, dtype=torch.bool) if counted is None else counted.to(v.device)[ids]  # [Vc]
        for rows in readout.blocks(B, S * T):
            block = v[:, rows]  # [S, b, T, dh]
            logits = (block.flatten(1, 2) @ WG).view(*block.shape[:3], -1)  # [S, b, T, Vc]
            others = kept & (ids != targets[rows, :, :, None]).all(2)  # [b, T, Vc]: a target never outranks the best
            higher[:, rows] += ((logits > best[:, rows, :, None]) & others).sum(-1)
    return (higher + 1).transpose(0, 1)  # [B, S, T]


def label_attention(dec: Decomposition, mask: torch.Tensor) -> torch.Tensor:
    """[B, L, H]: attention from the last position summed over the positions in mask [B, T],
    every head. dec needs pattern.
    """
    alpha = dec.require("pattern")  # [B, L, H, T]
    return (alpha * mask[:, None, None].to(alpha)).sum(-1)


def attention_at(dec: Decomposition, positions: torch.Tensor) -> torch.Tensor:
    """[B, L, H, P]: attention from the last position to each of positions [B, P] (-1: none,
    giving NaN), every head. dec needs pattern.
    """
    alpha = dec.require("pattern")  # [B, L, H, T]
    B, L, H, _ = alpha.shape
    index = positions.clamp(min=0).to(alpha.device)[:, None, None].expand(B, L, H, -1)
    return alpha.gather(-1, index).masked_fill((positions < 0).to(alpha.device)[:, None, None], float("nan"))
