"""A notebook's verdict table: every claim whole, ours with its interval, the verdict in its
colour, and each claim's whole reason and rule under the table."""
from __future__ import annotations

from icl_helpers.verdicts.claims import CLAIMS, Finding
from icl_helpers.verdicts.judgement import Judgement, not_tested
from icl_helpers.viz.verdict_table import COLOURS, VerdictTable, first_clause


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
    assert ">pooled top-1 over 8 cells<" in page  # the short reason: its first clause
    assert repr(VerdictTable(shown)).startswith("| id | claim |")  # a terminal gets the markdown


def test_first_clause_stops_at_a_semicolon_or_a_sentence_end():
    assert first_clause("a, b; c. d") == "a, b"
    assert first_clause("a. b; c") == "a"
    assert first_clause("whole") == "whole"
