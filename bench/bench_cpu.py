#!/usr/bin/env python3
"""CPU throughput: qrun's CPU reference backend against onnxruntime (CPU).

Runs a 128-token forward pass at batch 1 and 8, single-threaded and with all
cores, and prints tokens/s. qrun's GEMMs run on OpenBLAS threads
(OPENBLAS_NUM_THREADS) and large elementwise ops on OpenMP threads
(OMP_NUM_THREADS); the script sets both.

    .venv/bin/python bench/bench_cpu.py [--model examples/austen/model.onnx]
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
    a = p.parse_args()

    cores = os.cpu_count() or 1
    vocab = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"]) \
        .get_outputs()[0].shape[-1]
    with tempfile.TemporaryDirectory() as tmp:
        qpkg = os.path.join(tmp, "model.qpkg")
        subprocess.run([a.qcc, a.model, "--no-cuda", "-o", qpkg], check=True)
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


if __name__ == "__main__":
    main()
