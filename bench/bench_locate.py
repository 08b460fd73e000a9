"""Locate benchmark (issue 6): the full head-level locate against the forward pass alone,
the authors' per-prompt algorithm and TransformerLens, on the same prompts in one run.

    .venv/bin/python bench/bench_locate.py            # every case, about 15 minutes on 2 CPU cores
    .venv/bin/python bench/bench_locate.py --quick    # small N, a couple of minutes
    .venv/bin/python bench/bench_locate.py --device cuda   # adds the Llama-7B-shaped bf16 case
    .venv/bin/python bench/bench_locate.py --models smollm2-135m qwen2.5-coder-0.5b gemma3-270m --n 1024
        # only locate against the forward pass, on each named model (offline short names or hub ids)

Each measurement runs in a fresh subprocess (`--job`), so its peak memory is its own: peak
resident memory (VmHWM, reset after the model is loaded and warmed up) on the CPU, peak
allocated memory on a GPU. Times are medians of `--repeats` runs after one warm-up batch.
The authors' algorithm is timed on a few prompts and extrapolated per prompt; every
other method runs on all N prompts. Results print as a Markdown table (see RESULTS.md).
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from icl_helpers import ICLModel, load_model  # noqa: E402
from icl_helpers.core.attribution import Readout, position_increase  # noqa: E402
from icl_helpers.core.decompose import decompose  # noqa: E402
from icl_helpers.core.locate import locate  # noqa: E402
from icl_helpers.model.hooks import attached  # noqa: E402
from icl_helpers.paths import write_text_atomically  # noqa: E402
from tests.conftest import vocab_tokenizer  # noqa: E402  (the real GPT-2 and Llama-2 vocabularies, offline)

AGNEWS_CHARS = 170  # each text cut to this many characters: prompts of about 200 tokens
TOP_HEADS = 10


# --- models and prompts --------------------------------------------------------------
RANDOM_MODELS = ("gpt2-small", "llama-7b")


def build_model(name: str, device: str) -> ICLModel:
    """A randomly initialised GPT-2-small- or Llama-7B-shaped model, else load_model(name)."""
    if name not in RANDOM_MODELS:
        return load_model(name, device=device)
    from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig

    torch.manual_seed(0)
    if name == "gpt2-small":
        tokenizer = vocab_tokenizer("gpt2")
        model = GPT2LMHeadModel(GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=len(tokenizer)))
        return ICLModel(model.to(device), tokenizer, name=name)
    # Llama-7B's shapes and its SentencePiece vocabulary of 32,000 (the LLaMA-1/2 tokenizer)
    tokenizer = vocab_tokenizer("llama-spm")
    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=32, vocab_size=len(tokenizer), max_position_embeddings=4096)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return ICLModel(model, tokenizer, name=name)


def build_prompts(data: str, n: int) -> list[str]:
    """n word prompts (both word datasets, shuffled) or n AG News prompts."""
    from icl_helpers.data.prompts import build_prompts as render
    from icl_helpers.data.sentences import sentence_records
    from icl_helpers.data.words import load_word_records

    if data == "agnews":
        records = sentence_records("agnews", n=n, max_chars=AGNEWS_CHARS)
    else:
        records = load_word_records("sentiment_number") + load_word_records("animal_country")
        random.Random(0).shuffle(records)
        records = (records * (n // len(records) + 1))[:n]
    return [p.text for p in render(records)]


# --- the methods timed ---------------------------------------------------------------
def forward_pass(m: ICLModel, prompts: list[str], batch_size: int, logits_to_keep: int = 0) -> None:
    """(1) The model's own forward pass, nothing recorded: logits at every position (0), or
    at the last `logits_to_keep` positions."""
    with torch.no_grad():
        for start in range(0, len(prompts), batch_size):
            m.model(**m.encode(prompts[start : start + batch_size]), use_cache=False, logits_to_keep=logits_to_keep)


def locate_forward(m: ICLModel, prompts: list[str], batch_size: int) -> None:
    """Locate's forward passes alone: the hooked decomposition, no scoring."""
    for start in range(0, len(prompts), batch_size):
        decompose(m, prompts[start : start + batch_size])


def positions(m: ICLModel, prompts: list[str], batch_size: int, heads: list[tuple[int, int]]) -> None:
    """(2b) Position-level scores of the given heads for every prompt."""
    readout = Readout(m.arch)
    for start in range(0, len(prompts), batch_size):
        dec = decompose(m, prompts[start : start + batch_size], record=["pattern", "values"])
        for layer, head in heads:
            position_increase(readout, dec, layer, head, dec.predictions)


def authors_scores(m: ICLModel, prompt: str) -> tuple[list, list, list]:
    """(3) The authors' per-prompt algorithm, as in their released notebooks: record one
    prompt's activations as Python lists, then loop over layers and heads, projecting each
    d-dimensional vector through the frozen final norm and the whole unembedding.

    Returns head [L][H], attention [L] and FFN [L] log-probability increases.
    """
    arch, lm_head = m.arch, m.model.get_output_embeddings()
    rec: dict[str, list] = {"x": [], "z": [], "attn": [], "mlp": []}
    hooks = [(arch.final_norm(), "pre", lambda mod, args: rec.update(final=args[0][0].tolist()))]
    for l in range(arch.n_layers):
        hooks += [
            (arch.blocks()[l], "pre", lambda mod, args: rec["x"].append(args[0][0].tolist())),
            (arch.attn_out(l), "pre", lambda mod, args: rec["z"].append(args[0][0].tolist())),
            (arch.attn(l), "post", lambda mod, args, out: rec["attn"].append(out[0][0].tolist())),
            (arch.module("mlp", l), "post", lambda mod, args, out: rec["mlp"].append(out[0].tolist())),
        ]
    with torch.no_grad(), attached(hooks):
        logits = m.model(**m.encode([prompt])).logits
        w = int(logits[0, -1].argmax())
        final = torch.tensor(rec["final"][-1])
        centre = arch.norm_kind == "layer"
        scale = float(((final - final.mean() * centre).pow(2).mean() + arch.norm_eps()).sqrt())
        gamma = arch.norm_weight()

        def log_prob(vector: torch.Tensor) -> float:
            normed = (vector - vector.mean() * centre) / scale * gamma
            return float(torch.log_softmax(lm_head(normed), -1)[w])

        heads, attn, ffn = [], [], []
        for l in range(arch.n_layers):
            x, a, f = (torch.tensor(rec[k][l][-1]) for k in ("x", "attn", "mlp"))
            base, z, W_O = log_prob(x), rec["z"][l][-1], arch.W_O(l)
            row = []
            for h in range(arch.n_heads):
                head = torch.tensor(z[h * arch.d_head : (h + 1) * arch.d_head]) @ W_O[h]
                row.append(log_prob(x + head) - base)
            heads.append(row)
            mid = log_prob(x + a)
            attn.append(mid - base)
            ffn.append(log_prob(x + a + f) - mid)
    return heads, attn, ffn


def transformer_lens_scores(bridge, m: ICLModel, prompts: list[str], batch_size: int) -> torch.Tensor:
    """(4) Head scores [N, L, H] the way a TransformerLens user computes them: run_with_cache,
    per-head results and residuals through the cached (frozen) final-norm scale
    (apply_ln_to_stack), taken at each prompt's last position, projected on W_U."""
    cfg, out = bridge.cfg, []
    with torch.no_grad():
        for start in range(0, len(prompts), batch_size):
            enc = m.encode(prompts[start : start + batch_size])  # right-padded: real positions unchanged
            logits, cache = bridge.run_with_cache(enc["input_ids"], attention_mask=enc["attention_mask"])
            rows = torch.arange(len(enc["input_ids"]))
            last = enc["attention_mask"].sum(1) - 1
            w = logits[rows, last].argmax(-1)
            heads = cache.apply_ln_to_stack(cache.stack_head_results(layer=-1), layer=-1)[:, rows, last]  # [L*H, b, d]
            resid = cache.apply_ln_to_stack(cache.accumulated_resid(layer=-1), layer=-1)[:, rows, last]  # [L+1, b, d]
            scores = []
            for l in range(cfg.n_layers):
                base = (resid[l] @ bridge.W_U).log_softmax(-1)[rows, w]  # [b]
                new = ((resid[l] + heads[l * cfg.n_heads : (l + 1) * cfg.n_heads]) @ bridge.W_U).log_softmax(-1)
                scores.append(new[:, rows, w] - base)  # [H, b]
            out.append(torch.stack(scores).permute(2, 0, 1))
    return torch.cat(out).cpu()


def boot_bridge(m: ICLModel, device: str):
    """A TransformerLens bridge around a copy of the model (same weights), with
    HookedTransformer-style weight processing as its users enable for logit attribution."""
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(
        "gpt2", hf_model=copy.deepcopy(m.model).eval(), tokenizer=copy.deepcopy(m.tokenizer), device=device
    )
    bridge.enable_compatibility_mode(disable_warnings=True)
    return bridge.requires_grad_(False)


# --- one measurement, in its own process ---------------------------------------------
def _memory_mb(key: str) -> float:
    return int(re.search(rf"{key}:\s+(\d+)", Path("/proc/self/status").read_text()).group(1)) / 1024


def _reset_peak(device: str) -> float:
    """Reset the peak-memory counter; the memory in use now, in MB."""
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated() / 2**20
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (Linux)
    return _memory_mb("VmRSS")


def _peak(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**20
    return _memory_mb("VmHWM")


def _timed(work: Callable[[], object], repeats: int, device: str) -> tuple[float, list[float], object]:
    """Median seconds of `repeats` runs of work(), every time, and the last result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = work()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times, result


def run_job(args: argparse.Namespace) -> dict:
    """Time one method on one case; returns what the table needs."""
    m = build_model(args.model, args.device)
    prompts = build_prompts(args.data, args.n)
    timed_prompts = prompts[: args.subset or len(prompts)]
    bs = args.batch_size
    check: dict = {}
    if args.method == "forward":
        def work() -> object:
            return forward_pass(m, timed_prompts, bs)
    elif args.method == "forward-last":
        def work() -> object:
            return forward_pass(m, timed_prompts, bs, logits_to_keep=1)
    elif args.method == "locate-forward":
        def work() -> object:
            return locate_forward(m, timed_prompts, bs)
    elif args.method == "locate":
        def work() -> object:
            return locate(m, timed_prompts, batch_size=bs)
    elif args.method == "positions":
        heads = [tuple(int(i) for i in h.split(".")) for h in args.heads.split(",")]
        def work() -> object:
            return positions(m, timed_prompts, bs, heads)
    elif args.method == "authors":
        def work() -> object:
            return [authors_scores(m, p) for p in timed_prompts]
    elif args.method == "transformer-lens":
        bridge = boot_bridge(m, args.device)
        def work() -> object:
            return transformer_lens_scores(bridge, m, timed_prompts, bs)
    locate_forward(m, prompts[:bs], bs)  # warm-up
    base_mb = _reset_peak(args.device)
    seconds, times, result = _timed(work, args.repeats, args.device)
    peak_mb = _peak(args.device)
    if args.method == "locate":
        check["top_heads"] = [f"{l}.{h}" for l, h in result.top_heads(TOP_HEADS)]
    if args.method in ("authors", "transformer-lens"):  # the same scores from locate
        ours = locate(m, timed_prompts, batch_size=bs)
        if args.method == "authors":
            theirs = [torch.tensor(s) for s in zip(*result)]  # head [n, L, H], attn [n, L], ffn [n, L]
            check["max_abs_diff"] = max(float((a - b).abs().max()) for a, b in zip(theirs, (ours.head, ours.attn, ours.ffn)))
        else:
            check["max_abs_diff"] = float((result - ours.head).abs().max())
    tokens = m.encode(timed_prompts)["attention_mask"].sum(1).float().mean()
    return dict(seconds=seconds, times=times, n_timed=len(timed_prompts), mean_tokens=float(tokens),
                base_mb=base_mb, peak_mb=peak_mb, load=os.getloadavg()[0], threads=torch.get_num_threads(), **check)


# --- the whole bench -------------------------------------------------------------------
def plan(quick: bool, cuda: bool, models: list[str], n: int | None) -> list[dict]:
    """Cases and methods: (label, model, data, N, [(method, subset)]). With `models`, each
    named model on n word prompts: the forward pass (logits at every position, then at the
    last only), locate's hooked passes, and locate."""
    if models:
        return [dict(label=f"{name}, word prompts", model=name, data="words", n=n or 1024,
                     methods=[(mth, 0) for mth in ("forward", "forward-last", "locate-forward", "locate")])
                for name in models]
    words, news, scale_ns = (64, 16, (32, 128)) if quick else (256, 64, (64, 1024))
    cases = [
        ("SmolLM2, word prompts", "smollm2-135m", "words", words,
         ["forward", "locate-forward", "locate", "positions", ("authors", 2 if quick else 8)]),
        ("SmolLM2, AG News prompts", "smollm2-135m", "agnews", news,
         ["forward", "locate", "positions", ("authors", 1 if quick else 2)]),
        ("GPT-2-small-shaped (random), word prompts", "gpt2-small", "words", words, ["forward", "locate", "transformer-lens"]),
        *[("SmolLM2, word prompts", "smollm2-135m", "words", n, ["forward", "locate"]) for n in scale_ns],
    ]
    if cuda:
        cases.append(("Llama-7B-shaped (random, bf16), word prompts", "llama-7b", "words", words, ["forward", "locate"]))
    return [dict(label=c[0], model=c[1], data=c[2], n=c[3],
                 methods=[mth if isinstance(mth, tuple) else (mth, 0) for mth in c[4]]) for c in cases]


def spawn(case: dict, method: str, subset: int, args: argparse.Namespace, heads: str = "") -> dict:
    cmd = [sys.executable, __file__, "--job", method, "--model", case["model"], "--data", case["data"],
           "--n", str(case["n"]), "--subset", str(subset), "--device", args.device,
           "--batch-size", str(args.batch_size), "--repeats", str(args.repeats), "--heads", heads]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main_bench(args: argparse.Namespace) -> None:
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  device={args.device}  torch threads={torch.get_num_threads()}  "
          f"load average at start={os.getloadavg()}", flush=True)
    print("| case | N | tokens | method | prompts timed | seconds (median) | prompts/s | x forward | "
          "peak MB | peak - before MB | check |")
    print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    results = []
    for case in plan(args.quick, args.device.startswith("cuda"), args.models, args.n):
        forward_s, top = None, ""
        for method, subset in case["methods"]:
            r = spawn(case, method, subset, args, heads=top)
            per_prompt = r["seconds"] / r["n_timed"]
            forward_s = forward_s or r["seconds"]  # forward runs first, on all N
            top = ",".join(r.get("top_heads", [])) or top
            check = f"max abs diff vs locate {r['max_abs_diff']:.1e}" if "max_abs_diff" in r else ""
            if subset:
                check += f"; timed on {subset} prompts, x forward extrapolated to N"
            print(f"| {case['label']} | {case['n']} | {r['mean_tokens']:.0f} | {method} | {r['n_timed']} | "
                  f"{r['seconds']:.2f} | {1 / per_prompt:.2f} | {per_prompt * case['n'] / forward_s:.2f} | "
                  f"{r['peak_mb']:.0f} | {r['peak_mb'] - r['base_mb']:.0f} | {check} |", flush=True)
            results.append(dict(case=case["label"], n=case["n"], method=method, **r))
    if args.json:
        write_text_atomically(Path(args.json), json.dumps(results, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small N and fewer baseline prompts")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (median reported)")
    p.add_argument("--json", help="also write every measurement here")
    p.add_argument("--models", nargs="+", default=[], help="time only locate against the forward pass, on these models")
    p.add_argument("--n", type=int, help="with --models: word prompts (default 1024)")
    p.add_argument("--job", help=argparse.SUPPRESS)  # internal: one measurement in this process
    for name in ("--model", "--data", "--heads"):
        p.add_argument(name, default="", help=argparse.SUPPRESS)
    p.add_argument("--subset", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.job:
        args.method = args.job
        print(json.dumps(run_job(args)))
    else:
        main_bench(args)


if __name__ == "__main__":
    main()
