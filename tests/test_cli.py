"""The locate command line."""
from __future__ import annotations

import json

import pytest

from icl_helpers.cli import main


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


@pytest.mark.parametrize("argv, message", [
    (["locate", "--json", "x.json"], "No prompts given"),
    (["locate", "--prompts", "/nonexistent.txt", "--json", "x.json"], "does not exist"),
])
def test_bad_input_is_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bundled_example_predicts_foo(tmp_path):
    out = tmp_path / "out.json"
    assert main(["locate", "--model", "smollm2-135m", "--prompt",
                 "love : bar like : bar eight : foo two : foo one :", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["predictions"] == [" foo"]
    assert all(layer >= 15 for layer, _ in report["top_heads"][:10])
