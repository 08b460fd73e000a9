"""Command line: `python -m icl_helpers locate --model NAME --prompt TEXT --json OUT`,
`python -m icl_helpers report --model NAME --n N --sentence-n N2 --json OUT --markdown OUT.md [--robustness]`,
`python -m icl_helpers heads --model NAME --n N --sentence-n N2 --json OUT --markdown OUT.md`,
`python -m icl_helpers compare REPORT.json REPORT.json ... [--markdown OUT.md]` and
`python -m icl_helpers data fetch [--to DIR]`.

Every argument is checked before torch and transformers are imported or a model loads, so a
mistake costs a moment and one line, never a finished run.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from .core.heads import check_heads, heads_text
from .data.setting import MAIN
from .errors import UsageError, check_prompts, clean_text, warn_without_demonstration
from .outputs import WRITTEN, check_output, write_output
from .paths import (
    BUNDLED,
    DTYPE_NAMES,
    absent,
    check_model_name,
    same_file,
)
from .runs import CLASS_LABELS, SENTENCE_N, check_run, run_record, task_entry, task_of

if TYPE_CHECKING:  # the model's type, without importing torch
    pass

def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _device(text: str) -> str:
    if not re.fullmatch(r"cpu|auto|mps|cuda(:\d+)?", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not one of cpu, cuda, cuda:N, mps, auto")
    return text


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (no usage block above them)."""

    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def read_prompts(texts: list[str] | None, file: str | None) -> list[str]:
    """--prompt texts, then the lines of --prompts FILE (blank lines skipped), each as `clean_text`
    reads it: a byte-order mark, a Windows line end or another invisible character at either end
    is no part of a prompt."""
    prompts = [clean_text(t) for t in texts or []]
    if file:
        path = Path(file)
        if why := absent(path):
            raise UsageError(f"Prompt file {path} {why}: give a text file, one prompt a line.")
        for i, raw in enumerate(path.read_bytes().splitlines(), 1):  # \n, \r\n or \r
            try:
                line = clean_text(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise UsageError(f"{path}:{i} is not UTF-8 text: save the file as UTF-8.") from None
            if line.strip():
                prompts.append(line)
    if not prompts:
        raise UsageError("No prompts given: use --prompt TEXT (repeatable) or --prompts FILE.")
    return check_prompts(prompts)


def cmd_locate(args: argparse.Namespace) -> None:
    """`locate`: every layer's and head's increase on the prompts given, written to `--json`."""
    check_model_name(args.model)
    prompts = read_prompts(args.prompt, args.prompts)
    warn_without_demonstration(prompts)
    out = check_output(args.json)
    from .core.locate import locate  # torch and transformers load only now
    from .model.loading import load_model

    m = load_model(args.model, device=args.device, dtype=args.dtype)
    with warnings.catch_warnings():  # said above, before torch loaded (whose imports reset the warnings' memory)
        warnings.filterwarnings("ignore", r"\d+ of \d+ prompts hold no demonstration label", UserWarning)
        result = locate(m, prompts, batch_size=args.batch_size, progress=True)
    top = result.top_heads(MAIN.heads)
    report = {
        "model": args.model,
        "n_prompts": len(prompts),
        "n_layers": m.arch.n_layers,
        "n_heads": m.arch.n_heads,
        "prompts": prompts,  # as scored: read by `clean_text`
        "predictions": [m.tokenizer.decode([int(t)]) for t in result.targets],
        "head_increase": result.head_mean.tolist(),
        "attn_layer_increase": result.attn.mean(0).tolist(),
        "ffn_layer_increase": result.ffn.mean(0).tolist(),
        "top_heads": [list(h) for h in top],
        "top_head_increase": result.head_scores(top).tolist(),
    }
    write_output(out, json.dumps(report, indent=1))
    best = ", ".join(f"{l}.{h} ({s:.2f})" for (l, h), s in zip(top[:5], report["top_head_increase"]))
    print(f"{len(prompts)} prompts; top heads (layer.head, mean increase): {best}; wrote {out}")


def cmd_report(args: argparse.Namespace) -> None:
    """`report`: every claim of the paper judged on one model (`verdicts.findings.report`), written to
    `--json` and, with `--markdown`, as a table."""
    task, setting = task_of(args)
    out, md, sentence_n, heads = check_run(args, sentence=task is None)
    from .model.loading import load_model  # torch and transformers load only now
    from .verdicts import intro, markdown, report
    from .verdicts.claims.tables import task_intro
    from .verdicts.evidence import described
    from .verdicts.whose import OURS

    start = time.perf_counter()
    m = load_model(args.model, device=args.device, dtype=args.dtype)

    def announce(step: str) -> None:
        print(f"... {_clock(start)} {step}", flush=True)  # the log is the profile

    about_task = task_entry(m, task, setting, args.n)
    any_size = sentence_n or SENTENCE_N  # without sentence data, one that no sentence claim reads
    findings = report(m, args.n, any_size, args.seed, args.data_dir, heads=heads, announce=announce, setting=setting,
                      task=task)
    robust, section = {}, ""
    if args.robustness:  # at most the main size; its own main run at that size first
        from .verdicts import robustness

        size = min(args.robustness_n, args.n), min(args.robustness_sentence_n, any_size)
        entries = robustness.robustness(m, *size, args.seed, args.data_dir, announce, heads=heads)
        robust = {"robustness_n": size[0], "robustness_sentence_n": size[1] if sentence_n else None, "robustness": entries}
        section = "\n" + robustness.markdown(entries, *size)
    given = {"heads": heads_text(heads)} if heads else {}
    run = run_record(m, start)
    write_output(out, json.dumps({"model": args.model, **about_task, "n": args.n, "sentence_n": sentence_n, "seed": args.seed,
                                  **given, **run, "views": described(), "claims": [f.to_dict() for f in findings],
                                  **robust}, indent=1))
    if md:
        header = (f"# {args.model}: the paper's claims, tested" + (f" on the task {task.name}" if task else "")
                  + "\n\n" + (task_intro(about_task["task"]) + " " if task else "")
                  + intro(args.n, sentence_n, args.seed, task.name if task else None)
                  + (f" Heads analysed: {given['heads']} in every dataset, instead of each one's top {MAIN.heads}."
                     if heads else ""))
        write_output(md, header + "\n\n" + markdown(findings) + section, "--markdown")
    def counted(ours: bool) -> str:
        verdicts = [f.verdict for f in findings if (f.whose == OURS) == ours]
        return ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)) or "none"
    print(f"{len(findings)} claims in {_clock(start)}: the paper's {counted(False)}; ours {counted(True)}"
          + f"; wrote {out}" + (f" and {md}" if md else ""))


def cmd_heads(args: argparse.Namespace) -> None:
    """`heads`: the head types of one model and the literature's claims on them
    (`verdicts.head_report`), written to `--json` and, with `--markdown`, as a page."""
    task, setting = task_of(args)
    out, md, sentence_n, heads = check_run(args, sentence=task is None)
    from .data.sentences import sentence_datasets  # torch and transformers load only now
    from .model.loading import load_model
    from .verdicts import head_report
    from .verdicts.common import SENTENCE

    start = time.perf_counter()
    m = load_model(args.model, device=args.device, dtype=args.dtype)
    heads = check_heads(heads, m.arch)
    about_task = task_entry(m, task, setting, args.n)
    sentence = sentence_datasets(SENTENCE, args.data_dir) if sentence_n else []
    found = head_report.head_report(m, args.n, sentence, sentence_n or 0, args.sequences, args.draws, args.seed,
                                    args.data_dir, heads, lambda step: print(f"... {_clock(start)} {step}", flush=True),
                                    task, setting)
    report = {"model": args.model, **about_task, "n": args.n, "sentence_n": sentence_n, "seed": args.seed,
              **({"heads": heads_text(heads)} if heads else {}), **run_record(m, start), **found}
    write_output(out, json.dumps(report, indent=1))
    if md:
        write_output(md, head_report.markdown(report), "--markdown")
    verdicts = [c["verdict"] for c in report["claims"]]
    print(f"{len(verdicts)} claims of the literature in {_clock(start)}: "
          + ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts)) + f"; wrote {out}" + (f" and {md}" if md else ""))


def cmd_compare(args: argparse.Namespace) -> None:
    """`compare`: the verdicts of several reports side by side (`verdicts.compare`)."""
    from .verdicts.compare import markdown, read_reports  # no torch

    md = check_output(args.markdown, "--markdown") if args.markdown else None
    replaced = next((r for r in args.reports if md and same_file(md, r)), None)
    if replaced:
        raise UsageError(f"--markdown {md} is the report {replaced}: the table would replace it; give it a file of its own.")
    text = markdown(read_reports(args.reports))
    if md:
        write_output(md, text, "--markdown")
        print(f"wrote {md}")
    else:
        print(text, end="")


def cmd_data_fetch(args: argparse.Namespace) -> None:
    """`data fetch`: the sentence datasets from their original repositories (`data.fetch`)."""
    from .data.fetch import fetch

    fetch(args.to)


def _interrupted(command: str) -> str:
    """The one line a Ctrl-C prints: what the command wrote (each output whole: written atomically),
    and what a rerun finds."""
    if command == "data":
        return "interrupted: no dataset file is left in part; run it again to fetch the rest."
    wrote = f"wrote {' and '.join(map(str, WRITTEN))}" if WRITTEN else "nothing was written"
    kept = ("; the claims judged and the studies run so far are kept in the results cache, so the same command "
            "resumes from them" if command in ("report", "heads") else "")
    return f"interrupted: {wrote}{kept}."


def _clock(start: float) -> str:
    """Time since `start` as "m:ss"."""
    minutes, seconds = divmod(round(time.perf_counter() - start), 60)
    return f"{minutes}:{seconds:02d}"


def main(argv: list[str] | None = None) -> int:
    """`python -m icl_helpers` (and the console script `icl-helpers`): parse the arguments, run the command; the exit status."""
    parser = _Parser(prog="python -m icl_helpers", description="Locate in-context heads (locate), test the paper's claims (report), "
                                                         "set them beside other head types (heads), put reports side by "
                                                         "side (compare), or download the sentence datasets (data fetch).")
    sub = parser.add_subparsers(dest="command", required=True)
    model = _Parser(add_help=False)  # the arguments both commands take
    model.add_argument("--model", default=BUNDLED, help=f"hub id, local directory or {BUNDLED} (default)")
    model.add_argument("--device", type=_device, default=None, help="cpu, cuda, cuda:N, mps or auto (default: cuda if present)")
    model.add_argument("--dtype", choices=DTYPE_NAMES, default=None, help="float32 (default), bfloat16 or float16")
    model.add_argument("--json", required=True, help="where to write the results")
    task = _Parser(add_help=False)  # report's and heads' own task
    task.add_argument("--task", help="judge the claims on a task of your own instead of the paper's word datasets: a "
                                     "JSON-lines file, one {\"input\": TEXT, \"class\": NAME} a line, or a folder of "
                                     "<class>.txt files, one example a line (--n records of it)")
    task.add_argument("--labels", help="the task's label words, TRUE,FALSE (default foo,bar, the paper's): the first "
                                       "labels the demonstrations of the input's class on a balanced prompt, as foo "
                                       f"does; or {CLASS_LABELS!r}: each demonstration labelled by its own class's name")
    p = sub.add_parser("locate", parents=[model], help="log-probability increase of every layer and head")
    p.add_argument("--prompt", action="append", help="a prompt; repeat for more")
    p.add_argument("--prompts", help="a UTF-8 text file, one prompt a line (a byte-order mark and Windows line ends are fine)")
    p.add_argument("--batch-size", type=_positive, default=32)
    p.set_defaults(run=cmd_locate)
    r = sub.add_parser("report", parents=[model, task], help="test every claim of the paper: ours, its 95%% interval, a verdict")
    r.add_argument("--n", type=_positive, default=64, help="prompts a word dataset (the paper: 1000)")
    r.add_argument("--sentence-n", type=_positive, default=None, help=f"prompts a sentence dataset (default {SENTENCE_N}; "
                                                                      "the paper: 1000; at most 500, TREC's test inputs)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--data-dir", default=None,
                   help="sentence datasets (default: $ICL_DATA_DIR, else the copy `data fetch` made, else the hub)")
    r.add_argument("--markdown", help="also write the findings as one markdown table")
    r.add_argument("--heads", help="analyse these heads, e.g. 19-11,20-11 (layer-head), instead of each dataset's top "
                                   f"{MAIN.heads}")
    r.add_argument("--robustness", action="store_true",
                   help="also judge every claim, in its headline view, with one fixed choice changed (top 5, 10, 40 "
                        "heads; labels pen/sky, cup/door; a newline separator; 1 and 3 demonstrations a class; the next "
                        "two seeds)")
    r.add_argument("--robustness-n", type=_positive, default=200, help="word prompts a dataset for --robustness "
                                                                       "(default 200, at most --n)")
    r.add_argument("--robustness-sentence-n", type=_positive, default=50, help="sentence prompts a dataset for "
                                                                                "--robustness (default 50, at most --sentence-n)")
    r.set_defaults(run=cmd_report)
    h = sub.add_parser("heads", parents=[model, task], help="the head types beside the in-context heads, and the literature's "
                                                      "claims on which carry in-context learning")
    h.add_argument("--n", type=_positive, default=256, help="records a word dataset, split by input into the scores' "
                                                            "and the ablations' halves (default 256)")
    h.add_argument("--sentence-n", type=_positive, default=None, help=f"records a sentence dataset, ablated (default "
                                                                      f"{SENTENCE_N}; at most 500)")
    h.add_argument("--sequences", type=_positive, default=200, help="random token sequences of the attention scores "
                                                                    "(default 200)")
    h.add_argument("--draws", type=_positive, default=20, help="layer-matched random draws a set (default 20)")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--data-dir", default=None, help="sentence datasets (as for report)")
    h.add_argument("--markdown", help="also write the report as a markdown page")
    h.add_argument("--heads", help="ablate these heads too, as a set of their own, e.g. 19-11,20-11 (layer-head)")
    h.set_defaults(run=cmd_heads)
    c = sub.add_parser("compare", help="the verdicts of several reports (one a model) as one table")
    c.add_argument("reports", nargs="+", help="JSON files `report --json` wrote, one a model, of one size and seed")
    c.add_argument("--markdown", help="write the table here (default: print it)")
    c.set_defaults(run=cmd_compare)
    data = sub.add_parser("data", help="the sentence datasets").add_subparsers(dest="action", metavar="fetch", required=True)
    about = "download SST-2, TREC, AG News and ETHOS from their original repositories, checked against the standard copies"
    f = data.add_parser("fetch", help=about, description=about[0].upper() + about[1:] + ".")
    f.add_argument("--to", metavar="DIR", help="where (default: ~/.cache/icl_helpers/datasets, or datasets/ in "
                                               "$ICL_HELPERS_CACHE, where the loader looks)")
    f.set_defaults(run=cmd_data_fetch)
    args = parser.parse_args(argv)
    WRITTEN.clear()
    try:
        args.run(args)
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback through torch
        print(_interrupted(args.command), file=sys.stderr)
        return 130
    return 0
