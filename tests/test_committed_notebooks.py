"""What a reader of the committed notebooks sees without a kernel (GitHub, nbviewer, an
untrusted JupyterLab): a static copy wherever a widget is, no frozen progress bar, no saved
widget state, no path of the machine that ran them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from icl_helpers.verdicts.claims import claims_of, ids_of
from icl_helpers.verdicts.claims.registry import TASK_NOTEBOOK
from icl_helpers.verdicts.whose import LITERATURE as LITERATURE_CLAIMS

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"


def outputs(path: Path) -> list[dict]:
    cells = json.loads(path.read_text())["cells"]
    return [o for c in cells if c["cell_type"] == "code" for o in c["outputs"]]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_read_well_without_a_kernel(path):
    nb = json.loads(path.read_text())
    assert "widgets" not in nb["metadata"]
    shown = outputs(path)
    assert shown, "committed with outputs"
    for out in shown:
        data = out.get("data", {})
        if WIDGET in data:
            assert "image/png" in data, f"a widget without a static image: {data['text/plain']}"
        text = json.dumps(out)
        assert "it/s]" not in text and "Loading weights" not in text, "a frozen progress bar"
        assert "/work/" not in text and "/home/" not in text and "/root/" not in text, "a machine's path"


def test_each_notebook_links_its_neighbours_and_every_link_resolves():
    """The title cell names the previous and next notebook; the last cell of each but the last
    leads to the next; every relative link in a notebook's text reaches a file of the checkout."""
    for i, path in enumerate(NOTEBOOKS):
        cells = json.loads(path.read_text())["cells"]
        text = lambda c: "".join(c["source"])  # noqa: E731
        nav = text(cells[0]).splitlines()[1]
        for j, word in ((i - 1, "previous"), (i + 1, "next")):
            if 0 <= j < len(NOTEBOOKS):
                assert f"{word}: [{NOTEBOOKS[j].stem}]({NOTEBOOKS[j].name})" in nav, path.stem
        if i + 1 < len(NOTEBOOKS):
            assert text(cells[-1]).startswith(f"*Next: [{NOTEBOOKS[i + 1].stem}]({NOTEBOOKS[i + 1].name})"), path.stem
        for c in cells:
            if c["cell_type"] == "markdown":
                for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text(c)):
                    assert (path.parent / target).exists(), f"{path.stem}: a link to {target}"


QUICK_REPORT = NOTEBOOKS[0].parents[1] / "results" / "report-smollm2-135m-n64.md"
TASK_REPORT = QUICK_REPORT.with_name("task-fruit_tool-smollm2-135m-n64.md")  # the task notebook 10 runs, at its size


def table_rows(markdown: str) -> dict[str, dict[str, str]]:
    """The verdict table in `markdown` (`verdicts.markdown`'s): claim id -> {column: cell}."""
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split(" | ")]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[1:] if not line.startswith("|---")]
    return {row[0]: dict(zip(head, row)) for row in rows if len(row) == len(head)}


LITERATURE_IDS = set(ids_of(LITERATURE_CLAIMS))
PAPER = [path for path in NOTEBOOKS if set(claims_of(path.name[:2])) - LITERATURE_IDS]  # with the paper's claims and ours
LITERATURE = [path for path in NOTEBOOKS if set(claims_of(path.name[:2])) & LITERATURE_IDS]  # with the literature's (09)


def test_every_notebook_closes_with_one_kind_of_verdict():
    assert sorted(PAPER + LITERATURE) == NOTEBOOKS and not set(PAPER) & set(LITERATURE)


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.stem)
def test_a_committed_notebooks_verdicts_are_the_quick_reports_rows(path):
    """One number per claim: the committed outputs are run at the quick report's sizes, so each verdict row a
    notebook ends with is that report's row, cell for cell, the numbers its title cell quotes (the task's report,
    for the notebook on a task)."""
    tables = [o["data"]["text/plain"] for o in outputs(path) if "| id | claim |" in "".join(o.get("data", {}).get("text/plain", ""))]
    assert len(tables) == 1, "one verdict table"
    report = table_rows((TASK_REPORT if path.name.startswith(TASK_NOTEBOOK) else QUICK_REPORT).read_text())
    shown = table_rows("".join(tables[0]))
    assert shown, "a verdict row"
    for claim, row in shown.items():
        assert row == {column: report[claim][column] for column in row}, claim


@pytest.mark.parametrize("path", LITERATURE, ids=lambda p: p.stem)
def test_a_committed_literature_table_holds_every_claim_its_title_quotes(path):
    """The literature's claims are in no report: the notebook closes with one table of them all, and its title
    cell quotes each verdict as that table gives it."""
    tables = [o["data"]["text/plain"] for o in outputs(path) if "| id | claim |" in "".join(o.get("data", {}).get("text/plain", ""))]
    assert len(tables) == 1, "one verdict table"
    shown = table_rows("".join(tables[0]))
    assert list(shown) == claims_of(path.name[:2])
    title = "".join(json.loads(path.read_text())["cells"][0]["source"])
    for claim, row in shown.items():
        assert f"*{claim}: {row['verdict']}*" in title, claim


SYMBOLS = ("␣", "↵", "\ufffd")  # what a token table draws for a space, a line break, part of a character


def unkeyed_symbols(cells: list[dict]) -> list[str]:
    """The token tables' symbols that a notebook's outputs show and its markdown never explains."""
    shown = json.dumps([c.get("outputs", []) for c in cells], ensure_ascii=False)
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return [s for s in SYMBOLS if s in shown and s not in text]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_symbol_a_token_table_shows_has_its_key_in_the_notebook(path):
    assert unkeyed_symbols(json.loads(path.read_text())["cells"]) == []


def test_a_symbol_shown_without_its_key_is_found():
    table = {"cell_type": "code", "source": [], "outputs": [{"data": {"text/html": "<td>\u2423bar  \ufffd</td>"}}]}
    key = {"cell_type": "markdown", "source": ["␣ marks a space."]}
    assert unkeyed_symbols([key, table]) == ["\ufffd"]


TITLE_WORDS = 150
REFERENCE = re.compile(r"\b(?:Figs?\.|Tables?|Appendix|Sections?|ll?\.)\s*[A-Z]?\d+(?:\.\d+)?"
                       r"(?:\s*(?:-|–|,|and)\s*[A-Z]?\d+(?:\.\d+)?)*")  # Fig. 5, Figs. 12-15, Tables 1 and 3, l. 458, 666
YEAR = re.compile(r"(?<=\()(?:19|20)\d\d(?=\))|(?<=[A-Za-z.] )(?:19|20)\d\d\b")  # (2024), et al. 2022
LINK = re.compile(r"\]\([^)]*\)")  # a link's target: its text stays
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?(?:%|x)?(?![\w%])")  # 79.4%, 8.8, 2.5x, head 23-1


def title_numbers(title: str) -> list[str]:
    """The numbers a title cell states: not its heading's notebook number, references, citation years or link targets."""
    text = re.sub(r"^# \d+", "", title)
    for pattern in (LINK, REFERENCE, YEAR):
        text = pattern.sub(" ", text)
    return NUMBER.findall(text)


def unfound_numbers(cells: list[dict]) -> list[str]:
    """The title's numbers that no other cell of the notebook shows verbatim (its outputs or its text)."""
    rest = json.dumps([c.get("outputs", []) for c in cells[1:]], ensure_ascii=False)
    rest += "".join("".join(c["source"]) for c in cells[1:])
    numbers = title_numbers("".join(cells[0]["source"]))
    return [n for n in numbers if not re.search(r"(?<![\d.])" + re.escape(n) + r"(?!\d)", rest)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_title_cell_is_short_and_each_of_its_numbers_is_found_in_its_notebook(path):
    """Issue 79: a title of at most 150 words, the verdicts a short list; a reader finds each number it quotes
    below it, in the notebook's outputs or text."""
    cells = json.loads(path.read_text())["cells"]
    assert len("".join(cells[0]["source"]).split()) <= TITLE_WORDS
    assert unfound_numbers(cells) == []


def test_a_title_number_the_notebook_never_shows_is_found():
    title = {"cell_type": "markdown", "source": ["# 08 Title\n", "Tests Figs. 12-15 of Yu & Ananiadou (2024), l. 1141, "
                                                 "Table 2: [report](../results/report-n64.md).\n",
                                                 "- *causal*: 79.4% to 70.5%, 2.5x, head 23-1"]}
    table = {"cell_type": "code", "source": [], "outputs": [{"data": {"text/plain": "top-1 79.4% -> 70.6%; 2.5x; 23-1"}}]}
    assert title_numbers("".join(title["source"])) == ["79.4%", "70.5%", "2.5x", "23-1"]
    assert unfound_numbers([title, table]) == ["70.5%"]
