"""docs/extending.md's recipes, followed literally: its code blocks run here (the view's and the intervention's
where the recipe puts them, in the namespace of `verdicts/evidence.py` and `core/interventions.py`; the cached
study as a module of `icl_helpers.studies`, the literature's claim as one of `icl_helpers.verdicts.claims.literature`;
the head-type score in `studies/head_types.py` and `studies/head_sets.py`; the command in `cli.py`), on the small
random models, and every code name the page gives exists. The notebook recipe's parts are what every committed
notebook has. The claim and family recipes' blocks are the toy tests' own (tests/test_claims.py,
tests/test_families.py)."""
from __future__ import annotations

import importlib.util
import inspect
import json
import pydoc
import re
import textwrap
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest
import torch

from icl_helpers import cli, verdicts
from icl_helpers.core import interventions
from icl_helpers.core.decompose import decompose
from icl_helpers.core.heads import top_heads
from icl_helpers.core.interventions import Intervention, intervening
from icl_helpers.core.passes import intervened_accuracies
from icl_helpers.data.setting import MAIN
from icl_helpers.notebook import ENV, notebook_params, verdict_sizes
from icl_helpers.studies import head_sets, head_types
from icl_helpers.studies.accuracy import prompt_accuracy
from icl_helpers.verdicts import claims, compare, evidence, findings, head_report
from icl_helpers.verdicts.judgement import FAILS, PARTLY, REPLICATES
from icl_helpers.verdicts.whose import LITERATURE
from icl_helpers.viz.verdict_table import VerdictTable
from tests.conftest import STUDY_HEADS, close, exact
from tests.test_claims import TOY_SECTION, toy_section  # noqa: F401  the claim recipe's toy, a fixture here too
from tests.test_families import TOY
from tests.test_prose import notebook_markdown, too_long

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"


def section(number: int, text: str | None = None) -> str:
    """Recipe `number`'s section of the page (from its "## N." heading to the next heading of that level)."""
    text = PAGE.read_text(encoding="utf-8") if text is None else text
    return re.search(rf"^## {number}\. .*?(?=^## |\Z)", text, re.M | re.S).group(0)


def blocks(number: int) -> list[str]:
    """The python code blocks of recipe `number`, in order."""
    return re.findall(r"^```python\n(.*?)^```$", section(number), re.M | re.S)


def recipe_module(number: int, name: str, folder: Path):
    """Recipe `number`'s one code block, written to a file in `folder` and imported as the module `name`."""
    (code,) = blocks(number)
    path = folder / f"{name.rsplit('.', 1)[1]}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    module = recipe_module(5, "icl_helpers.studies.head_norms", tmp_path)
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


# --- 6. a claim of the literature ----------------------------------------------------------
LITERATURE_ID = "previous_below_induction"


@pytest.fixture
def composition(tmp_path, monkeypatch):
    """The recipe's module, written to a file and imported as a module of icl_helpers.verdicts.claims.literature
    (which registers its claim, as the package's import line would); unregistered after."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    try:
        yield recipe_module(6, "icl_helpers.verdicts.claims.literature.composition", tmp_path)
    finally:
        claims.CLAIMS.pop(LITERATURE_ID, None)


def mean_layer_gap(study: head_sets.HeadSetStudy, k: int) -> float:
    """The top-k induction heads' mean layer minus the top-k previous-token heads', from the scores."""
    layers = {name: [float(l) for l, _ in top_heads(study.scores.scores[name], k)]
              for name in (head_sets.INDUCTION, head_sets.PREVIOUS)}
    return sum(layers[head_sets.INDUCTION]) / k - sum(layers[head_sets.PREVIOUS]) / k


@pytest.mark.parametrize("small", ["llama-gqa"], indirect=True)  # its two sizes' gaps differ: every verdict can be had
def test_a_literature_claim_is_judged_on_the_head_set_study(small, composition, monkeypatch):
    """Registered last, in the registry and in notebook 09's; judged as the heads report judges every claim,
    its verdict is the rule applied by hand to the two sets' mean layers at each size, at a threshold
    below both gaps, between them and above both; the report's entry and table carry its rule."""
    assert list(claims.CLAIMS)[-1] == LITERATURE_ID == claims.claims_of("09")[-1] == claims.ids_of(LITERATURE)[-1]
    claim = claims.CLAIMS[LITERATURE_ID]
    assert claim.rule.startswith("at each size, the top induction heads' mean layer exceeds the top "
                                 "previous-token heads' by at least 0.5: replicates")
    study = head_sets.head_set_study(small, ["sentiment_number"], 12, sizes=(2, 3), n_sequences=2, length=7,
                                     n_random=2, batch_size=4)
    gaps = {k: mean_layer_gap(study, k) for k in study.sizes}
    low, high = sorted(gaps.values())
    assert low < high
    for threshold, verdict in ((low - 0.1, REPLICATES), ((low + high) / 2, PARTLY), (high + 0.1, FAILS)):
        monkeypatch.setitem(composition.PREVIOUS_BELOW, "min_gap", threshold)
        (found,) = head_report.judged(study, [LITERATURE_ID])
        assert (found.verdict, found.ours, found.ci, found.n) == (verdict, gaps[2], None, None), threshold
        assert f"k = 3: induction minus previous-token mean layer {gaps[3]:+.2f} (" in found.why
    assert [f.id for f in head_report.judged(study)][-1] == LITERATURE_ID  # the heads report judges it with the rest
    entry = found.to_dict()
    assert (entry["id"], entry["whose"], entry["verdict"], claim.reconstructed) == (LITERATURE_ID, LITERATURE, FAILS, True)
    assert f"| {LITERATURE_ID} | {claim.claim} | {claim.paper} (our reconstruction) |" in claims.markdown([found])
    assert f"Rule: {claim.rule}." in claims.markdown([found])


# --- 7. a head-type score ------------------------------------------------------------------
def score_recipe(monkeypatch) -> tuple[dict, dict]:
    """The recipe's targets and pass run in head_types.py's namespace, its name among head_sets.py's scores
    and its entry written into `head_scores` where the recipe says; patched into both modules for the study
    to read (`target_attention` counted: each pass of the sequences is one call)."""
    targets, scores_pass, names = blocks(7)
    types = dict(vars(head_types))
    exec(targets, types)
    exec(scores_pass, types)
    types["passes"] = 0
    walk = types["target_attention"]

    def counted(*args, **kwargs):
        types["passes"] += 1
        return walk(*args, **kwargs)
    types["target_attention"] = counted
    sets = dict(vars(head_sets))
    exec(names, sets)
    after, entry = re.search(r"after the entry `(.+?)`, the entry `(.+?)`", section(7)).groups()
    source = inspect.getsource(head_sets.head_scores)
    assert source.count(after) == 1
    sets["repeated_sequence_scores"] = types["repeated_sequence_scores"]
    exec(source.replace(after, f"{after} {entry}"), sets)
    monkeypatch.setattr(head_sets, "head_scores", sets["head_scores"])
    monkeypatch.setattr(head_sets, "SCORES", sets["SCORES"])
    return types, sets


@pytest.mark.parametrize("small", ["llama-gqa"], indirect=True)
def test_a_head_type_score_is_read_in_the_same_pass_and_makes_a_head_set(small, tmp_path, monkeypatch):
    """The score is the model's own attention from every query but the first on position 0, one sequence at
    a time; one pass gives it with the others, which are as before, and the cache gives it back. The study
    ranks every head by it and ablates its first heads at every size, against its draws."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    types, sets = score_recipe(monkeypatch)
    S, length = 3, 7
    got = types["repeated_sequence_scores"](small, S, length, batch_size=2)
    first = types["first_token_scores"](small, S, length, batch_size=2)
    assert types["passes"] == 1  # one pass for the three; the second call read the cache
    exact(first, got["first"])
    L, H = small.arch.n_layers, small.arch.n_heads
    by_hand = torch.zeros(L, H, dtype=torch.float64)
    for seq in head_types.random_sequences(small, S, length, 2, 0):
        att = small.model(seq[None].to(small.device), output_attentions=True).attentions  # L x [1, H, T, T]
        for layer, a in enumerate(att):
            by_hand[layer] += a[0, :, 1:, 0].double().cpu().mean(-1) / S
    close(first, by_hand, scale=1.0)
    assert by_hand.min() > 1e-3  # every head attends there a little: a test of something
    before = head_types.repeated_sequence_scores(small, S, length, batch_size=2)
    for name in ("repeat", "previous"):
        exact(got[name], before[name])

    study = head_sets.head_set_study(small, ["sentiment_number"], 12, sizes=(2, 3), ks=(1,), n_sequences=S,
                                     length=length, n_random=2, batch_size=4)
    name = sets["FIRST"]
    exact(study.scores.scores[name], first)
    assert study.ranked[name] == top_heads(first, L * H) and list(study.sets(3, head_sets.SCORES))[-1] == name
    curves = study.curves()
    assert set(curves[curves["set"] == name]["k"]) == {0, 1, 2, 3}
    top, draws = study.pooled().at(name, 3)
    assert len(draws) == 2 and len(top.top1_hits) == len(study.pooled().inputs)


# --- 8. a notebook -------------------------------------------------------------------------
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))


def source(cell: dict) -> str:
    return "".join(cell["source"])


def parameters_cell(text: str, number: str) -> bool:
    """Whether `text` is a parameters cell of notebook `number`: its parameters, their echo and its verdicts' sizes."""
    return "notebook_params(" in text and f'verdict_sizes(p, "{number}")' in text and text.rstrip().endswith("\np")


def notebook_parts(path: Path) -> dict[str, bool]:
    """Each part of the recipe's table: whether the notebook at `path` has it."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells, number = nb["cells"], path.name[:2]
    code = [c for c in cells if c["cell_type"] == "code"]
    tagged = [i for i, c in enumerate(code) if "parameters" in c["metadata"].get("tags", [])]
    verdict = squeezed(blocks(8)[1].replace('"11"', f'"{number}"'))
    on_task = verdict.replace(squeezed("))"), squeezed("), task=p.task)"))  # a notebook on a task (10) passes it
    title = source(cells[0]).splitlines()
    return {
        "title": cells[0]["cell_type"] == "markdown" and title[0].startswith(f"# {number} ")
        and "[all notebooks](README.md)" in title[1],
        "imports": source(code[0]).startswith("%matplotlib inline\n") and "from icl_helpers" in source(code[0]),
        "parameters": len(tagged) == 1 and parameters_cell(source(code[tagged[0]]), number),
        "model": len(tagged) == 1 and "m = p.load_model()" in source(code[tagged[0] + 1]),
        "verdicts": any(verdict in squeezed(source(c)) or on_task in squeezed(source(c))
                        or "VerdictTable(head_report.judged(study))" in source(c) for c in code),
        "next": cells[-1]["cell_type"] == "markdown" and source(cells[-1]).startswith("*"),
        "outputs": "widgets" not in nb["metadata"] and any(c["outputs"] for c in code),
        "kernel": nb["metadata"]["kernelspec"]["name"] == "python3",
        "prose": too_long(notebook_markdown(path)) == [],
    }


def test_a_notebooks_parts_are_the_ones_its_tests_hold():
    """The recipe's table names every part this test checks, each held by a test or by this one; every
    committed notebook has every part, the verdict cell as the recipe writes it (its number aside) where it
    closes with the paper's claims, and a row in notebooks/README.md; the recipe's parameters cell is one."""
    rows = re.findall(r"^\| `(\w+)` \| .+ \| (.+) \|$", section(8), re.M)
    assert [name for name, _ in rows] == list(notebook_parts(NOTEBOOKS[0]))
    for name, held in rows:
        assert held == "this page's test" or re.fullmatch(r"`tests/test_\w+\.py::test_\w+`(, `tests/test_\w+\.py::test_\w+`)*",
                                                         held), name
    for path in NOTEBOOKS:
        assert [name for name, has in notebook_parts(path).items() if not has] == [], path.stem
    readme = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    assert [path.stem for path in NOTEBOOKS if f"| `{path.stem}` |" not in readme] == []
    assert parameters_cell(blocks(8)[0], "11")


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_a_notebooks_parameters_and_verdict_cells_run_as_written(small, toy_section, tmp_path, monkeypatch,  # noqa: F811
                                                                 capsys):
    """With the toy claim of recipe 1 naming notebook 11: the parameters cell gives its defaults and says the
    prompts its verdicts need; the verdict cell judges the toy claim as the report does, shown in its table."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    for variable in ENV.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setitem(claims.CLAIMS, "toy", replace(claims.CLAIMS["toy"], notebooks=("11",)))
    parameters, verdict = blocks(8)
    scope = {"notebook_params": notebook_params, "verdict_sizes": verdict_sizes}  # the first cell imports them
    exec(parameters, scope)
    p = scope["p"]
    assert (p.model, p.n_prompts, p.n_sentence_prompts, p.device, p.heads) == ("smollm2-135m", 32, 10, None, None)
    need = claims.fewest_prompts("toy")["word"]
    assert capsys.readouterr().out == f"The verdicts at the end need at least {need} word prompts a dataset (N_PROMPTS).\n"
    scope |= {"m": small, "verdicts": verdicts, "VerdictTable": VerdictTable}
    *cell, shown = verdict.strip().splitlines()
    exec("\n".join(cell), scope)
    (found,) = scope["findings"]
    assert found == findings.report(small, 32, 10, announce=lambda step: None, ids=["toy"])[0]
    assert "<b>toy</b>: Our extension: a toy" in eval(shown, scope)._repr_html_()


# --- 9. a command --------------------------------------------------------------------------
PREDICTED = ["love : bar like : bar eight : foo two :", "cat : foo dog :"]


@pytest.fixture
def predict(monkeypatch) -> None:
    """The recipe's function in cli.py's namespace and its parser in `main`, before the line the recipe names:
    `icl_helpers.cli.main` is then that main."""
    function, parser = blocks(9)
    namespace = dict(vars(cli))
    exec(function, namespace)
    anchor = "    args = parser.parse_args(argv)\n"
    main = inspect.getsource(cli.main)
    assert main.count(anchor) == 1 and f"before `{anchor.strip()}`" in section(9)
    exec(main.replace(anchor, textwrap.indent(parser, "    ") + anchor), namespace)
    monkeypatch.setattr(cli, "main", namespace["main"])


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_a_command_checks_its_arguments_then_writes_its_output(small, predict, tmp_path, monkeypatch, capsys):
    """On a saved small model: the JSON's tokens are the model's top logits, prompt by prompt, read by hand;
    a bad --top is argparse's one line, a folder as --json the command's, each before a model loads."""
    folder = tmp_path / "m"
    small.model.save_pretrained(folder)
    small.tokenizer.save_pretrained(folder)
    out = tmp_path / "top.json"
    asked = [a for text in PREDICTED for a in ("--prompt", text)]
    assert cli.main(["predict", "--model", str(folder), "--device", "cpu", *asked, "--top", "3", "--json", str(out)]) == 0
    by_hand = []
    for text in PREDICTED:
        logits = small.model(torch.tensor([small.tokenizer(text)["input_ids"]]).to(small.device)).logits[0, -1]
        by_hand.append([small.tokenizer.decode([i]) for i in logits.topk(3).indices.tolist()])
    assert json.loads(out.read_text()) == {"model": str(folder), "prompts": PREDICTED, "top": by_hand}
    assert capsys.readouterr().out == f"2 prompts; wrote {out}\n"

    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["predict", *asked, "--top", "0", "--json", str(out)])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and "argument --top: must be at least 1, not 0" in err
    assert cli.main(["predict", *asked, "--json", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"error: --json {tmp_path} is a folder: give a file name, e.g. {tmp_path / 'out'}.\n"


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
