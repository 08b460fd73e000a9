"""Prompt records and the one builder: every variant against METHOD.md section 1's strings."""
import pytest

from icl_helpers import UsageError
from icl_helpers.data.prompts import VARIANTS, Record, Variant, build_prompt, build_prompts, parse_prompt
from icl_helpers.errors import clean_text

RECORD = Record("one", "number", "sentiment", ("eight", "two"), ("love", "like"))
BALANCED = "love : bar like : bar eight : foo two : foo one :"


@pytest.mark.parametrize("written, read", [
    ("\ufeff" + BALANCED, BALANCED),  # a byte-order mark (Windows Notepad)
    (BALANCED + "\r", BALANCED),  # a CRLF line end's "\r" (a shell script saved on Windows)
    ("\u200b\u200c\u200d\u2060\u00ad" + BALANCED + "\u200e", BALANCED),  # zero-width and other format characters
    (" \u200b love :\ufeff \r", "  love : "),  # among spaces: the spaces are kept
    ("love\r\nbar one\r\n", "love\nbar one\n"),  # a newline separator written on Windows
    ("\ufeff\r", ""),  # nothing to see: empty, which the prompt checks refuse
    ("man\u200dwoman : foo x :", "man\u200dwoman : foo x :"),  # inside the text, as written (a joined emoji needs it)
])
def test_clean_text_drops_what_no_reader_sees_at_either_end(written, read):
    assert clean_text(written) == read


@pytest.mark.parametrize("variant, text", [
    ("balanced", BALANCED),
    ("imbalanced", "love : bar like : bar eight : foo one :"),  # METHOD.md 5.1
    ("reordered", "eight : foo two : foo love : bar like : bar one :"),  # METHOD.md 5.2
    ("swapped", "love : foo like : foo eight : bar two : bar one :"),
])
def test_variants_match_method(variant, text):
    assert build_prompt(RECORD, VARIANTS[variant]).text == text


@pytest.mark.parametrize("order, text", [
    ("ftft", "love : bar eight : foo like : bar two : foo one :"),
    ("fttf", "love : bar eight : foo two : foo like : bar one :"),
    ("tfft", "eight : foo love : bar like : bar two : foo one :"),
    ("tftf", "eight : foo love : bar two : foo like : bar one :"),
])
def test_the_recency_orders_hold_the_same_demonstrations(order, text):
    assert build_prompt(RECORD, VARIANTS[f"order-{order}"]).text == text
    assert build_prompt(RECORD, Variant(order=order, imbalanced=True)).text == text.replace(" two : foo", "")


def test_other_parameters_compose():
    assert build_prompt(RECORD, Variant(demonstrations=2)).text == "love : bar eight : foo one :"
    assert build_prompt(RECORD, Variant(labels=("positive", "negative"))).text == (
        "love : negative like : negative eight : positive two : positive one :")
    assert build_prompt(RECORD, Variant(imbalanced=True, order="ttff")).text == "eight : foo love : bar like : bar one :"
    wide = Record("x", "a", "b", ("t1", "t2", "t3"), ("f1", "f2", "f3"))
    assert build_prompt(wide, Variant(demonstrations=6)).text == "f1 : bar f2 : bar f3 : bar t1 : foo t2 : foo t3 : foo x :"
    assert [p.text for p in build_prompts([RECORD, wide])] == [BALANCED, "f1 : bar f2 : bar t1 : foo t2 : foo x :"]


def test_spans_mark_demonstrations_and_labels():
    for variant in VARIANTS.values():
        p = build_prompt(RECORD, variant)
        demos = [p.text[s:e] for s, e in p.demos]
        labels = [p.text[s:e] for s, e in p.labels]
        truth = [d in RECORD.true_demos for d in demos]
        assert list(p.is_true) == truth
        assert labels == [variant.labels[0] if t else variant.labels[1] for t in truth]
    p = build_prompt(RECORD)
    assert p.demos == ((0, 4), (11, 15), (22, 27), (34, 37))
    assert p.labels == ((7, 10), (18, 21), (30, 33), (40, 43))
    assert (p.true_label, p.false_label) == ("foo", "bar")


def test_bad_variants_are_refused():
    with pytest.raises(UsageError, match=r"^The demonstrations of a prompt must be an even number of at least 2, not 3\.$"):
        Variant(demonstrations=3)
    with pytest.raises(UsageError, match=r"^Labels must be two different non-empty words, not \('foo', 'foo'\)\.$"):
        Variant(labels=("foo", "foo"))
    with pytest.raises(UsageError, match="not \\(' ', 'bar'\\)"):
        Variant(labels=(" ", "bar"))
    with pytest.raises(UsageError, match=r"^A demonstration order is 2 't' \(true\) and 2 'f' \(false\) letters for 4 demonstrations, not 'tttf'\.$"):
        Variant(order="tttf")
    with pytest.raises(UsageError, match=r"^6 demonstrations need 3 of each class; this record has 2 true and 2 false ones: use fewer or regenerate"):
        build_prompt(RECORD, Variant(demonstrations=6))


def test_record_json_round_trip():
    line = RECORD.to_json()
    assert line == ('{"input": "one", "true_class": "number", "false_class": "sentiment", '
                    '"true_demos": ["eight", "two"], "false_demos": ["love", "like"]}')
    assert Record.from_json(line) == RECORD
    assert RECORD.direction == "number/sentiment"
    for bad in ('{"input": "one"}', '{"input": "one", "true_class": "a", "false_class": "b", "true_demos": "xy", "false_demos": []}',
                '{"input": "", "true_class": "a", "false_class": "b", "true_demos": [], "false_demos": []}', "[]"):
        with pytest.raises(ValueError):
            Record.from_json(bad)


def test_parse_recovers_built_prompts():
    for variant in VARIANTS.values():
        built = build_prompt(RECORD, variant)
        assert parse_prompt(built.text, variant.labels) == built
    multi = parse_prompt("New Zealand : bar it was great : foo Peru :")
    assert multi.demos == ((0, 11), (18, 30)) and multi.is_true == (False, True)


def test_parse_refuses_a_prompt_without_labels():
    with pytest.raises(UsageError, match=r"^No label 'foo' or 'bar' in the prompt 'love : good one :': write it as"):
        parse_prompt("love : good one :")
    with pytest.raises(UsageError, match=r"must end with ' :' after the input\.$"):
        parse_prompt("love : bar one")
