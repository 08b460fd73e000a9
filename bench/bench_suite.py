"""Suite profile (issue 16): the whole report (every claim of the paper) from an empty
results cache, with where the time goes, how often each prompt goes through the model, and
the floor: one forward pass for each distinct prompt.

    .venv/bin/python bench/bench_suite.py --n 64 --sentence-n 16 --json results.json
    python3 bench/bench_suite.py --model llama-7b --device cuda --n 64 --sentence-n 16   # a GPU

`--model` takes a model's name (SmolLM2 by default) or one of bench_locate's random models of real
shapes and vocabularies (`gpt2-small`, `llama-7b` in bfloat16): the arithmetic is that of the real weights.

Every forward pass of the model is counted (a pre-hook on its base model): calls, prompt
rows, real tokens (attention mask) and tokens with padding by report step, and the
distinct prompts among those rows. A study two claims share is cached, so it is charged to
the first claim that needs it. Two floors are given for the same distinct prompts:
"arithmetic", their matrix products (2 x the parameters of the layers a token, attention
scores, and the unembedding of the last position) at this machine's measured matrix
throughput; and "forward", a plain forward pass over them in the suite's batches,
timed with the eager attention the suite runs (it reads attention weights) and, with
`--sdpa`, with SDPA. `--scale-to` extrapolates each step and its floor linearly to a larger
size (the paper's by default); `--from-json` prints a recorded run again.
Peak resident memory (and on a GPU, its peak allocated memory) is read after loading, after each step and
after the suite. `--ops` also counts, by step, the torch calls made outside the model's forward passes and
the host syncs among all calls (a GPU waits on each: `.item()`, `.tolist()`, `.cpu()`, a tensor read as a
Python bool or number, `nonzero`, `unique`); the counting slows the run, so its times are not the suite's. Results print as Markdown
(see RESULTS.md).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_locate import RANDOM_MODELS, build_model  # noqa: E402

from icl_helpers import ICLModel  # noqa: E402
from icl_helpers.core.batching import token_batches  # noqa: E402
from icl_helpers.paths import write_text_atomically  # noqa: E402
from icl_helpers.stats import MIN_CLUSTERS  # noqa: E402
from icl_helpers.verdicts import CLAIMS, report  # noqa: E402

BATCH = 32  # prompts a batch at most, as every pass of the suite


EMPTY_ROW = {"seconds": 0.0, "calls": 0, "rows": 0, "tokens": 0, "padded": 0, "peak_mb": 0.0}  # a step's counts


class PassCounter:
    """Counts every forward pass of a model by the step that is running: calls, prompt rows,
    real tokens, tokens with padding, and the distinct prompts (token sequences) seen over the whole run."""

    def __init__(self, m: ICLModel):
        self.step = "load"
        self.by_step: dict[str, dict[str, float]] = {}
        self.distinct: dict[tuple[int, ...], str] = {}  # each distinct prompt -> the step that first ran it
        self.handle = m.model.base_model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs) -> None:
        """A pass's rows and tokens; its prompts among the distinct ones unless it continues kept keys and
        values (a one-token pass: its mask covers them too, its own tokens are the mask's last columns)."""
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        mask = torch.ones_like(ids) if mask is None else mask[:, -ids.shape[1]:]
        row = self.by_step.setdefault(self.step, dict(EMPTY_ROW))
        row["calls"] += 1
        row["rows"] += ids.shape[0]
        row["tokens"] += int(mask.sum())
        row["padded"] += ids.numel()
        kept = kwargs.get("past_key_values")
        if kept is not None and kept.get_seq_length() > 0:
            return
        for i, k in zip(ids.cpu(), mask.cpu()):
            self.distinct.setdefault(tuple(i[k.bool()].tolist()), self.step)


# torch calls whose result a GPU must hand back to Python before the program can go on
SYNCS = frozenset({"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "nonzero", "unique",
                   "unique_consecutive"})


class OpCounter(TorchFunctionMode):
    """Counts torch calls by the step `counter` is in: those outside the model's forward passes (what a
    step's own code launches), and the host syncs (SYNCS) anywhere."""

    def __init__(self, m: ICLModel, counter: PassCounter):
        super().__init__()
        self.m, self.counter, self.depth = m, counter, 0

    def __enter__(self):
        self.handles = [self.m.model.register_forward_pre_hook(lambda *a: self._enter(1)),
                        self.m.model.register_forward_hook(lambda *a: self._enter(-1), always_call=True)]
        return super().__enter__()

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        return super().__exit__(*exc)

    def _enter(self, step: int) -> None:
        self.depth += step

    def __torch_function__(self, func, types, args=(), kwargs=None):
        row = self.counter.by_step.setdefault(self.counter.step, dict(EMPTY_ROW))
        name = getattr(func, "__name__", "")
        if name in SYNCS:
            row["syncs"] = row.get("syncs", 0) + 1
        if not self.depth:
            row["ops"] = row.get("ops", 0) + 1
        return func(*args, **(kwargs or {}))


def matmul_gflops(m: ICLModel, d: int = 1024, repeats: int = 20) -> float:
    """The model's device's matrix throughput (GFLOP/s) in its dtype on [d, d] x [d, d] products
    (d = 4096 on a GPU, to fill it), best of `repeats`."""
    d = 4096 if m.device.type == "cuda" else d
    a, b = (torch.randn(d, d, device=m.device, dtype=m.model.dtype) for _ in range(2))
    a @ b
    best = min(_timed(lambda: a @ b, m.device) for _ in range(repeats))
    return 2 * d**3 / best / 1e9


def peak_mb() -> float:
    """This process's peak resident memory so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def gpu_peak_mb() -> float | None:
    """The peak GPU memory allocated so far (MB), or None without a GPU."""
    return torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None


def synced(device: torch.device) -> float:
    """time.perf_counter() once the device has done what it was given."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _timed(fn, device: torch.device) -> float:
    start = synced(device)
    fn()
    return synced(device) - start


def prompt_flops(m: ICLModel, tokens: int) -> float:
    """Multiply-adds x 2 of one prompt's forward pass: the layers' weights at every token, the
    causal attention scores and mixing, and the unembedding at the last position only."""
    arch = m.arch
    layer_params = sum(p.numel() for p in arch.blocks().parameters() if p.dim() == 2)
    attention = 2 * arch.n_layers * tokens * (tokens + 1) / 2 * arch.n_heads * arch.d_head  # QK^T and AV, causal
    return 2 * (layer_params * tokens + attention + arch.d_model * arch.W_U().shape[0])


@torch.no_grad()
def forward_seconds(m: ICLModel, prompts: list[tuple[int, ...]]) -> float:
    """A plain forward pass over `prompts` in the suite's batches (`token_batches`: similar
    lengths, right-padded), logits at the last position."""
    pad = m.tokenizer.pad_token_id or 0
    start = synced(m.device)
    for rows in token_batches(list(map(len, prompts)), BATCH):
        batch = [prompts[i] for i in rows]
        width = max(map(len, batch))
        ids = torch.tensor([list(p) + [pad] * (width - len(p)) for p in batch])
        mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in batch])
        m.model(input_ids=ids.to(m.device), attention_mask=mask.to(m.device), logits_to_keep=1)
    return synced(m.device) - start


def run(model: str, device: str, n: int, sentence_n: int, ids: list[str], sdpa: bool, ops: bool = False) -> dict:
    started = time.perf_counter()
    m = build_model(model, device)
    load = synced(m.device) - started
    peak_load, gpu_peak_load = peak_mb(), gpu_peak_mb()
    counter = PassCounter(m)
    clock = [time.perf_counter()]

    def progress(step: str) -> None:
        now = synced(m.device)
        row = counter.by_step.setdefault(counter.step, dict(EMPTY_ROW))
        row["seconds"] += now - clock[0]
        row["peak_mb"] = peak_mb()  # the process's peak so far: where it grows, this step raised it
        row["gpu_peak_mb"] = gpu_peak_mb()
        clock[0], counter.step = now, step.split(":")[0]
        print(f"... {now - started:7.1f} s {step}", flush=True)

    with OpCounter(m, counter) if ops else contextlib.nullcontext():
        findings = report(m, n, sentence_n, announce=progress, ids=ids)
    progress("end")
    counter.by_step = {k: v for k, v in counter.by_step.items() if k != "load" or v["calls"]}
    suite = sum(r["seconds"] for r in counter.by_step.values())
    counter.handle.remove()
    peak_suite, gpu_peak_suite = peak_mb(), gpu_peak_mb()
    distinct = sorted(counter.distinct, key=len)
    tokens = sum(map(len, distinct))
    gflops = matmul_gflops(m)
    by_step: dict[str, float] = {}  # the arithmetic floor of the distinct prompts each step ran first
    for p, step in counter.distinct.items():
        by_step[step] = by_step.get(step, 0.0) + prompt_flops(m, len(p)) / gflops / 1e9
    arithmetic = sum(by_step.values())
    forward = forward_seconds(m, distinct)
    forward_sdpa = None
    if sdpa:
        m.model.set_attn_implementation("sdpa")  # what the pass would cost without reading attention weights
        forward_sdpa = forward_seconds(m, distinct)
        m.model.set_attn_implementation("eager")
    return {
        "model": model, "device": str(m.device), "dtype": str(m.model.dtype).removeprefix("torch."),
        "gpu": torch.cuda.get_device_name(m.device) if m.device.type == "cuda" else None,
        "n": n, "sentence_n": sentence_n, "claims": len(findings), "torch_threads": torch.get_num_threads(),
        "load_seconds": load, "suite_seconds": suite, "steps": counter.by_step,
        "rows": sum(r["rows"] for r in counter.by_step.values()),
        "tokens": sum(r["tokens"] for r in counter.by_step.values()),
        "padded_tokens": sum(r["padded"] for r in counter.by_step.values()),
        "distinct_prompts": len(distinct), "distinct_tokens": tokens, "matmul_gflops": gflops,
        "floor_arithmetic_seconds": arithmetic, "floor_arithmetic_by_step": by_step,
        "floor_forward_seconds": forward, "floor_forward_sdpa_seconds": forward_sdpa,
        "peak_mb_after_load": peak_load, "peak_mb_after_suite": peak_suite,
        "gpu_peak_mb_after_load": gpu_peak_load, "gpu_peak_mb_after_suite": gpu_peak_suite,
    }


def times(a: float, b: float) -> str:
    """a / b to one decimal, or "-" where b is 0 (the claims run made no forward pass)."""
    return f"{a / b:.1f}" if b else "-"


def against(suite: float, floor: float) -> str:
    """How many times its floor the suite took, in words (none where the claims run made no forward pass)."""
    return f"the suite {suite / floor:.1f}x it" if floor else "no pass to hold the suite against"


def markdown(r: dict) -> str:
    counted = any("ops" in row for row in r["steps"].values())  # a run with --ops
    where = f"{r.get('model', 'smollm2-135m')} ({r.get('dtype', 'float32')}) on {r.get('gpu') or r.get('device', 'cpu')}"
    lines = [f"{where}, N = {r['n']} word / {r['sentence_n']} sentence prompts, {r['claims']} claims, "
             f"{r['torch_threads']} torch threads; model load {r['load_seconds']:.1f} s (not in the suite's time).", "",
             "| step | seconds | share | forward calls | prompt rows | tokens | with padding | peak MB so far |"
             + (" torch calls outside passes | host syncs |" if counted else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if counted else "")]
    for step, row in sorted(r["steps"].items(), key=lambda kv: -kv[1]["seconds"]):
        lines.append(f"| {step} | {row['seconds']:.1f} | {row['seconds'] / r['suite_seconds']:.0%} | {row['calls']} | "
                     f"{row['rows']} | {row['tokens']} | {row['padded']} | {row.get('peak_mb', 0):.0f} |"
                     + (f" {row.get('ops', 0)} | {row.get('syncs', 0)} |" if counted else ""))
    lines += ["", f"Suite {r['suite_seconds']:.0f} s. Forward passes: {r['rows']} prompt rows ({r['tokens']} tokens, "
              f"{r['padded_tokens']} with padding) for "
              f"{r['distinct_prompts']} distinct prompts ({r['distinct_tokens']} tokens): "
              f"{times(r['rows'], r['distinct_prompts'])} passes a prompt, {times(r['tokens'], r['distinct_tokens'])} a token.",
              f"Floor, arithmetic ({r['matmul_gflops']:.0f} GFLOP/s measured): {r['floor_arithmetic_seconds']:.1f} s, "
              f"{against(r['suite_seconds'], r['floor_arithmetic_seconds'])}. Floor, one plain forward pass a "
              f"distinct prompt (timed): {r['floor_forward_seconds']:.1f} s, "
              f"{against(r['suite_seconds'], r['floor_forward_seconds'])}."
              + (f" The same pass with SDPA attention (no attention weights): {r['floor_forward_sdpa_seconds']:.1f} s."
                 if r.get("floor_forward_sdpa_seconds") else ""),
              f"Peak resident memory: {r['peak_mb_after_load']:.0f} MB after loading the model, "
              f"{r['peak_mb_after_suite']:.0f} MB after the suite."
              + (f" Peak GPU memory allocated: {r['gpu_peak_mb_after_load']:.0f} MB after loading, "
                 f"{r['gpu_peak_mb_after_suite']:.0f} MB after the suite." if r.get("gpu_peak_mb_after_suite") else "")]
    return "\n".join(lines)


def growth(step: str, r: dict, n: int, sentence_n: int) -> float:
    """How many times a step's work grows from run r's size to n word / sentence_n sentence prompts: a
    claim that reads the sentence datasets (its `reads`; most of its tokens, where it reads both) with the
    sentence prompts a dataset, any other step with the word prompts."""
    claim = CLAIMS.get(step)
    return sentence_n / r["sentence_n"] if claim and "sentence" in claim.reads else n / r["n"]


def extrapolated(r: dict, n: int, sentence_n: int) -> str:
    """Run r's steps and floors, each grown linearly to n word / sentence_n sentence prompts
    (`growth`), as Markdown: an extrapolation, not a measurement."""
    floors = r.get("floor_arithmetic_by_step", {})
    lines = [f"Extrapolated linearly from this run to {n} word / {sentence_n} sentence prompts (each step by the "
             "prompts it grows with; not measured):", "",
             "| step | grows | seconds | arithmetic floor s |", "|---|---|---|---|"]
    total = floor = 0.0
    for step, row in sorted(r["steps"].items(), key=lambda kv: -kv[1]["seconds"] * growth(kv[0], r, n, sentence_n)):
        g = growth(step, r, n, sentence_n)
        total, floor = total + g * row["seconds"], floor + g * floors.get(step, 0.0)
        lines.append(f"| {step} | {g:.3g}x | {g * row['seconds']:.0f} | {g * floors.get(step, 0.0):.0f} |")
    if not floors:
        return "\n".join(lines + ["", f"Suite about {total / 3600:.1f} h (this run recorded no floor by step)."])
    forward = r["floor_forward_seconds"] * floor / r["floor_arithmetic_seconds"]
    lines += ["", f"Suite about {total / 3600:.1f} h; arithmetic floor {floor / 60:.0f} min (the suite {total / floor:.1f}x "
              f"it); timed floor, grown as the arithmetic one, {forward / 60:.0f} min (the suite {total / forward:.1f}x it)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m",
                        help=f"a model's name, or a random model of a real shape: {', '.join(RANDOM_MODELS)}")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--n", type=int, default=64, help="prompts a word dataset (default 64)")
    parser.add_argument("--sentence-n", type=int, default=16, help="prompts a sentence dataset (default 16)")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--ids", nargs="+", default=list(CLAIMS), help="claims to run (default: all)")
    parser.add_argument("--scale-to", type=int, nargs=2, default=[1000, 500], metavar=("N", "SENTENCE_N"),
                        help="extrapolate to this size (default 1000 500, the paper-scale reports' size)")
    parser.add_argument("--sdpa", action="store_true", help="also time the floor pass with SDPA attention")
    parser.add_argument("--ops", action="store_true", help="count torch calls and host syncs by step (slows the run)")
    parser.add_argument("--from-json", type=Path, help="print a recorded run (and its extrapolation) instead of running")
    args = parser.parse_args()
    if args.n < MIN_CLUSTERS and not args.from_json:
        parser.error(f"--n {args.n}: the report judges no claim on fewer than {MIN_CLUSTERS} prompts a word dataset, "
                     f"so there would be nothing to time; give --n {MIN_CLUSTERS} or more")
    if min(args.scale_to) < 1:
        parser.error("--scale-to takes two positive numbers of prompts, e.g. 1000 500")
    if args.from_json and not args.from_json.is_file():
        parser.error(f"--from-json: no file {args.from_json}; give a JSON that --json wrote")
    if args.from_json:
        r = json.loads(args.from_json.read_text())
        print(markdown(r) + "\n\n" + extrapolated(r, *args.scale_to))
        return
    with tempfile.TemporaryDirectory() as cache:  # results computed afresh; the converted model is reused
        model_cache = Path(os.environ.get("ICL_HELPERS_CACHE", Path.home() / ".cache" / "icl_helpers"))
        for entry in model_cache.glob("*"):
            if entry.name != "results":
                os.symlink(entry, Path(cache) / entry.name)
        os.environ["ICL_HELPERS_CACHE"] = cache
        r = run(args.model, args.device, args.n, args.sentence_n, args.ids, args.sdpa, args.ops)
    if args.json:
        write_text_atomically(args.json, json.dumps(r, indent=1))
    print(markdown(r) + "\n\n" + extrapolated(r, *args.scale_to))


if __name__ == "__main__":
    main()
