#!/usr/bin/env python3
"""CPU throughput: qrun's CPU reference backend against onnxruntime (CPU).

Runs a 128-token forward pass at batch 1 and 8, single-threaded and with all
cores, and prints tokens/s. With --past-model (a with-past export of the same
model: optimum's text-generation-with-past, past_key_values.N.key/value in,
present.N.key/value out) it also times decode: qrun decodes through its KV
cache (`--bench-generate` on the artifact qcc compiles from that file),
onnxruntime runs the same file in a loop feeding present back as past;
greedy, CONTEXT random prompt tokens, then STEPS timed steps. qrun's GEMMs run on OpenBLAS threads
(OPENBLAS_NUM_THREADS) and large elementwise ops on OpenMP threads
(OMP_NUM_THREADS); the script sets both.

    .venv/bin/python bench/bench_cpu.py [--model examples/austen/model.onnx]
        [--past-model M_past.onnx --context 128 --steps 32]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def qrun_tokens_per_s(qrun, qpkg, batch, seq, threads, iterations):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    out = subprocess.run([qrun, qpkg, "--bench", str(batch), str(seq),
                          "--iterations", str(iterations)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"tokens/s ([0-9.e+]+)", out).group(1))


def ort_tokens_per_s(model, batch, seq, threads, iterations, vocab):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    # An exporter's other inputs, as qrun fills them (runtime sequenceInputs):
    # attention_mask all ones, position_ids 0..S-1.
    feeds = {}
    for i, inp in enumerate(sess.get_inputs()):
        if i == 0:
            feeds[inp.name] = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
        elif inp.name == "attention_mask":
            feeds[inp.name] = np.ones((batch, seq), dtype=np.int64)
        elif inp.name == "position_ids":
            feeds[inp.name] = np.tile(np.arange(seq, dtype=np.int64), (batch, 1))
        else:
            sys.exit(f"bench_cpu: input '{inp.name}' is not one a forward pass fills")
    sess.run(None, feeds)  # warm-up
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return batch * seq / sorted(times)[len(times) // 2]


def machine():
    """The conditions a table was measured in: CPU model, cores, load, date and
    OpenMP's wait policy (its default, active, halves qrun at 2 threads here)."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{model}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
            f"{time.strftime('%Y-%m-%d')}, OMP_WAIT_POLICY="
            f"{os.environ.get('OMP_WAIT_POLICY', 'unset (active)')}")


def qrun_decode_tokens_per_s(qrun, qpkg, batch, context, steps, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads))
    out = subprocess.run([qrun, qpkg, "--bench-generate", str(batch), str(context),
                          str(steps)], env=env, check=True, capture_output=True,
                         text=True).stdout
    return float(re.search(r"decode ([0-9.e+]+) tokens/s", out).group(1))


def ort_decode_tokens_per_s(model, batch, context, steps, threads):
    """Greedy decode with onnxruntime: prefill CONTEXT tokens from an empty
    past, then STEPS one-token steps feeding present.* back as past_key_values.*
    (only the steps are timed)."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    ins = {i.name: i for i in sess.get_inputs()}
    outs = [o.name for o in sess.get_outputs()]
    pasts = [n for n in ins if n.startswith("past_key_values.")]
    if "input_ids" not in ins or not pasts:
        sys.exit(f"bench_cpu: {model} has no input_ids / past_key_values.* inputs")
    presents = [n.replace("past_key_values.", "present.") for n in pasts]
    if any(p not in outs for p in presents):
        sys.exit(f"bench_cpu: {model} lacks a present.* output for a past input")
    vocab = sess.get_outputs()[0].shape[-1]
    rng = np.random.default_rng(0)
    feeds = {n: np.zeros((batch, ins[n].shape[1], 0, ins[n].shape[3]), np.float32)
             for n in pasts}

    def step(ids, past_len):
        total = past_len + ids.shape[1]
        f = {"input_ids": ids}
        if "attention_mask" in ins:
            f["attention_mask"] = np.ones((batch, total), np.int64)
        if "position_ids" in ins:
            f["position_ids"] = np.tile(np.arange(past_len, total, dtype=np.int64), (batch, 1))
        r = dict(zip(outs, sess.run(None, {**f, **feeds})))
        for n, p in zip(pasts, presents):
            feeds[n] = r[p]
        return r[outs[0]][:, -1, :].argmax(-1).reshape(batch, 1).astype(np.int64)

    nxt = step(rng.integers(0, vocab, size=(batch, context), dtype=np.int64), 0)
    t0 = time.perf_counter()
    for i in range(steps):
        nxt = step(nxt, context + i)
    return batch * steps / (time.perf_counter() - t0)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    default = os.path.join(ROOT, "examples", "austen", "model.onnx")
    if not os.path.exists(default):
        default = os.path.join(ROOT, "test", "models", "gpt2.onnx")
    p.add_argument("--model", default=default)
    p.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    p.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--batches", default="1,8", help="comma-separated batch sizes")
    p.add_argument("--threads", default="", help="comma-separated thread counts "
                   "(default: 1 and all cores)")
    p.add_argument("--past-model", help="with-past export of the same model: also time "
                   "decode (qrun through its KV cache, onnxruntime feeding present back)")
    p.add_argument("--context", type=int, default=128, help="decode: prompt tokens")
    p.add_argument("--steps", type=int, default=32, help="decode: timed steps")
    a = p.parse_args()

    cores = os.cpu_count() or 1
    vocab = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"]) \
        .get_outputs()[0].shape[-1]
    with tempfile.TemporaryDirectory() as tmp:
        qpkg = os.path.join(tmp, "model.qpkg")
        subprocess.run([a.qcc, a.model, "--no-cuda", "-o", qpkg], check=True)
        print(f"{machine()}")
        print(f"model {os.path.relpath(a.model, ROOT)}, {a.seq}-token forward pass, "
              f"median of {a.iterations} runs, tokens/s")
        print(f"| threads | batch | qrun CPU | onnxruntime | qrun / ort |")
        print(f"|---|---|---|---|---|")
        threads_list = ([int(t) for t in a.threads.split(",")] if a.threads
                        else sorted({1, cores}))
        for threads in threads_list:
            for batch in [int(b) for b in a.batches.split(",")]:
                q = qrun_tokens_per_s(a.qrun, qpkg, batch, a.seq, threads, a.iterations)
                o = ort_tokens_per_s(a.model, batch, a.seq, threads, a.iterations, vocab)
                print(f"| {threads} | {batch} | {q:.0f} | {o:.0f} | {q / o:.2f} |")
                sys.stdout.flush()
        if not a.past_model:
            return
        past_qpkg = os.path.join(tmp, "past.qpkg")
        subprocess.run([a.qcc, a.past_model, "--no-cuda", "-o", past_qpkg], check=True)
        print(f"\ndecode, {os.path.relpath(a.past_model, ROOT)}: {a.context}-token prompt, "
              f"{a.steps} greedy steps, tokens/s")
        print(f"| threads | batch | qrun CPU (KV cache) | onnxruntime (past_key_values) | qrun / ort |")
        print(f"|---|---|---|---|---|")
        for threads in threads_list:
            for batch in [int(b) for b in a.batches.split(",")]:
                q = qrun_decode_tokens_per_s(a.qrun, past_qpkg, batch, a.context, a.steps,
                                             threads)
                o = ort_decode_tokens_per_s(a.past_model, batch, a.context, a.steps, threads)
                print(f"| {threads} | {batch} | {q:.1f} | {o:.1f} | {q / o:.2f} |")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
