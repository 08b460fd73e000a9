"""The plugin that records which tests read the data (tests/data_use.py), on reads made by hand."""
import os
import subprocess
import sys
from types import SimpleNamespace

from tests.data_use import DataUse


def test_a_read_under_the_data_marks_the_test_its_file_or_every_test(tmp_path):
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    (data / "f").write_text("x")
    use = DataUse(tmp_path / "log", [data])
    (data / "f").read_text()  # no test running
    use.test = SimpleNamespace(nodeid="tests/test_x.py::test_a[1]")
    elsewhere.write_text("y")
    subprocess.run([sys.executable, "-m", "pip", "--version"], env={**os.environ, "ICL_DATA_DIR": str(data)},
                   check=True, capture_output=True)  # pip: the tokenizers' download, which reads no data
    assert use.read == set()
    (data / "f").read_text()
    assert use.read == {"tests/test_x.py::test_a[1]"}
    use.scopes = ["module", "function"]  # in a module fixture's set-up
    os.listdir(data)
    assert use.read == {"tests/test_x.py::test_a[1]", "tests/test_x.py"}
    use.scopes, use.test = [], SimpleNamespace(nodeid="tests/test_y.py::test_b")
    subprocess.run([sys.executable, "-c", "pass"], env={**os.environ, "ICL_DATA_DIR": str(data / "f")}, check=True)
    assert "tests/test_y.py::test_b" in use.read
    use.scopes = ["session"]
    os.scandir(data).close()
    use.pytest_sessionfinish(None)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    log = tmp_path / (f"log.{worker}" if worker else "log")
    assert log.read_text().splitlines() == ["tests", "tests/test_x.py", "tests/test_x.py::test_a[1]", "tests/test_y.py::test_b"]
