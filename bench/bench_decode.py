#!/usr/bin/env python3
"""Decode and prefill throughput on the CPU: KV cache (paged, contiguous)
against full recompute.

For each model: B random prompts of CONTEXT tokens, then STEPS new tokens
each (`qrun --bench-generate`); the best of --repeats runs is reported (this
machine's timings vary run to run). Targets (issue 4): decode through the
cache >= 10x recompute at 512 tokens of context; paged within 10% of
contiguous.

    .venv/bin/python bench/bench_decode.py
"""
import argparse
import os
import re
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (model, context, onnxruntime model with past_key_values or None): the
# LLaMA-style fixture has rotary positions (no limit); the demo model has 256
# learned positions, the GPT-2 fixture 128 (its past form exports to ONNX).
MODELS = [("test/models/llama.onnx", 512, None),
          ("examples/austen/model.onnx", 192, None),
          ("test/models/gpt2.onnx", 48, "test/models/gpt2_past.onnx")]


def ort_decode_tokens_per_s(model, batch, context, steps):
    """Greedy decode with onnxruntime feeding present back as past."""
    import numpy as np
    import onnxruntime as ort
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inputs = sess.get_inputs()
    past_names = [i.name for i in inputs[1:]]
    heads, head_dim = inputs[1].shape[1], inputs[1].shape[3]
    rng = np.random.default_rng(0)
    vocab = sess.get_outputs()[0].shape[-1]
    ids = rng.integers(0, vocab, size=(batch, context), dtype=np.int64)
    past = {n: np.zeros((batch, heads, 0, head_dim), np.float32) for n in past_names}
    out = sess.run(None, {inputs[0].name: ids, **past})
    t0 = time.perf_counter()
    for _ in range(steps):
        nxt = out[0][:, -1, :].argmax(-1).reshape(batch, 1).astype(np.int64)
        past = dict(zip(past_names, out[1:]))
        out = sess.run(None, {inputs[0].name: nxt, **past})
    return batch * steps / (time.perf_counter() - t0)


def run(qrun, qpkg, args, repeats):
    best = {}
    for _ in range(repeats):
        out = subprocess.run([qrun, qpkg] + args, check=True, capture_output=True,
                             text=True).stdout
        for key in ("prefill", "decode"):
            m = re.search(key + r" ([0-9.e+]+) tokens/s", out)
            if m:
                best[key] = max(best.get(key, 0.0), float(m.group(1)))
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    p.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--recompute-steps", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()

    print("| model | context | batch | prefill tok/s (paged) | decode tok/s paged | "
          "decode tok/s contiguous | decode tok/s recompute | cache / recompute | "
          "paged / contiguous | onnxruntime decode tok/s (past_key_values) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model, context, ort_past in MODELS:
            paths = {}
            for layout in ("paged", "contiguous"):
                paths[layout] = os.path.join(tmp, f"{layout}.qpkg")
                subprocess.run([a.qcc, os.path.join(ROOT, model), f"--kv-cache={layout}",
                                "-o", paths[layout]], check=True)
            for batch in (1, 8):
                gen = ["--bench-generate", str(batch), str(context)]
                paged = run(a.qrun, paths["paged"], gen + [str(a.steps)], a.repeats)
                contig = run(a.qrun, paths["contiguous"], gen + [str(a.steps)], a.repeats)
                recompute = run(a.qrun, paths["paged"],
                                gen + [str(a.recompute_steps), "--no-cache"], 1)
                print(f"| {model} | {context} | {batch} | {paged['prefill']:.0f} | "
                      f"{paged['decode']:.0f} | {contig['decode']:.0f} | "
                      f"{recompute['decode']:.1f} | "
                      f"{paged['decode'] / recompute['decode']:.0f}x | "
                      f"{paged['decode'] / contig['decode']:.2f} | "
                      + (f"{ort_decode_tokens_per_s(os.path.join(ROOT, ort_past), batch, context, a.steps):.0f}"
                         if ort_past else "-") + " |", flush=True)


if __name__ == "__main__":
    main()
