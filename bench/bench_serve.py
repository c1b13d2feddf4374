"""Serving benchmark (docs/SERVING.md): OpenAI-API servers under a closed-loop
load, side by side in one run: qserve (continuous batching over the paged KV
cache, prefix caching) on qcc artifacts, and llama.cpp's server
(llama-cpp-python's `llama_cpp.server`) on GGUFs of the same weights.

For each server, each share of repeated prompts and each concurrency C: C
clients each send streaming /v1/completions one after another until
--requests have finished; prompts are excerpts of the held-out Austen text
(examples/austen/heldout.txt, seeded, fresh for every cell), and with
--repeat-share a fraction of the requests reuse one of four fixed prompts instead (a workload with shared
prefixes: the prefix cache's case). Greedy, --max-tokens new tokens each.
Per cell: requests/s, generated tokens/s, latency p50/p95, time to first
token p50/p95; per server and share, the most requests/s whose p95 latency
stays within --p95-bound. --plot writes throughput against p95 latency.

    .venv-bench/bin/python bench/bench_serve.py \\
        --variant float=build/demo/float32.qpkg --variant w8a8=build/demo/w8a8.qpkg
    .venv-bench/bin/python bench/bench_serve.py --chars 400 \\
        --variant "qcc float=build/smollm2/float.qpkg" \\
        --llama "llama.cpp f32=build/smollm2/model-f32.gguf"

Needs only the standard library for qserve rows; llama.cpp rows need
llama-cpp-python[server] (scripts/setup_bench.sh). Not a test: timings go in
a table, never in an assertion.
"""
import argparse
import concurrent.futures
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_info import cpu_has_amx, machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def progress(msg):
    if sys.stderr.isatty():
        print(f"== {msg}", file=sys.stderr, flush=True)


# llama.cpp's model loader without its extra buffer types (weight repacking,
# AMX): on CPUs with AMX-INT8, llama-cpp-python 0.3.36 segfaults in
# ggml_backend_amx_mul_mat on quantized GGUFs (bench_cpu.py's --llama-repack).
LLAMA_NO_REPACK = (
    "import llama_cpp.llama_cpp as ll\n"
    "orig = ll.llama_model_default_params\n"
    "def no_extra_bufts():\n"
    "    p = orig()\n"
    "    p.use_extra_bufts = False\n"
    "    return p\n"
    "ll.llama_model_default_params = no_extra_bufts\n"
    "import sys, runpy\n"
    "sys.argv[0] = 'llama_cpp.server'\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__')\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on 127.0.0.1, ready once /v1/models answers."""

    def __init__(self, name, cmd, port, log_path):
        self.name, self.port = name, port
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"bench_serve: {name} exited {self.proc.returncode}; "
                                 f"see {log_path}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/v1/models")
                r = c.getresponse()
                self.model = json.loads(r.read())["data"][0]["id"]
                c.close()
                break
            except (OSError, ValueError, KeyError, IndexError):
                if time.time() > deadline:
                    raise SystemExit(f"bench_serve: {name} did not start; see {log_path}")
                time.sleep(0.5)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def stream_completion(port, model, prompt, max_tokens):
    """(seconds to the first text, seconds in all, tokens generated) of one
    streaming request. Tokens: the usage chunk where the server sends one,
    else the number of chunks with text."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "stream": True, "stream_options": {"include_usage": True}}
    c.request("POST", "/v1/completions", json.dumps(body),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]!r}")
    first, chunks, usage = None, 0, None
    for line in r:
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        data = json.loads(line[6:])
        if data.get("usage"):
            usage = data["usage"]["completion_tokens"]
        for ch in data.get("choices") or []:
            if ch.get("text"):
                chunks += 1
                if first is None:
                    first = time.perf_counter() - t0
    c.close()
    total = time.perf_counter() - t0
    return (first if first is not None else total), total, (usage if usage is not None else chunks)


def prompts_from(text, chars, count, seed):
    """`count` excerpts of about `chars` characters, starting and ending at
    word boundaries."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        i = rng.randrange(0, len(text) - chars - 100)
        i = text.index(" ", i) + 1
        j = text.rindex(" ", i, i + chars)
        out.append(re.sub(r"\s+", " ", text[i:j]).strip())
    return out


def percentile(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def run_cell(server, prompts, popular, share, concurrency, max_tokens, seed):
    """One cell: len(prompts) requests, each prompt unique to this cell (so
    that no cell finds the previous cells' prompts in the prefix cache) unless
    it is one of `popular` (share of the requests)."""
    rng = random.Random(seed)
    plan = [rng.choice(popular) if rng.random() < share else p for p in prompts]
    lock = threading.Lock()
    nxt = [0]
    results = []

    def client():
        while True:
            with lock:
                if nxt[0] >= len(plan):
                    return
                p = plan[nxt[0]]
                nxt[0] += 1
            results.append(stream_completion(server.port, server.model, p, max_tokens))

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        for f in [pool.submit(client) for _ in range(concurrency)]:
            f.result()
    wall = time.perf_counter() - t0
    ttft = [r[0] for r in results]
    lat = [r[1] for r in results]
    tokens = sum(r[2] for r in results)
    return {"rps": len(results) / wall, "tok_s": tokens / wall,
            "lat_p50": percentile(lat, 50), "lat_p95": percentile(lat, 95),
            "ttft_p50": percentile(ttft, 50), "ttft_p95": percentile(ttft, 95),
            "tokens_per_request": tokens / len(results)}


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--qserve", default=os.path.join(ROOT, "build", "bin", "qserve"))
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=ARTIFACT.qpkg served by qserve (repeatable)")
    p.add_argument("--llama", action="append", default=[],
                   help="NAME=MODEL.gguf served by llama-cpp-python's server (repeatable)")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="compute threads of every server")
    p.add_argument("--max-sequences", type=int, default=16, help="qserve's running batch")
    p.add_argument("--max-context", type=int, default=1024,
                   help="tokens per request (qserve --max-context, llama.cpp n_ctx)")
    p.add_argument("--concurrency", default="1,4,16", help="concurrent clients per cell")
    p.add_argument("--requests", type=int, default=32, help="requests per cell")
    p.add_argument("--max-tokens", type=int, default=32, help="new tokens per request")
    p.add_argument("--chars", type=int, default=400, help="prompt length in characters")
    p.add_argument("--repeat-share", default="0,0.2",
                   help="shares of requests that reuse one of four fixed prompts")
    p.add_argument("--p95-bound", type=float, default=5.0,
                   help="latency bound in seconds for the 'RPS at p95' column")
    p.add_argument("--llama-repack", choices=["auto", "on", "off"], default="auto",
                   help="llama.cpp's extra buffer types (weight repacking, AMX). auto: off on "
                   "CPUs with AMX-INT8, where llama-cpp-python 0.3.36 segfaults on quantized "
                   "GGUFs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out-dir", default=os.path.join(ROOT, "build", "bench-serve"))
    p.add_argument("--json", help="also write the rows here")
    p.add_argument("--plot", help="write throughput against p95 latency here (PNG; matplotlib)")
    a = p.parse_args()
    if not a.variant and not a.llama:
        p.error("give at least one --variant or --llama")
    os.makedirs(a.out_dir, exist_ok=True)
    text = open(os.path.join(ROOT, "examples", "austen", "heldout.txt"), encoding="utf-8").read()
    popular = prompts_from(text, a.chars, 4, a.seed)
    levels = [int(x) for x in a.concurrency.split(",")]
    shares = [float(x) for x in a.repeat_share.split(",")]

    servers = []
    for spec in a.variant:
        name, path = spec.split("=", 1)
        servers.append((name, lambda port, path=path: [
            a.qserve, path, "--port", str(port), "--threads", str(a.threads),
            "--max-sequences", str(a.max_sequences), "--max-context", str(a.max_context),
            "--quiet"]))
    repack = a.llama_repack == "on" or (a.llama_repack == "auto" and not cpu_has_amx())
    launcher = ["-m", "llama_cpp.server"] if repack else ["-c", LLAMA_NO_REPACK]
    for spec in a.llama:
        name, path = spec.split("=", 1)
        servers.append((name, lambda port, path=path: [
            sys.executable, *launcher, "--model", path, "--host", "127.0.0.1",
            "--port", str(port), "--n_threads", str(a.threads), "--n_ctx", str(a.max_context),
            # Its default (True) ends a running stream when another request
            # arrives: queue them instead, as a server must.
            "--interrupt_requests", "False", "--model_alias", "model"]))

    rows = []
    for name, cmd in servers:
        port = free_port()
        progress(f"{name}: starting")
        log = os.path.join(a.out_dir, re.sub(r"\W+", "_", name) + ".log")
        s = Server(name, cmd(port), port, log)
        try:
            stream_completion(port, s.model, "Warm-up.", 4)
            for i, share in enumerate(shares):
                for j, c in enumerate(levels):
                    progress(f"{name}: repeat share {share:g}, {c} clients")
                    # The same prompts for every server; fresh ones per cell.
                    cell = a.seed + 1 + i * len(levels) + j
                    prompts = prompts_from(text, a.chars, a.requests, 1000 * cell)
                    r = run_cell(s, prompts, popular, share, c, a.max_tokens, cell)
                    rows.append({"server": name, "share": share, "clients": c, **r})
        finally:
            s.stop()

    print(f"Machine: {machine()}; {a.threads} thread(s) per server; {a.requests} requests per "
          f"cell, prompts of about {a.chars} characters, {a.max_tokens} new tokens, greedy"
          + ("" if not a.llama else
             f"; llama.cpp's weight repacking {'on' if repack else 'off (an AMX CPU)'}")
          + ".\n")
    print("| server | repeated prompts | clients | requests/s | tokens/s | tokens/request "
          "| latency p50 / p95 (s) | first token p50 / p95 (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['server']} | {r['share']:.0%} | {r['clients']} | {r['rps']:.2f} | "
              f"{r['tok_s']:.1f} | {r['tokens_per_request']:.1f} | "
              f"{r['lat_p50']:.2f} / {r['lat_p95']:.2f} | "
              f"{r['ttft_p50']:.2f} / {r['ttft_p95']:.2f} |")
    print(f"\nMost requests/s with p95 latency <= {a.p95_bound:g} s:\n")
    print("| server | repeated prompts | requests/s | at clients |")
    print("|---|---:|---:|---:|")
    for name, _ in servers:
        for share in shares:
            ok = [r for r in rows if r["server"] == name and r["share"] == share
                  and r["lat_p95"] <= a.p95_bound]
            best = max(ok, key=lambda r: r["rps"]) if ok else None
            print(f"| {name} | {share:.0%} | {best['rps']:.2f} | {best['clients']} |" if best
                  else f"| {name} | {share:.0%} | - (none within the bound) | - |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, _ in servers:
            for share in shares:
                pts = [r for r in rows if r["server"] == name and r["share"] == share]
                ax.plot([r["lat_p95"] for r in pts], [r["tok_s"] for r in pts], marker="o",
                        label=f"{name}, {share:.0%} repeated")
                for r in pts:
                    ax.annotate(str(r["clients"]), (r["lat_p95"], r["tok_s"]), fontsize=7)
        ax.set_xlabel("p95 request latency (s)")
        ax.set_ylabel("generated tokens/s")
        ax.set_title("Throughput against p95 latency (labels: concurrent clients)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)


if __name__ == "__main__":
    main()
