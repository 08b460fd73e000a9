"""The package's layout rules, checked on its source: presentation lives in viz/ alone,
dependencies point one way, and no private name crosses a module boundary."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "icl_helpers"
PRESENTATION = ("matplotlib", "seaborn", "ipywidgets", "IPython")
# Floors, lowest first: a module may import its own floor and those below it, except data from model.
BASE = {"errors", "paths", "hub", "progress", "stats", "lazy", "outputs"}  # top-level modules everything may use
FRONT = {"__init__", "__main__", "cli", "runs", "notebook"}  # the doors users come in by (and the run checks of `cli`)
# `cache`, the results cache, is a floor of its own: it keys results by model and inputs, and studies ask it;
CACHE = {"entries"}  # beside it on that floor: the entries it keeps on disk
LAYERS = ["base", "model", "data", "core", "cache", "studies", "verdicts", "viz", "front"]


def imports(path: Path, package: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) for every import in a file of `package`."""
    here = path.relative_to(package.parent).with_suffix("").parts
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(here[: len(here) - node.level]) if node.level else []
            found.append((".".join(base + ([node.module] if node.module else [])), [a.name for a in node.names]))
    return found


def floor(parts: tuple[str, ...]) -> str:
    """The floor of a module, from its path inside the package (("core", "locate") or ("cli",))."""
    if len(parts) > 1 or parts[0] in LAYERS:
        return parts[0]
    floors = {**dict.fromkeys(BASE, "base"), **dict.fromkeys(CACHE, "cache"), **dict.fromkeys(FRONT, "front")}
    return floors.get(parts[0], "unplaced")


def violations(path: Path, package: Path = PACKAGE) -> list[str]:
    """What a file of the package imports against the layout rules, one line each."""
    parts = path.relative_to(package).with_suffix("").parts
    part, found = floor(parts), []
    if part not in LAYERS:
        return [f"{'/'.join(parts)} is on no floor: add it to BASE or FRONT, or move it into a subpackage"]
    for module, names in imports(path, package):
        if module.split(".")[0] in PRESENTATION and part != "viz":
            found.append(f"imports {module}: presentation belongs in viz/")
        if module == package.name:  # `from .. import notebook`: the names are modules
            found += [f for name in names for f in violations_of(part, f"{module}.{name}", [])]
        elif module.startswith(package.name + "."):
            found += violations_of(part, module, names)
    return found


def violations_of(part: str, module: str, names: list[str]) -> list[str]:
    """What importing `names` from a module of the package breaks, on floor `part`."""
    found, target = [], floor(tuple(module.split(".")[1:]))
    if target in LAYERS and (LAYERS.index(target) > LAYERS.index(part) or (part, target) == ("data", "model")):
        found.append(f"{part} imports {module}")
    if target == "viz" and part != "viz":
        found.append(f"imports {module}: nothing outside viz/ may")
    if any(n.startswith("_") for n in names):
        found.append(f"imports private names from {module}")
    return found


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layout_rules(path):
    assert violations(path) == []


def test_the_rules_can_fail(tmp_path):
    bad = tmp_path / "icl_helpers" / "core" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("import seaborn\nfrom ..viz.figures import _fig\nfrom ..studies import runner\nfrom .. import notebook\n")
    assert violations(bad, tmp_path / "icl_helpers") == [
        "imports seaborn: presentation belongs in viz/", "core imports icl_helpers.viz.figures",
        "imports icl_helpers.viz.figures: nothing outside viz/ may", "imports private names from icl_helpers.viz.figures",
        "core imports icl_helpers.studies", "core imports icl_helpers.notebook"]
    low = tmp_path / "icl_helpers" / "stats.py"
    low.write_text("from .verdicts import report\nfrom .errors import UsageError\n")
    assert violations(low, tmp_path / "icl_helpers") == ["base imports icl_helpers.verdicts"]
    stray = tmp_path / "icl_helpers" / "stray.py"
    stray.write_text("")
    assert violations(stray, tmp_path / "icl_helpers") == [
        "stray is on no floor: add it to BASE or FRONT, or move it into a subpackage"]
    entry = tmp_path / "icl_helpers" / "core" / "entry.py"
    entry.write_text("from ..entries import cached\n")
    assert violations(entry, tmp_path / "icl_helpers") == ["core imports icl_helpers.entries"]


MAX_LINES = 350  # a module's length at most: past it, split it into modules named for what they hold


def long_modules(package: Path = PACKAGE, most: int = MAX_LINES) -> list[str]:
    """The modules of the package longer than `most` lines, each with its length."""
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in sorted(package.rglob("*.py"))}
    return [f"{path.relative_to(package)}: {n} lines" for path, n in lengths.items() if n > most]


def test_every_module_keeps_to_the_line_cap():
    assert long_modules() == []


def test_a_module_past_the_cap_is_named(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(tmp_path) == [f"sub/long.py: {MAX_LINES + 1} lines"]


def cache_importers(folder: str, package: Path = PACKAGE) -> list[str]:
    """The files under `folder` of the package that import the results cache (`cache.py` or its `entries.py`),
    in any form."""
    cache = {"cache", *CACHE}
    return [str(path.relative_to(package)) for path in sorted((package / folder).rglob("*.py"))
            if any(module in {f"{package.name}.{c}" for c in cache} or (module == package.name and cache & set(names))
                   for module, names in imports(path, package))]


def test_the_core_imports_no_cache():
    """The exact computations know no disk: the cache keys and keeps their results a floor above them."""
    assert cache_importers("core") == []


def test_a_core_that_imports_the_cache_is_found(tmp_path):
    package = tmp_path / "icl_helpers"
    (package / "core").mkdir(parents=True)
    (package / "core" / "fine.py").write_text("from ..paths import cache_root\nfrom .batching import Tensors\n")
    (package / "core" / "alias.py").write_text("from ..cache import Tensors\n")
    (package / "core" / "whole.py").write_text("from .. import cache\n")
    (package / "core" / "plain.py").write_text("import icl_helpers.cache\n")
    (package / "core" / "entry.py").write_text("from ..entries import cached\n")
    (package / "core" / "entries.py").write_text("from .. import entries\n")
    assert cache_importers("core", package) == ["core/alias.py", "core/entries.py", "core/entry.py", "core/plain.py",
                                                "core/whole.py"]


PRODUCT = ["README.md", "docs/*.md", "data/README.md", "notebooks/README.md", "notebooks/*.ipynb", "scripts/*.sh", "icl_helpers/**/*.py"]
DEVELOPERS_ONLY = ("../shared", "shared/datasets", "METHOD.md")  # the developers' folder beside the checkout


def test_the_product_names_no_file_its_users_lack():
    """The package, notebooks, README, docs and scripts point to the paper and to their own files, never
    to the developers' folder beside the checkout (tests and CI may)."""
    root = PACKAGE.parent
    named = [f"{path.relative_to(root)}: {word}" for pattern in PRODUCT for path in sorted(root.glob(pattern))
             for word in DEVELOPERS_ONLY if word in path.read_text(encoding="utf-8")]
    assert named == []


DOCUMENTS = ["README.md", "docs/*.md", "data/README.md", "notebooks/README.md", "tests/README.md", "bench/*.md"]


def anchor(heading: str) -> str:
    """A markdown heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_documents_links_resolve():
    """Every relative link of the README and its pages names a file of the checkout, and its #anchor
    a heading of that file: the README's sections moved to docs/, whose links start one folder up."""
    root, broken = PACKAGE.parent, []
    for path in [p for pattern in DOCUMENTS for p in sorted(root.glob(pattern))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, fragment = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            text = linked.is_file() and linked.suffix not in (".png", ".jpg")  # a picture has no headings
            headings = re.findall(r"^#+ (.+)$", linked.read_text(encoding="utf-8"), re.M) if text else []
            if not linked.exists() or (fragment and fragment not in map(anchor, headings)):
                broken.append(f"{path.relative_to(root)}: {target}")
    assert broken == []


def named_modules(row: str) -> set[str]:
    """The modules a row of docs/layout.md's table names: its backticked names outside parentheses
    (a subpackage's with its slash, `claims/`, or without)."""
    while re.search(r"\([^()]*\)", row):
        row = re.sub(r"\([^()]*\)", "", row)
    return set(re.findall(r"`(\w+)/?`", row))


def test_the_layout_map_lists_every_module():
    """docs/layout.md's table: each folder's row names exactly its modules and subpackages."""
    text = (PACKAGE.parent / "docs" / "layout.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(icl_helpers/(?:\w+/)?)` \| (.+) \|$", text, re.M))
    folders = [PACKAGE, *(p for p in sorted(PACKAGE.iterdir()) if (p / "__init__.py").is_file())]
    assert sorted(rows) == sorted(f"{p.relative_to(PACKAGE.parent)}/" for p in folders)
    for folder in folders:
        modules = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("__")}
        packages = {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
        holds = (modules | packages) - ({p.name for p in folders} if folder == PACKAGE else set())
        assert named_modules(rows[f"{folder.relative_to(PACKAGE.parent)}/"]) == holds, folder.name


def section_lists(text: str) -> list[list[str]]:
    """Each list of the claims' sections a document gives: the backticked names after "one module a section of
    the paper:" or "the paper's section the claim belongs to (", up to the list's end."""
    found = re.findall(r"(?:one module a section of the paper: |the paper's section the claim belongs to \()"
                       r"((?:`\w+`,?\s*)+)", text)
    return [re.findall(r"`(\w+)`", names) for names in found]


def test_the_docs_list_the_claims_sections_the_package_registers_in_its_order():
    """docs/layout.md and recipe 1 of docs/extending.md name every module of verdicts/claims/ that registers
    claims, in the order `claims/__init__.py` imports them (the report's order)."""
    init = (PACKAGE / "verdicts" / "claims" / "__init__.py").read_text(encoding="utf-8")
    sections = re.search(r"^from \. import ([\w, ]+)", init, re.M).group(1).replace(" ", "").split(",")
    for name in ("layout.md", "extending.md"):
        lists = section_lists((PACKAGE.parent / "docs" / name).read_text(encoding="utf-8"))
        assert lists == [sections], name
    assert section_lists("one module a section of the paper: `accuracy`, `location`, and more") == [["accuracy", "location"]]


@pytest.mark.parametrize("package", ["icl_helpers", "icl_helpers.data", "icl_helpers.verdicts"])
def test_every_name_a_package_exports_on_first_use_resolves(package):
    """Each public name a package imports on first use (`lazy.lazy_exports`) is in the module its map names,
    so `verdicts.SENTENCE` and the like never fail in a user's hands after a name moves."""
    import importlib

    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{package} maps {', '.join(missing)} to a module that lacks them"
