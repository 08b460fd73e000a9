"""The fewest prompts a notebook's verdicts need (issue 60): computed where "too few prompts" is
decided (`verdicts.claims.fewest_prompts`) and said once, at the top of the notebook, with the
verdicts that a smaller run leaves untested."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from icl_helpers.notebook import ENV, notebook_params, verdict_sizes
from icl_helpers.stats import MIN_CLUSTERS
from icl_helpers.verdicts import claims, findings
from icl_helpers.verdicts.judgement import NOT_TESTED

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("0*.ipynb"))


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)  # any model: the sizes depend on the prompts alone
def test_table2_is_refused_below_its_fewest_prompts_and_judged_at_it(small):
    """Table 2 judges each direction apart, and a word dataset's inputs repeat: at 12 prompts its
    cells held 6 distinct inputs and it was not tested, which nothing said beforehand."""
    need = claims.fewest_prompts("table2")["word"]
    assert need >= 2 * MIN_CLUSTERS and claims.fewest_prompts("fig6") == {"word": MIN_CLUSTERS}
    below, at = (findings.report(small, n, 2, ids=["table2"], announce=lambda step: None)[0] for n in (need - 1, need))
    assert below.why == f"too few prompts: {need - 1} word prompts a dataset; its intervals need at least {need}"
    assert at.verdict != NOT_TESTED, at.why


def test_a_notebook_says_once_at_the_top_how_many_prompts_its_verdicts_need(monkeypatch, capsys):
    for name in ENV.values():
        monkeypatch.delenv(name, raising=False)
    need = claims.fewest_prompts("table2")["word"]
    verdict_sizes(notebook_params(n_prompts=32), "01")
    assert capsys.readouterr().out == (f"The verdicts at the end need at least {need} word prompts a dataset (N_PROMPTS) "
                                       f"and {MIN_CLUSTERS} sentence prompts a dataset (N_SENTENCE_PROMPTS).\n")
    verdict_sizes(notebook_params(n_prompts=8), "01")
    assert capsys.readouterr().out.splitlines()[1] == (
        "Note: N_PROMPTS = 8 is too few for 5 of its 6 verdicts (table2, table2_control, fig2, fig3_4, fig12_15): they "
        "will read 'not tested: too few prompts'.")
    verdict_sizes(notebook_params(n_prompts=12, n_sentence_prompts=4), "01")
    assert "N_PROMPTS = 12, N_SENTENCE_PROMPTS = 4 are too few for 3 of its 6 verdicts (table2, fig12_15, fig12_15_largest)" in \
        capsys.readouterr().out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_parameters_cell_says_what_its_verdicts_need(path):
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    params = next(c for c in cells if "notebook_params(" in c)
    assert f'verdict_sizes(p, "{path.name[:2]}")' in params
