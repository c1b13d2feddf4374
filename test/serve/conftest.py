"""Fixtures of the server's tests (docs/SERVING.md): the demo model compiled
once, and qserve started on 127.0.0.1 on a free port (the port read from its
"[qserve] ... on http://127.0.0.1:PORT" line), stopped with SIGTERM at the
end, which must exit 0. QCC_BIN_DIR names the build's bin/ (ctest sets it);
QCC_QSERVE, another qserve binary to test (the sanitizer build's)."""
import os
import pathlib
import re
import signal
import subprocess
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "austen"
BIN = pathlib.Path(os.environ.get("QCC_BIN_DIR", ROOT / "build" / "bin"))


def tool(name):
    # QCC_QSERVE: another qserve (scripts/sanitize.sh runs its ASan build here).
    override = os.environ.get("QCC_QSERVE") if name == "qserve" else None
    path = pathlib.Path(override) if override else BIN / name
    if not path.is_file():
        pytest.fail(f"{path} missing: build with scripts/build.sh, or set QCC_BIN_DIR")
    return path


class Server:
    """A running qserve: its base URL and its stderr so far."""

    def __init__(self, artifact, *flags, env=None):
        self.proc = subprocess.Popen(
            [str(tool("qserve")), str(artifact), "--port", "0", "--threads", "2",
             *map(str, flags)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env=None if env is None else {**os.environ, **env})
        self.log = []
        port = None
        for line in self.proc.stderr:
            self.log.append(line)
            m = re.search(r"on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            self.proc.wait(timeout=30)
            pytest.fail("qserve did not start:\n" + "".join(self.log))
        # Keep draining stderr so the server never blocks on a full pipe.
        self.drain = threading.Thread(target=lambda: self.log.extend(self.proc.stderr),
                                      daemon=True)
        self.drain.start()
        self.url = f"http://127.0.0.1:{port}"

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.drain.join(timeout=5)
        assert rc == 0, f"qserve exited {rc}:\n" + "".join(self.log)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("serve")


@pytest.fixture(scope="session")
def demo_artifact(workdir):
    """The demo model as float32 with a paged KV cache, CPU plan only."""
    out = workdir / "demo.qpkg"
    subprocess.run([str(tool("qcc")), str(DEMO / "model.onnx"), "--no-cuda",
                    "-o", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def server(demo_artifact):
    s = Server(demo_artifact, "--max-sequences", "16", "--max-context", "256")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def client(server):
    import openai
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0,
                      timeout=120)
    yield c
    c.close()  # no keep-alive connection left for the server to wait out


@pytest.fixture(scope="session")
def qrun_text(demo_artifact):
    """Greedy continuation of a prompt by `qrun --prompt` (the reference)."""
    def run(prompt, max_new_tokens):
        out = subprocess.run(
            [str(tool("qrun")), str(demo_artifact), "--backend=cpu", "--threads", "2",
             "--quiet", "--prompt", prompt, "--max-new-tokens", str(max_new_tokens)],
            check=True, capture_output=True, text=True).stdout
        assert out.startswith(prompt) and out.endswith("\n"), out
        return out[len(prompt):-1]
    return run
