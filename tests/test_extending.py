"""docs/extending.md's recipes, followed literally: its code blocks run here (the view's and the intervention's
where the recipe puts them, in the namespace of `verdicts/evidence.py` and `core/interventions.py`; the cached
study as a module of `icl_helpers.studies`), on the small random models, and every code name the page gives
exists. The claim and family recipes' blocks are the toy tests' own (tests/test_claims.py, tests/test_families.py)."""
from __future__ import annotations

import importlib.util
import pydoc
import re
import textwrap
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest
import torch

from icl_helpers.core import interventions
from icl_helpers.core.decompose import decompose
from icl_helpers.core.heads import top_heads
from icl_helpers.core.interventions import Intervention, intervening
from icl_helpers.core.passes import intervened_accuracies
from icl_helpers.data.setting import MAIN
from icl_helpers.studies.accuracy import prompt_accuracy
from icl_helpers.verdicts import claims, compare, evidence, findings
from icl_helpers.verdicts.judgement import FAILS
from tests.conftest import STUDY_HEADS, close, exact
from tests.test_claims import TOY_SECTION, toy_section  # noqa: F401  the claim recipe's toy, a fixture here too
from tests.test_families import TOY

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"


def section(number: int, text: str | None = None) -> str:
    """Recipe `number`'s section of the page (from its "## N." heading to the next heading of that level)."""
    text = PAGE.read_text(encoding="utf-8") if text is None else text
    return re.search(rf"^## {number}\. .*?(?=^## |\Z)", text, re.M | re.S).group(0)


def blocks(number: int) -> list[str]:
    """The python code blocks of recipe `number`, in order."""
    return re.findall(r"^```python\n(.*?)^```$", section(number), re.M | re.S)


def squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_the_claim_and_family_recipes_show_their_toy_tests_code():
    """The claim's block is the toy section of tests/test_claims.py, the family's the toy family of
    tests/test_families.py (whitespace aside): what the page shows is what those tests run."""
    (claim,) = blocks(1)
    (family,) = blocks(2)
    assert squeezed(claim) in squeezed(TOY_SECTION) and "register(Claim(" in claim
    assert squeezed(family) in squeezed(TOY) and "FAMILIES" in family


# --- 3. a view ---------------------------------------------------------------------------
@pytest.mark.parametrize("small", ["llama-bias"], indirect=True)  # the model that ranks about half its prompts wrong
def test_a_view_judges_its_rows_in_heads_located_on_them(small, toy_section, tmp_path, monkeypatch):  # noqa: F811
    """The view's class and its VIEWS line, run in evidence.py's namespace; the toy claim lists it as the
    recipe says and compare names it from the report's description. Its judgement is the toy judge applied
    by hand to the prompts ranked wrong, a proper subset, and its heads are located on them."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    view_class, views_line = blocks(3)
    namespace = dict(vars(evidence))
    exec("from ..studies.accuracy import prompt_accuracy\n" + view_class, namespace)
    exec(views_line, namespace)
    for key, view in namespace["VIEWS"].items():
        monkeypatch.setitem(evidence.VIEWS, key, view)
    view = namespace["RANKED_WRONG"]
    assert "`views=(ALL, RANKED_WRONG)` for the toy claim" in section(3)
    monkeypatch.setitem(claims.CLAIMS, "toy", replace(claims.CLAIMS["toy"], views=(evidence.ALL, view)))
    assert list(evidence.VIEWS)[-1] == view.key == "ranked_wrong"

    (found,) = findings.report(small, 48, 2, announce=lambda step: None, ids=["toy"])
    s = evidence.Evidence(small, 48, 2, 0, None)
    wrong = ~prompt_accuracy(small, s.prompts(evidence.FIRST)).ranked_hits
    assert 2 <= int(wrong.sum()) < len(wrong)  # a proper subset: judging every prompt would fail
    by_hand = toy_section.judge_toy(s.loc(evidence.FIRST).head[wrong].sum((1, 2)), s.inputs(evidence.FIRST)[wrong])
    assert found.views == {"ranked_wrong": by_hand} and found.n == len(wrong) and by_hand.n == int(wrong.sum())
    assert s.in_view(view).heads(evidence.FIRST) == top_heads(s.loc(evidence.FIRST).head[wrong].mean(0), MAIN.heads)
    assert "| ranked wrong only |" in claims.markdown([found]).splitlines()[0]
    assert view.about in claims.intro(48, 2, 0)
    flipped = found.to_dict()
    flipped["views"]["ranked_wrong"]["verdict"] = FAILS
    assert compare.cell(flipped, evidence.described()).endswith("(ranked wrong: does not replicate)")


# --- 4. an intervention ------------------------------------------------------------------
def intervention_recipe() -> tuple[dict, type[Intervention]]:
    """The recipe's function in core/interventions.py's namespace, and its classmethod in `Intervention`."""
    function, method, _ = blocks(4)
    namespace = dict(vars(interventions))
    exec(function, namespace)
    exec("class Recipe(Intervention):\n" + textwrap.indent(method, "    "), namespace)
    return namespace, namespace["Recipe"]


HEADS = [(2, 3), (1, 0)]  # from layer 1: the passes share block 0 among the interventions


def test_an_intervention_scaling_heads_by_zero_is_the_zero_ablation(small, ps):
    namespace, recipe = intervention_recipe()
    runs = [Intervention.ablated(small, HEADS), recipe.scaled(small, HEADS, 0.0), recipe.scaled(small, HEADS, 1.0),
            recipe.scaled(small, HEADS, 0.5), None]
    zero, scaled_zero, scaled_one, half, plain = intervened_accuracies(small, ps.prompts, runs)
    assert runs[1].start == runs[0].start == 1
    for name in ("true_logit", "false_logit", "predictions", "true_prob"):
        exact(getattr(scaled_zero, name), getattr(zero, name))
        exact(getattr(scaled_one, name), getattr(plain, name))
    assert not torch.equal(half.true_logit, zero.true_logit) and not torch.equal(half.true_logit, plain.true_logit)
    with namespace["scaled"](small, HEADS, 0.5):
        assert intervening(small)  # the results cache stands aside
    assert not intervening(small)


def test_the_intervention_recipes_use_runs_as_written(small, ps, capsys):
    _, recipe = intervention_recipe()
    use = blocks(4)[2]
    scope = {"m": small, "ps": ps, "heads": HEADS, "Intervention": recipe}
    exec(use, scope)
    plain, halved = intervened_accuracies(small, ps.prompts, [None, recipe.scaled(small, HEADS, 0.5)])
    assert capsys.readouterr().out == f"{plain.top1} {halved.top1}\n"
    exact(scope["halved"].true_logit, halved.true_logit)


# --- 5. a cached study -------------------------------------------------------------------
@pytest.fixture
def study(tmp_path, monkeypatch):
    """The recipe's module, written to a file and imported as a module of icl_helpers.studies; its
    `decomposed` counted (each computation walks the prompt set once); the cache a fresh folder."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    (code,) = blocks(5)
    path = tmp_path / "head_norms.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location("icl_helpers.studies.head_norms", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.calls = 0
    walk = module.decomposed

    def counted(*args, **kwargs):
        module.calls += 1
        return walk(*args, **kwargs)
    monkeypatch.setattr(module, "decomposed", counted)
    return module


def test_a_cached_study_computes_once_and_keys_its_extras(small, ps, study):
    from icl_helpers.cache import key

    first = study.head_norms(small, ps, STUDY_HEADS)
    z = decompose(small, ps.texts).z.float()  # [N, L, H, dh]: the prompts in one batch
    close(first, torch.stack([z[:, l, h].norm(dim=-1) for l, h in STUDY_HEADS], 1))
    assert study.calls == 1 and first.shape == (len(ps), len(STUDY_HEADS))
    exact(study.head_norms(small, ps, STUDY_HEADS), first)
    assert study.calls == 1  # read back, not computed
    exact(study.head_norms(small, ps, STUDY_HEADS[:1]), first[:, :1])
    assert study.calls == 2  # other heads: another key
    ours, other = key(study.KIND, small, ps, heads=STUDY_HEADS), key(study.KIND, small, ps, heads=STUDY_HEADS[:1])
    assert ours != other and ours.exists() and other.exists()
    exact(study.head_norms(small, ps, STUDY_HEADS, cache=False), first)
    assert study.calls == 3  # computed afresh


# --- the page's names --------------------------------------------------------------------
def unresolved(text: str, root: Path = ROOT) -> list[str]:
    """The code names and paths in `text`'s backticks that do not exist: a dotted name resolves from the
    top (`icl_helpers.X.Y`), from the package (`cache.stored`) or from a module the text names in full
    (`Claim.views`, after `icl_helpers.verdicts.claims...`), a dataclass's field counting; a path
    (with a slash, or a file name) must name a file or folder of the checkout (or of the package) or match
    one (`results/report-*.json`), and `FILE::test` a test of that file."""
    spans = re.findall(r"`([^`\n]+)`", text)
    dotted = [s for s in spans if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", s) and not FILE.search(s)]
    modules = {".".join(s.split(".")[:i]) for s in dotted if s.startswith("icl_helpers.")
               for i in range(2, s.count(".") + 2)}
    modules = {"icl_helpers", *(m for m in modules if type(pydoc.locate(m)).__name__ == "module")}
    missing = [s for s in dotted if not any(exists(f"{m}.{s}") for m in {"", *modules})]
    for span in (s for s in spans if FILE.search(s) and " " not in s):
        path, _, test = span.rstrip("/").partition("::")
        found = [*root.glob(path), *(root / "icl_helpers").glob(path)]
        if not found or (test and f"def {test}(" not in found[0].read_text(encoding="utf-8")):
            missing.append(span)
    return missing


FILE = re.compile(r"(/|\.(py|md|json|ipynb|sh)\b)")


def exists(name: str) -> bool:
    """Whether a dotted name (with a leading dot where it is relative to nothing) is a module or member."""
    name = name.lstrip(".")
    if pydoc.locate(name) is not None:
        return True
    parent, _, last = name.rpartition(".")
    owner = pydoc.locate(parent) if parent else None
    return owner is not None and is_dataclass(owner) and last in {f.name for f in fields(owner)}


def test_every_code_name_and_path_on_the_page_exists():
    assert unresolved(PAGE.read_text(encoding="utf-8")) == []


def test_a_name_or_path_that_is_not_there_is_found():
    text = ("`icl_helpers.verdicts.claims.Claim` and `Claim.views`, `Claim.id` (a field), `cache.stored`; "
            "`icl_helpers.cache.nothing`, `Claim.nothing`, `core.nowhere`; `tests/test_extending.py`, "
            "`studies/label_subspace.py`, `results/report-*-n64.json`, `results/earlier/`, `tests/test_none.py`, "
            "`tests/test_extending.py::test_a_name_or_path_that_is_not_there_is_found`, `tests/test_extending.py::gone`")
    assert unresolved(text) == ["icl_helpers.cache.nothing", "Claim.nothing", "core.nowhere", "tests/test_none.py",
                                "tests/test_extending.py::gone"]
