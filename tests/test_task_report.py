"""The report on a task of one's own (`report(m, ..., task=...)`, `report --task FILE`): a task stands in for the
word datasets, so a paper's word dataset written as a task file gives the built-in path's numbers; the claims that
read the sentence datasets or several datasets are not tested, saying why; a bad task or option is one line
before the model loads."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import small_model

from icl_helpers.cli import main
from icl_helpers.data.prompts import CLASS_NAMES
from icl_helpers.data.setting import MAIN, Setting
from icl_helpers.data.tasks import add_task, read_task
from icl_helpers.data.words import WORD_DATASETS, read_word_list
from icl_helpers.model.loading import ICLModel
from icl_helpers.stats import MIN_CLUSTERS
from icl_helpers.studies.runner import prompt_set
from icl_helpers.studies.towers import candidates, content_tokens
from icl_helpers.verdicts import report
from icl_helpers.verdicts.claims import CLAIMS, claims_of, fewest_prompts, reported
from icl_helpers.verdicts.claims.registry import MOST_PROMPTS, TASK_NOTEBOOK
from icl_helpers.verdicts.evidence import Evidence
from icl_helpers.verdicts.findings import NOT_ON_TASK, judged, on_task

FRUIT = "apple pear plum grape lemon mango peach cherry melon kiwi berry fig".split()  # two small classes of words
TOOL = "hammer saw drill wrench chisel file rasp plane clamp level ruler knife".split()


def jsonl(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"input": x, "class": c}) + "\n" for x, c in rows), encoding="utf-8")
    return path


def words_file(path: Path, dataset: str) -> Path:
    """A word dataset's lists (data/words/) as a task file."""
    return jsonl(path, [(w, c) for c in WORD_DATASETS[dataset] for w in read_word_list(c)])


@pytest.fixture(scope="module")
def model(gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model("llama-gqa"), gpt2_tokenizer, name="llama-gqa")


def numbers(judgement) -> str:
    """What a judgement says in numbers and words, as JSON (so a NaN equals a NaN)."""
    return json.dumps([judgement.ours, judgement.ci, judgement.n, judgement.verdict])


def test_a_word_dataset_written_as_a_task_file_gives_the_built_in_numbers(model, tmp_path):
    """sentiment_number read from a task file and judged as a task, against the same dataset by its built-in name
    as the one dataset the word claims read: every claim a task's report judges, in every view, the same."""
    task = add_task(read_task(words_file(tmp_path / "sentiments.jsonl", "sentiment_number")))
    own, built_in = (Evidence(model, 24, 10, 0, None, task=name) for name in (task, "sentiment_number"))
    ids = [id for id in reported() if on_task(CLAIMS[id])]
    assert len(ids) == 27 and "causal_words" in ids and "majority_bias_words" in ids and "fig12_15" not in ids
    assert claims_of(TASK_NOTEBOOK) == ids  # the task's notebook closes with them all
    tested = 0
    for id in ids:
        a, b = judged(id, own), judged(id, built_in)
        assert numbers(a) == numbers(b), id
        assert {k: numbers(v) for k, v in a.views.items()} == {k: numbers(v) for k, v in b.views.items()}, id
        tested += a.verdict != "not tested"
    assert tested >= 25  # the headline judged, not a column of "not tested"


def test_a_task_report_judges_the_word_claims_and_says_why_not_the_others(model, tmp_path, monkeypatch):
    """Every claim has a finding; the word datasets' claims read the task, the others say why they are not tested.
    A task of other examples under the same name is judged afresh, not read from the results cache."""
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    ids = ["fig2", "fig6", "fig12_15", "causal"]
    first = read_task(jsonl(tmp_path / "mine.jsonl", [(w, "fruit") for w in FRUIT] + [(w, "tool") for w in TOOL]))
    found = {f.id: f for f in report(model, 24, 10, ids=ids, task=first, announce=lambda line: None)}
    assert [found[id].verdict == "not tested" for id in ids] == [False, False, True, True]
    assert found["fig12_15"].why == found["causal"].why == NOT_ON_TASK
    assert Evidence(model, 24, 10, 0, None, task=add_task(first)).sentence == []  # no sentence data is looked for
    colour = "red blue green pink grey black white brown amber olive coral ivory".split()
    second = read_task(jsonl(tmp_path / "mine.jsonl", [(w, "fruit") for w in FRUIT] + [(w, "colour") for w in colour]))
    assert second.name == "mine"  # a file's path works as well as the task read from it
    again = {f.id: f for f in report(model, 24, 10, ids=ids[:2], task=tmp_path / "mine.jsonl", announce=lambda line: None)}
    assert first.digest != second.digest and again["fig6"].ours != found["fig6"].ours


def test_a_task_judged_in_its_classes_own_names_labels_each_prompt_by_its_record(model, tmp_path):
    """`--labels classes`: every variant labels a demonstration by its class's name (swapped: the other's), each
    prompt is scored on its own record's class, and the claims that build their own prompts (Table 1's example,
    the bias runs) are judged, not refused."""
    task = read_task(jsonl(tmp_path / "kinds.jsonl", [(w, "fruit") for w in FRUIT] + [(w, "tool") for w in TOOL]))
    name = add_task(task)
    named = Setting(labels=CLASS_NAMES)
    records = named.records(name, 24)
    for variant, pair in [("balanced", lambda r: (r.true_class, r.false_class)),
                          ("swapped", lambda r: (r.false_class, r.true_class))]:
        ps = prompt_set(model, name, variant, 24, setting=named)
        assert [(p.true_label, p.false_label) for p in ps.prompts] == [pair(r) for r in records], variant
        assert all(p.text.endswith(f" {r.input} :") and CLASS_NAMES[0] not in p.text for p, r in zip(ps.prompts, records))
    assert {p.true_label for p in prompt_set(model, name, "balanced", 24, setting=named).prompts} == {"fruit", "tool"}
    ids = ["table1", "table2", "majority_bias_words"]
    found = report(model, 32, 10, ids=ids, task=task, setting=named, announce=lambda line: None)
    assert [f.verdict != "not tested" for f in found] == [True, True, True], [f.why for f in found]


def test_a_claims_fewest_prompts_are_counted_on_the_task(tmp_path):
    """Table 2 needs MIN_CLUSTERS distinct inputs in each class: a task of three classes of 8 examples never has them,
    one of 12 has them within its 36 records; a task added again under its name is counted again."""
    small = add_task(read_task(jsonl(tmp_path / "abc.jsonl", [(f"{c} {i}", c) for c in "abc" for i in range(8)])))
    assert fewest_prompts("table2", word=(small,)) == {"word": MOST_PROMPTS}
    large = add_task(read_task(jsonl(tmp_path / "abc.jsonl", [(f"{c} {i}", c) for c in "abc" for i in range(12)])))
    assert large == small and 30 <= fewest_prompts("table2", word=(large,))["word"] <= 36
    assert fewest_prompts("fig6", word=(large,)) == {"word": MIN_CLUSTERS}  # each record its own input


def test_a_task_of_sentences_ranks_their_content_tokens(model, tmp_path):
    """The towers rank a word's spellings, and a sentence's content tokens, in a task as in the paper's datasets."""
    rows = [(f"the {w} is ripe today", "fruit") for w in "apple pear plum grape lemon mango peach cherry melon kiwi".split()]
    rows += [(f"a {w} hangs on the wall", "tool") for w in "hammer saw drill wrench chisel file rasp plane clamp level".split()]
    name = add_task(read_task(jsonl(tmp_path / "sentences.jsonl", rows)))
    ps = prompt_set(model, name, "balanced", 4)
    got = candidates(model, ps)
    want = content_tokens(model.tokenizer, ps.prompts[0].text[slice(*ps.prompts[0].demos[0])].strip())
    assert got[0, 0, : len(want)].tolist() == want and len(want) > 1
    countries = read_task(words_file(tmp_path / "places.jsonl", "animal_country"))
    assert "New Zealand" in countries.of("country") and not countries.sentences  # a task of words, as the paper's


# --- the command line ----------------------------------------------------------------------
@pytest.fixture
def task_file(tmp_path) -> Path:
    return words_file(tmp_path / "sentiments.jsonl", "sentiment_number")


@pytest.mark.parametrize("extra, message", [
    (["--task", "{tmp}/none.jsonl"], "No task file {tmp}/none.jsonl: pass a JSON-lines file"),
    (["--labels", "pen,sky"], "--labels sets a task's label words: give --task FILE too"),
    (["--task", "{task}", "--robustness"], "--robustness judges the paper's datasets: drop it with --task."),
    (["--task", "{task}", "--labels", "pen"], "--labels pen is not two different words: give them as TRUE,FALSE"),
    (["--task", "{three}", "--n", "31"], "three has 30 test inputs: ask for at most 30 prompts, not 31."),
], ids=["no file", "labels alone", "robustness", "one label", "too many prompts"])
def test_a_bad_task_or_option_is_one_line_before_the_model_loads(tmp_path, task_file, capsys, extra, message):
    three = jsonl(tmp_path / "three.jsonl", [(f"{c} {i}", c) for c in "abc" for i in range(10)])
    def filled(text: str) -> str:
        return text.replace("{tmp}", str(tmp_path)).replace("{task}", str(task_file)).replace("{three}", str(three))
    out = tmp_path / "out.json"
    assert main(["report", "--model", str(tmp_path / "no-model"), "--json", str(out), *map(filled, extra)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {filled(message)}") and err.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("labels", ["xylophone,xylophonist", "classes"])
def test_label_words_a_prompt_cannot_tell_apart_are_refused_before_any_study(model, tmp_path, capsys, labels):
    """Two words given, or two classes' names as their labels (a class named for each word)."""
    task_file = jsonl(tmp_path / "x.jsonl", [(f"{w} {i}", w) for w in ("xylophone", "xylophonist") for i in range(12)])
    model.model.save_pretrained(tmp_path / "m")
    model.tokenizer.save_pretrained(tmp_path / "m")
    out = tmp_path / "out.json"
    assert main(["report", "--model", str(tmp_path / "m"), "--device", "cpu", "--task", str(task_file), "--labels",
                 labels, "--json", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.err.split("\n")[-2].startswith("error: The label words 'xylophone' and 'xylophonist' share their")
    assert "..." not in captured.out and not out.exists()


@pytest.mark.parametrize("given, labels, said", [
    ("pen,sky", ("pen", "sky"), "Label words pen/sky."),
    ("classes", CLASS_NAMES, "Label words: each demonstration's own class name, so the input's class is the true label."),
], ids=["two words", "class names"])
def test_a_task_report_names_its_task_labels_and_size(model, tmp_path, task_file, monkeypatch, given, labels, said):
    seen = []
    monkeypatch.setattr("icl_helpers.verdicts.report",
                        lambda m, n, *a, task=None, setting=MAIN, **k: seen.append((n, task.name, setting.labels)) or [])
    model.model.save_pretrained(tmp_path / "m")
    model.tokenizer.save_pretrained(tmp_path / "m")
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main(["report", "--model", str(tmp_path / "m"), "--device", "cpu", "--task", str(task_file), "--n", "40",
                 "--labels", given, "--json", str(out), "--markdown", str(md)]) == 0
    assert seen == [(40, "sentiments", labels)]
    written = json.loads(out.read_text())
    assert written["task"] == {"name": "sentiments", "classes": ["sentiment", "number"], "examples": 175,
                               "digest": read_task(task_file).digest, "labels": list(labels),
                               "records": "40 drawn as the word datasets are", "notes": []}
    assert written["sentence_n"] is None
    header = md.read_text().split("\n\n")[:2]
    assert header[0] == f"# {tmp_path / 'm'}: the paper's claims, tested on the task sentiments"
    assert header[1].startswith(f"The task sentiments ({written['task']['digest']}): 2 classes (sentiment, number), 175 "
                                f"distinct examples, 40 drawn as the word datasets are. {said} It stands in "
                                "for the paper's word datasets")
    assert "40 prompts of the task sentiments, seed 0." in header[1]


def test_heads_on_a_task_studies_it_in_place_of_the_word_datasets(model, tmp_path, monkeypatch):
    """`heads --task FILE --labels classes`: the head-set study and the signatures run on the task alone, in its
    classes' names; the file and its page name the task and read no sentence dataset."""

    from icl_helpers.studies import head_sets as hs
    from icl_helpers.verdicts import head_report
    from icl_helpers.verdicts.claims.literature import sources

    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sources, "K", 3)  # sets of 2 and 3 of the small model's 12 heads
    monkeypatch.setattr(head_report, "K", 3)
    studied, study = [], hs.head_set_study
    def study_at(m, word, *a, setting=MAIN, **k):
        studied.append((word, setting.labels))
        return study(m, word, *a, length=7, setting=setting, **k)  # random sequences within its 64 positions
    monkeypatch.setattr(hs, "head_set_study", study_at)
    signed, signatures = [], hs.signatures
    def signatures_of(m, study, *a, setting=MAIN, **k):
        signed.append((study.word, setting.labels))
        return signatures(m, study, *a, setting=setting, **k)
    monkeypatch.setattr(hs, "signatures", signatures_of)
    model.model.save_pretrained(tmp_path / "m")
    model.tokenizer.save_pretrained(tmp_path / "m")
    task_file = Path(__file__).parents[1] / "data" / "tasks" / "fruit_tool.jsonl"
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main(["heads", "--model", str(tmp_path / "m"), "--device", "cpu", "--task", str(task_file), "--labels",
                 "classes", "--n", "24", "--sequences", "2", "--draws", "2", "--json", str(out), "--markdown", str(md)]) == 0
    assert studied == [(("fruit_tool",), CLASS_NAMES)] and signed == [(["fruit_tool"], CLASS_NAMES)]
    r = json.loads(out.read_text())
    assert r["task"]["name"] == "fruit_tool" and r["task"]["labels"] == list(CLASS_NAMES) and r["sentence_n"] is None
    assert list(r["floors"]) == ["word"] and r["floors"]["word"]["N"] > 0
    page = md.read_text()
    assert page.startswith(f"# {tmp_path / 'm'}: which heads carry in-context learning on the task fruit_tool\n")
    assert "24 records of the task fruit_tool (each split by input" in page and "sentence dataset (" not in page
    assert "no sentence dataset is read" in page and "## The two-tower signature of each set of 3 (the task's" in page


@pytest.mark.parametrize("extra, message", [
    (["--task", "{tmp}/none.jsonl"], "No task file {tmp}/none.jsonl: pass a JSON-lines file"),
    (["--labels", "classes"], "--labels sets a task's label words: give --task FILE too"),
], ids=["no file", "labels alone"])
def test_heads_refuses_a_bad_task_in_one_line_before_the_model_loads(tmp_path, capsys, extra, message):
    out = tmp_path / "out.json"
    args = [a.replace("{tmp}", str(tmp_path)) for a in extra]
    assert main(["heads", "--model", str(tmp_path / "no-model"), "--json", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message.replace('{tmp}', str(tmp_path))}") and err.count("\n") == 1
