"""Progress bars: shown as a step starts, removed when it ends, off on request or where
TQDM_DISABLE=1 (the main job)."""
import io

from icl_helpers.progress import progress_bar


def test_bars_show_at_once_leave_nothing_and_obey_tqdm_disable(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    bar = progress_bar(3, "locate")
    assert (bar.delay, bar.leave, bar.disable, bar.desc, bar.total) == (0, False, False, "locate", 3)
    bar.close()
    assert progress_bar(3, "locate", enabled=False).disable
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress_bar(3, "locate").disable


def test_a_one_step_bar_names_its_step_before_the_step_ends(monkeypatch):
    """A step of one batch: the bar's text is out before the update that ends it."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    bar = progress_bar(1, "locate sst2")
    assert "locate sst2" in out.getvalue() and "0/1" in out.getvalue()
    bar.update()
    bar.close()
