"""The sentence-dataset loaders and records, and which sentence datasets this machine has."""
import re
import sys
import types
from collections import Counter

import pytest

from icl_helpers import UsageError, hub
from icl_helpers.data import sentences as ds
from icl_helpers.data.datasets import dataset_records
from icl_helpers.data.sources import SOURCES, Example, parse_examples
from tests.conftest import SHARED

DATA_DIR = SHARED / "datasets"
full_copy = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"no full copy of the sentence datasets at {DATA_DIR} (set ICL_SHARED_DIR to the folder "
                                  "holding datasets/): the loaders are tested on small files in each format instead")


SIZES = {  # (test, train or None, first test example)
    "sst2": (1821, 6920, ("no movement , no yuks , not much of anything .", "negative")),
    "trec": (500, 5452, ("How far is it from Denver to Aspen ?", "NUM")),
    "agnews": (7600, None, ("Fears for T N pension after talks Unions representing workers at Turner Newall say they "
                            "are 'disappointed' after talks with stricken parent firm Federal Mogul.", "Business")),
    "ethos": (998, None, ("You should know women's sports are a joke", "hate")),
}


# Small copies in each dataset's real format: a label code, separators, CSV quoting ("" inside
# a quoted field, a delimiter inside quotes), backslashes for line breaks, fractional scores.
SMALL = {
    "sst2": {
        "stsa.binary.train": "1 a gorgeous , witty film .\n0 no movement , no yuks .\n1 fine .\n0 dull .\n1 warm .\n0 flat .\n",
        "stsa.binary.test": "0 it 's a bore .\n1 a   joy from start to finish .\n",
    },
    "trec": {
        "train.txt": "".join(f"{c}:x What is {c.lower()} number {i} ?\n" for c in SOURCES["trec"].classes for i in range(3)),
        "test.txt": "NUM:dist How far is it from Denver to Aspen ?\nLOC:city What city has the zip code 35824 ?\n"
                    "DESC:def What is a fjord ?\nHUM:ind Who killed Gandhi ?\nENTY:animal What bird flies highest ?\n"
                    "ABBR:exp What does NASA stand for ?\n",
    },
    "agnews": {
        "test.csv": "Class Index,Title,Description\n"
                    + "".join(f'{c},"Title, {c}{i}","He said ""hi {c}{i}"", then\\left."\n' for c in "1234" for i in range(3)),
    },
    "ethos": {
        "Ethos_Dataset_Binary.csv": "comment;isHate\n" + "".join(f'"a; ""quoted"" {i}";{s}\n' for i, s in
                                                                  enumerate(["1.0", "0.5", "0.6666666667", "0.0", "0.1", "0.4999"])),
    },
}


@pytest.fixture(scope="module")
def small_copies(tmp_path_factory):
    root = tmp_path_factory.mktemp("datasets")
    for name, files in SMALL.items():
        (root / name).mkdir()
        for file, text in files.items():
            (root / name / file).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def own_data(monkeypatch):
    monkeypatch.setenv("ICL_OWN_DATA", "1")  # small copies of our own, on purpose


def test_small_copies_parse_in_each_format(small_copies, own_data):
    with pytest.warns(UserWarning, match=r"holds \d+ examples, not the standard"):
        got = {name: ds.load_sentences(name, small_copies) for name in SOURCES}
    assert [(e.text, e.label) for e in got["sst2"].test] == [("it 's a bore .", "negative"), ("a joy from start to finish .", "positive")]
    assert [e.label for e in got["sst2"].train] == ["positive", "negative"] * 3
    assert [e.label for e in got["trec"].test] == ["NUM", "LOC", "DESC", "HUM", "ENTY", "ABBR"]
    assert got["trec"].test[0].text == "How far is it from Denver to Aspen ?" and len(got["trec"].train) == 18
    assert got["agnews"].train is None and [e.label for e in got["agnews"].test[::3]] == ["World", "Sports", "Business", "Sci/Tech"]
    assert got["agnews"].test[4].text == 'Title, 21 He said "hi 21", then\\left.'
    assert [e.label for e in got["ethos"].test] == ["hate", "hate", "hate", "not hate", "not hate", "not hate"]
    assert got["ethos"].test[0].text == 'a; "quoted" 0'


def test_small_copies_give_records(small_copies, own_data):
    with pytest.warns(UserWarning):
        records = ds.sentence_records("agnews", n=12, data_dir=small_copies)
    assert len({r.input for r in records}) == 12
    for r in records:
        assert r.input not in r.true_demos and r.true_class != r.false_class
        assert all(d.startswith(f"Title, {'1234'[SOURCES['agnews'].classes.index(r.true_class)]}") for d in r.true_demos)


def test_a_local_file_is_read_once_a_version(tmp_path, own_data, monkeypatch):
    """A dataset asked for again is not read again; a file rewritten (another size) is."""
    (tmp_path / "sst2").mkdir()
    for file, text in SMALL["sst2"].items():
        (tmp_path / "sst2" / file).write_text(text, encoding="utf-8")
    reads = Counter()
    parse = ds.parse_examples
    monkeypatch.setattr(ds, "parse_examples", lambda data, source, shown: reads.update([shown]) or parse(data, source, shown))
    with pytest.warns(UserWarning):
        first = ds.load_sentences("sst2", tmp_path)
        assert ds.load_sentences("sst2", tmp_path) == first and sorted(reads.values()) == [1, 1]
    test = tmp_path / "sst2" / SOURCES["sst2"].files["test"]
    test.write_text(SMALL["sst2"][test.name] + "1 a new line .\n", encoding="utf-8")
    with pytest.warns(UserWarning):
        assert ds.load_sentences("sst2", tmp_path).test[-1].text == "a new line ." and reads[str(test)] == 2


@full_copy
@pytest.mark.parametrize("name", list(SOURCES))
def test_local_datasets_load(name):
    data = ds.load_sentences(name, DATA_DIR)
    n_test, n_train, first = SIZES[name]
    assert (len(data.test), data.train and len(data.train)) == (n_test, n_train)
    assert (data.test[0].text, data.test[0].label) == first
    assert {e.label for e in data.test} == set(data.classes)


@full_copy
def test_class_counts():
    assert Counter(e.label for e in ds.load_sentences("ethos", DATA_DIR).test) == {"not hate": 565, "hate": 433}
    assert Counter(e.label for e in ds.load_sentences("agnews", DATA_DIR).test) == {c: 1900 for c in SOURCES["agnews"].classes}


@full_copy
@pytest.mark.parametrize("name", list(SOURCES))
def test_sentence_records(name):
    data = ds.load_sentences(name, DATA_DIR)
    pool = {ds.truncate(e.text): e.label for e in (data.train or data.test)}
    records = ds.sentence_records(name, n=40, data_dir=DATA_DIR)
    assert records == ds.sentence_records(name, n=40, data_dir=DATA_DIR)
    assert records != ds.sentence_records(name, n=40, seed=1, data_dir=DATA_DIR)
    for r in records:
        assert r.true_class != r.false_class and {r.true_class, r.false_class} <= set(data.classes)
        assert [pool[d] for d in r.true_demos] == [r.true_class] * 2
        assert [pool[d] for d in r.false_demos] == [r.false_class] * 2


def test_demonstrations_never_include_the_input(tmp_path, monkeypatch):
    # ETHOS has no train split; with 3 comments a class, the two true demonstrations must be the other two
    monkeypatch.setenv("ICL_OWN_DATA", "1")  # a copy of our own, on purpose
    (tmp_path / "ethos").mkdir()
    rows = [f"hateful {i};1.0" for i in range(3)] + [f"kind {i};0.0" for i in range(3)]
    (tmp_path / "ethos" / "Ethos_Dataset_Binary.csv").write_text("comment;isHate\n" + "\n".join(rows) + "\n")
    with pytest.warns(UserWarning, match=r"Ethos_Dataset_Binary.csv \(ethos test\) holds 6 examples, not the standard 998"):
        records = ds.sentence_records("ethos", n=6, data_dir=tmp_path)
    assert Counter(r.input for r in records) == {t: 1 for t in [f"hateful {i}" for i in range(3)] + [f"kind {i}" for i in range(3)]}
    for r in records:
        word = r.input.split()[0]
        assert sorted(r.true_demos) == sorted(f"{word} {i}" for i in range(3) if f"{word} {i}" != r.input)


@full_copy
def test_truncation_policy():
    text = "alpha beta gamma"
    cuts = [ds.truncate(text, n) for n in (16, 15, 10, 9, 5, 4)]
    assert cuts == [text, "alpha beta", "alpha beta", "alpha", "alpha", "alph"]
    records = ds.sentence_records("agnews", n=300, data_dir=DATA_DIR)
    texts = [t for r in records for t in (r.input, *r.true_demos, *r.false_demos)]
    assert max(map(len, texts)) <= ds.MAX_CHARS and sum(len(t) > 300 for t in texts) > 0


@full_copy
def test_every_prompt_fits_gpt2_context(gpt2_tokenizer):
    """The worst 4-demonstration prompt any dataset can give: five longest texts plus labels and separators."""
    longest = {}
    for name in SOURCES:
        data = ds.load_sentences(name, DATA_DIR)
        texts = [" " + ds.truncate(e.text) for e in data.test + (data.train or [])]
        longest[name] = max(map(len, gpt2_tokenizer(texts)["input_ids"]))
    assert longest == {"sst2": 76, "trec": 39, "agnews": 159, "ethos": 134}
    overhead = len(gpt2_tokenizer(" : foo" * 4 + " :")["input_ids"]) + 1  # +1: the first text has no leading space
    assert 5 * max(longest.values()) + overhead <= 1024


def test_missing_directory_is_refused(tmp_path, monkeypatch):
    message = f"^Data directory {tmp_path / 'nope'} does not exist: pass a directory holding sst2/, trec/, agnews/, ethos/"
    with pytest.raises(UsageError, match=message):
        ds.load_sentences("sst2", tmp_path / "nope")
    monkeypatch.setenv("ICL_DATA_DIR", str(tmp_path / "nope"))
    with pytest.raises(UsageError, match=message):
        ds.sentence_records("sst2", n=2)
    with pytest.raises(UsageError, match=rf"^Missing file {tmp_path / 'trec' / 'train.txt'}: copy the dataset there"):
        ds.load_sentences("trec", tmp_path)
    (tmp_path / "file").touch()
    monkeypatch.setenv("ICL_DATA_DIR", str(tmp_path / "file"))
    with pytest.raises(UsageError, match=f"^Data directory {tmp_path / 'file'} is a file, not a folder: pass a directory"):
        ds.sentence_records("sst2", n=2)


@pytest.mark.parametrize("name, content, line, what", [
    ("sst2", "1 fine film .\n2 what ?\n", 2, "expected 'LABEL TEXT' with LABEL 0 or 1"),
    ("trec", "NUM:dist How far ?\nhow far ?\n", 2, "expected 'COARSE:fine QUESTION'"),
    ("agnews", "Class,Title,Description\n", 1, "expected the header 'Class Index,Title,Description'"),
    ("agnews", "Class Index,Title,Description\n5,a,b\n", 2, "expected 'Class Index,Title,Description' with a class index 1-4"),
    ("ethos", "comment;isHate\nok;0.0\nbad;yes\n", 3, "expected 'comment;isHate' with isHate a number in \\[0, 1\\]"),
])
def test_malformed_file_is_refused(tmp_path, name, content, line, what):
    for file in SOURCES[name].files.values():
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / file).write_text(content)
    path = tmp_path / name / next(iter(SOURCES[name].files.values()))  # the first file read
    with pytest.raises(UsageError, match=rf"^{path}:{line}: malformed: {what}.*Replace the file with a fresh copy\.$"):
        ds.load_sentences(name, tmp_path)


def test_where_the_loader_looks(small_copies, tmp_path, monkeypatch):
    """The argument, else ICL_DATA_DIR, else the fetched copy (where it holds every dataset), else the hub (None)."""
    monkeypatch.delenv("ICL_DATA_DIR", raising=False)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    fetched = tmp_path / "cache" / "datasets"
    assert ds.fetched_dir() == fetched and ds.resolve_data_dir() is None
    for name in list(SOURCES)[:-1]:
        (fetched / name).mkdir(parents=True)
    assert ds.resolve_data_dir() is None  # a fetch cut short: not a data directory
    (fetched / "ethos").mkdir()
    assert ds.resolve_data_dir() == fetched
    monkeypatch.setenv("ICL_DATA_DIR", str(small_copies))
    assert ds.resolve_data_dir() == small_copies
    assert ds.resolve_data_dir(tmp_path) == tmp_path


@pytest.mark.parametrize("name", list(SMALL))
def test_a_byte_order_mark_is_no_text(name):
    """A copy saved by a Windows editor reads as the copy without the mark (SST-2's first label,
    AG News's header, would otherwise be malformed)."""
    file, text = next(iter(SMALL[name].items()))
    source = SOURCES[name]
    assert parse_examples(b"\xef\xbb\xbf" + text.encode(), source, file) == parse_examples(text.encode(), source, file)


def test_a_file_that_is_not_utf8(tmp_path):
    (tmp_path / "ethos").mkdir()
    (tmp_path / "ethos" / "Ethos_Dataset_Binary.csv").write_bytes("comment;isHate\ncaf\xe9;0.0\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"Ethos_Dataset_Binary\.csv is not UTF-8 text \(byte 18\)\. Replace the file with a fresh copy\.$"):
        ds.load_sentences("ethos", tmp_path)


@pytest.fixture
def no_local_copy(monkeypatch, tmp_path):
    """No data directory, nothing fetched; a hub that answers (each test brings its own stand-in `datasets`)."""
    monkeypatch.delenv("ICL_DATA_DIR", raising=False)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(hub, "reachable", lambda: True)


def test_hub_needs_the_datasets_package(no_local_copy, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails
    reason = "no local copy, and the `datasets` package (which loads them from the Hugging Face hub) is not installed"
    assert ds.unavailable() == reason
    with pytest.raises(UsageError, match=rf"^Cannot load trec: {re.escape(reason)}\. Download the datasets with `python -m icl_helpers data fetch`, "
                                         r"set ICL_DATA_DIR to a directory holding trec/"):
        ds.load_sentences("trec")


def test_unreachable_hub_is_said_at_once(no_local_copy, monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=None))  # never called
    monkeypatch.setattr(hub, "reachable", lambda: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert ds.unavailable() == "no local copy, and the Hugging Face hub cannot be reached (offline?)"
    with pytest.raises(UsageError, match=r"^Cannot load sst2: no local copy, and the Hugging Face hub cannot be reached \(offline\?\)\. "
                                         r"Download the datasets with `python -m icl_helpers data fetch`, set ICL_DATA_DIR .* "
                                         r"or HF_HUB_OFFLINE=1 to use a copy the hub cached earlier\.$"):
        ds.load_sentences("sst2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the user's choice: the hub's own cache decides
    assert ds.unavailable() is None


def test_a_local_copy_needs_no_hub(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "reachable", lambda: False)
    monkeypatch.setitem(sys.modules, "datasets", None)
    assert ds.unavailable(tmp_path) is None


def test_hub_rows_map_to_the_local_format(no_local_copy, monkeypatch):
    monkeypatch.setenv("ICL_OWN_DATA", "1")
    calls = []

    def load_dataset(**kwargs):
        calls.append(kwargs)
        return {"train": [{"text": "  a\ncomment ", "label": 1}, {"text": "fine", "label": 0}], "test": [{"text": "x", "label": 3}]}

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.warns(UserWarning, match=r"^iamollas/ethos \(ethos test\) holds 2 examples, not the standard 998"):
        ethos = ds.load_sentences("ethos")
    assert (ethos.test, ethos.train) == ([Example("a comment", "hate"), Example("fine", "not hate")], None)
    with pytest.warns(UserWarning):
        agnews = ds.load_sentences("agnews")
    assert (agnews.test, agnews.train) == ([Example("x", "Sci/Tech")], None)
    assert calls == [{"path": "iamollas/ethos", "name": "binary"}, {"path": "fancyzhx/ag_news"}]


def test_hub_failure_is_one_message(no_local_copy, monkeypatch):
    def load_dataset(**kwargs):
        raise ConnectionError("Couldn't reach the hub\nmore detail")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(UsageError, match=r"^Could not load sst2 from the Hugging Face hub \(SetFit/sst2: Couldn't reach the hub\); "
                                         r"download the datasets with `python -m icl_helpers data fetch`, or set ICL_DATA_DIR"):
        ds.load_sentences("sst2")


@full_copy
@pytest.mark.parametrize("name, cut", [
    ("sst2", lambda text: "".join(text.splitlines(True)[:1000])),  # at a line: 1,000 of 1,821 rows
    ("trec", lambda text: text[: text.index("\n", 5000) - 9]),  # mid-line: half a question, still well formed
    ("agnews", lambda text: text[: text.index('"', 20000) + 15]),  # inside a quoted field
])
def test_a_cut_copy_is_refused(tmp_path, name, cut):
    for split, file in SOURCES[name].files.items():
        (tmp_path / name).mkdir(exist_ok=True)
        text = (DATA_DIR / name / file).read_text(encoding="utf-8")
        (tmp_path / name / file).write_text(text if split == "train" else cut(text), encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{tmp_path / name}.* Replace (it|the file) with a fresh copy"):
        ds.load_sentences(name, tmp_path)


@full_copy
@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace("1 ", "0 ", 1), r"holds negative 913, positive 908 examples a class, not the standard 912, 909"),
    (lambda text: text.replace(" film ", " movie ", 1), r"holds the standard examples a class \(negative 912, positive 909\) "
                                                        r"but its bytes differ from the standard copy's \(SHA-256 "),
])
def test_an_edited_copy_is_refused(tmp_path, monkeypatch, edit, message):
    (tmp_path / "sst2").mkdir()
    for split, file in SOURCES["sst2"].files.items():
        text = (DATA_DIR / "sst2" / file).read_text(encoding="utf-8")
        (tmp_path / "sst2" / file).write_text(text if split == "train" else edit(text), encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{tmp_path}/sst2/stsa.binary.test \(sst2 test\) {message}.*: the copy is edited\. "
                                         "Replace it with a fresh copy, or set ICL_OWN_DATA=1"):
        ds.load_sentences("sst2", tmp_path)
    monkeypatch.setenv("ICL_OWN_DATA", "1")  # on purpose: a warning, and the copy as it is
    with pytest.warns(UserWarning, match=message):
        assert len(ds.load_sentences("sst2", tmp_path).test) == 1821


def test_asking_for_more_prompts_than_a_dataset_holds(small_copies, own_data):
    with pytest.raises(UsageError, match=r"^sentiment_number has 1,000 records: ask for at most 1,000 prompts, not 1,001\.$"):
        dataset_records("sentiment_number", 1001)
    with pytest.warns(UserWarning), pytest.raises(UsageError, match=r"^trec has 6 test inputs: ask for at most 6 prompts, not 7\.$"):
        dataset_records("trec", 7, data_dir=small_copies)


def test_sentence_sections_skip_with_one_line(no_local_copy, tmp_path, monkeypatch, capsys):
    assert ds.sentence_datasets(["sst2", "trec"], tmp_path) == ["sst2", "trec"]  # a local copy
    monkeypatch.setattr(hub, "reachable", lambda: False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert capsys.readouterr().out == ""
    assert ds.sentence_datasets(["sst2", "trec"]) == []
    out = capsys.readouterr().out
    assert out.startswith("Skipping sst2, trec: no local copy, and ") and out.endswith(
        "For the sections on them, run `python -m icl_helpers data fetch` on a machine with a network, set ICL_DATA_DIR "
        "to local copies (layout: data/README.md), or install `datasets`.\n") and out.count("\n") == 1
    assert ds.missing_note() == out.removeprefix("Skipping sst2, trec: ").strip()
    assert ds.missing_note(tmp_path) is None
