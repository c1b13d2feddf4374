"""Fixtures of the Python package's tests (docs/PYTHON.md): the installed qcc
package (scripts/test.sh builds and installs it into .venv before ctest runs
this suite), the qrun binary to compare with (QCC_BIN_DIR, set by ctest), and
the demo model compiled once per session."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "austen"

try:
    import qcc
except ImportError as e:  # a failure, not a skip: the suite checks the wheel
    raise SystemExit(
        f"qcc is not installed in this Python ({e}): scripts/test.sh installs it "
        "(.venv/bin/pip install --no-build-isolation .)")


@pytest.fixture(scope="session")
def qrun():
    path = pathlib.Path(os.environ.get("QCC_BIN_DIR", ROOT / "build" / "bin")) / "qrun"
    if not path.is_file():
        pytest.fail(f"{path} missing: build with scripts/build.sh, or set QCC_BIN_DIR")
    def run(*args):
        return subprocess.run([str(path), *map(str, args)], check=True,
                              capture_output=True, text=True).stdout
    return run


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("qcc")


@pytest.fixture(scope="session")
def demo_float(workdir):
    """The demo model as float32 with a paged KV cache, CPU plan only."""
    out = workdir / "demo.qpkg"
    assert qcc.compile(DEMO / "model.onnx", out, cuda=False) == str(out)
    return out


@pytest.fixture(scope="session")
def session(demo_float):
    return qcc.Session(demo_float, backend="cpu", threads=2)
