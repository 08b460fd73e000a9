"""What `report` and `heads` check of their arguments before torch loads (`check_run`, `task_of`), and what
their files record of a run (`run_record`)."""
from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .core.heads import parse_heads
from .data.datasets import check_sizes
from .data.prompts import CLASS_NAMES
from .data.sentences import unavailable
from .data.setting import MAIN, Setting
from .data.tasks import Task, check_label_words, drawn, read_task
from .errors import UsageError
from .outputs import check_output
from .paths import absent, check_model_name, same_file

if TYPE_CHECKING:  # the model's type, without importing torch
    from .model.loading import ICLModel

SENTENCE_N = 16  # --sentence-n's default
CLASS_LABELS = "classes"  # --labels for each demonstration's own class name (`prompts.CLASS_NAMES`)


def check_run(args: argparse.Namespace, sentence: bool = True) -> tuple[Path, Path | None, int | None, list | None]:
    """The checks `report` and `heads` make before torch loads: (the --json path, the --markdown path
    or None, the sentence size or None where no sentence data can be had or `sentence` is False (a task's
    report), the --heads given or None)."""
    check_model_name(args.model)
    out = check_output(args.json)
    md = check_output(args.markdown, "--markdown") if args.markdown else None
    if md and same_file(md, out):
        raise UsageError(f"--json and --markdown both name {out}: the second would replace the first; give each its own file.")
    if args.data_dir and (why := absent(Path(args.data_dir), folder=True)):
        raise UsageError(f"--data-dir {args.data_dir} {why}: give a folder holding sst2/, trec/, agnews/, ethos/.")
    sentence_n = sentence_size(args.sentence_n, args.data_dir) if sentence else None
    if sentence:
        check_sizes(args.n, sentence_n, args.data_dir)
    return out, md, sentence_n, parse_heads(args.heads, "--heads")  # heads checked against the model before any study


def task_of(args: argparse.Namespace) -> tuple[Task | None, Setting]:
    """`report`'s and `heads`' --task read and its --n records drawn, and the setting of its --labels, before torch loads:
    (the task or None, the setting). A UsageError for a bad file, size or option."""
    if not args.task:
        if args.labels:
            raise UsageError("--labels sets a task's label words: give --task FILE too (--robustness varies the "
                             "paper's).")
        return None, MAIN
    if getattr(args, "robustness", False):  # `report`'s alone
        raise UsageError("--robustness judges the paper's datasets: drop it with --task.")
    labels = parsed_labels(args.labels)
    setting = replace(MAIN, labels=labels)
    task = read_task(args.task, setting.per_class)
    drawn(task, args.n, args.seed)  # n records can be drawn
    return task, setting


def parsed_labels(given: str | None) -> tuple[str, str]:
    """--labels as a setting's labels: MAIN's where None, CLASS_NAMES for CLASS_LABELS, else the two words."""
    if given is not None and given.strip() == CLASS_LABELS:
        return CLASS_NAMES
    labels = tuple(w.strip() for w in given.split(",")) if given else MAIN.labels
    if len(labels) != 2 or not all(labels) or labels[0] == labels[1]:
        raise UsageError(f"--labels {given} is not two different words: give them as TRUE,FALSE, e.g. foo,bar, or "
                         f"{CLASS_LABELS} for the classes' own names.")
    return labels


def task_entry(m: ICLModel, task: Task | None, setting: Setting, n: int) -> dict:
    """What a file of n records of `task` records of it, {"task": `Task.described`} ({} without a task), once its
    label words are checked against the model's tokenizer (`check_label_words`): before any study, so a bad
    word stops the run in one line. Prints the task's size and notes."""
    if task is None:
        return {}
    note = check_label_words(m.tokenizer, task.label_words(setting.labels), setting.sep)
    entry = task.described(setting.labels, n, note)
    print(f"the task {task.name}: {len(task.classes)} classes, {len(task.examples):,} examples"
          + "".join(f"; {line}" for line in entry["notes"]), flush=True)
    return {"task": entry}


def run_record(m: ICLModel, start: float) -> dict:
    """What a report file records of its run: the weights' fingerprint, dtype, device, torch threads and
    the seconds since `start`."""
    import torch  # loaded by the model already

    return {"weights": m.fingerprint(), "dtype": str(m.model.dtype).removeprefix("torch."), "device": str(m.device),
            "torch_threads": torch.get_num_threads(), "seconds": round(time.perf_counter() - start, 1)}


def sentence_size(given: int | None, data_dir: str | None) -> int | None:
    """--sentence-n (default SENTENCE_N) where the sentence datasets can be had here; else None,
    and a size given is refused: it would be recorded for data no claim reads."""
    reason = unavailable(data_dir)
    if reason is None:
        return SENTENCE_N if given is None else given
    if given is not None:
        raise UsageError(f"--sentence-n {given} was given, but no sentence dataset can be had here ({reason}): run "
                         "`python -m icl_helpers data fetch`, give --data-dir, or leave --sentence-n out to judge the "
                         "word-dataset claims alone.")
    return None
