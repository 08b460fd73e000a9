"""The suite's own maps, checked against the files: the quick tier (`QUICK` in conftest.py) names tests
that exist, and tests/README.md's table of which files test a module names every module of the package."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import QUICK
from tests.test_layout import PACKAGE

TESTS = Path(__file__).resolve().parent
MAP_HEADING = "## Which files test a module"


def collected_tests(path: Path) -> set[str]:
    """The tests pytest collects from a file: its functions named test*, those of its classes, and
    those it imports from another test file."""
    found = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        body = node.body if isinstance(node, ast.ClassDef) else [node]
        found |= {f.name for f in body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if isinstance(node, ast.ImportFrom):
            found |= {a.asname or a.name for a in node.names}
    return {name for name in found if name.startswith("test")}


def quick_gaps(quick: dict[str, tuple[str, ...]], folder: Path = TESTS) -> list[str]:
    """What `quick` names that is not there: a file, by its name, or a test of a file, as FILE::NAME."""
    gaps = []
    for file, names in quick.items():
        path = folder / file
        if not path.is_file():
            gaps.append(file)
        else:
            gaps += [f"{file}::{name}" for name in names if name not in collected_tests(path)]
    return gaps


def test_the_quick_tier_names_files_and_tests_that_exist():
    assert quick_gaps(QUICK) == []


def test_a_quick_tier_naming_a_file_or_test_that_is_not_there_is_found(tmp_path):
    (tmp_path / "test_here.py").write_text("from tests.test_layout import test_layout_rules\n\n\ndef test_one():\n"
                                           "    pass\n\n\nclass TestGroup:\n    def test_two(self):\n        pass\n")
    quick = {"test_here.py": ("test_one", "test_two", "test_layout_rules", "test_onne"), "test_gone.py": ()}
    assert quick_gaps(quick, tmp_path) == ["test_here.py::test_onne", "test_gone.py"]


def module_map(readme: str) -> list[tuple[list[str], list[str]]]:
    """The rows of the README's table of which files test a module: (modules or folders, test files)."""
    section = readme.split(MAP_HEADING, 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", section, re.M)[1:]  # after the header (its rule has no spaces)
    return [(re.findall(r"`([\w/.]+)`", modules), re.findall(r"\btest_\w+", tests)) for modules, tests in rows]


def map_gaps(readme: str, package: Path = PACKAGE, tests: Path = TESTS) -> list[str]:
    """What the table misses or names wrongly: a module of the package in no row (a folder's row covers
    the modules under it), a module or folder that is not there, a test file that is not there."""
    rows = module_map(readme)
    named = {name for modules, _ in rows for name in modules}
    modules = [str(path.relative_to(package)) for path in sorted(package.rglob("*.py"))]
    gaps = [f"{m}: no row" for m in modules
            if m not in named and not any(m.startswith(n) for n in named if n.endswith("/"))]
    gaps += [f"{n}: no such module" for n in sorted(named) if not (package / n).exists()]
    files = sorted({t for _, names in rows for t in names})
    return gaps + [f"{t}: no such test file" for t in files if not (tests / f"{t}.py").is_file()]


def test_the_readme_says_which_files_test_each_module():
    assert map_gaps((TESTS / "README.md").read_text(encoding="utf-8")) == []


def test_a_module_without_a_row_or_a_row_naming_nothing_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub" / "deep").mkdir(parents=True)
    for module in ("a.py", "sub/b.py", "sub/deep/c.py"):
        (package / module).write_text("")
    (tmp_path / "test_here.py").write_text("")
    readme = (f"# Tests\n\n{MAP_HEADING}\n\n| module | test files |\n|---|---|\n| `a.py`, `gone.py` | test_here |\n"
              "| `sub/deep/` | test_here, test_gone |\n\n## Next\n\n| `sub/b.py` | test_here |\n")
    assert map_gaps(readme, package, tmp_path) == ["sub/b.py: no row", "gone.py: no such module",
                                                   "test_gone: no such test file"]
