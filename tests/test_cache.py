"""The results cache has one door: `cache.key` builds every key, from everything a result depends on
(changed only on purpose, so the cache on disk stays found), and studies ask the cache for results, never
for paths (that the core imports no cache is a layout rule: `test_layout.py`)."""
from __future__ import annotations

import json
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from icl_helpers import ICLModel
from icl_helpers import cache as results_cache
from icl_helpers.data.setting import MAIN
from icl_helpers.studies import ablation, biases, function_vectors, head_types, in_context_heads, mrr
from icl_helpers.studies.accuracy import prompt_accuracy
from icl_helpers.studies.runner import prompt_set, prompt_set_from_texts
from icl_helpers.verdicts import findings
from tests.conftest import MIXED_TEXTS, exact, small_model, vocab_tokenizer
from tests.test_layout import PACKAGE, imports

DOOR = {"stored", "stored_accuracies", "stored_json", "stored_together", "stored_parts", "stored_accuracy_parts", "forget",
        "prompts_hash", "source_hash"}


class Weights:
    """What a key reads of the model's module: its dtype (and the vocabulary size random sequences draw from)."""

    dtype = torch.float32

    def get_input_embeddings(self) -> SimpleNamespace:
        return SimpleNamespace(weight=torch.empty(50257, 0))


class Bundled:
    """The bundled model as the keys see it: its name, its weights' fingerprint (smollm2-135m's), its dtype."""

    name, model, arch = "smollm2-135m", Weights(), SimpleNamespace(n_layers=30, n_heads=9)
    tokenizer = vocab_tokenizer("gpt2")

    def fingerprint(self) -> str:
        return "8bb27936ee8b66ef"

    @contextmanager
    def held(self):
        yield self.fingerprint()


class Keyed(Exception):
    """Raised with an entry's file name where a study asks the cache for it."""


M, HEADS = Bundled(), [(3, 1), (5, 2)]
PS = prompt_set(M, "sentiment_number", "balanced", 4)
EVIDENCE = SimpleNamespace(m=M, n=12, sentence_n=8, seed=0, given=[], sentence=["sst2", "trec", "agnews"], setting=MAIN)


def replace_evidence(**changes: object) -> SimpleNamespace:
    """The report's evidence with some of its values changed."""
    return SimpleNamespace(**{**vars(EVIDENCE), **changes})


OURS = "smollm2-135m__weights=8bb27936ee8b66ef__dtype=float32"
# Each study's first key, as `cache.key` builds it, for the bundled model: a key changed by accident fails here
# (the entries on disk would be lost, or read under the wrong inputs). One changed on purpose is written here anew.
BEFORE = {
    "located": (lambda: in_context_heads.located(M, PS),
                f"locate__model={OURS}__dataset=sentiment_number__variant=balanced__n=4__seed=0__prompts=e7052f086fc8.pt"),
    "label_ranks": (lambda: mrr.label_ranks(M, PS, HEADS),
                    f"ranks__model={OURS}__dataset=sentiment_number__variant=balanced__n=4__seed=0__prompts=e7052f086fc8"
                    "__heads=4c0287079eff.pt"),
    "function_vector_scores": (lambda: function_vectors.function_vector_scores(M, PS),  # a key too long: cut and hashed
                               f"function-vectors__model={OURS}__dataset=sentiment_number__variant=balanced__n=4__seed=0"
                               "__prompts=e7052f086fc8__cells=b1e52b3d1dfd___c2f531409fe5d47c.pt"),
    "induction_scores": (lambda: head_types.induction_scores(M, 2, 5),
                         f"repeated-sequences__model={OURS}__n=2__T=10__ids=08f328f689ab.pt"),
    "majority_bias": (lambda: biases.majority_bias(M, MAIN.records("sentiment_number", 8, 0), HEADS),
                      f"majority-bias__model={OURS}__n=8__prompts=7f5b73a8ce71__heads=4c0287079eff.pt"),
    "causal_check": (lambda: ablation.causal_check(M, ["sentiment_number"], 8, given=HEADS),
                     f"causal-check__model={OURS}__n=4__prompts=233671fdf5b4__heads=4c0287079eff__n_random=9246e824773f"
                     "__seed=a37bbbb0764c__ablation=cc89__4905f37a85bc2432.pt"),  # its plain pass: k = 0
    "finding": (lambda: findings.kept_finding("fig2", EVIDENCE),
                f"finding__model={OURS}__claim=fig2__n=12__sentence_n=8__seed=0__heads=ce6558960ff0__data=61d65f30ed1f"
                "__code=0123456789ab.json"),
    "finding in another setting": (
        lambda: findings.kept_finding("table2", replace_evidence(given=HEADS, setting=replace(MAIN, heads=5))),
        f"finding__model={OURS}__claim=table2__n=12__sentence_n=8__seed=0__heads=4c0287079eff__data=61d65f30ed1f"
        "__setting=0c693e89d51f__code=0123456789ab.json"),
}


@pytest.mark.parametrize("study", BEFORE)
def test_every_study_keys_its_result_as_before(study, monkeypatch):
    def asked(path: Path, compute, form):
        raise Keyed(path.name)
    monkeypatch.setattr(results_cache, "cached_as", asked)  # where every entry is read or written
    monkeypatch.setattr(findings, "CODE", "0123456789ab")
    ask, name = BEFORE[study]
    with pytest.raises(Keyed) as got:
        ask()
    assert str(got.value) == name


def test_studies_ask_the_cache_for_results_never_for_paths():
    """Outside `cache.py`, the package takes from the cache only its door: results by kind, model and
    inputs, and the hashes a key's values may be (no file, no key, no raw read or write, not the module whole).
    Its entries on disk (`entries.py`) only `cache.py` reads or writes."""
    taken, whole, entries = set(), [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        for module, names in imports(path, PACKAGE):
            if path.name != "cache.py" and module == "icl_helpers.cache":
                taken |= set(names)
            if (module, names) == ("icl_helpers.cache", []) or (module == "icl_helpers" and "cache" in names):
                whole.append(str(path.relative_to(PACKAGE)))
            reads_entries = module == "icl_helpers.entries" or (module == "icl_helpers" and "entries" in names)
            if path.name != "cache.py" and reads_entries:
                entries.append(str(path.relative_to(PACKAGE)))
    assert whole == [] and entries == [] and taken <= DOOR
    assert {"stored", "stored_accuracies", "stored_json", "forget"} <= taken


def _changed_prompt(ps, **changes: object):
    """ps with its first prompt's fields changed (its text kept unless told)."""
    return replace(ps, prompts=[replace(ps.prompts[0], **changes), *ps.prompts[1:]])


def test_a_prompt_sets_key_holds_everything_its_result_depends_on():
    """A prompt set's key changes with each thing a result depends on, changed alone: a text, a
    label's or demonstration's span, which label is true, the label words, the separator and the
    directions; the same prompts give the same key. Texts are hashed as a list, never joined: the
    two lists a join of \\x00 makes alike get two keys."""
    base = prompt_set_from_texts(M, MIXED_TEXTS)
    first = base.prompts[0]
    start, end = first.labels[0]
    changed = {
        "a text": prompt_set_from_texts(M, [MIXED_TEXTS[0].replace("love", "hate"), *MIXED_TEXTS[1:]]),
        "which label is true": prompt_set_from_texts(M, MIXED_TEXTS, labels=("bar", "foo")),
        "one label true": _changed_prompt(base, is_true=(not first.is_true[0], *first.is_true[1:])),
        "a label's span": _changed_prompt(base, labels=((start + 1, end), *first.labels[1:])),
        "a demonstration's span": _changed_prompt(base, demos=((1, first.demos[0][1]), *first.demos[1:])),
        "the label words": _changed_prompt(base, true_label="baz"),
        "the separator": _changed_prompt(base, sep=" :: "),
        "the directions": replace(base, directions=["sentiment/number"] * len(base)),
    }
    names = {what: results_cache.key("locate", M, ps).name for what, ps in changed.items()}
    want = results_cache.key("locate", M, base).name
    assert want == results_cache.key("locate", M, prompt_set_from_texts(M, list(MIXED_TEXTS))).name
    assert want not in names.values() and len(set(names.values())) == len(names), names
    a, b, c = "love : bar one", "two : foo", "three :"
    assert results_cache.prompts_hash([a + "\x00" + b, c]) != results_cache.prompts_hash([a, b + "\x00" + c])


_SCORE = """
import json, sys
from icl_helpers import load_model
from icl_helpers.studies.accuracy import prompt_accuracy
from icl_helpers.studies.runner import prompt_set_from_texts
m = load_model(sys.argv[1], device="cpu")
ps = prompt_set_from_texts(m, json.loads(sys.argv[2]), labels=("foo", "bar"))
print(json.dumps(prompt_accuracy(m, ps).true_logit.tolist()))
"""


def test_the_same_texts_with_the_other_label_true_are_scored_afresh_in_another_process(gpt2_tokenizer, tmp_path,
                                                                                      monkeypatch):
    """Process 1 scores prompts with foo true and stores them; this process, on the same cache, scores the
    same texts with bar true and gets a fresh cache's numbers, bit for bit (the same computation): the
    true and false logits swapped, not process 1's."""
    saved = tmp_path / "model"
    ICLModel(small_model("gpt2").cpu(), gpt2_tokenizer).model.save_pretrained(saved)
    gpt2_tokenizer.save_pretrained(saved)
    env = {"ICL_HELPERS_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    run = subprocess.run([sys.executable, "-c", _SCORE, str(saved), json.dumps(MIXED_TEXTS)], env=env,
                         capture_output=True, text=True, check=True)
    foo_true = torch.tensor(json.loads(run.stdout.splitlines()[-1]))
    m = ICLModel(small_model("gpt2").cpu(), gpt2_tokenizer, name=str(saved))
    swapped = prompt_set_from_texts(m, MIXED_TEXTS, labels=("bar", "foo"))
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))
    got = prompt_accuracy(m, swapped)
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "fresh"))
    want = prompt_accuracy(m, swapped)
    exact(got.true_logit, want.true_logit)
    exact(got.false_logit, foo_true)
    assert (got.true_logit - foo_true).abs().max() > 1e-3  # process 1 did store other numbers
