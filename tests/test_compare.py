"""Verdicts across models: `compare` reads reports and puts them side by side."""
from __future__ import annotations

import json
import re

import pytest

from icl_helpers.cli import main
from icl_helpers.errors import UsageError
from icl_helpers.verdicts.compare import cell, differing, markdown, read_reports

VIEWS = {"all": {"title": "all prompts", "mark": "all prompts", "about": "a"},
         "correct_only": {"title": "correct prompts only", "mark": "correct only", "about": "c"},
         "held_out": {"title": "held out", "mark": "held out", "about": "h"},
         "paper_share": {"title": "the paper's share of heads", "mark": "paper's share", "about": "p"}}


def finding(id: str, verdict: str, ours, whose: str = "paper") -> dict:
    return {"id": id, "whose": whose, "claim": f"claim {id}", "paper": "p", "unit": f"unit {id}", "ours": ours, "ci": None, "n": 4,
            "verdict": verdict, "why": "w", "view": "all", "views": {}}


def a_report(model: str, fig2: str, top1: float, n: int = 64) -> dict:
    return {"model": model, "n": n, "sentence_n": 16, "seed": 0, "views": VIEWS, "claims": [
        finding("table2", "partly", top1), finding("fig2", fig2, -13.1 if fig2 != "replicates" else 2.61),
        finding("app_d", "not tested", None),
        finding("fig8_9_sentences", "partly", "imbalanced: partly", "ours") | {"claim": "Our extension: Figs. 8 and 9 on sentences"}]}


def test_a_cell_is_the_verdict_and_the_headline_number():
    assert cell(finding("fig2", "does not replicate", -13.0889), VIEWS) == "does not replicate: -13.1"
    assert cell(finding("fig6", "replicates", 0.17312), VIEWS) == "replicates: 0.173"
    assert cell(finding("app_d", "not tested", None), VIEWS) == "not tested"
    assert cell(finding("fig8_9_sentences", "partly", "imbalanced: partly"), VIEWS) == "partly: imbalanced: partly"
    assert cell(None, VIEWS) == "-"
    held = {"ours": 0.7, "ci": None, "n": 32, "verdict": "replicates", "why": "w"}
    assert (cell(finding("app_e", "does not replicate", 0.0) | {"views": {"held_out": held}}, VIEWS)
            == "does not replicate: 0 (held out: replicates)")
    assert cell(finding("app_e", "replicates", 0.8) | {"views": {"held_out": held}}, VIEWS) == "replicates: 0.8"  # the same
    untested = held | {"ours": None, "verdict": "not tested"}
    assert cell(finding("app_e", "replicates", 0.8) | {"views": {"held_out": untested}}, VIEWS) == "replicates: 0.8"
    every = {"all": held, "correct_only": held | {"verdict": "partly"}, "held_out": untested,
             "paper_share": held | {"verdict": "does not replicate"}}  # each view that flips, in the report's order
    assert (cell(finding("app_b_mrr", "replicates", 0.3) | {"view": "correct_only", "views": every}, VIEWS)
            == "replicates: 0.3 (correct only: partly; paper's share: does not replicate)")
    renamed = VIEWS | {"held_out": VIEWS["held_out"] | {"mark": "other inputs"}}  # the mark is the report's own
    assert (cell(finding("app_e", "does not replicate", 0.0) | {"views": {"held_out": held}}, renamed)
            == "does not replicate: 0 (other inputs: replicates)")


def test_the_tables_give_the_totals_first_then_the_papers_claims_then_ours_and_name_what_differs():
    """A row a claim with its unit, a column a model; the counts first, the paper's claims before our rows."""
    reports = [a_report("smollm2-135m", "does not replicate", 0.832), a_report("qwen", "replicates", 0.949)]
    assert differing(reports) == ["fig2"]
    blocks = markdown(reports).split("\n\n")
    assert blocks[1].splitlines() == [
        "| verdicts: replicates / partly / does not replicate / not tested | smollm2-135m | qwen |", "|---|---|---|",
        "| the paper's claims (3) | 0 / 1 / 1 / 1 | 1 / 1 / 0 / 1 |",
        "| our controls, extensions and rows (1) | 0 / 1 / 0 / 0 | 0 / 1 / 0 / 0 |",
        "| pooled top-1 on the word datasets (table2) | 83.2% | 94.9% |"]
    assert blocks[2] == "The paper's claims:" and blocks[4] == "Our controls, extensions and rows:"
    assert blocks[3].splitlines() == [
        "| claim | unit | smollm2-135m | qwen |", "|---|---|---|---|",
        "| table2: claim table2 | unit table2 | partly: 0.832 | partly: 0.949 |",
        "| fig2: claim fig2 | unit fig2 | does not replicate: -13.1 | replicates: 2.61 |",
        "| app_d: claim app_d | unit app_d | not tested | not tested |"]
    assert blocks[5].splitlines()[2:] == [
        "| fig8_9_sentences: Our extension: Figs. 8 and 9 on sentences | unit fig8_9_sentences | "
        "partly: imbalanced: partly | partly: imbalanced: partly |"]
    assert blocks[6] == "Verdicts that differ between the models: fig2.\n"
    assert ("each other view's verdict where it differs (all prompts, correct only: correct prompts only, held out, "
            "paper's share: the paper's share of heads). Each model's own report") in blocks[0]
    same = markdown([a_report("a", "replicates", 0.9), a_report("b", "replicates", 0.8)])
    assert same.splitlines()[-1] == "Every claim has the same verdict on every model."


def test_reports_of_other_sizes_or_files_that_are_no_reports_are_refused(tmp_path):
    paths = []
    for name, body in (("a", a_report("a", "replicates", 0.9)), ("b", a_report("b", "replicates", 0.9, n=1000)),
                       ("c", {"claims": []}), ("e", {k: v for k, v in a_report("e", "partly", 0.9).items() if k != "views"})):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(body))
    (tmp_path / "d.json").write_text("{not json")
    with pytest.raises(UsageError, match="differ in size or seed .*a: n=64.*b: n=1000"):
        read_reports(paths[:2])
    with pytest.raises(UsageError, match="c.json is not a report"):
        read_reports([paths[0], paths[2]])
    with pytest.raises(UsageError, match="d.json cannot be read as a report"):
        read_reports([paths[0], tmp_path / "d.json"])
    with pytest.raises(UsageError, match="two or more"):
        read_reports(paths[:1])
    with pytest.raises(UsageError, match="e.json does not describe its views .an older report.: run its `report` again"):
        read_reports([paths[0], paths[3]])


def test_reports_of_two_tasks_or_of_a_task_and_the_papers_data_are_refused_and_one_tasks_are_named(tmp_path):
    task = {"name": "mine", "digest": "0123456789ab", "classes": ["x", "y"], "examples": 20, "labels": ["foo", "bar"],
            "records": "64 drawn as the word datasets are", "notes": []}
    bodies = {"paper": a_report("p", "replicates", 0.9), "a": a_report("a", "replicates", 0.9) | {"task": task},
              "b": a_report("b", "partly", 0.5) | {"task": task},
              "other": a_report("o", "partly", 0.5) | {"task": task | {"digest": "ba9876543210"}}}
    paths = {}
    for name, body in bodies.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(body))
    for pair, message in ((("paper", "a"), "p: the paper's datasets; a: the task mine (0123456789ab)"),
                          (("a", "other"), "a: the task mine (0123456789ab); o: the task mine (ba9876543210)")):
        with pytest.raises(UsageError) as err:
            read_reports([paths[name] for name in pair])
        assert str(err.value) == f"The reports judge different data ({message}): compare reports of one task, or of none."
    table = markdown(read_reports([paths["a"], paths["b"]]))
    assert "64 prompts of the task mine (0123456789ab), in place of the word datasets, seed 0." in table


def test_compare_writes_the_table(tmp_path, capsys):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path, r in zip(paths, (a_report("a", "replicates", 0.9), a_report("b", "partly", 0.5))):
        path.write_text(json.dumps(r))
    assert main(["compare", *map(str, paths), "--markdown", str(tmp_path / "out.md")]) == 0
    assert (tmp_path / "out.md").read_text() == markdown(read_reports(paths))
    assert main(["compare", str(paths[0])]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["a", "b", "--markdown", "a"], "--markdown {a} is the report {a}: the table would replace it; give it a file of its own."),
    (["a", "b", "--markdown", "to_b"], "--markdown {to_b} is the report {b}: the table would replace it"),  # a symlink
    (["a", "b", "--markdown", "hard_a"], "--markdown {hard_a} is the report {a}: the table would replace it"),  # a hard link
    (["a", "a", "--markdown", "out"], "{a} is given twice: give each report once."),
    (["a", "b", "to_b"], "{b} is given twice (the second time as {to_b}): give each report once."),
])
def test_compare_refuses_to_replace_a_report_or_to_read_one_twice(tmp_path, capsys, argv, message):
    """One line, and nothing written: the reports as they were, no table."""
    files = {name: tmp_path / f"{name}.json" for name in ("a", "b")}
    for name, path in files.items():
        path.write_text(json.dumps(a_report(name, "replicates", 0.9)))
    (tmp_path / "to_b.json").symlink_to(files["b"])
    (tmp_path / "hard_a.json").hardlink_to(files["a"])
    names = {name: str(tmp_path / f"{name}.json") for name in ("a", "b", "to_b", "hard_a", "out")}
    before = {path: path.read_bytes() for path in tmp_path.iterdir()}
    assert main(["compare", *(names.get(a, a) for a in argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message.format(**names)}") and err.count("\n") == 1
    assert {path: path.read_bytes() for path in tmp_path.iterdir()} == before


def a_heads_report(model: str, verdict: str) -> dict:
    return {"kind": "head-types", "model": model, "n": 256, "sentence_n": 64, "seed": 0, "claims": [
        finding("induction_exist", "replicates", 0.9, "literature"), finding("fv_over_induction", verdict, 0.1, "literature")]}


def test_head_types_reports_are_compared_by_the_literatures_claims_and_never_with_the_papers(tmp_path):
    text = markdown([a_heads_report("a", "replicates"), a_heads_report("b", "partly")])
    lines = text.splitlines()
    assert lines[0].startswith("256 records per word dataset, 64 per sentence dataset, seed 0: the literature's claims")
    assert "| fv_over_induction: claim fv_over_induction | unit fv_over_induction | replicates: 0.1 | partly: 0.1 |" in lines
    assert "| the literature's claims (2) | 2 / 0 / 0 / 0 | 1 / 1 / 0 / 0 |" in lines
    assert not any("the paper's claims" in line for line in lines)
    paths = [tmp_path / "paper.json", tmp_path / "heads.json"]
    paths[0].write_text(json.dumps(a_report("a", "replicates", 0.9, n=256) | {"sentence_n": 64}))
    paths[1].write_text(json.dumps(a_heads_report("b", "partly")))
    with pytest.raises(UsageError, match=r"of different kinds \(a: paper; b: head-types\): compare `report` files"):
        read_reports(paths)


def set_in(report: dict, where: tuple, value) -> dict:
    """A copy of `report` with the field at the keys `where` set to `value`, or removed where `value` is `REMOVED`."""
    *holders, key = where
    holder = report = json.loads(json.dumps(report))  # deep: the reports share `VIEWS`
    for k in holders:
        holder = holder[k]
    if value is REMOVED:
        del holder[key]
    else:
        holder[key] = value
    return report


REMOVED = object()


@pytest.mark.parametrize("where, value, message", [
    (("claims", 1, "verdict"), REMOVED, "claims[1] has no 'verdict'"),
    (("claims",), {"fig2": finding("fig2", "replicates", 0.9)}, "claims is an object, not a list"),
    (("views",), None, "views is null, not an object"),
    (("views", "held_out", "mark"), REMOVED, "views['held_out'] has no 'mark'"),
    (("views", "all"), "all prompts", "views['all'] is text, not an object"),
    (("claims", 2), "app_d", "claims[2] is text, not an object"),
    (("claims", 0, "claim"), None, "claims[0].claim is null, not text"),
    (("claims", 0, "whose"), REMOVED, "claims[0] has no 'whose'"),
    (("claims", 3, "whose"), "mine", "claims[3].whose is 'mine', not one of paper, ours, literature"),
    (("claims", 0, "unit"), 3, "claims[0].unit is a whole number, not text"),
    (("claims", 0, "ours"), [0.8], "claims[0].ours is a list, not a number or text or null"),
    (("claims", 1, "views"), {"held_out": {"verdict": "partly"}}, "claims[1].views['held_out'] has no 'ours'"),
    (("claims", 1, "views"), {"other": {"verdict": "partly", "ours": 1.0}},
     "claims[1].views holds 'other', a view the report's views do not describe"),
    (("model",), 7, "model is a whole number, not text"),
    (("n",), True, "n is true or false, not a whole number"),
    (("seed",), "0", "seed is text, not a whole number"),
])
def test_a_malformed_report_is_one_line_naming_the_file_and_the_field(tmp_path, capsys, where, value, message):
    """A hand-edited or copied report: no traceback and no table, one line that says which field is wrong."""
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    paths[0].write_text(json.dumps(a_report("a", "replicates", 0.9)))
    paths[1].write_text(json.dumps(set_in(a_report("b", "partly", 0.5), where, value)))
    assert main(["compare", *map(str, paths)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"error: {paths[1]}: {message}: give files `python -m icl_helpers report --json` wrote.\n"


def test_one_model_given_twice_under_two_names_is_refused_naming_both_files(tmp_path):
    """A copy of one report (the same weights, dtype, size and seed) is no second model; an older
    report without a fingerprint, or the same weights in another dtype, is compared."""
    run = {"weights": "ff11e0aa3b7beef4", "dtype": "float32"}
    bodies = {"a": a_report("a", "replicates", 0.9) | run, "copy": a_report("renamed", "partly", 0.5) | run,
              "half": a_report("half", "partly", 0.5) | run | {"dtype": "float16"},
              "old_a": a_report("a", "replicates", 0.9), "old_b": a_report("b", "partly", 0.5)}
    paths = {name: tmp_path / f"{name}.json" for name in bodies}
    for name, body in bodies.items():
        paths[name].write_text(json.dumps(body))
    with pytest.raises(UsageError, match=rf"^{re.escape(str(paths['a']))} and {re.escape(str(paths['copy']))} are one "
                                         r"model given twice \(weights ff11e0aa3b7beef4, float32, one size and seed\): "
                                         r"give each model's report once\.$"):
        read_reports([paths["a"], paths["half"], paths["copy"]])
    assert len(read_reports([paths["a"], paths["half"]])) == 2
    assert len(read_reports([paths["old_a"], paths["old_b"]])) == 2


def test_a_pipe_or_a_newline_in_a_model_name_or_a_claim_keeps_the_table_whole():
    reports = [a_report("org/a|b\nc\td", "replicates", 0.9), a_report("b", "partly", 0.5)]
    reports[1]["claims"][1]["claim"] = "top-1 | top-5"  # the last report's text is the row's
    reports[0]["claims"][2]["ours"] = None
    reports[1]["claims"][2] |= {"verdict": "does not replicate", "ours": "a|b"}
    lines = markdown(reports).splitlines()
    assert r"| claim | unit | org/a\|b c d | b |" in lines
    assert r"| fig2: top-1 \| top-5 | unit fig2 | replicates: 2.61 | partly: -13.1 |" in lines
    assert r"| app_d: claim app_d | unit app_d | not tested | does not replicate: a\|b |" in lines
    tables = [block.splitlines() for block in markdown(reports).split("\n\n") if block.startswith("|")]
    pipes = [{len(re.findall(r"(?<!\\)\|", line)) for line in table} for table in tables]
    assert pipes == [{4}, {5}, {5}]  # the totals' three cells, the claims' four, in each row
