"""A two-layer GPT-2 whose weights are set by hand so that it learns a two-class task in context the way the paper
says models do: its in-context head is known before any study runs.

Layer 0 has two positional heads. One copies the class of the token before each position (so the last position, the
separator after the input, holds the input's class); the other copies the class of the token two back (so each label
position holds its demonstration's class). Layer 1's head 0, the in-context head, has its query read the first and its
key the second: the last position attends to the labels of the demonstrations of the input's class, and its value
copies those labels' words to the output. The query and key are the paper's two towers; nothing else writes a logit
(no MLP, every other head silent, the unembedding reads only that head's output).

The head two back has no token to read at the second position, so it reads the first word there. Where the first
demonstration is true (the re-ordered prompts), the second position's key then matches, and part of the in-context
head's attention goes to that separator, which carries no label: the tests read no claim of those prompts.

Every vector written to the residual stream has mean zero (a last coordinate takes the rest), so each LayerNorm
only rescales it. Shapes: width D = 128, H = 4 heads of 32 dimensions, positions up to 64."""
from __future__ import annotations

import math

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from icl_helpers import ICLModel

D, H, DH, POSITIONS = 128, 4, 32, 64
FREQUENCIES = 16  # sine-cosine pairs of the position code, dims 0-31
CLASS, FOO, BAR, BEFORE, TWO_BACK, OUT_FOO, OUT_BAR, REST = 32, 33, 34, 35, 36, 37, 38, D - 1
IN_CONTEXT_HEAD = (1, 0)  # (layer, head)
SHARP = 4.0  # the positional heads' query scale: attention one-hot on their offset
MATCH = 6.0  # the in-context head's query scale: attention on the labels of the input's class


def zero_mean(v: torch.Tensor) -> torch.Tensor:
    """v [..., D] with its last coordinate set so that each vector sums to 0 (a LayerNorm then only rescales it)."""
    v = v.clone()
    v[..., REST] = 0
    v[..., REST] = -v.sum(-1)
    return v


def _positional_head(w_qkv: torch.Tensor, w_out: torch.Tensor, head: int, offset: int, write: int) -> None:
    """Head `head` of a layer: attends from each position to the one `offset` before it, and writes the class
    coordinate it reads there to coordinate `write`."""
    q, k, v = (slice(part * D + head * DH, part * D + (head + 1) * DH) for part in range(3))
    for f in range(FREQUENCIES):
        angle = 2 * math.pi * (f + 1) / POSITIONS * offset
        c, s = math.cos(angle), math.sin(angle)
        rows = slice(2 * f, 2 * f + 2)
        # query: the position code turned back by `offset`, so it meets the key of the position `offset` before
        w_qkv[rows, q.start + 2 * f: q.start + 2 * f + 2] = SHARP * torch.tensor([[c, -s], [s, c]])
        w_qkv[rows, k.start + 2 * f: k.start + 2 * f + 2] = torch.eye(2)
    w_qkv[CLASS, v.start] = 1.0
    w_out[head * DH] = zero_mean(torch.nn.functional.one_hot(torch.tensor(write), D).float())


def wired_model(tokenizer, classes: dict[str, list[str]], labels: tuple[str, str] = ("foo", "bar")) -> ICLModel:
    """The model above over `tokenizer`'s vocabulary: the words of the first class of `classes` carry class +1, the
    second's -1 (each with and without a leading space; every one a single token), and the label words (after a
    space) the coordinates FOO and BAR."""
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=POSITIONS, n_embd=D, n_layer=2, n_head=H,
                                       tie_word_embeddings=False))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for block in model.transformer.h:
            block.ln_1.weight.fill_(1.0)
            block.ln_2.weight.fill_(1.0)
        model.transformer.ln_f.weight.fill_(1.0)
        tokens = torch.zeros(len(tokenizer), D)
        for sign, words in zip((1.0, -1.0), classes.values()):
            for word in words:
                for form in (word, " " + word):
                    (token,) = tokenizer(form, add_special_tokens=False)["input_ids"]
                    tokens[token, CLASS] = sign
        label_ids = [tokenizer(" " + word, add_special_tokens=False)["input_ids"] for word in labels]
        for (token,), at in zip(label_ids, (FOO, BAR)):
            tokens[token, at] = 1.0
        model.transformer.wte.weight.copy_(zero_mean(tokens))
        angles = 2 * math.pi * torch.outer(torch.arange(POSITIONS).float(), torch.arange(1, FREQUENCIES + 1).float()) / POSITIONS
        positions = torch.zeros(POSITIONS, D)
        positions[:, 0: 2 * FREQUENCIES: 2], positions[:, 1: 2 * FREQUENCIES: 2] = angles.cos(), angles.sin()
        model.transformer.wpe.weight.copy_(zero_mean(positions))
        first, second = model.transformer.h
        _positional_head(first.attn.c_attn.weight, first.attn.c_proj.weight, 0, 1, BEFORE)
        _positional_head(first.attn.c_attn.weight, first.attn.c_proj.weight, 1, 2, TWO_BACK)
        w_qkv, w_out = second.attn.c_attn.weight, second.attn.c_proj.weight
        w_qkv[BEFORE, 0] = MATCH  # the query: the input's class
        w_qkv[TWO_BACK, D] = 1.0  # the key: a label's demonstration's class
        w_qkv[FOO, 2 * D], w_qkv[BAR, 2 * D + 1] = 1.0, 1.0  # the value: the label's word
        w_out[0] = zero_mean(torch.nn.functional.one_hot(torch.tensor(OUT_FOO), D).float())
        w_out[1] = zero_mean(torch.nn.functional.one_hot(torch.tensor(OUT_BAR), D).float())
        for (token,), at in zip(label_ids, (OUT_FOO, OUT_BAR)):
            model.lm_head.weight[token, at] = 1.0
    return ICLModel(model.eval(), tokenizer, name="wired")
