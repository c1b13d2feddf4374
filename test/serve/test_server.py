"""qserve against the official `openai` client and raw HTTP (docs/SERVING.md):
the API's shapes, greedy output equal to `qrun --prompt`, streaming, stop,
seed, hostile bodies and overload, a client that disconnects, and a load of
64 concurrent streams each equal to its prompt served alone."""
import concurrent.futures
import json
import re
import time
import urllib.error
import urllib.request

import openai
import pytest

from conftest import DEMO, Server

DEMO_MODEL = DEMO / "model.onnx"

PROMPTS = [
    "It is a truth universally acknowledged, that",
    "Mr. Darcy",
    "Emma Woodhouse, handsome, clever, and rich,",
    "The family of Dashwood had long been settled in Sussex.",
    "She was",
    "Elizabeth",
    "Captain Wentworth",
    "It was a fine morning, and",
]
MODEL = "demo"


def post(url, body, raw=False, headers=None):
    """(status, parsed JSON body) of a POST; `body` bytes are sent as they are."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json",
                                          **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            payload = r.read()
            return r.status, (payload if raw else json.loads(payload))
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def metrics(server):
    with urllib.request.urlopen(server.url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return text, values


def gauge(values, prefix):
    return sum(v for k, v in values.items() if k.startswith(prefix + "{"))


def wait_idle(server, seconds=30):
    """Metrics once no request runs or waits; fails if the cache is not empty."""
    deadline = time.time() + seconds
    while True:
        text, values = metrics(server)
        busy = gauge(values, "qcc_requests_running") + gauge(values, "qcc_requests_waiting")
        if busy == 0 or time.time() > deadline:
            break
        time.sleep(0.1)
    assert busy == 0, text
    assert gauge(values, "qcc_kv_cache_units_in_use") == 0, text
    return values


def test_health_and_models(server, client):
    with urllib.request.urlopen(server.url + "/health", timeout=30) as r:
        assert json.loads(r.read()) == {"status": "ok"}
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_greedy_completion_equals_qrun(client, qrun_text):
    for prompt in PROMPTS[:3]:
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24,
                                      temperature=0)
        assert r.object == "text_completion"
        choice = r.choices[0]
        assert choice.text == qrun_text(prompt, 24)
        assert choice.finish_reason == "length"
        assert r.usage.completion_tokens == 24
        assert r.usage.total_tokens == r.usage.prompt_tokens + 24


def test_streaming_matches_whole(client):
    whole = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=20,
                                      temperature=0).choices[0].text
    chunks = list(client.completions.create(
        model=MODEL, prompt=PROMPTS[0], max_tokens=20, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole
    finals = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finals[-1] == "length" and all(f is None for f in finals[:-1])
    assert chunks[-1].usage.completion_tokens == 20 and not chunks[-1].choices


def test_chat(client):
    r = client.chat.completions.create(
        model=MODEL, max_tokens=16, temperature=0,
        messages=[{"role": "system", "content": "You answer in the style of Jane Austen."},
                  {"role": "user", "content": "Who is Mr. Darcy?"}])
    assert r.object == "chat.completion"
    m = r.choices[0].message
    assert m.role == "assistant" and isinstance(m.content, str)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 16
    # The same, streamed: a first delta with the role, the same text.
    chunks = list(client.chat.completions.create(
        model=MODEL, max_tokens=16, temperature=0, stream=True,
        messages=[{"role": "system", "content": "You answer in the style of Jane Austen."},
                  {"role": "user", "content": "Who is Mr. Darcy?"}]))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == m.content
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason


def test_stop_string(client):
    text = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=24,
                                     temperature=0).choices[0].text
    words = [w for w in re.findall(r"[A-Za-z]{3,}", text)]
    assert words, text
    stop = words[len(words) // 2]
    r = client.completions.create(model=MODEL, prompt=PROMPTS[0], max_tokens=24,
                                  temperature=0, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == text[:text.index(stop)]


def test_seed_reproducible(client):
    def sample(seed):
        return client.completions.create(model=MODEL, prompt=PROMPTS[1], max_tokens=24,
                                         temperature=0.9, top_p=0.95, seed=seed
                                         ).choices[0].text
    a = sample(7)
    assert a == sample(7)
    assert len({a, sample(8), sample(9)}) > 1  # sampling, not greedy


@pytest.mark.parametrize("body,status,param", [
    (b"{not json", 400, None),
    (b'{"model": "demo", "prompt": "\xff\xfe"}', 400, None),  # not UTF-8
    (b"[1, 2]", 400, None),
    (b"[" * 100000, 400, None),
    ({"model": "demo"}, 400, "prompt"),
    ({"prompt": "x"}, 400, "model"),
    ({"model": "other", "prompt": "x"}, 404, "model"),
    ({"model": "demo", "prompt": "x", "temperature": 5}, 400, "temperature"),
    ({"model": "demo", "prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ({"model": "demo", "prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"model": "demo", "prompt": "x", "max_tokens": 10**30}, 400, "max_tokens"),
    ({"model": "demo", "prompt": "x", "max_tokens": 300}, 400, "max_tokens"),
    ({"model": "demo", "prompt": "word " * 400}, 400, "prompt"),
    ({"model": "demo", "prompt": "x", "n": 2}, 400, "n"),
    ({"model": "demo", "prompt": "x", "logprobs": 3}, 400, "logprobs"),
    ({"model": "demo", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, 400, "stop"),
    ({"model": "demo", "prompt": "x", "bogus": 1}, 400, "bogus"),
    ({"model": "demo", "prompt": [10**9]}, 400, "prompt[0]"),
    ({"model": "demo", "prompt": ["a", "b"]}, 400, "prompt"),
])
def test_bad_completion_requests(server, body, status, param):
    code, reply = post(server.url + "/v1/completions", body)
    assert code == status, reply
    err = reply["error"]
    assert err["message"] and err["type"]
    if param:
        assert err["param"] == param, err


@pytest.mark.parametrize("body,param", [
    ({"model": "demo", "messages": []}, "messages"),
    ({"model": "demo", "messages": [{"role": "robot", "content": "x"}]}, "messages"),
    ({"model": "demo", "messages": [{"role": "user", "content": 3}]}, "messages[0].content"),
    ({"model": "demo", "messages": [{"role": "user", "content": "x", "tool_calls": []}]},
     "messages[0].tool_calls"),
    ({"model": "demo", "messages": [{"role": "user", "content": "x"}], "tools": [{}]}, "tools"),
])
def test_bad_chat_requests(server, body, param):
    code, reply = post(server.url + "/v1/chat/completions", body)
    assert code == 400, reply
    assert reply["error"]["param"] == param


def test_http_level_errors(server):
    code, reply = post(server.url + "/v1/nothing", {"model": "demo"})
    assert code == 404 and "error" in reply
    code, reply = post(server.url + "/v1/completions",
                       b'{"model": "demo", "prompt": "' + b"a" * (2 << 20) + b'"}')
    assert code == 413 and "error" in reply
    wait_idle(server)


def test_disconnect_mid_stream_frees_the_cache(server):
    """A client that goes away after the first event: its request ends as
    cancelled at the next step and its blocks are freed. The demo model
    generates 200 tokens in well under a second, so on a busy machine the
    request can finish before the server sees the socket closed: up to five
    tries, each of which must leave no block in use, one must be cancelled."""
    name = 'qcc_requests_total{model="demo",finish_reason="cancelled"}'
    for attempt in range(5):
        before = metrics(server)[1].get(name, 0)
        req = urllib.request.Request(
            server.url + "/v1/completions", method="POST",
            data=json.dumps({"model": MODEL, "prompt": PROMPTS[0], "max_tokens": 200,
                             "temperature": 0, "stream": True}).encode(),
            headers={"Content-Type": "application/json"})
        r = urllib.request.urlopen(req, timeout=60)
        assert r.readline().startswith(b"data: ")
        r.close()  # gone after the first event
        values = wait_idle(server)
        if values.get(name, 0) == before + 1:
            return
    pytest.fail("5 disconnected streams, none ended as cancelled")


def test_queue_full_is_429(demo_artifact):
    s = Server(demo_artifact, "--max-sequences", "1", "--max-queue", "1",
               "--max-context", "256", "--model-name", MODEL)
    try:
        body = {"model": MODEL, "prompt": PROMPTS[0], "max_tokens": 64, "temperature": 0}
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = sorted(c for c, _ in pool.map(
                lambda _: post(s.url + "/v1/completions", body), range(8)))
        assert 200 in codes and 429 in codes, codes
        assert set(codes) <= {200, 429}, codes
        wait_idle(s)
    finally:
        s.stop()


def test_64_concurrent_streams_equal_alone(server, client):
    """Every stream's greedy text equals its prompt served alone: nothing lost,
    mixed up or changed by what else is in the batch (the decode batch grows
    and shrinks, prompts are prefilled together, in chunks)."""
    alone = {p: client.completions.create(model=MODEL, prompt=p, max_tokens=32,
                                          temperature=0).choices[0].text
             for p in PROMPTS}

    def stream(i):
        p = PROMPTS[i % len(PROMPTS)]
        # Different lengths so that requests leave the batch at different steps.
        n = 32 if i % 2 == 0 else 8 + i % 24
        parts = client.completions.create(model=MODEL, prompt=p, max_tokens=n,
                                          temperature=0, stream=True)
        return p, n, "".join(c.choices[0].text for c in parts if c.choices)

    m = 'qcc_decode_{}_total{{model="demo"}}'
    before = metrics(server)[1]
    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        results = list(pool.map(stream, range(64)))
    after = metrics(server)[1]
    steps = after[m.format("steps")] - before[m.format("steps")]
    rows = after[m.format("rows")] - before[m.format("rows")]
    # Batched: the streams shared decode calls (16 at most, --max-sequences).
    assert rows / steps > 4, (rows, steps)
    for p, n, text in results:
        if n == 32:
            assert text == alone[p], (p, text, alone[p])
        else:
            assert alone[p].startswith(text), (p, n, text, alone[p])
    values = wait_idle(server)
    assert values['qcc_requests_total{model="demo",finish_reason="error"}'] == 0


def test_preemption_when_blocks_run_out(demo_artifact, client):
    """A cache of 6 blocks (96 tokens) for 8 concurrent requests of up to 80
    tokens (5 blocks) each, so any two that overlap cannot both finish:
    admitted on their prompts' blocks, the latest admitted are preempted when
    the running ones need more (recomputed when admitted again), and every
    stream still equals its prompt served alone."""
    alone = {p: client.completions.create(model=MODEL, prompt=p, max_tokens=64,
                                          temperature=0).choices[0].text
             for p in PROMPTS}
    s = Server(demo_artifact, "--kv-blocks", "6", "--max-sequences", "8",
               "--max-context", "128", "--model-name", MODEL)
    try:
        small = openai.OpenAI(base_url=s.url + "/v1", api_key="none", timeout=300)

        def stream(p):
            parts = small.completions.create(model=MODEL, prompt=p, max_tokens=64,
                                             temperature=0, stream=True)
            return p, "".join(c.choices[0].text for c in parts if c.choices)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(stream, PROMPTS))
        for p, text in results:
            assert text == alone[p], (p, text, alone[p])
        values = wait_idle(s)
        assert values['qcc_preemptions_total{model="demo"}'] > 0, values
        assert values['qcc_requests_total{model="demo",finish_reason="error"}'] == 0
    finally:
        s.stop()


def test_prefix_cache(client, qrun_text):
    """A prompt seen before starts from its cached blocks (usage says how many
    tokens) and generates exactly what it generates computed in full."""
    prompt = ("Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who, "
              "for his own amusement, never took up any book but the Baronetage; "
              "there he found occupation for an idle hour, and consolation in a "
              "distressed one.")
    first = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16,
                                      temperature=0)
    second = client.completions.create(model=MODEL, prompt=prompt + " He", max_tokens=16,
                                       temperature=0)
    again = client.completions.create(model=MODEL, prompt=prompt, max_tokens=16,
                                      temperature=0)
    n = first.usage.prompt_tokens
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    # Whole blocks (16 tokens), at most the prompt less one token.
    for r in (second, again):
        cached = r.usage.prompt_tokens_details.cached_tokens
        assert cached >= 16 and cached % 16 == 0 and cached < r.usage.prompt_tokens, cached
    assert again.choices[0].text == first.choices[0].text == qrun_text(prompt, 16)
    assert second.choices[0].text == qrun_text(prompt + " He", 16)


@pytest.mark.parametrize("flags,message", [
    (["--max-sequences", "0"], "--max-sequences"),
    (["--port", "70000"], "--port"),
    (["--chat-template", "jinja"], "--chat-template: 'jinja' is not auto or one of"),
    (["--max-context", "100000"], "--max-context needs 100000 positions"),
    (["--gpu-layers", "x"], "--gpu-layers: 'x' is not auto or a count of layers"),
    (["--cpu-precision", "fp16"], "--cpu-precision: fp16 not in"),
    (["--backend", "cpu", "--gpu-layers", "1"], "it needs the CUDA backend"),
    (["--gpu-memory-limit", "4x"], "--gpu-memory-limit: x unit not recognized"),
    (["--backend", "cpu", "--gpu-memory-limit", "4MiB"],
     "--gpu-memory-limit bounds the GPU's memory: it needs the CUDA backend"),
])
def test_bad_flags_one_line(demo_artifact, flags, message):
    import subprocess
    from conftest import tool
    p = subprocess.run([str(tool("qserve")), str(demo_artifact), "--quiet", *flags],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("qserve: error: ") and message in lines[0], lines


def test_encoder_is_refused(workdir):
    import subprocess
    from conftest import ROOT, tool
    bert = workdir / "bert.qpkg"
    subprocess.run([str(tool("qcc")), str(ROOT / "test" / "models" / "bert.onnx"), "--no-cuda",
                    "-o", str(bert)], check=True, capture_output=True)
    p = subprocess.run([str(tool("qserve")), str(bert), "--quiet"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1
    assert "serving needs the prefill and decode entry points" in p.stderr, p.stderr


def test_lora_adapters_per_request(workdir):
    """Runtime LoRA adapters (docs/LORA.md) are models of their own names: a
    request picks one by `model`, greedy text equal to `qrun --lora`; requests
    of the base model and of the adapter run in one batch without mixing,
    and the prefix cache shares blocks within one adapter only."""
    import subprocess
    import openai
    from conftest import ROOT, DEMO, tool
    artifact = workdir / "demo-lora.qpkg"
    adapter = ROOT / "test" / "runtime" / "Inputs" / "austen-lora"
    subprocess.run([str(tool("qcc")), str(DEMO / "model.onnx"), "--no-cuda",
                    f"--lora-adapter=x={adapter}", "-o", str(artifact)],
                   check=True, capture_output=True)

    def qrun(prompt, lora):
        out = subprocess.run(
            [str(tool("qrun")), str(artifact), "--backend=cpu", "--threads", "2",
             "--quiet", "--prompt", prompt, "--max-new-tokens", "12"]
            + (["--lora", lora] if lora else []),
            check=True, capture_output=True, text=True).stdout
        return out[len(prompt):-1]

    s = Server(artifact, "--max-sequences", "8", "--max-context", "256")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0,
                          timeout=120)
        models = {m.id: m for m in c.models.list().data}
        assert set(models) == {"demo-lora", "x"}
        assert models["x"].model_extra.get("parent") == "demo-lora"
        prompt = ("Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man "
                  "who, for his own amusement, never took up any book but the "
                  "Baronetage;")
        want = {"demo-lora": qrun(prompt, None), "x": qrun(prompt, "x")}
        assert want["demo-lora"] != want["x"]

        def ask(model):
            return c.completions.create(model=model, prompt=prompt, max_tokens=12,
                                        temperature=0)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            runs = list(pool.map(ask, ["x", "demo-lora", "x", "demo-lora"]))
        for model, r in zip(["x", "demo-lora", "x", "demo-lora"], runs):
            assert r.model == model
            assert r.choices[0].text == want[model], (model, r.choices[0].text)
        # Blocks an adapter computed are shared with that adapter only: a
        # prompt new to both, served by x, then twice by the base model.
        fresh = "Anne Elliot had been a very pretty girl, but her bloom had " \
                "vanished early; and as even in its height, her father had " \
                "found little to admire in her,"
        assert cached_tokens(c, "x", fresh) == 0
        assert cached_tokens(c, "demo-lora", fresh) == 0
        assert cached_tokens(c, "demo-lora", fresh) >= 16
        assert cached_tokens(c, "x", fresh) >= 16
        with pytest.raises(openai.NotFoundError) as e:
            c.completions.create(model="y", prompt="x", max_tokens=1)
        assert "'demo-lora', 'x'" in str(e.value)
        c.close()
    finally:
        s.stop()


def cached_tokens(client, model, prompt):
    """Prompt tokens a one-token completion found in the prefix cache."""
    return client.completions.create(model=model, prompt=prompt, max_tokens=1,
                                     temperature=0).usage.prompt_tokens_details.cached_tokens


def test_layer_split_on_the_stand_in(workdir, qrun_text):
    """--gpu-layers 0 on the libcuda stand-in (test/fake: it runs no kernel,
    so every block runs on the split's CPU half): the CUDA backend's session
    with a host KV cache, under continuous batching, serves qrun's text, and
    leaves no block in use."""
    import subprocess
    from conftest import BIN, tool
    fake = BIN.parent / "lib" / "libqcc-fake-cuda.so"
    if not fake.is_file():
        pytest.skip(f"{fake} missing (the stand-in is built with the CUDA toolkit)")
    art = workdir / "demo-gpu.qpkg"
    subprocess.run([str(tool("qcc")), str(DEMO_MODEL), "-o", str(art)], check=True,
                   capture_output=True)
    listing = subprocess.run([str(tool("qrun")), str(art), "--list-kernels"],
                             capture_output=True, text=True).stdout
    if "no GPU kernels" in listing:
        pytest.skip("qcc compiled no CUDA kernels (no CUDA toolkit)")
    s = Server(art, "--backend", "cuda", "--gpu-layers", "0", "--max-sequences", "4",
               "--max-context", "128", env={"QCC_CUDA_DRIVER": str(fake)})
    try:
        assert any("no layer on the GPU" in line for line in s.log), s.log
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            texts = list(pool.map(
                lambda p: post(s.url + "/v1/completions",
                               {"model": "demo-gpu", "prompt": p, "max_tokens": 12,
                                "temperature": 0})[1]["choices"][0]["text"],
                PROMPTS[:4]))
        assert texts == [qrun_text(p, 12) for p in PROMPTS[:4]]
        wait_idle(s)
    finally:
        s.stop()
