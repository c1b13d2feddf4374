#!/usr/bin/env python3
"""f16 and bf16 models through qcc + qrun's CPU backend, against stored references.

    .venv/bin/python test/e2e/check_half.py --qcc build/bin/qcc --qrun build/bin/qrun \\
        [--kv-check build/bin/qcc-kv-check] [CASE_DIR ...]

For every test/models/half/<case>/ (default: all; written by test/models/half/gen_half.py
from zoo llama exports, as `torch.onnx.export(model.half())` writes them):
  1. `qcc model.onnx --no-cuda -o m.qpkg`: the artifact keeps the weights in the model's
     type (every constant of 1024 elements or more is f16/bf16 in the manifest) and is
     compared in size with the float32 source model compiled alike;
  2. `qrun m.qpkg --backend=cpu --input ...`: every output has the model's type (.npy '<f2'
     for f16; bf16 has no numpy dtype and is written as float32) and
     max|qrun - ref| / max|ref| <= TOLERANCE[type] over the rows whose result is defined
     (meta.json ignore_positions: left-padding query rows);
  3. `qcc --quant=w8a8 --calib=inputs/`: W8A8 (SmoothQuant O1, calibrated on the case's
     own inputs) reads the f16/bf16 weights as float; within W8A8_TOLERANCE of the same
     reference;
  4. with --kv-check, when the artifact has a KV cache: qcc-kv-check (prefill/decode vs
     recompute, its own f16/bf16 tolerance).

Tolerances (relative to max|ref|, the measure of check_zoo.py):
  - f16, reference = onnxruntime on the same f16 graph. Both store every f16 value, but round
    at different places (onnxruntime's CPU provider runs ops it has no f16 kernel for in f32
    between inserted casts; qrun rounds every value a node writes) and sum in different
    orders. One f16 rounding is 2^-11 = 4.9e-4 relative; over two layers, the measured error
    is about 2 such roundings of the largest logit. TOLERANCE 8 * 2^-11 = 3.9e-3.
  - bf16, reference = onnxruntime on the float32 model (its CPU provider has no bf16 kernels).
    The bf16 model differs from it by its weights and every value rounded to bf16 (2^-8 =
    3.9e-3 relative each); measured about 2.5 such roundings. TOLERANCE 8 * 2^-8 = 3.1e-2.
  - W8A8: int8 weights and activations (2^-8 of each row's range) on top; a sanity bound
    (a wrong scale or layout gives errors of order 1): 0.1.
Exit status 1 on any failure. Needs only numpy.
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HALF = os.path.join(ROOT, "test", "models", "half")
ZOO = os.path.join(ROOT, "test", "models", "zoo")
TOLERANCE = {"FLOAT16": 8 * 2.0**-11, "BFLOAT16": 8 * 2.0**-8}
W8A8_TOLERANCE = 0.1
TIMEOUT_S = 300


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): "
                           f"{(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return p.stdout + p.stderr


def manifest(qpkg):
    """The JSON manifest of a .qpkg (header: runtime/core/Artifact.h)."""
    with open(qpkg, "rb") as f:
        data = f.read()
    off, size = struct.unpack_from("<QQ", data, 16)
    return json.loads(data[off:off + size])


def rel_err(got, ref, ignore):
    got, ref = got.astype(np.float64), ref.astype(np.float64)
    keep = np.ones(ref.shape[:2], dtype=bool) if ref.ndim >= 2 else None
    if keep is not None:
        for b, s in ignore:
            keep[b, s] = False
        got, ref = got[keep], ref[keep]
    if not np.isfinite(got).all():
        return float("inf")
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-6))


def check_case(case, args, work):
    meta = json.load(open(os.path.join(case, "meta.json")))
    name = os.path.basename(case.rstrip("/"))
    half = meta["half"]
    want = "f16" if half == "FLOAT16" else "bf16"
    out_dtype = np.float16 if half == "FLOAT16" else np.float32
    failures = []
    inputs = sorted(glob.glob(os.path.join(case, "inputs", "*.npy")))
    feeds = [f"--input={os.path.basename(p)[:-4]}={p}" for p in inputs]

    qpkg = os.path.join(work, name + ".qpkg")
    run([args.qcc, os.path.join(case, "model.onnx"), "--no-cuda", "-o", qpkg])
    ref32 = os.path.join(work, name + ".f32.qpkg")
    run([args.qcc, os.path.join(ZOO, meta["source"], "model.onnx"), "--no-cuda", "-o", ref32])
    m = manifest(qpkg)
    big = [c for c in m["constants"] if c["size"] >= 1024 * 2]  # weights (norm gammas: 64)
    wrong = {m["values"][c["value"]]["dtype"] for c in big} - {want, "i64", "i32", "i8", "bool"}
    if wrong:
        failures.append(f"artifact holds large constants of type {sorted(wrong)}")
    sizes = (os.path.getsize(qpkg), os.path.getsize(ref32))

    def compare(qpkg_path, tol, label):
        out_dir = os.path.join(work, name + "-" + label)
        run([args.qrun, qpkg_path, "--backend=cpu", *feeds, "--output-dir", out_dir])
        worst = 0.0
        for ref_path in sorted(glob.glob(os.path.join(case, "outputs", "*.npy"))):
            oname = os.path.basename(ref_path)[:-4]
            got = np.load(os.path.join(out_dir, oname + ".npy"))
            if got.dtype != out_dtype:
                failures.append(f"{label}: output {oname} is {got.dtype}, expected {np.dtype(out_dtype)}")
                continue
            ref = np.load(ref_path)
            ignore = meta.get("ignore_positions", {}).get(oname, [])
            worst = max(worst, rel_err(got, ref, ignore))
        if not worst <= tol:
            failures.append(f"{label}: max rel err {worst:.3g} > {tol:.3g}")
        return worst

    err = compare(qpkg, TOLERANCE[half], want)
    q8 = os.path.join(work, name + ".w8a8.qpkg")
    run([args.qcc, os.path.join(case, "model.onnx"), "--no-cuda", "--quant=w8a8",
         "--calib=" + os.path.join(case, "inputs"), "-o", q8])
    err8 = compare(q8, W8A8_TOLERANCE, "w8a8")
    kv = "-"
    if args.kv_check and "kv_cache" in m:
        p = subprocess.run([args.kv_check, qpkg], capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        kv = "PASS" if p.returncode == 0 else "FAIL"
        if p.returncode != 0:
            failures.append("kv-check: " + (p.stdout + p.stderr).strip().splitlines()[-2:][0])
    status = "FAIL: " + "; ".join(failures) if failures else "PASS"
    print(f"{name:16} {want:5} artifact {sizes[0]:>7} B (f32 source: {sizes[1]:>7} B)  "
          f"max rel err {err:.3g} (tol {TOLERANCE[half]:.3g}, ref: {meta['reference']})  "
          f"w8a8 {err8:.3g} (tol {W8A8_TOLERANCE})  kv {kv}  {status}")
    return not failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    ap.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))
    ap.add_argument("--kv-check")
    args = ap.parse_args()
    cases = args.cases or sorted(os.path.dirname(p) for p in
                                 glob.glob(os.path.join(HALF, "*", "meta.json")))
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for case in cases:
            try:
                failed += not check_case(case, args, work)
            except Exception as e:  # one line per broken case
                print(f"{os.path.basename(case.rstrip('/')):16} FAIL: {e}")
                failed += 1
    print(f"half: {len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
