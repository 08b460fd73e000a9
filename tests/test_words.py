"""Word lists and the stored word datasets."""
import pytest

from icl_helpers import UsageError
from icl_helpers.data.prompts import Record, build_prompts, by_direction
from icl_helpers.data.words import (
    WORD_CLASSES,
    WORD_DATASETS,
    load_word_records,
    main,
    make_word_records,
    read_word_list,
    word_dataset_path,
)

WORDS = {c: read_word_list(c) for c in WORD_CLASSES}


def test_word_lists_are_large_distinct_and_disjoint():
    assert {c: len(w) for c, w in WORDS.items()} == {"sentiment": 105, "number": 70, "animal": 116, "country": 112}
    for words in WORDS.values():
        assert all(w == w.strip() and w for w in words)
    lowered = [w.lower() for words in WORDS.values() for w in words]
    assert len(lowered) == len(set(lowered))  # no duplicate within a list, no word in two lists


def test_a_word_list_is_read_as_an_editor_writes_it(tmp_path):
    """A byte-order mark, CRLF line ends and invisible characters are no part of a word."""
    (tmp_path / "animal.txt").write_bytes("\ufeffcat\r\n\u200bdog \r\n\r\nowl\u200d\r\n".encode("utf-8"))
    assert read_word_list("animal", tmp_path) == ["cat", "dog", "owl"]


def test_duplicate_word_is_refused(tmp_path):
    (tmp_path / "animal.txt").write_text("cat\ndog\nCat\n")
    with pytest.raises(UsageError, match=r"animal\.txt: 'Cat' is listed twice; each word once\.$"):
        read_word_list("animal", tmp_path)


@pytest.mark.parametrize("name", list(WORD_DATASETS))
def test_stored_records_are_as_the_paper_built_them(name):
    records = load_word_records(name)
    first, second = WORD_DATASETS[name]
    assert len(records) == 1000
    assert [r.direction for r in records[:2]] == [f"{first}/{second}", f"{second}/{first}"]
    assert {d: len(g) for d, g in by_direction(records).items()} == {f"{first}/{second}": 500, f"{second}/{first}": 500}
    for r in records:
        assert r.input in WORDS[r.true_class] and r.input not in r.true_demos
        assert len(r.true_demos) == len(r.false_demos) == 2 and len(set(r.true_demos)) == 2 and len(set(r.false_demos)) == 2
        assert set(r.true_demos) <= set(WORDS[r.true_class]) and set(r.false_demos) <= set(WORDS[r.false_class])
    assert len({r.to_json() for r in records}) > 990  # sampled, not repeated


def test_generator_is_deterministic():
    args = (("animal", "country"), (WORDS["animal"], WORDS["country"]), 6, 3)
    assert make_word_records(*args) == make_word_records(*args)
    assert make_word_records(*args) != make_word_records(*args[:3], 4)


def test_command_regenerates_the_files_byte_for_byte(tmp_path):
    main(["--out", str(tmp_path)])  # what `python -m icl_helpers.data.words --out DIR` runs
    for name in WORD_DATASETS:
        assert (tmp_path / f"{name}.jsonl").read_bytes() == word_dataset_path(name).read_bytes()


def test_first_stored_prompt():
    prompt = build_prompts(load_word_records("sentiment_number")[:1])[0]
    assert prompt.text == "five : bar dozen : bar worried : foo comfort : foo smile :"


def test_a_word_file_is_parsed_once_and_again_when_it_changes(tmp_path):
    """The records of one version of a file are parsed once (a report asks for them a hundred times), a new list
    each call; a file rewritten (another size) is read afresh."""
    path = word_dataset_path("animal_country", tmp_path)
    cat, horse = (Record(x, "animal", "country", ("dog",), ("Peru",)) for x in ("cat", "horse"))
    path.write_text(cat.to_json() + "\n")
    first = load_word_records("animal_country", tmp_path)
    again = load_word_records("animal_country", tmp_path)
    assert first == again == [cat] and first is not again
    path.write_text(cat.to_json() + "\n" + horse.to_json() + "\n")
    assert load_word_records("animal_country", tmp_path) == [cat, horse]


def test_malformed_word_file_is_refused(tmp_path):
    path = word_dataset_path("animal_country", tmp_path)
    path.write_text(Record("cat", "animal", "country", ("dog",), ("Peru",)).to_json() + '\n{"input": 3}\n')
    with pytest.raises(UsageError, match=r"animal_country\.jsonl:2 is not a prompt record \(expected a JSON object with the keys"):
        load_word_records("animal_country", tmp_path)
    with pytest.raises(UsageError, match=r"^Unknown word dataset 'sst2'; choose one of sentiment_number, animal_country\.$"):
        load_word_records("sst2")
