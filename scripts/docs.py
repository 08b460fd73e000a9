"""Build the API reference of icl_helpers from its docstrings with pdoc, into the folder given
(`bash scripts/docs.sh` writes build/docs/). It fails, naming each problem, where pdoc warns (a
module that does not import, a name in `__all__` that does not resolve, an annotation it cannot
read) or where a docstring names a module of the package, or a member of one, that does not exist:
a backticked dotted name whose first part is a module (`core.locate.locate`, `prompts.Prompt`) or
a class of the module it is in (`Decomposition.attn_scale`)."""
from __future__ import annotations

import importlib
import pkgutil
import re
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.doc
import pdoc.extract

import icl_helpers

REFERENCE = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)`")


def module_specs() -> list[str]:
    """The modules to give pdoc so that it documents icl_helpers and every public module below it:
    pdoc walks a package's modules, but stops at one whose `__all__` lists its names and not its
    modules (icl_helpers, verdicts), so those modules are given one by one."""
    below = pkgutil.walk_packages(icl_helpers.__path__, "icl_helpers.")
    specs, reached = [], set()
    for name in ["icl_helpers"] + [m.name for m in below if not m.name.rpartition(".")[2].startswith("_")]:
        if name not in reached:
            specs.append(name)
            reached.update(pdoc.extract.walk_specs([name]))
    return specs


def members(doc: pdoc.doc.Namespace) -> list[pdoc.doc.Doc]:
    """The documented members of a module or class, and theirs."""
    found = []
    for member in doc.own_members:
        found.append(member)
        if isinstance(member, pdoc.doc.Class):
            found += members(member)
    return found


def resolves(name: str, module: pdoc.doc.Module, every: dict[str, pdoc.doc.Module]) -> bool | None:
    """Whether a dotted name in a docstring of `module` names something documented; None where it is
    no reference: its first part is neither a module (from the package's root down to this module's
    own package) nor a class of this module."""
    first = name.partition(".")[0]
    if isinstance(module.get(first), pdoc.doc.Class):
        return module.get(name) is not None
    scopes = [module.modulename.rsplit(".", n)[0] for n in range(module.modulename.count(".") + 1)]
    full = next((f"{scope}.{name}" for scope in scopes if f"{scope}.{first}" in every), name if first in every else None)
    if full is None:
        return None
    parts = full.split(".")
    cut = max(n for n in range(1, len(parts) + 1) if ".".join(parts[:n]) in every)
    rest = ".".join(parts[cut:])
    return not rest or every[".".join(parts[:cut])].get(rest) is not None


def broken_references(every: dict[str, pdoc.doc.Module]) -> list[str]:
    """'where: `name`' for each docstring reference that names nothing documented."""
    return [f"{doc.fullname}: `{name}`" for module in every.values() for doc in [module, *members(module)]
            for name in REFERENCE.findall(doc.docstring) if resolves(name, module, every) is False]


def main(out: Path) -> int:
    # The packages import their public names on first use (icl_helpers, data, verdicts); pdoc reads a
    # module's own namespace, so they are imported here first.
    packages = [icl_helpers] + [importlib.import_module(m.name) for m in pkgutil.walk_packages(icl_helpers.__path__, "icl_helpers.")
                                if m.ispkg]
    for package in packages:
        for name in getattr(package, "__all__", []):
            setattr(package, name, getattr(package, name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.render.configure(docformat="markdown", footer_text="icl-helpers")
        specs = module_specs()
        pdoc.pdoc(*specs, output_directory=out)
        every = {name: pdoc.doc.Module.from_name(name) for name in pdoc.extract.walk_specs(specs)}
        problems = broken_references(every)
    ours = (Path(pdoc.__file__).parent, Path(icl_helpers.__file__).parent)
    problems = [f"{w.category.__name__}: {w.message}" for w in caught if any(Path(w.filename).is_relative_to(d) for d in ours)] + problems
    for problem in problems:
        print(f"docs: {problem}", file=sys.stderr)
    if problems:
        print(f"docs: {len(problems)} problem(s); the reference was written to {out} but is not clean.", file=sys.stderr)
        return 1
    print(f"docs: {len(every)} modules documented in {out}/ (open {out}/index.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "build/docs")))
