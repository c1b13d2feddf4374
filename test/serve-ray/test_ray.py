"""qserve replicas under Ray Serve (deploy/ray/qserve_ray.py, docs/SERVING.md
"Beyond one machine"): two replicas of the demo model behind Ray Serve's HTTP
proxy on 127.0.0.1; the official `openai` client's requests are answered by
both replicas (each answer names its replica in `x-qcc-replica`), greedy text
is the same whichever replica served it and equals qserve's own answer, a
streamed answer passes through whole, and SIGTERM stops Ray and every qserve.
Runs in .venv-ray (ray[serve], scripts/setup.sh); QCC_BIN_DIR names bin/."""
import concurrent.futures
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import openai
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("QCC_BIN_DIR", ROOT / "build" / "bin"))
MODEL = "demo-ray"  # qserve names the model after the artifact's file
PROMPTS = ["It is a truth universally acknowledged", "Emma Woodhouse, handsome",
           "The family of Dashwood", "Sir Walter Elliot"]


def pids_serving(artifact):
    """Processes whose command line names the artifact (the qserve replicas)."""
    out = subprocess.run(["pgrep", "-f", str(artifact)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("ray") / "demo-ray.qpkg"
    subprocess.run([str(BIN / "qcc"), str(ROOT / "examples" / "austen" / "model.onnx"),
                    "--no-cuda", "-o", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def cluster(artifact):
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "deploy" / "ray" / "qserve_ray.py"),
         str(artifact), "--replicas", "2", "--port", "0", "--num-cpus", "2",
         "--cpus-per-replica", "1", "--qserve", str(BIN / "qserve"),
         "--", "--threads", "1", "--max-sequences", "8", "--max-context", "256"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    log, url = [], None
    deadline = time.monotonic() + 300
    for line in proc.stderr:
        log.append(line)
        m = re.search(r"\[qserve-ray\] 2 replicas on (http://\S+)", line)
        if m:
            url = m.group(1)
            break
        if time.monotonic() > deadline:
            break
    if url is None:
        proc.kill()
        pytest.fail("qserve_ray.py did not come up:\n" + "".join(log[-40:]))
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    yield url
    proc.send_signal(signal.SIGTERM)
    rc = proc.wait(timeout=120)
    assert rc == 0, "qserve_ray.py exited %d:\n%s" % (rc, "".join(log[-40:]))
    for _ in range(60):  # Ray stops its actors, which stop their qserve
        if not pids_serving(artifact):
            break
        time.sleep(1)
    assert not pids_serving(artifact), "a qserve replica outlived Ray Serve"


def complete(client, prompt):
    raw = client.completions.with_raw_response.create(
        model=MODEL, prompt=prompt, max_tokens=12, temperature=0)
    return raw.headers.get("x-qcc-replica"), raw.parse().choices[0].text


def test_requests_reach_both_replicas_with_the_same_text(cluster, artifact):
    client = openai.OpenAI(base_url=cluster + "/v1", api_key="none", timeout=120)
    jobs = [PROMPTS[i % len(PROMPTS)] for i in range(32)]
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda p: (p,) + complete(client, p), jobs))
    replicas = {r for _, r, _ in answers}
    assert None not in replicas, "an answer without x-qcc-replica"
    assert len(replicas) == 2, f"served by {replicas}, expected both replicas"
    by_prompt = {}
    for prompt, _, text in answers:
        by_prompt.setdefault(prompt, set()).add(text)
    for prompt, texts in by_prompt.items():
        assert len(texts) == 1, f"{prompt!r}: replicas disagree: {texts}"
    # The same as qrun's greedy text for that prompt (one process, no server).
    out = subprocess.run(
        [str(BIN / "qrun"), str(artifact), "--backend=cpu", "--threads", "1", "--quiet",
         "--prompt", PROMPTS[0], "--max-new-tokens", "12"],
        check=True, capture_output=True, text=True).stdout
    assert out.startswith(PROMPTS[0]) and out.endswith("\n"), out
    assert by_prompt[PROMPTS[0]].pop() == out[len(PROMPTS[0]):-1]


def test_streaming_passes_through(cluster):
    client = openai.OpenAI(base_url=cluster + "/v1", api_key="none", timeout=120)
    whole = client.completions.create(model=MODEL, prompt=PROMPTS[1], max_tokens=12,
                                      temperature=0).choices[0].text
    chunks = client.completions.create(model=MODEL, prompt=PROMPTS[1], max_tokens=12,
                                       temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole


def test_errors_pass_through(cluster):
    client = openai.OpenAI(base_url=cluster + "/v1", api_key="none", timeout=60)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=-1)
    assert "max_tokens" in str(e.value)
