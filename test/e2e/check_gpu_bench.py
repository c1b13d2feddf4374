#!/usr/bin/env python3
"""bench/gpu_bench.py on the CPU (ctest `gpu-bench-script`): its byte counts and its table.

    .venv/bin/python test/e2e/check_gpu_bench.py --qcc build/bin/qcc --qrun build/bin/qrun

Compiles the demo model examples/austen/model.onnx (4 layers, width 256; every node of its
decode step has a CUDA kernel, so every weight is read by one) as gpu_bench.py expects the 1B
model (f16.qpkg: float; w8a8.qpkg: W8A8 with an int8 KV cache, calibrated on a folder of
random-id .npy inputs as bench/llama_1b.py writes them), then checks:
  - decode weight bytes from the manifest against an independent count from the ONNX file:
      float: 2 x (MatMul weights) + 4 x (1-D parameters: norm gains and biases, linear biases)
             + B x width x 4 for each embedding table (token and position: the gathered f32
             rows); equal up to 1 KiB (scalars the decode kernels also read);
      W8A8:  at least the MatMul weights' element count (1 byte each), at most that plus the
             per-channel f32 scales, i32 weight sums and smoothing factors (8 N + 4 K bytes per
             [K, N] MatMul), the 1-D
             parameters and the embedding rows, + 1 KiB;
  - KV bytes of the int8 cache: B x layers x 2 x kv_heads x head_dim x ctx + the scales;
  - gpu_bench.py --backend=cpu (tiny counts; 32 timed steps after qrun's warm-up, ~20 ms here, well
    above this machine's run-to-run noise) with a made-up reference JSON runs, prints one
    table with the qrun rows and the three PyTorch rows, every qrun decode rate finite and > 0,
    and a PyTorch row's MBU equal to the formula's value from the made-up numbers (also with
    tied embeddings, whose table is read as the LM head).
Runs in well under a minute.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpu_bench  # noqa: E402

MODEL = os.path.join(ROOT, "examples", "austen", "model.onnx")
SMALL = 1024  # bytes: scalars beside the weights


def fail(msg):
    print("FAIL: " + msg)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    ap.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))
    args = ap.parse_args()
    try:
        import numpy as np
        import onnx
    except ImportError as e:
        print("SKIP: %s" % e)
        return 77
    m = onnx.load(MODEL)
    users = {}
    for n in m.graph.node:
        for i in n.input:
            users.setdefault(i, set()).add(n.op_type)
    matmul = [t for t in m.graph.initializer if len(t.dims) == 2 and "MatMul" in users.get(t.name, ())]
    gains = [t for t in m.graph.initializer if len(t.dims) == 1 and t.dims[0] > 8 and t.name in users]
    embed = [t for t in m.graph.initializer if "Gather" in users.get(t.name, ()) and len(t.dims) == 2]
    width = embed[0].dims[1]
    rows = len(embed) * width * 4  # bytes of one gathered row of every table
    mm_elems = sum(t.dims[0] * t.dims[1] for t in matmul)
    # ONNX MatMul weights are [K, N]: per output channel an f32 scale and an i32 sum, per input
    # channel an f32 smoothing factor, at most.
    mm_extra = sum(4 * t.dims[0] + 8 * t.dims[1] for t in matmul)
    gain_elems = sum(t.dims[0] for t in gains)

    with tempfile.TemporaryDirectory() as tmp:
        calib = os.path.join(tmp, "calib")
        os.makedirs(calib)
        rng = np.random.default_rng(0)
        ids = rng.integers(0, embed[0].dims[0], size=(4, 16), dtype=np.int64)
        for inp in m.graph.input:
            np.save(os.path.join(calib, inp.name + ".npy"),
                    ids if inp.name == "input_ids" else np.ones_like(ids))
        f16, w8 = os.path.join(tmp, "f16.qpkg"), os.path.join(tmp, "w8a8.qpkg")
        subprocess.run([args.qcc, MODEL, "--quiet", "-o", f16], check=True)
        subprocess.run([args.qcc, MODEL, "--quiet", "--quant=w8a8", "--kv-dtype=i8",
                        "--calib=" + calib, "--calib-samples=4", "-o", w8], check=True)

        bad = 0
        for b in (1, 3):
            got, _ = gpu_bench.decode_weight_bytes(gpu_bench.manifest(f16), b)
            want = 2 * mm_elems + 4 * gain_elems + b * rows
            ok = want <= got <= want + SMALL
            print("float decode weight bytes, B=%d: %d (ONNX count %d): %s" % (b, got, want, "ok" if ok else "FAIL"))
            bad += not ok
            got, _ = gpu_bench.decode_weight_bytes(gpu_bench.manifest(w8), b)
            lo = mm_elems
            hi = mm_elems + mm_extra + 4 * gain_elems + b * rows + SMALL
            ok = lo <= got <= hi
            print("W8A8 decode weight bytes, B=%d: %d (bounds %d..%d): %s" % (b, got, lo, hi, "ok" if ok else "FAIL"))
            bad += not ok
        kv = gpu_bench.manifest(w8)["kv_cache"]
        if kv["dtype"] != "i8":
            return fail("w8a8.qpkg's KV cache is %s, not i8" % kv["dtype"])
        want = 3 * kv["layers"] * 2 * kv["kv_heads"] * kv["head_dim"] * 20 + kv["layers"] * 2 * kv["kv_heads"] * 4
        if gpu_bench.kv_bytes(kv, 3, 20) != want:
            return fail("kv_bytes %d != %d" % (gpu_bench.kv_bytes(kv, 3, 20), want))
        if bad:
            return fail("%d byte counts off" % bad)

        params = sum(math.prod(t.dims) for t in m.graph.initializer)
        ref = {"device": "test", "date": "-", "copy_GBps": 10.0, "f16_TFLOPs": 0.1, "i8_TOPs": 0.2,
               "params": params, "layers": kv["layers"], "width": width, "heads": 0,
               "kv_heads": kv["kv_heads"], "head_dim": kv["head_dim"], "vocab": embed[0].dims[0],
               "context": 16, "decode_steps": 32, "warmup_steps": 3, "prefill": 32,
               "decode_b1_tokps": 50.0, "decode_b8_tokps": 400.0, "decode_b32_tokps": 1600.0,
               "prefill_2048_tokps": 1000.0, "lean_decode_b1_tokps": 100.0,
               "lean_graph_decode_b1_tokps": 200.0, "lean_prefill_2048_tokps": 2000.0}
        refp = os.path.join(tmp, "ref.json")
        json.dump(ref, open(refp, "w"))
        out = os.path.join(tmp, "bench.json")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gpu_bench.py"), "--qrun", args.qrun,
                            "--artifacts", tmp, "--reference", refp, "--json", out, "--backend=cpu",
                            "--batches", "1", "2", "--context", "16", "--steps", "32", "--prefill", "32"],
                           capture_output=True, text=True)
        print(p.stdout)
        if p.returncode != 0:
            print(p.stderr)
            return fail("gpu_bench.py exited %d" % p.returncode)
        res = json.load(open(out))
        rows = res["rows"]
        names = ["f16", "W8A8", gpu_bench.HF_ROW, "PyTorch f16 lean eager", gpu_bench.GRAPH_ROW]
        if sorted(rows) != sorted(names):
            return fail("rows %s, expected %s" % (sorted(rows), sorted(names)))
        speed, _, memory = p.stdout.partition("Memory (")
        table = [ln for ln in speed.splitlines() if ln.startswith("| ")]
        if len(table) != 1 + len(names):
            return fail("%d table lines, expected a header and %d rows" % (len(table), len(names)))
        # The memory table: qrun's rows, a host peak RSS each (the CPU
        # backend here: no device columns).
        mem = [ln.split("|")[1:-1] for ln in memory.splitlines() if ln.startswith("| ")]
        if [c[0].strip() for c in mem[1:]] != ["f16", "W8A8"] or \
                not all(float(c[4]) > 0 for c in mem[1:]):
            return fail("memory table %s" % mem)
        for name in ("f16", "W8A8"):
            for b in ("1", "2"):
                d = rows[name]["decode"][b]
                if not (d.get("tokps", 0) > 0 and math.isfinite(d["tokps"]) and d["mbu"] > 0):
                    return fail("%s decode b%s: %s" % (name, b, d))
            if not rows[name]["prefill"].get("wall_tokps", 0) > 0:
                return fail("%s prefill: %s" % (name, rows[name]["prefill"]))
        hf = rows[gpu_bench.HF_ROW]["decode"]["1"]
        ctx = 16 + 3 + 33 / 2.0
        w = 2 * params - 2 * ref["vocab"] * width + 2 * width
        k = kv["layers"] * 2 * kv["kv_heads"] * kv["head_dim"] * ctx * 2
        want = (w + k) / (1 / 50.0) / 10e9
        if abs(hf["mbu"] - want) > 1e-12 * want:
            return fail("HF MBU b1 %r, formula %r" % (hf["mbu"], want))
        # Tied embeddings (gpu_reference.py --shape llama32-1b): the table is
        # the LM head too, so every parameter is read once per step (plus
        # the gathered rows).
        tied = dict(gpu_bench.torch_rows(dict(ref, tied=True), 16, width, ref["vocab"]))
        want = (2 * params + 2 * width + k) / (1 / 50.0) / 10e9
        got = tied[gpu_bench.HF_ROW]["decode"][1]["mbu"]
        if abs(got - want) > 1e-12 * want:
            return fail("tied HF MBU b1 %r, formula %r" % (got, want))
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
