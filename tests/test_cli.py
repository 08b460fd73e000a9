"""The command line: `python -m icl_helpers` and its console script."""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tomllib
import warnings
from contextlib import nullcontext
from pathlib import Path

import pytest

from icl_helpers import ICLModel
from icl_helpers.cli import main
from icl_helpers.verdicts.common import WORD
from tests.conftest import small_model


def test_locate_writes_the_report(small, tmp_path, capsys):
    small.model.save_pretrained(tmp_path / "m")
    small.tokenizer.save_pretrained(tmp_path / "m")
    (tmp_path / "prompts.txt").write_text("a : foo b : bar c :\n\nd : bar e :\n")
    out = tmp_path / "out.json"
    rc = main(["locate", "--model", str(tmp_path / "m"), "--prompt", "x : foo y :",
               "--prompts", str(tmp_path / "prompts.txt"), "--json", str(out), "--device", "cpu"])
    assert rc == 0
    report = json.loads(out.read_text())
    L, H = small.arch.n_layers, small.arch.n_heads
    assert (report["n_prompts"], report["n_layers"], report["n_heads"]) == (3, L, H)
    assert len(report["predictions"]) == 3
    assert len(report["head_increase"]) == L and len(report["head_increase"][0]) == H
    assert len(report["attn_layer_increase"]) == len(report["ffn_layer_increase"]) == L
    best = max((v, l, h) for l, row in enumerate(report["head_increase"]) for h, v in enumerate(row))
    assert report["top_heads"][0] == [best[1], best[2]] and report["top_head_increase"][0] == best[0]
    assert len(report["top_heads"]) == len(report["top_head_increase"]) == min(20, L * H)
    assert report["prompts"] == ["x : foo y :", "a : foo b : bar c :", "d : bar e :"]  # what was scored


@pytest.fixture(scope="module")
def gpt2(gpt2_tokenizer) -> ICLModel:
    """conftest's small random GPT-2, with the real GPT-2 tokenizer."""
    return ICLModel(small_model("gpt2"), gpt2_tokenizer, name="gpt2")


@pytest.fixture(scope="module")
def gpt2_folder(gpt2, tmp_path_factory) -> str:
    """`gpt2` saved, for the command line to load."""
    folder = tmp_path_factory.mktemp("gpt2")
    gpt2.model.save_pretrained(folder)
    gpt2.tokenizer.save_pretrained(folder)
    return str(folder)


LINES = ["love : bar like : bar eight : foo two : foo one :", "cat : foo dog : bar fish :"]


@pytest.mark.parametrize("written, argv", [
    # Windows Notepad: a byte-order mark, CRLF line ends
    ("\ufeff" + "\r\n".join(LINES) + "\r\n", []),
    # invisible characters at either end of a line; a byte-order mark inside the file (two files joined)
    ("\u200b" + LINES[0] + "\u2060\n\n\ufeff" + LINES[1] + "\u200d", []),
    # a shell script saved with CRLF line ends: each argument ends in "\r"
    (None, ["--prompt", LINES[0] + "\r", "--prompt", LINES[1] + "\r"]),
], ids=["notepad", "invisible", "crlf-script"])
def test_prompts_are_read_as_an_editor_writes_them(gpt2_folder, tmp_path, written, argv):
    """The same prompts as the clean file's, so the same numbers bit for bit (the same prompts run
    the same way), and the report shows what was scored."""
    def located(*args: str) -> dict:
        out = tmp_path / "out.json"
        assert main(["locate", "--model", gpt2_folder, "--device", "cpu", *args, "--json", str(out)]) == 0
        return json.loads(out.read_text())

    (tmp_path / "clean.txt").write_text("\n".join(LINES) + "\n")
    want = located("--prompts", str(tmp_path / "clean.txt"))
    if written is not None:
        (tmp_path / "edited.txt").write_bytes(written.encode("utf-8"))
        argv = ["--prompts", str(tmp_path / "edited.txt")]
    got = located(*argv)
    scored = got.pop("prompts"), want.pop("prompts")
    assert got == want
    assert scored == (LINES, LINES)


@pytest.mark.parametrize("argv, message", [
    (["locate", "--json", "x.json"], "No prompts given"),
    (["locate", "--prompts", "/nonexistent.txt", "--json", "x.json"], "does not exist"),
    (["locate", "--prompt", "a : foo b :", "--json", "{tmp}"], "--json {tmp} is a folder: give a file name"),
    (["locate", "--prompt", "a : foo b :", "--json", "{tmp}/no/such/out.json"], "the folder {tmp}/no/such does not exist"),
    (["locate", "--prompts", "{tmp}/latin1.txt", "--json", "x.json"], "{tmp}/latin1.txt:2 is not UTF-8 text"),
    (["locate", "--prompt", "a : foo b :", "--prompt", "  ", "--json", "x.json"], "Prompt 1 is empty: every prompt needs text."),
    # /proc refuses new files even to root, who passes every os.access check
    (["locate", "--prompt", "a : foo b :", "--json", "/proc/locate.json"], "--json /proc/locate.json cannot be written"),
    (["locate", "--prompt", "a : foo b :", "--json", "/proc/version"], "--json /proc/version cannot be written"),
    (["report", "--json", "x.json", "--markdown", "{tmp}"], "--markdown {tmp} is a folder: give a file name"),
    (["report", "--json", "x.json", "--data-dir", "{tmp}/no-such"], "--data-dir {tmp}/no-such does not exist"),
    (["report", "--json", "x.json", "--data-dir", "{tmp}/latin1.txt"],
     "error: --data-dir {tmp}/latin1.txt is a file, not a folder: give a folder holding sst2/, trec/, agnews/, ethos/."),
    (["locate", "--prompts", "{tmp}", "--json", "x.json"], "error: Prompt file {tmp} is a folder, not a file: give a text file"),
    (["report", "--json", "x.json", "--heads", "19.11"],
     "error: --heads: '19.11' is not a head: write layer-head pairs separated by commas, e.g. 19-11,20-11."),
    (["report", "--json", "{tmp}/out", "--markdown", "{tmp}/../{name}/out"],
     "error: --json and --markdown both name {tmp}/out: the second would replace the first; give each its own file."),
    (["report", "--json", "x.json", "--n", "1001"],
     "error: sentiment_number has 1,000 records: ask for at most 1,000 prompts, not 1,001."),
    (["report", "--json", "x.json", "--data-dir", "{tmp}"], "error: Missing file {tmp}/sst2/stsa.binary.train: copy the dataset"),
    (["report", "--json", "x.json", "--model", ""], "error: No model named (''): give a hub id, a local folder saved with"),
    (["locate", "--model", " ", "--prompt", "a : foo b :", "--json", "x.json"], "error: No model named (' '): give a hub id"),
])
def test_bad_input_is_one_line_before_torch_loads(argv, message, capsys, tmp_path, monkeypatch):
    (tmp_path / "latin1.txt").write_bytes("a : foo b :\ncaf\xe9 : bar d :\n".encode("latin-1"))
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    assert main([a.format(tmp=tmp_path, name=tmp_path.name) for a in argv]) == 2
    err = capsys.readouterr().err
    assert message.format(tmp=tmp_path) in err and err.count("\n") == 1


@pytest.mark.skipif(not os.environ.get("ICL_DATA_DIR"), reason="no local copy of the sentence datasets")
def test_a_sentence_size_beyond_the_data_is_one_line_before_a_model_loads(capsys, monkeypatch):
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["report", "--json", "x.json", "--sentence-n", "501"]) == 2
    assert capsys.readouterr().err == "error: trec has 500 test inputs: ask for at most 500 prompts, not 501.\n"


@pytest.fixture
def no_sentence_data(tmp_path, monkeypatch):
    """No local copy of the sentence datasets, and no `datasets` package to load them from the hub."""
    monkeypatch.delenv("ICL_DATA_DIR", raising=False)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("icl_helpers.data.sentences._installed", lambda package: False)


def test_a_sentence_size_without_sentence_data_is_refused(no_sentence_data, capsys, monkeypatch):
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["report", "--json", "x.json", "--sentence-n", "1000000000"]) == 2
    assert capsys.readouterr().err == (
        "error: --sentence-n 1000000000 was given, but no sentence dataset can be had here (no local copy, and the "
        "`datasets` package (which loads them from the Hugging Face hub) is not installed): run `python -m icl_helpers "
        "data fetch`, give --data-dir, or leave --sentence-n out to judge the word-dataset claims alone.\n")


@pytest.mark.parametrize("args, message", [
    (["--dtype", "float33"], "argument --dtype: invalid choice: 'float33'"),
    (["--dtype", "int8"], "invalid choice: 'int8'"),
    (["--dtype", "tensor"], "invalid choice: 'tensor'"),
    (["--device", "tpu"], "argument --device: 'tpu' is not one of cpu, cuda, cuda:N, mps, auto"),
    (["--batch-size", "0"], "argument --batch-size: must be at least 1, not 0"),
    (["--batch-size", "-1"], "must be at least 1, not -1"),
    (["--batch-size", "two"], "'two' is not a whole number"),
    (["--n", "0"], "unrecognized arguments: --n 0"),  # --n belongs to report, not locate
])
def test_argument_errors_come_before_torch_is_imported(args, message):
    """In a fresh interpreter: the error, and torch never imported (so it answers at once)."""
    code = ("import sys\nfrom icl_helpers.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    print('torch' in sys.modules, e.code)")
    run = subprocess.run([sys.executable, "-c", code, "locate", "--prompt", "a : foo b :", "--json", "x.json", *args],
                         capture_output=True, text=True)
    assert run.stdout.split() == ["False", "2"]
    assert message in run.stderr and run.stderr.count("\n") == 1


def test_bundled_example_predicts_foo(tmp_path):
    out = tmp_path / "out.json"
    assert main(["locate", "--model", "smollm2-135m", "--prompt",
                 "love : bar like : bar eight : foo two : foo one :", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["predictions"] == [" foo"]
    assert all(layer >= 15 for layer, _ in report["top_heads"][:10])


def test_a_prompt_without_demonstrations_is_warned_of_before_torch_loads():
    code = ("import sys\nfrom icl_helpers.cli import main\ncode = main(sys.argv[1:])\n"
            "print('torch' in sys.modules, code)")
    run = subprocess.run([sys.executable, "-c", code, "locate", "--prompt", "love : bar one :", "--prompt", "one :",
                          "--json", "/no/such/folder/x.json"], capture_output=True, text=True)
    assert run.stdout.split() == ["False", "2"]  # the output path's error still stops it, torch unloaded
    assert "UserWarning: 1 of 2 prompts hold no demonstration label (prompt 1): in-context learning needs" in run.stderr


@pytest.fixture
def saved(small, tmp_path):
    small.model.save_pretrained(tmp_path / "m")
    small.tokenizer.save_pretrained(tmp_path / "m")
    return str(tmp_path / "m")


@pytest.mark.parametrize("heads, message", [("3-0", "Head 3-0 is not in this model: it has 3 layers x 4 heads"),
                                            ("0-1,0-1", "Head 0-1 is given twice")])
def test_report_refuses_heads_the_model_lacks_before_any_study(saved, tmp_path, capsys, heads, message):
    out = tmp_path / "out.json"
    assert main(["report", "--model", saved, "--device", "cpu", "--n", "2", "--heads", heads, "--json", str(out)]) == 2
    captured = capsys.readouterr()
    error = captured.err.split("\n")[-2]  # the last line: before it, only the model's loading bar
    assert error.startswith(f"error: {message}") and captured.err.endswith(error + "\n")
    assert "..." not in captured.out and not out.exists()  # no study started, nothing written


def test_report_analyses_the_heads_given_and_records_them(saved, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr("icl_helpers.verdicts.report", lambda m, *a, heads=None, **k: seen.append(heads) or [])
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main(["report", "--model", saved, "--device", "cpu", "--n", "2", "--heads", "2-3, 1-0", "--json", str(out),
                 "--markdown", str(md)]) == 0
    assert seen == [((2, 3), (1, 0))]
    assert json.loads(out.read_text())["heads"] == "2-3,1-0"
    assert "Heads analysed: 2-3,1-0 in every dataset, instead of each one's top 20." in md.read_text()
    assert main(["report", "--model", saved, "--device", "cpu", "--n", "2", "--json", str(out)]) == 0
    assert seen[-1] is None and "heads" not in json.loads(out.read_text())


def test_a_report_without_sentence_data_records_no_sentence_size(saved, no_sentence_data, tmp_path, monkeypatch):
    monkeypatch.setattr("icl_helpers.verdicts.report", lambda m, *a, **k: [])
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main(["report", "--model", saved, "--device", "cpu", "--n", "2", "--json", str(out), "--markdown", str(md)]) == 0
    assert json.loads(out.read_text())["sentence_n"] is None
    assert "2 prompts a word dataset, no sentence dataset (none could be had), seed 0." in md.read_text()


def test_a_reports_header_says_what_its_intervals_and_views_do(saved, tmp_path, monkeypatch):
    """The header is written from the code that makes the table: the bootstrap's level, draws and unit (distinct
    inputs), and each view column's own description (`View.about`), so it changes with them."""
    from icl_helpers.stats import DRAWS, MIN_CLUSTERS
    from icl_helpers.verdicts.evidence import HeldOut

    monkeypatch.setattr("icl_helpers.verdicts.report", lambda m, *a, **k: [])
    monkeypatch.setattr(HeldOut, "about", "judged on the records a stand-in picks")
    md = tmp_path / "out.md"
    assert main(["report", "--model", saved, "--device", "cpu", "--n", "12", "--json", str(tmp_path / "o.json"),
                 "--markdown", str(md)]) == 0
    header = md.read_text().split("\n\n")[1]
    assert header.startswith("12 prompts a word dataset, ") and "95% percentile bootstrap" in header
    assert f"{DRAWS:,} draws over the distinct inputs" in header and f"fewer than {MIN_CLUSTERS} distinct inputs" in header
    assert "*held out*: judged on the records a stand-in picks;" in header
    assert "*correct prompts only*: the prompts the model answers correctly" in header
    assert "*the paper's share of heads*: every prompt, in the top heads at the paper's share" in header
    views = json.loads((tmp_path / "o.json").read_text())["views"]  # as `compare` reads them: each view's own words
    assert list(views) == ["all", "correct_only", "held_out", "paper_share"]
    assert views["held_out"] == {"title": "held out", "mark": "held out", "about": "judged on the records a stand-in picks"}


def test_compare_checks_its_files_before_torch_loads(tmp_path):
    code = ("import sys\nfrom icl_helpers.cli import main\ncode = main(sys.argv[1:])\nprint('torch' in sys.modules, code)")
    run = subprocess.run([sys.executable, "-c", code, "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                         capture_output=True, text=True)
    assert run.stdout.split() == ["False", "2"]
    assert run.stderr.startswith(f"error: {tmp_path / 'a.json'} cannot be read as a report") and run.stderr.count("\n") == 1


def test_locate_warns_of_prompts_without_demonstrations_once(saved, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning shown: only the command's own choice keeps it to one
        assert main(["locate", "--model", saved, "--device", "cpu", "--prompt", "one :", "--json", str(tmp_path / "o.json")]) == 0
    said = [w for w in caught if "prompts hold no demonstration label" in str(w.message)]
    assert len(said) == 1


def test_a_cut_model_folder_is_one_line_naming_it(saved, tmp_path, capsys):
    weights = Path(saved) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert main(["locate", "--model", saved, "--device", "cpu", "--prompt", "a : foo b :", "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.split("\n")[-2]  # the last line: before it, only the loading bar
    assert re.fullmatch(rf"error: Could not load the model in {re.escape(saved)} \(.+\): a file of it is missing, cut or "
                        r"damaged; save it there again with save_pretrained \(config.json, tokenizer and weights\)\.", err), err


def test_report_logs_each_step_with_the_time_since_it_started(saved, tmp_path, monkeypatch, capsys):
    """The log is the run's profile: every step and the end carry the elapsed time (m:ss)."""
    from icl_helpers.verdicts import CLAIMS
    from icl_helpers.verdicts.judgement import PARTLY, REPLICATES, Judgement

    def fake(m, *a, announce, **k):
        announce("fig2: a claim")
        return [CLAIMS["fig2"].finding(Judgement(0.5, None, 12, REPLICATES, "w")),
                CLAIMS["fig6_control"].finding(Judgement(0.1, None, 12, PARTLY, "w"))]
    monkeypatch.setattr("icl_helpers.verdicts.report", fake)
    assert main(["report", "--model", saved, "--device", "cpu", "--n", "12", "--json", str(tmp_path / "out.json")]) == 0
    # the paper's claims and our rows counted apart
    assert re.fullmatch(r"\.\.\. 0:0\d fig2: a claim\n2 claims in 0:0\d: the paper's 1 replicates; ours 1 partly; "
                        r"wrote .*out.json\n", capsys.readouterr().out)


def test_the_console_script_is_named_for_the_package():
    """pyproject's one console script, `icl-helpers`, runs every subcommand, as `python -m icl_helpers` does."""
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {project["name"]: "icl_helpers.cli:main"} and project["name"] == "icl-helpers"


def stop(*args, **kwargs):
    raise KeyboardInterrupt  # Ctrl-C


RESUME = "the claims judged and the studies run so far are kept in the results cache, so the same command resumes from them."


@pytest.mark.parametrize("argv, stopped, said", [
    (["locate", "--prompt", "a : foo b :", "--json", "{out}"], "icl_helpers.model.loading.load_model",
     "interrupted: nothing was written."),
    (["report", "--n", "2", "--json", "{out}"], "icl_helpers.verdicts.report", f"interrupted: nothing was written; {RESUME}"),
    (["report", "--n", "2", "--json", "{out}", "--markdown", "{md}"], "icl_helpers.verdicts.markdown",
     f"interrupted: wrote {{out}}; {RESUME}"),  # between the two outputs
    (["data", "fetch", "--to", "{tmp}"], "icl_helpers.data.fetch.fetch",
     "interrupted: no dataset file is left in part; run it again to fetch the rest."),
], ids=["locate", "report", "report-between-its-outputs", "data-fetch"])
def test_ctrl_c_is_one_line_saying_what_was_written(gpt2, tmp_path, monkeypatch, capsys, argv, stopped, said):
    """Exit status 130, as a shell's for SIGINT, and one line on stderr instead of a traceback."""
    paths = {"out": tmp_path / "out.json", "md": tmp_path / "out.md", "tmp": tmp_path}
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: gpt2)
    monkeypatch.setattr("icl_helpers.verdicts.report", lambda *a, **k: [])
    monkeypatch.setattr(stopped, stop)
    try:
        assert main([a.format(**paths) for a in argv]) == 130
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C went through main: a traceback")
    assert capsys.readouterr().err == said.format(**paths) + "\n"
    assert paths["out"].exists() == ("wrote" in said) and not paths["md"].exists()


@pytest.mark.parametrize("argv, message", [
    (["--heads", "19.11"], "error: --heads: '19.11' is not a head: write layer-head pairs separated by commas"),
    (["--n", "1001"], "error: sentiment_number has 1,000 records: ask for at most 1,000 prompts, not 1,001."),
    (["--draws", "0"], "argument --draws: must be at least 1, not 0"),
])
def test_heads_checks_its_arguments_before_a_model_loads(argv, message, capsys, monkeypatch):
    monkeypatch.setattr("icl_helpers.model.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit) if "--draws" in argv else nullcontext():
        assert main(["heads", "--json", "x.json", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_heads_writes_the_literatures_verdicts_and_the_tables_they_rest_on(saved, no_sentence_data, tmp_path,
                                                                           monkeypatch):
    """On a model of 12 heads (sets of 2 and 3): the JSON's numbers are the study's own, read again
    from its cache, and the page shows each claim and each table."""
    from icl_helpers.model.loading import load_model
    from icl_helpers.studies import head_sets as hs
    from icl_helpers.verdicts import claims, head_report
    from icl_helpers.verdicts.claims.literature import sources
    from icl_helpers.verdicts.whose import LITERATURE

    monkeypatch.setattr(sources, "K", 3)  # set_sizes reads it there
    monkeypatch.setattr(head_report, "K", 3)
    study_at = functools.partial(hs.head_set_study, length=7)  # random sequences within the small model's 64 positions
    monkeypatch.setattr(hs, "head_set_study", study_at)
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main(["heads", "--model", saved, "--device", "cpu", "--n", "12", "--sequences", "2", "--draws", "2",
                 "--json", str(out), "--markdown", str(md)]) == 0
    r = json.loads(out.read_text())
    assert (r["kind"], r["n"], r["sentence_n"], r["sizes"], r["draws"]) == ("head-types", 12, None, [2, 3], 2)
    assert [c["id"] for c in r["claims"]] == claims.ids_of(LITERATURE)
    assert list(r["sets"]) == list(hs.SCORES) and all(len(heads) == 3 for heads in r["sets"].values())
    m = load_model(saved, device="cpu")
    study = study_at(m, tuple(WORD), 12, (2, 3), head_report.CURVE, n_sequences=2, n_random=2)
    pooled = study.pooled()
    rows = {(row["set"], row["k"]): row for row in r["ablations"]["word"]}
    for name in (hs.IN_CONTEXT, hs.FV, hs.exclusive(hs.INDUCTION, hs.FV)):
        top, draws = pooled.at(name, 3)
        assert rows[name, 3]["top-1 ablated"] == top.top1
        assert rows[name, 3]["beyond random"] == pytest.approx(float(pooled.effect(name, 3).mean()), abs=1e-12)
    assert r["floors"]["word"] == {**pooled.floors(), "N": len(pooled.inputs)}
    assert r["sets"][hs.FV] == [f"{l}-{h}" for l, h in study.ranked[hs.FV][:3]]
    page = md.read_text()
    assert all(f"| {c['id']} | {c['claim']} |" in page for c in r["claims"])
    assert "## The sets of 3" in page and "## Overlaps of the top 2" in page and "## The two-tower signature" in page
    assert f"(N={len(pooled.inputs)}; few-shot {pooled.plain.top1:.1%}" in page
