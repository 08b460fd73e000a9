"""The prose rule for what a reader reads: at most 30 words a sentence in the README, the docs, the
notebooks' markdown and the verdict reasons, counted on the text as it renders (code, tables, headings and
link targets left out)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MOST_WORDS = 30
PAGES = ["README.md", "notebooks/README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb"))
ENDS = re.compile(r"(?<=[.!?])\s+(?=[A-Z*(\[_\"'])|(?<=:)\s+(?=[A-Z*])|\n\s*[-*] |\n\s*\d+\. |\n\n| · ")


def sentences(markdown: str) -> list[str]:
    """The sentences of `markdown` as it renders: fenced code, tables, headings and pictures dropped, a
    link as its text, inline code as one word (capitalised, as a sentence may begin with it); a list item, a
    paragraph or a " · " between a list's entries ends a sentence."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(("|", "#", "![", "<")))
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"`[^`]*`", "Code", text)
    return [" ".join(s.split()) for s in ENDS.split("\n" + text) if s.strip()]


def too_long(markdown: str) -> list[str]:
    """The sentences of `markdown` over MOST_WORDS words."""
    return [s for s in sentences(markdown) if len(s.split()) > MOST_WORDS]


def notebook_markdown(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


@pytest.mark.parametrize("page", PAGES)
def test_a_pages_sentences_are_at_most_30_words(page):
    assert too_long((ROOT / page).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebooks_sentences_are_at_most_30_words(name):
    assert too_long(notebook_markdown(ROOT / "notebooks" / f"{name}.ipynb")) == []


def test_the_rule_finds_a_long_sentence_and_reads_markdown_as_it_renders():
    long = "Word " * 31
    assert too_long(f"Short one. {long.strip()}.\n\n```\n{long}\n```\n| {long} |\n- a [link]({'x/' * 40}) item") == [long.strip() + "."]
    assert sentences("See Fig. 5 and e.g. this. Then that: Next one.\n- an item · `x` runs.") == [
        "See Fig. 5 and e.g. this.", "Then that:", "Next one.", "an item", "Code runs."]
