"""The results cache has one door: `cache.key` builds every key, as the keys were built before it
(the cache on disk stays found), and studies ask the cache for results, never for paths (that the
core imports no cache is a layout rule: `test_layout.py`)."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from icl_helpers import cache as results_cache
from icl_helpers.data.setting import MAIN
from icl_helpers.studies import ablation, biases, function_vectors, head_types, in_context_heads, mrr
from icl_helpers.studies.runner import prompt_set
from icl_helpers.verdicts import findings
from tests.conftest import vocab_tokenizer
from tests.test_layout import PACKAGE, imports

DOOR = {"stored", "stored_accuracies", "stored_json", "stored_together", "stored_parts", "forget", "prompts_hash", "source_hash"}


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
# Each study's first key, as the code before `cache.key` built it (studies/runner.py's result_file and
# prompts_file, head_types' own key and the finding's), for the bundled model: a change of key fails here.
BEFORE = {
    "located": (lambda: in_context_heads.located(M, PS),
                f"locate__model={OURS}__dataset=sentiment_number__variant=balanced__n=4__seed=0__prompts=4d9803c3b202.pt"),
    "label_ranks": (lambda: mrr.label_ranks(M, PS, HEADS),
                    f"ranks__model={OURS}__dataset=sentiment_number__variant=balanced__n=4__seed=0__prompts=4d9803c3b202"
                    "__heads=942e7b9da46c.pt"),
    "function_vector_scores": (lambda: function_vectors.function_vector_scores(M, PS),  # a key too long: cut and hashed
                               f"function-vectors__model={OURS}__dataset=sentiment_number__variant=balanced__n=4__seed=0"
                               "__prompts=4d9803c3b202__cells=ca05abdc35d2___b7915d9817b31e60.pt"),
    "induction_scores": (lambda: head_types.induction_scores(M, 2, 5),
                         f"repeated-sequences__model={OURS}__n=2__T=10__ids=c075c0513b21.pt"),
    "majority_bias": (lambda: biases.majority_bias(M, MAIN.records("sentiment_number", 8, 0), HEADS),
                      f"majority-bias__model={OURS}__n=8__prompts=1bce68ec885f__heads=942e7b9da46c.pt"),
    "causal_check": (lambda: ablation.causal_check(M, ["sentiment_number"], 8, given=HEADS),
                     f"causal-check__model={OURS}__n=4__prompts=a05ce019f79e__heads=942e7b9da46c__ks=038966de9f6b"
                     "__n_random=f5ca38f748a1__seed=5feceb66ff__a7ebd815f27fcec6.pt"),
    "finding": (lambda: findings.kept_finding("fig2", EVIDENCE),
                f"finding__model={OURS}__claim=fig2__n=12__sentence_n=8__seed=0__heads=4f53cda18c2b__data=13cfaaecaa3b"
                "__code=0123456789ab.json"),
    "finding in another setting": (
        lambda: findings.kept_finding("table2", replace_evidence(given=HEADS, setting=replace(MAIN, heads=5))),
        f"finding__model={OURS}__claim=table2__n=12__sentence_n=8__seed=0__heads=942e7b9da46c__data=13cfaaecaa3b"
        "__setting=b6b5e92a7473__code=0123456789ab.json"),
}


@pytest.mark.parametrize("study", BEFORE)
def test_every_study_keys_its_result_as_before(study, monkeypatch):
    def asked(path: Path, compute, form):
        raise Keyed(path.name)
    monkeypatch.setattr(results_cache, "_cached", asked)  # where every entry is read or written
    monkeypatch.setattr(findings, "CODE", "0123456789ab")
    ask, name = BEFORE[study]
    with pytest.raises(Keyed) as got:
        ask()
    assert str(got.value) == name


def test_studies_ask_the_cache_for_results_never_for_paths():
    """Outside `cache.py`, the package takes from the cache only its door: results by kind, model and
    inputs, and the hashes a key's values may be (no file, no key, no raw read or write, not the module whole)."""
    taken, whole = set(), []
    for path in sorted(PACKAGE.rglob("*.py")):
        for module, names in imports(path, PACKAGE):
            if path.name != "cache.py" and module == "icl_helpers.cache":
                taken |= set(names)
            if (module, names) == ("icl_helpers.cache", []) or (module == "icl_helpers" and "cache" in names):
                whole.append(str(path.relative_to(PACKAGE)))
    assert whole == [] and taken <= DOOR and {"stored", "stored_accuracies", "stored_json", "forget"} <= taken
