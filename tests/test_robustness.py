"""Settings and the robustness section: the main setting builds exactly the prompts and cache
entries it built before; each other setting changes what it should (label words, separator,
demonstrations a class, heads, seed), its label positions and label tokens the label words for
three real tokenizers; a claim a setting cannot build a prompt for is not tested, saying why;
and the robustness entries, JSON and markdown."""
from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from icl_helpers.cache import key
from icl_helpers.cli import main
from icl_helpers.data import setting as setting_module
from icl_helpers.data.datasets import dataset_records
from icl_helpers.data.positions import find_positions
from icl_helpers.data.prompts import (
    ORDERS,
    VARIANTS,
    Record,
    Variant,
    build_prompts,
    orders,
    parse_prompt,
    prompt_label_ids,
    split_separator,
)
from icl_helpers.data.sentences import SentenceData
from icl_helpers.data.setting import MAIN, Setting, class_pools, more_demonstrations
from icl_helpers.data.sources import Example
from icl_helpers.data.words import WORD_DATASETS, make_word_records, read_word_list
from icl_helpers.errors import CannotMeasure, UsageError
from icl_helpers.studies import recency
from icl_helpers.studies.runner import prompt_set
from icl_helpers.verdicts import claims, common, evidence, findings, robustness, rules
from icl_helpers.verdicts.judgement import NOT_TESTED, PARTLY, REPLICATES, Judgement
from tests.conftest import vocab_tokenizer

PEN = Setting(labels=("pen", "sky"))
NEWLINE = Setting(sep="\n")
ONE, THREE = Setting(per_class=1), Setting(per_class=3)
WORD = "sentiment_number"


def test_the_main_setting_is_the_papers_prompts():
    """The variants, records and example prompt of the main setting are those of before settings."""
    assert VARIANTS == {"balanced": Variant(), "imbalanced": Variant(imbalanced=True), "reordered": Variant(order="ttff"),
                        "swapped": Variant(labels=("bar", "foo")),
                        **{f"order-{o}": Variant(order=o) for o in ("ftft", "fttf", "tfft", "tftf")}}
    assert {name: MAIN.variant(name) for name in VARIANTS} == VARIANTS
    assert ORDERS == ("fftt", "ftft", "fttf", "tfft", "tftf", "ttff") and recency.order_variants() == recency.ORDER_VARIANTS
    for d in WORD_DATASETS:
        assert MAIN.records(d, 50) == dataset_records(d, 50)
    assert evidence.EXAMPLE == "love : bar like : bar eight : foo two : foo one :"
    assert MAIN == Setting(20, ("foo", "bar"), " : ", 2) and MAIN.heads == rules.K


def test_label_words_and_separator_reach_every_prompt():
    assert evidence.example(PEN).text == "love : sky like : sky eight : pen two : pen one :"
    assert evidence.example(NEWLINE).text == "love\nbar like\nbar eight\nfoo two\nfoo one\n"
    assert evidence.example(replace(PEN, sep="\n", per_class=1)).text == "like\nsky two\npen one\n"
    assert PEN.variant("swapped").labels == ("sky", "pen") and NEWLINE.variant("order-tftf").sep == "\n"
    for s in (PEN, NEWLINE, THREE):
        for name in ("balanced", "imbalanced", "swapped", "reordered"):
            built = build_prompts(s.records(WORD, 1), s.variant(name))[0]
            assert parse_prompt(built.text, (built.true_label, built.false_label), built.sep) == built
    with pytest.raises(UsageError, match="must hold something besides spaces"):
        Setting(sep="  ")


def test_demonstrations_a_class_keep_the_nearest_and_add_in_front():
    stored = dataset_records(WORD, 30)
    one, three = ONE.records(WORD, 30), THREE.records(WORD, 30)
    words = {c: read_word_list(c) for c in WORD_DATASETS[WORD]}
    for r, a, b in zip(stored, one, three):
        assert (a.input, a.true_demos, a.false_demos) == (r.input, r.true_demos[1:], r.false_demos[1:])
        assert (b.input, b.true_demos[1:], b.false_demos[1:]) == (r.input, r.true_demos, r.false_demos)
        assert b.true_demos[0] in words[r.true_class] and b.false_demos[0] in words[r.false_class]
        assert len({b.input, *b.true_demos, *b.false_demos}) == 7  # never the input or a demonstration held
    assert THREE.records(WORD, 10) == three[:10]  # a record's draw depends on its row alone
    assert build_prompts(three[:1], THREE.variant("balanced"))[0].text == (
        "{0} : bar {1} : bar {2} : bar {3} : foo {4} : foo {5} : foo {6} :".format(*three[0].false_demos, *three[0].true_demos,
                                                                                  three[0].input))
    assert recency.order_variants(1) == {"ft": "balanced", "tf": "reordered"} and len(recency.order_variants(3)) == 20
    assert all(sorted(o) == list("fffttt") for o in orders(3))


def test_more_demonstrations_draw_from_the_class_pool_and_refuse_a_small_one():
    r = Record("x", "a", "b", ("a1",), ("b1",))
    pools = {"a": ["x", "a1", "a2", "a3"], "b": ["b1", "b2"]}
    (got,) = more_demonstrations([r], 2, pools, seed=5)
    assert got.true_demos[1:] == ("a1",) and got.true_demos[0] in ("a2", "a3") and got.false_demos == ("b2", "b1")
    assert more_demonstrations([r], 2, pools, seed=5) == [got]
    with pytest.raises(UsageError, match=r"Too few examples of a class \(2\) for 2 more"):
        more_demonstrations([r], 3, pools)


def test_sentence_pools_are_the_split_records_are_drawn_from(monkeypatch):
    long = "word " * 100
    data = {"trained": SentenceData("trained", ("p", "n"), [Example("t", "p")], [Example("a", "p"), Example(long, "n")]),
            "tested": SentenceData("tested", ("p", "n"), [Example("t", "p"), Example("u", "n")], None)}
    monkeypatch.setattr(setting_module, "load_sentences", lambda name, data_dir=None: data[name])
    assert class_pools("trained") == {"p": ["a"], "n": [long[:399]]}  # cut as sentence_records cuts, at a space
    assert class_pools("tested") == {"p": ["t"], "n": ["u"]}
    assert class_pools(WORD) == {c: read_word_list(c) for c in ("sentiment", "number")}


def test_another_seed_draws_other_word_records():
    classes = WORD_DATASETS[WORD]
    drawn = make_word_records(classes, (read_word_list(classes[0]), read_word_list(classes[1])), 1000, 1)
    assert dataset_records(WORD, 40, seed=1) == drawn[:40] != dataset_records(WORD, 40)


@pytest.mark.parametrize("name", ["gpt2", "llama-spm", "llama-bpe"])
def test_label_positions_and_tokens_are_the_label_words_in_every_setting(name):
    """Each label position holds the token its prompt's label id names (the word's first and only
    token), each demonstration's tokens decode to it, and the last token is the separator's end."""
    tokenizer = vocab_tokenizer(name)
    for s in (MAIN, PEN, Setting(labels=("cup", "door")), NEWLINE, ONE, THREE, replace(PEN, sep="\n", per_class=3)):
        prompts = [p for v in ("balanced", "swapped", "reordered") for p in build_prompts(s.records(WORD, 6), s.variant(v))]
        pos = find_positions(tokenizer, prompts)
        true, false = prompt_label_ids(tokenizer, prompts)
        assert pos.labels.shape[1] == 2 * s.per_class and (pos.labels >= 0).all()
        for b, p in enumerate(prompts):
            ids = tokenizer(p.text)["input_ids"]
            at = [ids[i] for i in pos.labels[b]]
            assert at == [int(true[b] if t else false[b]) for t in p.is_true], (s, p.text)
            words = [p.true_label if t else p.false_label for t in p.is_true]
            assert [tokenizer.decode([i]).strip() for i in at] == words == [p.text[i:j] for i, j in p.labels]
            demos = [tokenizer.decode(ids[i:j]).strip() for i, j in pos.demos[b].tolist()]
            assert demos == [p.text[i:j] for i, j in p.demos]
            assert int(pos.last[b]) == len(ids) - 1 and tokenizer.decode(ids[-1:]).strip(" ") == split_separator(s.sep)[0].strip(" ")


def test_one_demonstration_a_class_cannot_build_an_imbalanced_prompt():
    with pytest.raises(CannotMeasure, match="one demonstration a class: an imbalanced prompt drops a true demonstration"):
        ONE.variant("imbalanced")
    assert THREE.variant("imbalanced") == Variant(6, imbalanced=True)


@pytest.fixture
def word_only(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path))
    monkeypatch.setattr(common, "sentence_datasets", lambda names, data_dir=None: [])
    return tmp_path


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_settings_reach_the_studies_and_keep_their_own_cache_entries(small, word_only):
    """The main setting's cache files are named as before; another setting's prompt sets and
    findings have their own; its heads are its top K; a claim it cannot build is not tested."""
    main_ps, pen_ps = (prompt_set(small, WORD, "balanced", 6, setting=s) for s in (MAIN, PEN))
    assert key("locate", small, main_ps) == key("locate", small, prompt_set(small, WORD, "balanced", 6))
    assert re.fullmatch(rf"locate__model=gpt2__weights=\w+__dtype=float32__dataset={WORD}__variant=balanced__n=6__seed=0"
                        r"__prompts=[0-9a-f]{12}\.pt", key("locate", small, main_ps).name)
    assert key("locate", small, pen_ps) != key("locate", small, main_ps)
    assert all(" : pen " in t or " : sky " in t for t in pen_ps.texts)
    ids = ["fig3_4", "fig8", "majority_bias_words"]
    main_run = findings.report(small, 12, 2, announce=lambda step: None, ids=ids)
    names = {p.name for p in (word_only / "results").glob("finding__*.json")}
    assert len(names) == 3 and not any("setting=" in n for n in names)
    assert findings.report(small, 12, 2, announce=lambda step: None, ids=ids, setting=Setting()) == main_run
    assert {p.name for p in (word_only / "results").glob("finding__*.json")} == names  # the same entries, read again
    five = findings.report(small, 12, 2, announce=lambda step: None, ids=ids, setting=Setting(heads=5))
    assert "top 5 in layers" in five[0].why and "top 20 in layers" in main_run[0].why
    assert len(evidence.Evidence(small, 12, 2, 0, None, setting=Setting(heads=5)).heads(WORD)) == 5
    one = findings.report(small, 12, 2, announce=lambda step: None, ids=ids, setting=ONE)
    assert [f.verdict for f in one[1:]] == [NOT_TESTED, NOT_TESTED] and all("one demonstration a class" in f.why for f in one[1:])
    assert one[1].views == {} and one[0].verdict != NOT_TESTED
    assert len({p.name for p in (word_only / "results").glob("finding__*setting=*.json")}) == 6


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_robustness_judges_each_variation_against_main_at_its_size(small, word_only):
    ids = ["fig3_4", "fig8"]
    entries = robustness.robustness(small, 12, 2, announce=lambda step: None, ids=ids)
    kept = [p.name for p in (word_only / "results").glob("finding__*.json")]
    assert len(kept) == len(ids) * len(entries) and all("__views=" in name for name in kept)  # headlines alone, own keys
    full = findings.report(small, 12, 2, ids=ids, announce=lambda step: None)
    headline = findings.report(small, 12, 2, ids=ids, announce=lambda step: None, headline_only=True)
    assert [f.to_dict() | {"views": {}} for f in full] == [f.to_dict() for f in headline] and full[1].views
    assert [(e["factor"], e["value"]) for e in entries] == [
        ("main", "20 heads, foo/bar, ' : ', 2 a class, seed 0"), ("heads", "5"), ("heads", "10"), ("heads", "40"),
        ("labels", "pen/sky"), ("labels", "cup/door"), ("separator", "newline"), ("demonstrations", "1"),
        ("demonstrations", "3"), ("seed", "1"), ("seed", "2")]
    by = {(e["factor"], e["value"]): e for e in entries}
    assert entries[0]["verdicts"] == {f.id: f.verdict for f in findings.report(small, 12, 2, ids=ids, announce=lambda step: None)}
    assert by["demonstrations", "1"]["verdicts"]["fig8"] == NOT_TESTED
    assert "one demonstration a class" in by["demonstrations", "1"]["not_tested"]["fig8"]
    assert all(set(e["verdicts"]) == set(ids) for e in entries) and json.loads(json.dumps(entries)) == entries
    text = robustness.markdown(entries, 12, 2)
    assert "at 12 prompts a word dataset and 2 a sentence dataset" in text
    assert "| claim | main | heads 5 | heads 10 | heads 40 | labels pen/sky | labels cup/door | separator newline | " \
           "demonstrations 1 | demonstrations 3 | seed 1 | seed 2 |" in text
    row = next(line for line in text.splitlines() if line.startswith("| fig8 |")).split(" | ")
    assert row[8] == "≠ not tested" and "- demonstrations 1, fig8: one demonstration a class" in text


def test_the_markdown_marks_each_verdict_that_differs():
    def entry(factor, value, **verdicts):
        return {"factor": factor, "value": value, "verdicts": verdicts,
                "not_tested": {i: "why not" for i, v in verdicts.items() if v == NOT_TESTED}}
    entries = [entry("main", "m", a=REPLICATES, b=PARTLY, c=NOT_TESTED), entry("heads", "5", a=REPLICATES, b=NOT_TESTED, c=NOT_TESTED),
               entry("seed", "1", a=PARTLY, b=PARTLY, c=NOT_TESTED)]
    lines = robustness.markdown(entries, 200, 50).splitlines()
    assert lines[4:9] == ["| claim | main | heads 5 | seed 1 |", "|---|---|---|---|", "| a | yes | = | ≠ partly |",
                          "| b | partly | ≠ not tested | = |", "| c | not tested | = | = |"]
    assert "- heads 5, b: why not" in lines and "- heads 5, c: why not" not in lines  # main does not test c either
    assert lines[-1] == "Verdicts that differ from main: heads 5 (b); seed 1 (a)."


@pytest.mark.parametrize("small", ["gpt2"], indirect=True)
def test_the_cli_writes_the_robustness_section_at_its_size(small, tmp_path, monkeypatch):
    small.model.save_pretrained(tmp_path / "m")
    small.tokenizer.save_pretrained(tmp_path / "m")
    seen = []

    def fake(m, n, sentence_n, seed, data_dir, announce, ids, heads, setting, headline_only):
        assert headline_only
        seen.append((n, sentence_n, seed, setting))
        verdict = PARTLY if setting.sep == "\n" else REPLICATES
        return [claims.CLAIMS["fig2"].finding(Judgement(0.5, None, n, verdict, "w"))]
    monkeypatch.setattr(robustness, "report", fake)
    monkeypatch.setattr("icl_helpers.verdicts.report", lambda m, *a, **k: [])
    # The sentence datasets as the hub would give them, on any machine: --sentence-n is taken (not refused) and
    # checked against the hub's standard counts; no study reads them (both reports are stand-ins).
    monkeypatch.setattr("icl_helpers.runs.unavailable", lambda data_dir: None)
    monkeypatch.setattr("icl_helpers.data.datasets.resolve_data_dir", lambda data_dir: None)
    out, md = tmp_path / "out.json", tmp_path / "out.md"
    assert main(["report", "--model", str(tmp_path / "m"), "--device", "cpu", "--n", "300", "--sentence-n", "20", "--seed", "4",
                 "--robustness", "--json", str(out), "--markdown", str(md)]) == 0
    written = json.loads(out.read_text())
    assert (written["robustness_n"], written["robustness_sentence_n"]) == (200, 20)  # 200 and 50, at most --n and --sentence-n
    assert [e["factor"] for e in written["robustness"]] == ["main"] + ["heads"] * 3 + ["labels"] * 2 + ["separator"] + [
        "demonstrations"] * 2 + ["seed"] * 2
    assert written["robustness"][6]["verdicts"] == {"fig2": PARTLY} and [s[2] for s in seen][-3:] == [4, 5, 6]
    assert {s[:2] for s in seen} == {(200, 20)} and seen[0][3] == MAIN
    assert "## Robustness" in md.read_text() and "| fig2 | yes | = | = | = | = | = | ≠ partly |" in md.read_text()
