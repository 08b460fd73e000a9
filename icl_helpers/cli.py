"""Command line: `python -m icl_helpers locate --model NAME --prompt TEXT --json OUT`."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .core.locate import locate
from .errors import UsageError
from .model.loading import BUNDLED, load_model


def _read_prompts(args: argparse.Namespace) -> list[str]:
    prompts = list(args.prompt or [])
    if args.prompts:
        path = Path(args.prompts)
        if not path.is_file():
            raise UsageError(f"Prompt file {path} does not exist: give a text file, one prompt a line.")
        prompts += [line for line in path.read_text().splitlines() if line.strip()]
    if not prompts:
        raise UsageError("No prompts given: use --prompt TEXT (repeatable) or --prompts FILE.")
    return prompts


def cmd_locate(args: argparse.Namespace) -> None:
    prompts = _read_prompts(args)
    m = load_model(args.model, device=args.device, dtype=args.dtype)
    result = locate(m, prompts, batch_size=args.batch_size, progress=True)
    top = result.top_heads(20)
    report = {
        "model": args.model,
        "n_prompts": len(prompts),
        "n_layers": m.arch.n_layers,
        "n_heads": m.arch.n_heads,
        "predictions": [m.tokenizer.decode([int(t)]) for t in result.targets],
        "head_increase": result.head_mean.tolist(),
        "attn_layer_increase": result.attn.mean(0).tolist(),
        "ffn_layer_increase": result.ffn.mean(0).tolist(),
        "top_heads": [list(h) for h in top],
        "top_head_increase": result.head_scores(top).tolist(),
    }
    Path(args.json).write_text(json.dumps(report, indent=1))
    best = ", ".join(f"{l}.{h} ({s:.2f})" for (l, h), s in zip(top[:5], report["top_head_increase"]))
    print(f"{len(prompts)} prompts; top heads (layer.head, mean increase): {best}; wrote {args.json}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl_helpers", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("locate", help="log-probability increase of every layer and head")
    p.add_argument("--model", default=BUNDLED, help=f"hub id, local directory or {BUNDLED} (default)")
    p.add_argument("--prompt", action="append", help="a prompt; repeat for more")
    p.add_argument("--prompts", help="a text file, one prompt a line")
    p.add_argument("--json", required=True, help="where to write the results")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N or auto (default: cuda if present)")
    p.add_argument("--dtype", default=None, help="float32 (default), bfloat16 or float16")
    p.set_defaults(run=cmd_locate)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
