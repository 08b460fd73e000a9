"""Progress bars: shown after a delay, off on request or where TQDM_DISABLE=1 (the main job)."""
from icl_helpers.progress import DELAY, progress_bar


def test_bars_wait_and_obey_tqdm_disable(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    bar = progress_bar(3, "locate")
    assert (bar.delay, bar.disable, bar.desc, bar.total) == (DELAY, False, "locate", 3)
    bar.close()
    assert progress_bar(3, "locate", enabled=False).disable
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert progress_bar(3, "locate").disable
