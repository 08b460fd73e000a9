"""Notebook parameters: the defaults of a parameters cell, overridden by the environment.

Imported in IPython (every notebook's first cell), it has a `UsageError` shown as its one line, not as a
traceback through the package: a bad parameter says what to set, and nothing else."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from .core.heads import Head, check_heads, heads_text, parse_heads
from .data.sentences import missing_note, resolve_data_dir, sentence_datasets
from .data.tasks import Task, add_task, drawn, read_task
from .errors import UsageError
from .model.loading import ICLModel, check_device, check_dtype, load_model
from .paths import REPO_ROOT
from .studies.accuracy import prompt_accuracy
from .studies.runner import PromptSet
from .verdicts.claims import CLAIMS, claims_of, fewest_prompts
from .verdicts.claims.registry import on_task
from .verdicts.common import WORD

# parameter -> environment variable that overrides it
ENV = {
    "model": "ICL_MODEL",
    "n_prompts": "ICL_N_PROMPTS",
    "n_sentence_prompts": "ICL_N_SENTENCE_PROMPTS",
    "device": "ICL_DEVICE",
    "dtype": "ICL_DTYPE",
    "data_dir": "ICL_DATA_DIR",
    "seed": "ICL_SEED",
    "heads": "ICL_HEADS",
    "task": "ICL_TASK",
}


@dataclass(frozen=True)
class Params:
    """What a notebook runs on: model, prompts a word dataset and a sentence dataset (whose
    prompts are some 20 times longer), device, dtype, data directory, seed, and the heads
    to analyse (None: the top 20 located on each dataset), and a task of one's own read from its file (None: the
    paper's datasets), which stands in for the word datasets (`word`) and leaves out the sentence datasets."""

    model: str
    n_prompts: int
    n_sentence_prompts: int
    device: str | None
    dtype: str
    data_dir: Path | None
    seed: int
    heads: tuple[Head, ...] | None = None
    task: Task | None = None
    from_env: tuple[tuple[str, str], ...] = ()  # (parameter, its environment variable) for each value taken from it

    def __repr__(self) -> str:
        """The values, with a data directory as `shown_dir` writes it, and heads, as HEADS is
        written, only where given; then a line naming the values the environment set, which the
        parameters cell above does not show."""
        shown = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "from_env"}
        if self.data_dir is not None:
            shown["data_dir"] = shown_dir(self.data_dir)
        if self.heads is None:
            del shown["heads"]
        else:
            shown["heads"] = heads_text(self.heads)
        if self.task is None:
            del shown["task"]
        else:
            shown["task"] = self.task.name
        values = f"Params({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
        if not self.from_env:
            return values
        set_by = ", ".join(f"{k.upper()} = {shown[k]!r} ({variable})" for k, variable in self.from_env)
        return f"{values}\nSet by the environment, not by this cell: {set_by}."

    @property
    def task_name(self) -> str | None:
        """The task's name as a dataset's (`tasks.add_task`), or None without a task."""
        return add_task(self.task) if self.task else None

    @property
    def word(self) -> list[str]:
        """The datasets the word datasets' claims read: the task's alone, else the paper's."""
        name = self.task_name
        return [name] if name else list(WORD)

    def sentence(self, datasets: Sequence[str]) -> list[str]:
        """The sentence datasets of `datasets` that can be had here (`sentence_datasets`); none with a task."""
        return [] if self.task else sentence_datasets(datasets, self.data_dir)

    def load_model(self) -> ICLModel:
        """The model, on the device and in the dtype given, with the heads given checked against it
        (`core.heads.check_heads`): a head it lacks stops the notebook at its model cell, before any study.
        Each refusal ends with the parameter to set."""
        with set_in_the_cell("DEVICE", "DTYPE"):
            check_device(self.device)
            check_dtype(self.dtype)
        with set_in_the_cell("MODEL"):
            m = load_model(self.model, self.device, self.dtype)
        with set_in_the_cell("HEADS"):
            check_heads(self.heads, m.arch)
        return m


def shown_dir(path: Path) -> str:
    """A data directory as the parameters' echo shows it: from the checkout where it lies in the
    checkout's parent folder (`../datasets`, the same on every machine laid out alike), else
    its name alone (`.../datasets`), so a saved run names no other folder of the machine that ran it."""
    path = Path(os.path.abspath(path))
    if path.is_relative_to(REPO_ROOT.parent):
        return os.path.relpath(path, REPO_ROOT)
    return f".../{path.name}"


@contextmanager
def set_in_the_cell(*names: str) -> Iterator[None]:
    """A UsageError raised inside, ending with where to change it: the parameters cell's `names`, or
    their environment variables."""
    try:
        yield
    except UsageError as err:
        variables = " and ".join(ENV[n.lower()] for n in names)
        raise UsageError(f"{err} Set {' and '.join(names)} in the parameters cell (or {variables}).") from None


def _one_line(shell, etype: type, value: BaseException, tb, tb_offset=None) -> None:
    """IPython's display of a UsageError: its type and message (as IPython colours them), without the traceback
    and without the line that points to %tb for it."""
    shell._showtraceback(etype, value, shell.InteractiveTB.get_exception_only(etype, value))


def _show_usage_errors_in_one_line() -> None:
    """In IPython (a notebook's kernel), show every UsageError as `_one_line`."""
    shell = sys.modules["IPython"].get_ipython() if "IPython" in sys.modules else None
    if shell is not None:
        shell.set_custom_exc((UsageError,), _one_line)


def notebook_params(
    model: str = "smollm2-135m",
    n_prompts: int = 32,
    n_sentence_prompts: int = 10,
    device: str | None = None,
    dtype: str = "float32",
    data_dir: str | Path | None = None,
    seed: int = 0,
    heads: str | Sequence[Head] | None = None,
    task: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> Params:
    """The parameters cell's values, each replaced by its environment variable when set
    (ICL_MODEL, ICL_N_PROMPTS, ICL_N_SENTENCE_PROMPTS, ICL_DEVICE, ICL_DTYPE, ICL_DATA_DIR, ICL_SEED,
    ICL_HEADS, ICL_TASK).

    heads: analyse these heads instead of the top 20 located, as "19-11,20-11" or (layer,
    head) pairs; checked against the model as soon as `Params.load_model` loads it.

    task: a task file (`data.tasks.read_task`), read here, with n_prompts records of it drawn, so a bad file
    stops the notebook at this cell.

    env renames variables, e.g. {"model": "ICL_LLAMA_MODEL"} for a notebook that needs a
    Llama-family model whatever ICL_MODEL says. A relative data directory is taken from
    the checkout (notebooks run in notebooks/, scripts in the checkout).
    """
    given = dict(model=model, n_prompts=n_prompts, n_sentence_prompts=n_sentence_prompts, device=device, dtype=dtype,
                 data_dir=data_dir, seed=seed, heads=heads, task=task)
    names = ENV | (env or {})
    values = {k: os.environ.get(names[k]) or v for k, v in given.items()}
    for key in ("n_prompts", "n_sentence_prompts", "seed"):
        try:
            values[key] = int(values[key])
        except ValueError:
            raise UsageError(f"{names[key]} must be a whole number, not {values[key]!r}.") from None
        if key != "seed" and values[key] < 1:
            raise UsageError(f"{names[key]}: the number of prompts must be at least 1, not {values[key]}.")
    values["heads"] = parse_heads(values["heads"], names["heads"])
    values["from_env"] = tuple((k, names[k]) for k in given if os.environ.get(names[k]))
    if values["data_dir"] is not None:  # relative: from the checkout, as in scripts/; checked before the model loads
        values["data_dir"] = resolve_data_dir(REPO_ROOT / Path(values["data_dir"]).expanduser())
    if values["task"] is not None:  # relative: from the checkout, as the data directory
        with set_in_the_cell("TASK"):
            values["task"] = read_task(REPO_ROOT / Path(values["task"]).expanduser())
        with set_in_the_cell("N_PROMPTS"):
            drawn(values["task"], values["n_prompts"], values["seed"])  # n_prompts records can be drawn
    return Params(**values)


def report_accuracy(m: ICLModel, sets: dict[str, PromptSet]) -> None:
    """Print, per prompt set, how often the model predicts the true label (top-1) and ranks
    it above the false one; where it does no better than chance (nothing right, or the true
    label above the false one in at most half the prompts), one note that the heads the
    notebook locates then explain no in-context learning, so its numbers test nothing."""
    for name, ps in sets.items():
        acc = prompt_accuracy(m, ps)
        n = len(ps)
        print(f"{name}: {m.name} predicts the true label in {round(acc.top1 * n)}/{n} prompts ({acc.top1:.0%}) "
              f"and ranks it above the false label in {round(acc.ranked * n)}/{n} ({acc.ranked:.0%}).")
        if acc.top1 == 0 or acc.ranked <= 0.5:
            print(f"  Note: no better than chance. {m.name} does not learn {name} in context, so the heads located "
                  "here explain no in-context learning: read this notebook's numbers as a run of the code, not as a "
                  "test of the paper.")


def no_sentence_data(p: Params) -> None:
    """In place of a section on the sentence datasets where the notebook reads none: one line saying why it
    shows nothing (a task stands in for the paper's datasets, or none can be had here: then how to get them)."""
    if p.task:
        print(f"Nothing to show here: the task {p.task.name} stands in for the paper's word datasets, and no sentence "
              "dataset is read (unset TASK to read them).")
    else:
        print(f"Nothing to show here: {missing_note(p.data_dir)}")


def verdict_sizes(p: Params, notebook: str) -> None:
    """Print the fewest prompts a dataset that the notebook's verdicts need (`verdicts.claims.fewest_prompts`
    of its claims; with a task, of those judged on it) and, where p gives fewer, once, which of them will read
    "not tested: too few prompts"."""
    given = {"word": ("N_PROMPTS", p.n_prompts), "sentence": ("N_SENTENCE_PROMPTS", p.n_sentence_prompts)}
    needs = {id: fewest_prompts(id, p.seed, word=p.word) for id in claims_of(notebook)
             if not p.task or on_task(CLAIMS[id])}
    if not needs:  # a task, and none of its claims reads the word datasets alone
        print("None of its verdicts is judged on a task: each will read 'not tested'.")
        return
    ids = list(needs)
    most = {kind: max(need.get(kind, 0) for need in needs.values()) for kind in given}
    print("The verdicts at the end need at least " + " and ".join(
        f"{n} {kind} prompts a dataset ({given[kind][0]})" for kind, n in most.items() if n) + ".")
    short = [id for id, need in needs.items() if any(given[kind][1] < n for kind, n in need.items())]
    if short:
        low = [f"{name} = {n}" for kind, (name, n) in given.items() if n < most[kind]]
        print(f"Note: {', '.join(low)} {'is' if len(low) == 1 else 'are'} too few for {len(short)} of its {len(ids)} "
              f"verdicts ({', '.join(short)}): they will read 'not tested: too few prompts'.")


_show_usage_errors_in_one_line()
