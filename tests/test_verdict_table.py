"""A notebook's verdict table: every claim whole, ours with its interval, the verdict in its
colour, and each claim's whole reason and rule under the table."""
from __future__ import annotations

import html
import json
import re
from pathlib import Path

from icl_helpers.verdicts.claims import CLAIMS, Finding
from icl_helpers.verdicts.judgement import Judgement, not_tested
from icl_helpers.viz.verdict_table import COLOURS, VerdictTable, short_reason

REPORTS = [path for n in (64, 1000) for path in sorted((Path(__file__).parents[1] / "results").glob(f"report-*-n{n}.json"))]


def finding(id: str, judgement: Judgement) -> Finding:
    return CLAIMS[id].finding(judgement)


def test_the_table_holds_each_claim_whole_and_each_reason_under_it():
    long_why = "pooled top-1 over 8 cells; lowest cell 12% < 80% & more"
    shown = [finding("table2", Judgement(0.828, (0.779, 0.874), 128, "partly", long_why)),
             finding("fig2", not_tested("too few prompts: 4 word prompts a dataset"))]
    page = VerdictTable(shown)._repr_html_()
    assert CLAIMS["table2"].claim in page and ">128<" in page
    assert f'0.828 (0.779 to 0.874)<br><span style="color: #57606a">{CLAIMS["table2"].unit}</span>' in page
    assert f"color: {COLOURS['partly']}" in page and f"color: {COLOURS['not tested']}" in page
    assert "<li><b>table2</b> (partly): pooled top-1 over 8 cells; lowest cell 12% &lt; 80% &amp; more." in page
    assert f"<i>Rule</i>: {CLAIMS['fig2'].rule}"[:60] in page
    assert ">lowest cell 12% &lt; 80% &amp; more<" in page  # the short reason: its first clause with a number
    assert repr(VerdictTable(shown)).startswith("| id | claim |")  # a terminal gets the markdown


def test_the_headline_view_has_a_column_and_the_rules_dates_are_folded_under_the_reasons():
    """The view a headline is judged on sits in one column, row after row; the reasons hold no history
    (when a rule was set), which the folded list under them holds, claim by claim."""
    all_prompts = finding("table2", Judgement(0.828, (0.779, 0.874), 128, "partly", "pooled top-1 0.828"))
    correct = CLAIMS["app_b_mrr"].finding(Judgement(2.0, (1.5, 2.5), 12, "replicates", "mean ratio 2.0"))
    page = VerdictTable([all_prompts, correct])._repr_html_()
    head = re.findall(r"<th[^>]*>([^<]*)</th>", page)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(<td.*?)</tr>", page)]
    assert [row[head.index("judged on")] for row in cells] == ["all prompts", "correct prompts only"]
    reasons, dates = page.split("<details>")
    assert "(set " not in reasons and CLAIMS["table2"].set_on not in reasons
    assert dates.startswith("<summary>When each rule was set")
    for f in (all_prompts, correct):
        assert f"<li><b>{f.id}</b>: {html.escape(CLAIMS[f.id].set_on)}.</li>" in dates


def test_a_short_reason_is_a_whole_clause_with_the_numbers():
    assert short_reason("a, b; c. d") == "a, b"  # no numbers: the first clause
    assert short_reason("ours: mean (true - false) summed attention; true 0.214, false 0.049; 20/20") == "true 0.214, false 0.049"
    assert short_reason("mean of 20 heads (mean 0.06, 95th 0.09; ours 2.5x); 10/20 above") == \
        "mean of 20 heads (mean 0.06, 95th 0.09; ours 2.5x)"  # a semicolon in brackets does not end it
    assert short_reason("each weight (the paper's Fig. 7, cf. Figs. 8-9, e.g. here vs. there). Ours: 0.469") == "Ours: 0.469"
    assert short_reason("run on qwen2.5-coder-0.5b, Fig. 7; head 29-1. sst2 MRR: 0.246 (0.23 to 0.26)") == \
        "sst2 MRR: 0.246 (0.23 to 0.26)"  # a version or a head's name is not a number measured
    assert short_reason("whole") == "whole"


def committed_reasons() -> list[tuple[str, str]]:
    """(report and claim, why) of every finding and view of the committed word-scale and paper-scale reports."""
    reasons = []
    for path in REPORTS:
        for entry in json.loads(path.read_text())["claims"]:
            f = Finding.from_dict(entry)
            reasons += [(f"{path.name} {f.id} {view}", judgement.why) for view, judgement in (("", f), *f.views.items())]
    return reasons


def test_every_committed_reason_in_short_ends_where_a_clause_ends_and_holds_its_numbers():
    """Issue 60: the short reason stopped inside brackets ("(mean 0.0606, 95th percentile 0.0877"),
    after "Fig." ("(the paper's Fig"), or only restated the metric ("ours: mean (true - false)
    summed attention"). On every reason of the committed reports: the short reason is a piece of
    it that closes every bracket it opens, ends neither on an abbreviation nor inside a number,
    and holds a number wherever the reason does, other than in a leading "ours: ..." that names the metric."""
    assert len(REPORTS) >= 3  # the quick reports of the three offline models, and the paper-scale ones where current
    bad = []
    NUMBER = re.compile(r"(?<![\w.-])\d")  # not a model's name (gemma3-270m)
    for where, why in committed_reasons():
        short = short_reason(why)
        end = why.index(short) + len(short)
        depth = [short[:i].count("(") - short[:i].count(")") for i in range(len(short) + 1)]
        problems = [("unbalanced brackets", min(depth) < 0 or depth[-1] != 0),
                    ("ends on an abbreviation", re.search(r"\b(Figs?|Tab|App|e\.g|i\.e|vs|cf)\.?$", short)),
                    ("cut inside a number", end < len(why) and why[end - 1].isdigit() and why[end] in ".,0123456789"),
                    ("only the metric", re.fullmatch(r"ours(:| is) [^0-9]*", short)),
                    ("no number", NUMBER.search(why) and not NUMBER.search(short))]
        bad += [f"{where}: {name}: {short!r}" for name, failed in problems if failed]
    assert not bad, "\n".join(bad)


def test_two_runs_of_the_same_claims_sit_side_by_side_and_other_claims_are_refused():
    import pytest

    from icl_helpers.verdicts.claims import side_by_side

    foo = [finding("table2", Judgement(0.59, (0.52, 0.66), 256, "partly", "pooled top-1 0.59")),
           finding("fig2", not_tested("too few prompts: 4 word prompts a dataset"))]
    named = [finding("table2", Judgement(0.961, (0.94, 0.98), 256, "replicates", "pooled top-1 0.961")),
             finding("fig2", Judgement(0.33, (0.3, 0.36), 256, "does not replicate", "share 0.33"))]
    table = side_by_side({"foo/bar": foo, "class names": named})
    assert list(table.index) == ["table2", "fig2"] and table.loc["table2", ("", "claim")] == CLAIMS["table2"].claim
    assert table.loc["table2", ("foo/bar", "ours (95% CI)")] == "0.59 (0.52 to 0.66)"
    assert list(table.loc["table2", [("foo/bar", "verdict"), ("class names", "verdict")]]) == ["partly", "replicates"]
    assert list(table.loc["fig2", [("foo/bar", "N"), ("class names", "N")]]) == ["-", "256"]
    with pytest.raises(ValueError, match="these differ"):
        side_by_side({"foo/bar": foo, "class names": named[::-1]})
