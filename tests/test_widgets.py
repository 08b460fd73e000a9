"""Widget callbacks: moving a control redraws for the chosen layer, head and prompt."""
from __future__ import annotations

import base64
import io

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure
from PIL import Image

from icl_helpers import ICLModel
from icl_helpers.core.locate import LocateResult
from icl_helpers.studies import label_attention, projection, runner
from icl_helpers.studies.label_attention import LabelAttention
from icl_helpers.viz import figures, widgets
from tests.conftest import close, exact, small_model

L, H, N = 4, 3, 10


@pytest.fixture(scope="module")
def att() -> LabelAttention:
    g = torch.Generator().manual_seed(0)
    return LabelAttention(torch.rand(N, L, H, generator=g), torch.rand(N, L, H, generator=g) / 2, torch.zeros(N, dtype=torch.long),
                          torch.rand(N, L, H, 4, generator=g))


@pytest.fixture(scope="module")
def gpt2(gpt2_tokenizer) -> ICLModel:
    return ICLModel(small_model("gpt2"), gpt2_tokenizer, name="gpt2")


def title(fig: Figure) -> str:
    return " ".join([fig.axes[0].get_title(), fig.get_suptitle()])


def test_explorer_calls_draw_with_the_controls_values():
    calls = []
    texts = [f"text {i}" for i in range(N)]
    ex = widgets.any_head(lambda **kw: calls.append(kw) or len(calls), n_layers=L, n_heads=H, start=(1, 2), texts=texts)
    assert ex.label.value == "prompt 0: text 0"
    ex.controls["prompt"].value = 7
    assert calls == [dict(layer=1, head=2, prompt=0), dict(layer=1, head=2, prompt=7)]
    assert ex.shown == 2 and ex.label.value == "prompt 7: text 7"


def png(bundle: dict) -> bytes:
    return base64.b64decode(bundle["image/png"])


def test_an_explorer_carries_one_static_copy_of_its_view(att):
    """The bundle holds the live widget and a PNG of the current figure: front ends without
    a kernel show the PNG; the output area holds the same single view, set without any
    display message (so a cell's own outputs hold no second figure)."""
    ex = widgets.attention_explorer(att, start=(0, 0), title="toy")
    bundle = ex._repr_mimebundle_()
    assert set(bundle) == {"application/vnd.jupyter.widget-view+json", "image/png", "text/plain"}
    assert png(bundle).startswith(b"\x89PNG") and bundle["text/plain"].startswith("Explorer (layer 0, head 0): run the notebook")
    assert len(ex.out.outputs) == 1 and png(ex.out.outputs[0]["data"]) == png(widgets.static_copy(ex.shown))
    ex.controls["layer"].value = 3
    moved = ex._repr_mimebundle_()
    assert png(moved) != png(bundle) and len(ex.out.outputs) == 1
    assert png(ex.out.outputs[0]["data"]) == png(widgets.static_copy(ex.shown))


def test_a_static_copy_says_under_it_that_it_is_interactive(att):
    """The copy a repository host shows carries a caption under the figure (the live view has none)."""
    ex = widgets.attention_explorer(att, start=(0, 2), title="toy")
    note = "Interactive when the notebook runs: move its layer and head controls (here: layer 0, head 2)."
    captioned, plain = (Image.open(io.BytesIO(png(b))) for b in (ex._repr_mimebundle_(), widgets.static_copy(ex.shown)))
    assert captioned.width >= plain.width and captioned.height > plain.height + 10
    assert note in widgets.static_copy(pd.DataFrame({"a": [1]}), note)["text/html"]


def test_attention_explorer_redraws_for_the_chosen_head(att):
    ex = widgets.attention_explorer(att, start=(0, 0), title="toy")
    assert "head 0-0" in title(ex.shown)
    ex.controls["layer"].value, ex.controls["head"].value = 3, 2
    assert "head 3-2" in title(ex.shown)
    legend = [t.get_text() for t in ex.shown.axes[0].get_legend().get_texts()]
    assert f"{att.true[:, 3, 2].mean():.3f}" in legend[0] and f"{att.false[:, 3, 2].mean():.3f}" in legend[1]


def test_variant_explorer_redraws_for_the_chosen_head(att):
    variants = {"balanced": att, "imbalanced": LabelAttention(att.false, att.true, att.predictions, att.per_label)}
    ex = widgets.variant_explorer(variants, start=(0, 0), title="toy")
    ex.controls["layer"].value = 2
    ax_true = ex.shown.axes[0]
    assert [t.get_text() for t in ax_true.get_xticklabels()] == ["2-0"]
    heights = sorted(p.get_height() for p in ax_true.patches if p.get_height() > 0)  # means taken by seaborn
    close(heights, sorted(float(v) for v in (att.true[:, 2, 0].mean(), att.false[:, 2, 0].mean())))


def test_rank_explorer_redraws_for_the_chosen_head():
    heads, random = [(1, 0), (2, 1)], [(1, 2), (2, 0)]
    ranks = torch.tensor([[[1.0, 2.0], [5.0, 6.0]]]).repeat(N, 1, 1)  # [N, S=2, D=2]
    ex = widgets.rank_explorer(heads, ranks, random, ranks * 100, "toy (N=10)")
    assert "head 1-0" in title(ex.shown)
    ex.controls["head"].value = (2, 1)
    assert "head 2-1" in title(ex.shown)
    assert [t.get_text() for t in ex.shown.axes[0].get_legend().get_texts()] == ["head 2-1", "random head 2-0"]


@pytest.fixture(scope="module")
def ps(gpt2) -> runner.PromptSet:
    return runner.prompt_set_from_texts(gpt2, ["love : bar like : bar eight : foo two : foo one :", "cat : foo dog :",
                                               "a long demonstration : bar fine : foo six :"])


def test_projection_explorer_shows_the_chosen_heads_table(gpt2, ps):
    proj = projection.projections(gpt2, ps)
    ex = widgets.projection_explorer(proj, start=(0, 0), title="gpt2, toy (N=3)", k=3)
    ex.controls["layer"].value, ex.controls["head"].value, ex.controls["prompt"].value = 2, 1, 1
    expected, shown = proj.table(1, (2, 1), k=3), ex.shown.data
    assert shown[["vector", "position"]].equals(expected[["vector", "position"]])
    assert shown["top tokens"].tolist() == ["  ".join(map(figures.visible, top)) for top in expected["top tokens"]]
    assert shown["token"].tolist() == ["␣foo", "␣foo", "␣:"]
    assert ex.label.value == "prompt 1: cat : foo dog :"
    bundle = ex._repr_mimebundle_()
    assert "gpt2, toy (N=3), prompt 1, head 2-1" in bundle["text/html"] and "␣foo" in bundle["text/html"]
    image = base64.b64decode(bundle["image/png"])  # the same table as an image, for front ends without HTML
    assert image.startswith(b"\x89PNG") and len(image) > 2000


def test_prompt_attention_explorer_draws_the_chosen_row(gpt2, ps):
    rows = label_attention.prompt_attention(gpt2, ps)
    ex = widgets.prompt_attention_explorer(rows, start=(0, 0), texts=ps.texts, title="gpt2, toy (N=3)")
    ex.controls["head"].value, ex.controls["prompt"].value = 3, 1
    assert "gpt2, toy (N=3), prompt 1: attention from the last position, head 0-3" in title(ex.shown)
    assert [t.get_text() for t in ex.shown.axes[0].get_xticklabels()] == ["cat", "␣:", "␣foo", "␣dog", "␣:"]
    bars = [p.get_height() for p in ex.shown.axes[0].patches]
    assert len(bars) == 5 + int((rows.true[1] | rows.false[1]).sum())  # "cat : foo dog :": a bar a token, a stub a label
    exact(torch.tensor(bars[:5], dtype=torch.float32), rows.pattern[1, 0, 3, :5])  # the values themselves, via float64
    assert all(h < 0 for h in bars[5:])  # the stubs lie under the axis, whatever the label's weight


def test_layer_explorer_redraws_for_the_chosen_prompt():
    g = torch.Generator().manual_seed(1)
    loc = LocateResult(torch.rand(N, L, H, generator=g), torch.rand(N, L, generator=g), torch.rand(N, L, generator=g),
                       torch.zeros(N, dtype=torch.long))
    ex = widgets.layer_explorer(loc, [f"text {i}" for i in range(N)], "toy")
    ex.controls["prompt"].value = 4
    assert "prompt 4" in title(ex.shown) and ex.label.value == "prompt 4: text 4"
    heights = [p.get_height() for p in ex.shown.axes[0].patches]
    exact(torch.tensor(heights, dtype=torch.float32), torch.cat([loc.attn[4], loc.ffn[4]]))  # the values, via float64
