"""Task files: a researcher's own classification task, read from a JSON-lines file or a folder of class files
and drawn into prompt records as the paper's datasets are. The paper's own word datasets, and a small
sentence dataset, written as task files give their records byte for byte; bad files are one line each."""
from __future__ import annotations

import csv
import json
import math
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from icl_helpers import stats
from icl_helpers.data import tasks
from icl_helpers.data.prompts import (
    CLASS_NAMES,
    Record,
    Variant,
    build_prompt,
    build_prompts,
    prompt_label_ids,
    variants,
)
from icl_helpers.data.sentences import sentence_records
from icl_helpers.data.setting import MAIN, Setting
from icl_helpers.data.sources import SOURCES
from icl_helpers.data.split import input_halves, input_ids
from icl_helpers.data.tasks import (
    MIN_INPUTS,
    add_task,
    check_label_words,
    drawn,
    inputs_needed,
    read_task,
)
from icl_helpers.data.words import WORD_DATASETS, load_word_records, read_word_list, word_records
from icl_helpers.errors import UsageError
from icl_helpers.model.offline import offline_model_dir
from icl_helpers.paths import BUNDLED

SETTINGS = [MAIN, Setting(per_class=1), Setting(per_class=3), Setting(labels=("pen", "sky"), sep="\n")]


def jsonl(path: Path, rows: list[tuple[str, object]]) -> Path:
    """A task file of (input, class) rows, one JSON object a line."""
    path.write_text("".join(json.dumps({"input": x, "class": c}, ensure_ascii=False) + "\n" for x, c in rows),
                    encoding="utf-8")
    return path


def words_task(path: Path, dataset: str) -> Path:
    """A word dataset's lists (data/words/) as a task file, its first class's words first."""
    return jsonl(path, [(w, c) for c in WORD_DATASETS[dataset] for w in read_word_list(c)])


def numbered(classes: dict[str, int]) -> list[tuple[str, str]]:
    """(input, class) rows: `count` distinct inputs of each class, "<class> <i>", the classes interleaved."""
    rows = [(f"{c} {i}", c) for c, count in classes.items() for i in range(count)]
    return sorted(rows, key=lambda row: int(row[0].split()[-1]))


def task_records(task: tasks.Task, n: int, seed: int = 0, setting: Setting = MAIN) -> list[Record]:
    """The task's records as a report draws them: the task added as a dataset, its records in the setting."""
    return setting.records(add_task(task), n, seed)


@pytest.fixture(scope="module")
def smollm_tokenizer():
    return AutoTokenizer.from_pretrained(offline_model_dir(BUNDLED))


# --- the paper's datasets as task files ---------------------------------------------------
def test_a_word_dataset_written_as_a_task_file_draws_its_records_and_prompts(tmp_path):
    """sentiment_number as a JSON-lines file, animal_country as a folder (its classes are in alphabetical
    order): the stored records, another seed's, and every setting's records and prompts, exactly."""
    sentiment = read_task(words_task(tmp_path / "sentiments.jsonl", "sentiment_number"))
    assert (sentiment.name, sentiment.classes, len(sentiment.examples)) == ("sentiments", ("sentiment", "number"), 175)
    assert task_records(sentiment, 1000) == load_word_records("sentiment_number")  # the committed data/*.jsonl
    assert task_records(sentiment, 1000, seed=7) == word_records("sentiment_number", 7)
    folder = tmp_path / "animals"
    folder.mkdir()
    for c in WORD_DATASETS["animal_country"]:
        (folder / f"{c}.txt").write_text("\n".join(read_word_list(c)) + "\n", encoding="utf-8")
    animal = read_task(folder)
    assert task_records(animal, 1000) == load_word_records("animal_country")
    assert animal.digest == read_task(words_task(tmp_path / "same.jsonl", "animal_country")).digest  # content, not form
    for task, dataset in ((sentiment, "sentiment_number"), (animal, "animal_country")):
        for setting in SETTINGS:
            records = task_records(task, 120, seed=3, setting=setting)
            assert records == setting.records(dataset, 120, seed=3)
            assert {len(r.true_demos) for r in records} == {len(r.false_demos) for r in records} == {setting.per_class}
            for name in variants(setting.per_class):
                if name == "imbalanced" and setting.per_class < 2:
                    continue  # it drops a true demonstration, which would leave none (CannotMeasure)
                variant = setting.variant(name)
                assert [p.text for p in build_prompts(records, variant)] == [
                    p.text for p in build_prompts(setting.records(dataset, 120, seed=3), variant)]


def test_a_sentence_dataset_written_as_a_task_file_draws_its_records(tmp_path, monkeypatch):
    """A small copy of AG News (no train split, as a task file has none) read by the sentence loader. The same
    examples in the same order as a task file give the same records under every setting and seed."""
    monkeypatch.setenv("ICL_OWN_DATA", "1")  # a copy of our own: the loader warns where it differs from the standard
    names = SOURCES["agnews"].classes
    rows = [(f"Headline {i}", f"story number {i} of {names[i % 4]}, told twice  over", names[i % 4]) for i in range(40)]
    (tmp_path / "agnews").mkdir()
    with open(tmp_path / "agnews" / "test.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["Class Index", "Title", "Description"],
                                 *[[str(names.index(c) + 1), title, text] for title, text, c in rows]])
    task = read_task(jsonl(tmp_path / "news.jsonl", [(f"{title} {text}", c) for title, text, c in rows]))
    assert task.classes == names and task.of("World")[0] == "Headline 0 story number 0 of World, told twice over"
    with pytest.warns(UserWarning, match="ICL_OWN_DATA=1"):
        for seed in (0, 5):
            assert task_records(task, 40, seed) == sentence_records("agnews", 40, seed, data_dir=tmp_path)
        for setting in SETTINGS:
            got = task_records(task, 30, 2, setting)
            assert got == setting.records("agnews", 30, 2, data_dir=tmp_path) and len(got) == 30


# --- what the records hold ----------------------------------------------------------------
def test_a_task_added_is_a_dataset_by_its_name_unless_the_paper_has_that_name(tmp_path):
    """`add_task` names the task's records for `Setting.records`; a task added again under its name replaces the
    first; a task named as one of the paper's datasets is refused, which keeps the paper's records its own."""
    first = read_task(jsonl(tmp_path / "mine.jsonl", numbered({"pos": 10, "neg": 10})))
    assert add_task(first) == "mine" and MAIN.records("mine", 20) == MAIN.fit(drawn(first, 20), first.pools)
    second = read_task(jsonl(tmp_path / "mine.jsonl", numbered({"yes": 10, "no": 10})))
    assert {r.true_class for r in MAIN.records(add_task(second), 20)} == {"yes", "no"}
    for name in ("sentiment_number", "sst2"):
        with pytest.raises(UsageError) as err:
            add_task(read_task(jsonl(tmp_path / f"{name}.jsonl", numbered({"pos": 10, "neg": 10}))))
        assert str(err.value) == f"The task {name!r} has the name of one of the paper's datasets: rename its file."
    assert MAIN.records("sentiment_number", 4) == load_word_records("sentiment_number")[:4]


def test_records_are_balanced_by_class_and_direction_as_the_built_in_ones(tmp_path):
    """Two classes: rows alternate direction (even rows the first class's inputs), as the word datasets'. Three:
    every example an input once, as a sentence dataset's test split, and one false class drawn at random."""
    two = read_task(jsonl(tmp_path / "two.jsonl", numbered({"pos": 12, "neg": 15})))
    records = task_records(two, 200, seed=1)
    assert [r.true_class for r in records[:4]] == ["pos", "neg", "pos", "neg"]
    assert Counter(r.direction for r in records) == {"pos/neg": 100, "neg/pos": 100}
    for r in records:
        assert r.input not in r.true_demos and len(set(r.true_demos)) == len(set(r.false_demos)) == 2
        assert set((r.input, *r.true_demos)) <= set(two.of(r.true_class)) and set(r.false_demos) <= set(two.of(r.false_class))
    three = read_task(jsonl(tmp_path / "three.jsonl", numbered({"a": 8, "b": 9, "c": 10})))
    records = task_records(three, 27, seed=1)
    assert Counter(r.true_class for r in records) == {"a": 8, "b": 9, "c": 10}
    assert sorted(r.input for r in records) == sorted(e.text for e in three.examples)  # each input once
    assert all(r.false_class != r.true_class and r.input not in r.true_demos for r in records)
    directions = Counter(r.direction for r in records)
    assert set(directions) <= {f"{t}/{f}" for t in "abc" for f in "abc" if t != f} and len(directions) == 6
    assert task_records(three, 27, seed=1) == records and task_records(three, 27, seed=2) != records  # seeded


def test_input_halves_split_task_records_by_input(tmp_path):
    """The held-out split takes half the distinct inputs of each class (rounded down) with all their records.
    No input is on both sides, and with the fewest inputs a class may hold each half holds MIN_INPUTS."""
    assert MIN_INPUTS == stats.MIN_CLUSTERS
    for classes, draw in (({"pos": 10, "neg": 11}, "words"), ({"a": 8, "b": 8, "c": 9}, "sentences")):
        task = read_task(jsonl(tmp_path / "t.jsonl", numbered(classes)))
        records = task_records(task, 400 if draw == "words" else 25, seed=4)
        assert tasks.DRAWS[len(classes) > 2] == draw  # the default draw
        score, ids = input_halves(records, seed=4), input_ids(records)
        assert not set(ids[score].tolist()) & set(ids[~score].tolist())
        for cls in classes:
            inputs = {r.input for r in records if r.true_class == cls}
            assert len(inputs) == classes[cls]  # every input drawn at least once
            chosen = {r.input for r, s in zip(records, score.tolist()) if s and r.true_class == cls}
            assert len(chosen) == classes[cls] // 2
        halves = len(set(ids[score].tolist())), len(set(ids[~score].tolist()))
        assert halves == ((10, 11) if draw == "words" else (12, 13))  # 5 + 5 and 5 + 6; 4 + 4 + 4 and 4 + 4 + 5
        assert min(halves) >= MIN_INPUTS


def test_a_class_needs_the_inputs_of_a_prompt_and_of_both_halves(tmp_path):
    """inputs_needed: an input and max(per_class, 2) others, and 2 * ceil(MIN_INPUTS / classes) for the split.
    A class one short is refused, naming how many; one at the count is read."""
    assert [inputs_needed(c, p) for c, p in ((2, 2), (3, 2), (4, 2), (7, 2), (10, 2), (20, 3), (30, 1), (2, 9))] == [
        10, 8, 6, 4, 3, 4, 3, 10]
    assert [inputs_needed(c) for c in range(2, 12)] == [max(3, 2 * math.ceil(10 / c)) for c in range(2, 12)]
    path = jsonl(tmp_path / "small.jsonl", numbered({"pos": 10, "neg": 9}))
    with pytest.raises(UsageError) as err:
        read_task(path)
    assert str(err.value) == (f"{path}: class 'neg' holds 9 distinct inputs, and 10 are needed: 3 for a prompt of 2 "
                              "demonstrations a class, and 10 in each half of the held-out split by input across the "
                              "2 classes. Add examples to it, or drop the class.")
    many = jsonl(tmp_path / "many.jsonl", numbered({c: 4 for c in "abcdefghij"}))
    assert len(read_task(many).classes) == 10  # 4 >= max(3, 2)
    with pytest.raises(UsageError, match="class 'a' holds 4 distinct inputs, and 5 are needed: 5 for a prompt of 4"):
        read_task(many, per_class=4)
    with pytest.raises(UsageError, match="holds 4 distinct inputs, and 5 are needed"):
        task_records(read_task(many), 10, setting=Setting(per_class=4))


def test_a_task_is_read_as_the_sentence_datasets_are(tmp_path):
    """Texts are cleaned and cut as the sentence datasets' are, and repeats kept once, with a note of each. Classes
    come in order of first appearance (numbers as text). A byte-order mark and other keys are ignored."""
    long = "word " * 100  # 500 characters, cut at the last space before 400
    rows = [(f"\u200b  text\t{i}  of  a ", "b" if i % 2 else 1) for i in range(20)] + [(long, 1), ("text 0 of a", 1)]
    path = tmp_path / "mine.jsonl"
    path.write_text("\ufeff" + "".join(json.dumps({"id": i, "input": x, "class": c}) + "\n\n" for i, (x, c) in enumerate(rows)),
                    encoding="utf-8")
    task = read_task(path)
    assert (task.name, task.classes, len(task.examples)) == ("mine", ("1", "b"), 21)
    assert task.of("1")[:2] == ["text 0 of a", "text 2 of a"] and task.of("1")[-1] == ("word " * 80).strip()
    assert len(task.of("1")[-1]) == 399 and task.max_chars == 400
    assert task.notes == ("1 example cut to 400 characters, at the last space before the limit",
                          "1 input repeated in its class, kept once")
    assert task.pools() == {"1": task.of("1"), "b": task.of("b")} and len(task.digest) == 12
    path.write_text(path.read_text(encoding="utf-8").replace("text\\t19", "text\\t20"), encoding="utf-8")
    assert read_task(path).digest != task.digest
    assert read_task(path, max_chars=1000).of("1")[-1] == long.strip()


# --- bad input: one line each -------------------------------------------------------------
FORM = '{"input": TEXT, "class": NAME}'
GOOD = "".join(json.dumps({"input": x, "class": c}) + "\n" for x, c in numbered({"pos": 10, "neg": 10}))
BAD_FILES = {  # id: (the file's bytes, the message after its path)
    "not utf-8": (GOOD.encode() + b'{"input": "caf\xe9", "class": "pos"}\n', ":21 is not UTF-8 text (byte 714): save "
                  "the file as UTF-8."),
    "not json": (GOOD + '{"input": "x", "class": pos}\n', f":21 is not JSON (Expecting value): write one {FORM} object a line."),
    "not an object": (GOOD + '["x", "pos"]\n', f":21 is a JSON list, not an object: write one {FORM} a line."),
    "no input": (GOOD + '{"text": "x", "class": "pos"}\n', f":21 has no 'input': write one {FORM} a line."),
    "no class": ('{"input": "x"}\n' + GOOD, f":1 has no 'class': write one {FORM} a line."),
    "input not text": (GOOD + '{"input": ["x"], "class": "pos"}\n', f":21: the input is a list, not text: write one {FORM} a line."),
    "empty input": (GOOD + '{"input": " \\u200b ", "class": "pos"}\n', ":21: the input is empty: give every example its "
                    "text, or drop the line."),
    "empty class": (GOOD + '{"input": "x", "class": " "}\n', ":21: the class is empty: name the class of every example."),
    "one class": ("".join(json.dumps({"input": f"x {i}", "class": "pos"}) + "\n" for i in range(30)),
                  " holds one class ('pos'): a task needs examples of two or more classes."),
    "no example": ("\n\n", " holds no examples: write one example a line."),
    "two classes": (GOOD + '{"input": "pos  3", "class": "neg"}\n', ":21: the input 'pos 3' is in class 'neg' and in "
                    "class 'pos' ({path}:7): give each input one class."),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_task_file_is_refused_in_one_line(tmp_path, case):
    content, message = BAD_FILES[case]
    path = tmp_path / "task.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UsageError) as err:
        read_task(path)
    assert str(err.value) == f"{path}{message}".replace("{path}", str(path)) and "\n" not in str(err.value)


def test_a_missing_file_or_a_folder_of_too_few_classes_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "README.md").write_text("not a class\n")
    messages = []
    for files in ((), ("pos.txt",)):
        for name in files:
            (folder / name).write_text("".join(f"{name} {i}\n" for i in range(12)))
        with pytest.raises(UsageError) as err:
            read_task(folder)
        messages.append(str(err.value))
    assert messages == [f"{folder} holds {files}: a task folder needs a <class>.txt file for each of two or more "
                        "classes, one example a line." for files in ("0 class files", "1 class file (pos.txt)")]
    (folder / "neg.txt").write_bytes(b"fine\n\nca\xffe\n")
    with pytest.raises(UsageError) as err:
        read_task(folder)
    assert str(err.value) == f"{folder / 'neg.txt'}:3 is not UTF-8 text (byte 8): save the file as UTF-8."
    with pytest.raises(UsageError) as err:
        read_task(tmp_path / "nothing.jsonl")
    assert str(err.value) == (f"No task file {tmp_path / 'nothing.jsonl'}: pass a JSON-lines file, one {FORM} a line, "
                              "or a folder of <class>.txt files, one example a line.")


def test_a_draw_the_task_cannot_give_is_refused_in_one_line(tmp_path):
    three = read_task(jsonl(tmp_path / "three.jsonl", numbered({"a": 8, "b": 8, "c": 8})))
    cases = [(dict(n=25), "three has 24 test inputs: ask for at most 24 prompts, not 25."),
             (dict(n=4, draw="words"), "The word datasets' draw takes two classes; three has 3: draw as the sentence "
                                       "datasets are."),
             (dict(n=4, draw="pairs"), "Unknown draw 'pairs': choose one of words, sentences."),
             (dict(n=0), "n must be at least 1, not 0.")]
    for kwargs, message in cases:
        with pytest.raises(UsageError) as err:
            drawn(three, **kwargs)
        assert str(err.value) == message
    assert len(drawn(three, 24, draw="sentences")) == 24


# --- label words --------------------------------------------------------------------------
@pytest.mark.parametrize("words, sep, message", [
    (("xylophonist", "xylophone"), " : ", "The label words 'xylophone' and 'xylophonist' share their first token ' xyl', "
                                          "which scores a label: choose words that begin differently."),
    (("barn", "bark"), "\n", "The label words 'bark' and 'barn' share their first token 'b', which scores a label: choose "
                             "words that begin differently."),
    (("bar", "foo bar"), " : ", "The first token of the label word 'bar', ' bar', is also a token of 'foo bar': choose "
                                "words that share no token."),
    (("not hate", "hate"), " : ", "The first token of the label word 'hate', ' hate', is also a token of 'not hate': "
                                  "choose words that share no token."),  # ETHOS's class names
], ids=["a first token shared", "a first token shared after a newline", "a token of another", "ETHOS's class names"])
def test_label_words_a_prompt_could_not_tell_apart_are_refused(smollm_tokenizer, words, sep, message):
    with pytest.raises(UsageError) as err:
        check_label_words(smollm_tokenizer, words, sep)
    assert str(err.value) == message


def test_a_label_word_of_several_tokens_is_noted_and_scored_by_its_first(smollm_tokenizer):
    assert check_label_words(smollm_tokenizer, ("foo", "bar")) is None
    assert check_label_words(smollm_tokenizer, ("sentiment", "number")) is None
    agnews = SOURCES["agnews"].classes
    assert check_label_words(smollm_tokenizer, agnews) == (
        "Label words of several tokens are scored by their first: 'Sci/Tech' by ' Sci' (of 3).")
    assert check_label_words(smollm_tokenizer, ("sentiment", "number", "xylophonist"), "\n") == (
        "Label words of several tokens are scored by their first: 'sentiment' by 'sent' (of 2), 'xylophonist' by 'x' (of 4).")
    record = Record("x", "World", "Sci/Tech", ("a", "b"), ("c", "d"))
    prompt = build_prompt(record, Variant(labels=CLASS_NAMES))
    true_id, false_id = prompt_label_ids(smollm_tokenizer, [prompt])
    assert smollm_tokenizer.decode(false_id.tolist()) == " Sci" and smollm_tokenizer.decode(true_id.tolist()) == " World"


def test_class_names_as_labels_follow_each_record_and_every_variant():
    record = Record("one", "number", "sentiment", ("eight", "two"), ("love", "like"))
    other = Record("love", "sentiment", "number", ("like", "happy"), ("two", "eight"))
    named = Setting(labels=CLASS_NAMES)
    prompts = build_prompts([record, other], named.variant("balanced"))
    assert [p.text for p in prompts] == [
        "love : sentiment like : sentiment eight : number two : number one :",
        "two : number eight : number like : sentiment happy : sentiment love :"]
    assert [(p.true_label, p.false_label) for p in prompts] == [("number", "sentiment"), ("sentiment", "number")]
    assert build_prompt(record, named.variant("swapped")).text == (
        "love : number like : number eight : sentiment two : sentiment one :")
    assert build_prompt(record, named.variant("imbalanced")).text == "love : sentiment like : sentiment eight : number one :"
    assert build_prompt(record, replace(named, sep="\n").variant("order-ftft")).text == (
        "love\nsentiment eight\nnumber like\nsentiment two\nnumber one\n")
    pen = Setting(labels=("pen", "sky"))
    assert build_prompt(record, pen.variant("swapped")).true_label == "sky"  # given words stay the setting's
    assert build_prompt(record, pen.variant("balanced")).text == "love : sky like : sky eight : pen two : pen one :"
