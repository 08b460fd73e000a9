"""A task whose answer is known by construction: a two-layer GPT-2 wired by hand (`tests/wired.py`) learns it in
context through one head, so the report's numbers on it are known before it runs. Where the claim holds by
construction it must replicate; where the wiring rules it out (Fig. 8: the head reads the labels of the input's class,
however many), it must not; with the head's key removed, the model and Table 2 fall to chance."""
from __future__ import annotations

import json

import pytest
import torch

from icl_helpers.data.setting import Setting
from icl_helpers.data.tasks import add_task, read_task
from icl_helpers.studies import in_context_heads, runner
from icl_helpers.studies.accuracy import prompt_accuracy
from icl_helpers.verdicts import report
from tests.wired import IN_CONTEXT_HEAD, TWO_BACK, D, wired_model

CLASSES = {"animal": "cat dog cow hen fox owl bee ant rat bat horse bird".split(),
           "colour": "red blue green gray black white brown gold tan orange yellow silver".split()}
ONE_HEAD = Setting(heads=1)  # the model has 8 heads: each claim analyses its top one


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    path = tmp_path_factory.mktemp("task") / "kinds.jsonl"
    path.write_text("".join(json.dumps({"input": w, "class": c}) + "\n" for c, ws in CLASSES.items() for w in ws))
    return read_task(path)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ICL_HELPERS_CACHE", str(tmp_path / "cache"))


def test_the_wired_model_learns_the_task_through_its_one_in_context_head(gpt2_tokenizer, task, cache):
    """Every variant answered (top-1 the true label); the one head that writes a logit is located first, every other
    head's increase is 0."""
    m = wired_model(gpt2_tokenizer, CLASSES)
    name = add_task(task)
    for variant in ("balanced", "swapped", "imbalanced", "reordered"):
        acc = prompt_accuracy(m, runner.prompt_set(m, name, variant, 64))
        assert (acc.top1, acc.ranked) == (1.0, 1.0), variant
    located = in_context_heads.located(m, runner.prompt_set(m, name, "balanced", 64))
    assert located.top_heads(1) == [IN_CONTEXT_HEAD] and float(located.head_mean[IN_CONTEXT_HEAD]) > 1
    others = located.head_mean.clone()
    others[IN_CONTEXT_HEAD] = 0
    assert others.abs().max() < 1e-5


def test_the_report_on_it_judges_what_the_wiring_makes_true_and_false(gpt2_tokenizer, task, cache):
    """Table 2, Figs. 3-4 and 6 replicate (the head answers every prompt, sits in the deeper layer, attends to the true
    labels alone); Fig. 8 does not (the head's summed attention on the true labels stays 1 when one is dropped); the
    causal check takes top-1 from 100% to chance. The head's key turned round (it reads the other class's labels):
    top-1 0, and Table 2 fails."""
    m = wired_model(gpt2_tokenizer, CLASSES)
    found = {f.id: f for f in report(m, 64, 10, ids=["table2", "fig3_4", "fig6", "fig8", "causal_words"], task=task,
                                     setting=ONE_HEAD, announce=lambda step: None)}
    assert [found[id].verdict for id in ("table2", "fig3_4", "fig6")] == ["replicates"] * 3
    assert found["table2"].ours == 1.0 and found["fig6"].ours == pytest.approx(1.0, abs=1e-3)
    assert found["fig8"].verdict == "does not replicate" and found["fig8"].ours == pytest.approx(0.0, abs=1e-3)
    assert "top-1 100.0% plain" in found["causal_words"].why and 0.3 < found["causal_words"].ours < 0.7
    turned = wired_model(gpt2_tokenizer, CLASSES)
    with torch.no_grad():
        turned.model.transformer.h[1].attn.c_attn.weight[TWO_BACK, D] = -1.0  # the key: the other class
    (broken,) = report(turned, 64, 10, ids=["table2"], task=task, setting=ONE_HEAD, announce=lambda step: None)
    assert broken.verdict == "does not replicate" and broken.ours == 0.0
