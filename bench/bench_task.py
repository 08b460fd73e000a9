"""What a task of one's own costs against the paper's word dataset of the same size: sentiment_number written as a task
file and judged as a task, then sentiment_number by its built-in name as the one dataset the word claims read. The
same claims (every claim a task's report judges), the same numbers (checked), each from an empty results cache:
`OMP_NUM_THREADS=1 .venv/bin/python bench/bench_task.py --n 64 --json bench/task-....json`."""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from icl_helpers.data.tasks import add_task, read_task
from icl_helpers.data.words import WORD_DATASETS, read_word_list
from icl_helpers.model.loading import load_model
from icl_helpers.verdicts.claims import CLAIMS, reported
from icl_helpers.verdicts.evidence import Evidence
from icl_helpers.verdicts.findings import judged, on_task

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="smollm2-135m")
parser.add_argument("--n", type=int, default=64)
parser.add_argument("--json")
args = parser.parse_args()

m = load_model(args.model, device="cpu")
ids = [id for id in reported() if on_task(CLAIMS[id])]
with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "sentiments.jsonl"  # the paper's word lists, one example a line
    path.write_text("".join(json.dumps({"input": w, "class": c}) + "\n" for c in WORD_DATASETS["sentiment_number"]
                            for w in read_word_list(c)), encoding="utf-8")
    runs, numbers = {}, {}
    for name, dataset in (("task", lambda: add_task(read_task(path))), ("built-in", lambda: "sentiment_number")):
        os.environ["ICL_HELPERS_CACHE"] = str(Path(tmp) / name)  # an empty results cache for each
        start = time.perf_counter()
        s = Evidence(m, args.n, 16, 0, None, task=dataset())
        found = [judged(id, s) for id in ids]
        runs[name] = round(time.perf_counter() - start, 1)
        numbers[name] = json.dumps([[f.ours, f.ci, f.n, f.verdict] for f in found])
        print(f"{name}: {runs[name]} s for {len(ids)} claims", flush=True)
assert numbers["task"] == numbers["built-in"], "a task's numbers differ from the built-in path's"
result = {"model": args.model, "n": args.n, "claims": len(ids), "torch_threads": torch.get_num_threads(),
          "seconds": runs, "task over built-in": round(runs["task"] / runs["built-in"], 3), "same numbers": True}
print(json.dumps(result))
if args.json:
    Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
