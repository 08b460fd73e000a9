"""The committed reports (results/) agree with the claims registry and with their own markdown."""

import json
import re
from itertools import takewhile
from pathlib import Path

import pytest
from PIL import Image

from icl_helpers.data.prompts import CLASS_NAMES
from icl_helpers.data.setting import MAIN
from icl_helpers.data.tasks import read_task
from icl_helpers.model.offline import OFFLINE_MODELS
from icl_helpers.verdicts import claims, head_report, robustness
from icl_helpers.verdicts.claims.tables import task_intro
from icl_helpers.verdicts.compare import markdown, read_reports
from icl_helpers.verdicts.evidence import described
from icl_helpers.verdicts.findings import NOT_ON_TASK, on_task
from icl_helpers.verdicts.judgement import FAILS, NOT_TESTED, PARTLY, REPLICATES
from icl_helpers.verdicts.whose import LITERATURE
from icl_helpers.viz import report_figures

ROOT = Path(__file__).parents[1] / "results"
RESULTS = sorted(ROOT.glob("report-*.json"))
RESTATED = ROOT / "earlier" / "restated"  # the paper-scale reports of the claims before they were judged again (2026-11-27)


def test_every_offline_model_has_its_quick_report_and_its_paper_scale_one():
    """Each offline model's quick report (64 word, 16 sentence prompts) and paper-scale one (1,000 and 500) judge the
    current claims (the tests below hold each to the registry and to its markdown); the reports of earlier claims stay
    in results/earlier."""
    names = {p.name for p in RESULTS}
    for model in OFFLINE_MODELS:
        for n in (64, 1000):
            assert f"report-{model}-n{n}.json" in names, (model, n)
        assert (RESTATED / f"report-{model}-n1000.json").exists(), model


def test_each_report_names_its_model():
    for path in RESULTS:
        report = json.loads(path.read_text())
        assert path.name == f"report-{report['model']}-n{report['n']}.json"
        assert report["model"] in OFFLINE_MODELS, path.name


HEADS = sorted(ROOT.glob("heads-*.json"))  # `python -m icl_helpers heads` files: the literature's claims on head types
TASKS = sorted(ROOT.glob("task-*.json"))  # `report --task` files: the claims on a task of one's own


@pytest.mark.parametrize("path", RESULTS + HEADS + TASKS, ids=lambda p: p.name)
def test_a_committed_file_states_every_claim_it_judges_as_the_registry_does(path: Path):
    """A report holds the paper's claims and ours, a heads file the literature's, each entry a finding as
    `Finding.to_dict` writes it, in the registry's words, its number inside its interval."""
    report = json.loads(path.read_text())
    heads = report.get("kind") == head_report.KIND
    assert [c["id"] for c in report["claims"]] == (claims.ids_of(LITERATURE) if heads else claims.reported())
    for c in report["claims"]:
        registered = claims.CLAIMS[c["id"]]
        assert claims.Finding.from_dict(c).to_dict() == c, c["id"]
        assert ((c["whose"], c["claim"], c["paper"], c["source"], c["unit"])
                == (registered.whose, registered.claim, registered.paper, registered.source, registered.unit))
        if c["ci"] is not None:
            assert c["ci"][0] <= c["ours"] <= c["ci"][1], c["id"]


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_a_committed_report_tests_every_claim_its_sizes_allow(path: Path):
    report = json.loads(path.read_text())
    for c in report["claims"]:
        registered = claims.CLAIMS[c["id"]]
        if c["id"] == "app_d" and c["verdict"] == NOT_TESTED and "not a Llama-family model" in c["why"]:
            pass  # Appendix D, on a model outside LLaMA's layout
        elif c["verdict"] == NOT_TESTED and "sentence" in registered.reads and report["sentence_n"] < 100:
            # a quick report's few sentence prompts: too few answered correctly for a headline on them (its all-prompts
            # view beside it), or too few that move for the prediction shift
            assert c["why"].startswith("too few prompts") or "answered correctly" in c["why"], c["id"]
        else:
            assert c["verdict"] in (REPLICATES, PARTLY, FAILS), c["id"]  # every other claim tested


@pytest.mark.parametrize("path", TASKS, ids=lambda p: p.name)
def test_a_committed_task_report_names_its_task_and_its_file_and_judges_the_word_claims_alone(path: Path):
    """Its file is named for its task, model and size; it judges the task as the one data set of the word datasets'
    claims, the others not tested for that reason; its header says so, and its table is its JSON."""
    report = json.loads(path.read_text())
    task = report["task"]
    labels = "" if task["labels"] == list(MAIN.labels) else "-classes" if task["labels"] == list(CLASS_NAMES) else (
        "-" + "-".join(task["labels"]))  # the paper's labels, the classes' names, or the words given
    assert path.name == f"task-{task['name']}-{report['model']}-n{report['n']}{labels}.json" and report["sentence_n"] is None
    assert report["model"] in OFFLINE_MODELS
    task_file = Path(__file__).parents[1] / "data" / "tasks" / f"{task['name']}.jsonl"
    assert read_task(task_file).digest == task["digest"]  # the committed task file it judged
    for c in report["claims"]:
        assert (c["why"] == NOT_ON_TASK) == (not on_task(claims.CLAIMS[c["id"]])), c["id"]
    header = path.with_suffix(".md").read_text().split("\n\n")[1]
    assert header.startswith(task_intro(task) + " " + claims.intro(report["n"], None, report["seed"], task["name"]))
    findings = [claims.Finding.from_dict(d) for d in report["claims"]]
    assert path.with_suffix(".md").read_text().endswith(claims.markdown(findings))


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_a_committed_reports_markdown_is_its_json(path: Path):
    report = json.loads(path.read_text())
    findings = [claims.Finding.from_dict(d) for d in report["claims"]]
    section = ("\n" + robustness.markdown(report["robustness"], report["robustness_n"], report["robustness_sentence_n"])
               if "robustness" in report else "")
    assert path.with_suffix(".md").read_text().endswith(claims.markdown(findings) + section)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: p.name)
def test_a_committed_reports_header_says_what_the_code_does(path: Path):
    """Its header is the one the code writes (`claims.intro`: the bootstrap and the views as they are)."""
    report = json.loads(path.read_text())
    header = path.with_suffix(".md").read_text().split("\n\n")[1]
    assert header.startswith(claims.intro(report["n"], report["sentence_n"], report["seed"]))
    assert report["views"] == described()  # what `compare` names the views by


def test_the_committed_cross_model_tables_are_their_reports():
    """Each cross-model table is `compare` of the reports of its size, in the README's column order."""
    for table in sorted(ROOT.glob("cross-model-n*.md")):
        size = table.stem.removeprefix("cross-model-")
        reports = read_reports([ROOT / f"report-{model}-{size}.json" for model in OFFLINE_MODELS])
        assert table.read_text() == markdown(reports), table.name


def tables(text: str) -> list[list[str]]:
    """The markdown tables of `text`, in order, each as its rows as written."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        if line.startswith("|") and (i == 0 or not lines[i - 1].startswith("|")):
            found.append(list(takewhile(lambda row: row.startswith("|"), lines[i:])))
    return found


def test_the_readmes_results_tables_are_the_committed_cross_model_tables_it_names():
    """The README's Results section shows, cell for cell, the totals and the paper's claims of the
    cross-model file it links to, in 150 lines at most for the whole README."""
    readme = (ROOT.parent / "README.md").read_text()
    section = readme.split("\n## Results\n")[1].split("\n## ")[0]
    named = re.search(r"\(results/(cross-model-n\d+\.md)\)", section).group(1)
    assert tables(section) == tables((ROOT / named).read_text())[:2], named
    assert len(readme.splitlines()) <= 150


@pytest.mark.parametrize("path", [p for p in RESULTS if "robustness" in json.loads(p.read_text())], ids=lambda p: p.name)
def test_a_committed_robustness_section_judges_every_claim_under_the_five_factors(path: Path):
    report = json.loads(path.read_text())
    entries = report["robustness"]
    assert [e["factor"] for e in entries] == ["main", *["heads"] * 3, *["labels"] * 2, "separator",
                                              *["demonstrations"] * 2, *["seed"] * 2]
    assert [e["value"] for e in entries[1:]] == ["5", "10", "40", "pen/sky", "cup/door", "newline", "1", "3",
                                                 str(report["seed"] + 1), str(report["seed"] + 2)]
    assert report["robustness_n"] <= report["n"] and report["robustness_sentence_n"] <= report["sentence_n"]
    for e in entries:
        assert list(e["verdicts"]) == claims.reported()
        assert set(e["not_tested"]) == {id for id, v in e["verdicts"].items() if v == NOT_TESTED}


def test_every_committed_head_types_report_is_of_an_offline_model_at_the_issues_sizes():
    """Judged on at least 256 word records a dataset and the sentence datasets; at least the bundled model's."""
    from icl_helpers.paths import BUNDLED

    assert any(json.loads(p.read_text())["model"] == BUNDLED for p in HEADS)
    for path in HEADS:
        report = json.loads(path.read_text())
        assert path.name == f"heads-{report['model']}-n{report['n']}.json" and report["model"] in OFFLINE_MODELS
        assert report["kind"] == "head-types" and report["n"] >= 256 and report["sentence_n"], path.name


@pytest.mark.parametrize("path", HEADS, ids=lambda p: p.name)
def test_a_committed_head_types_report_tests_every_claim_and_its_page_is_its_json(path: Path):
    report = json.loads(path.read_text())
    for c in report["claims"]:
        assert c["verdict"] in (REPLICATES, PARTLY, FAILS), c["id"]  # every claim tested at these sizes
    assert path.with_suffix(".md").read_text() == head_report.markdown(report)


def test_the_committed_cross_model_head_types_table_is_its_files():
    """`compare` of the committed head-types files, in the offline models' order."""
    files = [ROOT / f"heads-{model}-n256.json" for model in OFFLINE_MODELS if (ROOT / f"heads-{model}-n256.json").exists()]
    assert (ROOT / "cross-model-heads-n256.md").read_text() == markdown(read_reports(files))


PAPER_SCALE = [ROOT / f"report-{model}-n1000.json" for model in OFFLINE_MODELS]  # in the README's order


def changed(reports: list[dict], picture: str) -> list[dict]:
    """A copy of `reports` with one thing its picture shows changed: a verdict, or the headline number of fig6."""
    copy = json.loads(json.dumps(reports))
    first = copy[0]["claims"][0] if picture == "verdicts" else next(f for f in copy[0]["claims"] if f["id"] == "fig6")
    if picture == "verdicts":
        first["verdict"] = "does not replicate" if first["verdict"] != "does not replicate" else "partly"
    else:
        first["ours"] += 0.01
    return copy


@pytest.mark.parametrize("picture", report_figures.PICTURES)
def test_the_readmes_pictures_are_drawn_from_the_committed_paper_scale_reports(picture):
    """The two pictures on the README's first screen are drawn from the paper-scale reports as committed: each PNG
    holds the digest of what it shows, which changes with any verdict, claim, model or (the label attention) number.
    Draw them again with `python -m icl_helpers.viz.report_figures results/report-*-n1000.json --verdicts
    docs/verdicts.png --attention docs/attention.png` (the README's order)."""
    readme = "\n".join((ROOT.parent / "README.md").read_text().splitlines()[:35])
    assert f"(docs/{picture}.png)" in readme  # on the first screen
    reports = read_reports(PAPER_SCALE)
    with Image.open(ROOT.parent / "docs" / f"{picture}.png") as png:
        assert png.text["Description"] == report_figures.digest(reports, picture)
    assert report_figures.digest(changed(reports, picture), picture) != report_figures.digest(reports, picture)


def test_the_label_attention_bars_are_the_reports_headline_numbers_and_verdicts():
    """Each bar of the label attention picture is its claim's headline number on one model, its error bar the 95%
    interval, its verdict written above it: left fig6 by model; right fig6_control by model, then fig9_control.
    A claim a report lacks has no bar and reads "not tested"."""
    reports = read_reports(PAPER_SCALE)
    del reports[2]["claims"][[f["id"] for f in reports[2]["claims"]].index("fig9_control")]
    fig = report_figures.label_attention(reports)
    found = [{f["id"]: f for f in r["claims"]} for r in reports]
    for ax, ids in zip(fig.axes, (["fig6"], ["fig6_control", "fig9_control"])):
        want = [by[i] for i in ids for by in found if i in by]
        assert [p.get_height() for p in ax.patches] == pytest.approx([f["ours"] for f in want], abs=0)
        spans = [float(y) for c in ax.containers if hasattr(c, "lines") for line in c.lines[2]
                 for y in sorted(line.get_segments()[0][:, 1])]
        assert spans == pytest.approx([y for f in want for y in f["ci"]], rel=1e-12)
        words = [t.get_text().replace("\n", " ") for t in ax.texts]
        assert words == [by[i]["verdict"] if i in by else "not tested" for i in ids for by in found]


def test_the_report_figures_refuse_a_file_that_is_not_a_report_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert report_figures.main([str(bad), "--verdicts", str(tmp_path / "out.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}") and err.count("\n") == 1 and not (tmp_path / "out.png").exists()
