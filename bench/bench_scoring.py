"""Scoring alone, two versions of the code side by side: `layer_head_increase` (locate's
scoring pass) as `core/attribution.py` stands at each git revision, on the same
decomposition, in one process, the versions alternating, so that a CPU's drift between
runs touches each alike. The kept fold (W_O G) is made once beforehand and shared, so only
the scoring loop is timed. Prints each run's seconds and the largest difference from the
first version's scores.

    .venv/bin/python bench/bench_scoring.py --revs HEAD~1 HEAD --n 512
    .venv/bin/python bench/bench_scoring.py --revs HEAD work     # work: the working tree
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_locate import build_model, build_prompts  # noqa: E402

from icl_helpers.core.decompose import decompose  # noqa: E402

SOURCE = "icl_helpers/core/attribution.py"


def attribution_at(rev: str, folder: Path) -> ModuleType:
    """core/attribution.py as it stands at git revision `rev` ("work": the working tree),
    loaded beside the package so that its relative imports resolve."""
    path = REPO / SOURCE
    if rev != "work":
        path = folder / f"{rev.replace('/', '_').replace('~', '_')}.py"
        path.write_text(subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{SOURCE}"], check=True,
                                       capture_output=True, text=True).stdout)
    spec = importlib.util.spec_from_file_location(f"icl_helpers.core._bench_{len(sys.modules)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--revs", nargs="+", default=["HEAD", "work"], help="git revisions, or work (default HEAD work)")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--device", default="cpu")
    p.add_argument("--n", type=int, default=512, help="word prompts (default 512)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        versions = {rev: attribution_at(rev, Path(folder)) for rev in args.revs}
    m = build_model(args.model, args.device)
    prompts = build_prompts("words", args.n)
    batches = [decompose(m, prompts[i : i + 32]) for i in range(0, args.n, 32)]
    inputs = [torch.cat([getattr(d, field) for d in batches]) for field in ("z", "resid", "predictions", "scale",
                                                                            "attn_scale")]
    first = versions[args.revs[0]]
    readout = first.Readout(m.arch, keep_floats=2**62)  # every head's fold kept, made by the warm-up below
    first.layer_head_increase(readout, *inputs)
    print(f"# {args.model}, {args.n} word prompts, {torch.get_num_threads()} threads, device {args.device}")
    times: dict[str, list[float]] = {rev: [] for rev in args.revs}
    scores: dict[str, tuple] = {}
    for _ in range(args.repeats):
        for rev, module in versions.items():
            readout.__class__ = module.Readout  # the same weights and kept fold, this version's methods
            start = time.perf_counter()
            scores[rev] = module.layer_head_increase(readout, *inputs)
            times[rev].append(time.perf_counter() - start)
    for rev in args.revs:
        gap = max(float((a - b).abs().max()) for a, b in zip(scores[rev], scores[args.revs[0]]))
        print(f"{rev}: {', '.join(f'{t:.2f}' for t in times[rev])} s; max |score - {args.revs[0]}'s| {gap:.3g}")


if __name__ == "__main__":
    main()
