#!/usr/bin/env python3
"""LoRA adapters (docs/LORA.md) against PEFT: test/models/lora's base models
(llama: torch Linear, MatMul; gpt2: Conv1D, Gemm) with two adapters each that
PEFT trained and saved, and PEFT's merged model's logits from onnxruntime.

    .venv/bin/python test/e2e/check_lora.py [--qcc build/bin/qcc]
        [--qrun build/bin/qrun] [--kv-check build/bin/qcc-kv-check]

Per family:
  1. merged: `qcc --lora adapters/X` then qrun's logits = PEFT's (X = a, b),
     and `--lora adapters/a:0` (scale 0) = the base model's;
  2. runtime: one artifact with `--lora-adapter a=... --lora-adapter b=...`;
     qrun with no --lora, `--lora a`, `--lora b` = base, a, b;
  3. the KV cache with adapters (qcc-kv-check): one batch mixing a, b and
     none through prefill/decode = `main` with each sequence's adapter, bit
     for bit batch-invariant; and adapter a through the cache = the artifact
     with a merged (its `main`);
  4. W8A8 with runtime adapters: qrun --lora a within check_zoo's W8A8
     sanity bound of PEFT's float logits.
Tolerance for 1 and 2: max |qrun - PEFT| <= 1e-4 * max |PEFT| over the
unpadded positions: float32 on both sides, different summation orders (a
merged weight rounds W + scaling * B A once; a runtime adapter adds the
low-rank product, summed in double, to the base linear's result), so a few
ulps of the largest logit. Exit status 1 on any failure. Needs only numpy.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

import check_zoo

LORA = os.path.join(check_zoo.ROOT, "test", "models", "lora")
TOLERANCE = 1e-4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bin_dir = os.path.join(check_zoo.ROOT, "build", "bin")
    ap.add_argument("--qcc", default=os.path.join(bin_dir, "qcc"))
    ap.add_argument("--qrun", default=os.path.join(bin_dir, "qrun"))
    ap.add_argument("--kv-check", default=os.path.join(bin_dir, "qcc-kv-check"))
    args = ap.parse_args()
    failures = []
    passed = 0

    def expect(ok, what):
        nonlocal passed
        print(f"{'PASS' if ok else 'FAIL'}: {what}", flush=True)
        if ok:
            passed += 1
        else:
            failures.append(what)

    def compile_(model, flags, pkg):
        rc, _, err = check_zoo.run([args.qcc, model, "--no-cuda", "--quiet", "-o", pkg] + flags)
        if rc != 0:
            raise RuntimeError(f"qcc {' '.join(flags)}: {check_zoo.first_error_line(err)}")

    def logits(pkg, in_dir, tmp, adapter=None):
        out = tempfile.mkdtemp(dir=tmp)
        cmd = [args.qrun, pkg, "--backend=cpu", "--quiet", "--output-dir", out]
        if adapter:
            cmd += ["--lora", adapter]
        for f in sorted(os.listdir(in_dir)):
            cmd += ["--input", f"{f[:-4]}={os.path.join(in_dir, f)}"]
        rc, _, err = check_zoo.run(cmd)
        if rc != 0:
            raise RuntimeError(f"qrun {adapter or ''}: {check_zoo.first_error_line(err)}")
        return np.load(os.path.join(out, "logits.npy"))

    for family in sorted(os.listdir(LORA)):
        case = os.path.join(LORA, family)
        if not os.path.isfile(os.path.join(case, "model.onnx")):
            continue
        with open(os.path.join(case, "meta.json")) as f:
            ignore = json.load(f)["ignore_positions"]
        model = os.path.join(case, "model.onnx")
        in_dir = os.path.join(case, "inputs")
        ref = {k: np.load(os.path.join(case, "outputs", f"logits_{k}.npy"))
               for k in ("base", "a", "b")}
        adapter = {k: os.path.join(case, "adapters", k) for k in ("a", "b")}

        def close(got, want, what):
            err, why = check_zoo.compare(ref[want], got, ignore)
            expect(why is None and err <= TOLERANCE,
                   f"{family} {what}: max rel err {err:.2e} vs PEFT {want} "
                   f"(<= {TOLERANCE:g}){'; ' + why if why else ''}")

        with tempfile.TemporaryDirectory() as tmp:
            try:
                # 1. merged
                for k in ("a", "b"):
                    pkg = os.path.join(tmp, f"merged_{k}.qpkg")
                    compile_(model, ["--lora", adapter[k]], pkg)
                    close(logits(pkg, in_dir, tmp), k, f"--lora adapters/{k}")
                pkg = os.path.join(tmp, "scale0.qpkg")
                compile_(model, ["--lora", adapter["a"] + ":0"], pkg)
                close(logits(pkg, in_dir, tmp), "base", "--lora adapters/a:0")
                # 2. runtime
                rt = os.path.join(tmp, "runtime.qpkg")
                flags = [f"--lora-adapter={k}={adapter[k]}" for k in ("a", "b")]
                compile_(model, flags, rt)
                for k in (None, "a", "b"):
                    close(logits(rt, in_dir, tmp, k), k or "base",
                          f"--lora-adapter a, b; qrun --lora {k or '(none)'}")
                # 3. the KV cache
                merged_a = os.path.join(tmp, "merged_a.qpkg")
                rc, out, err = check_zoo.run(
                    [args.kv_check, f"{rt}@a,b,base", f"{rt}@a={merged_a}"])
                for line in out.splitlines():
                    if line.startswith(tmp):
                        print("   ", line.replace(tmp + os.sep, ""))
                expect(rc == 0, f"{family} qcc-kv-check with adapters a, b and none in one "
                                f"batch, and a against the merged artifact")
                # 4. W8A8
                q = os.path.join(tmp, "w8a8.qpkg")
                compile_(model, ["--quant=w8a8", f"--calib={in_dir}"] + flags, q)
                err, why = check_zoo.compare(ref["a"], logits(q, in_dir, tmp, "a"), ignore)
                expect(why is None and err <= check_zoo.W8A8_SANITY,
                       f"{family} W8A8 + runtime adapter a: max rel err {err:.2e} vs PEFT a "
                       f"(<= {check_zoo.W8A8_SANITY})")
            except RuntimeError as e:
                expect(False, f"{family}: {e}")
    print(f"lora: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
