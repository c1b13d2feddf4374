#!/usr/bin/env python3
"""LoRA adapters (docs/LORA.md) across the model zoo's families and exports:
a synthetic rank-2 adapter in PEFT's format on every named block linear of a
case (q/k/v/o, MLP, fused projections, experts), then

  1. merged (qcc --lora) = onnxruntime on the model with the same update
     added to its weights by numpy;
  2. runtime (qcc --lora-adapter x=..., qrun --lora x) = the same;
  3. the KV cache with the runtime adapter (qcc-kv-check RUNTIME@x=MERGED):
     every decoder (fused QKV projections included: group-fused-heads
     regroups B's rows with the weight's);
  4. mixture-of-experts experts at run time are refused by name (their rows
     are routed tokens), and the same model with adapters on its attention
     only passes 1-3.

    .venv/bin/python test/e2e/check_lora_zoo.py [CASE ...] [--all]
        [--qcc build/bin/qcc] [--qrun build/bin/qrun] [--kv-check build/bin/qcc-kv-check]

Default: one case per kind of module layout (ctest lora-zoo); --all: every
zoo case (about 12 minutes on 2 cores). Tolerance for 1 and 2: max |qcc -
onnxruntime| <= 1e-4 x max |onnxruntime| over the first output (float32
both sides, different summation orders). PEFT's own numbers:
test/e2e/check_lora.py. Needs numpy, onnx, onnxruntime.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

import check_zoo

ZOO = os.path.join(check_zoo.ROOT, "test", "models", "zoo")
TOLERANCE = 1e-4
# The module names HF's families give their block linears.
TARGETS = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
           "c_attn", "c_proj", "c_fc", "dense", "query_key_value", "fc1", "fc2", "Wqkv",
           "out_proj", "qkv_proj", "gate_up_proj", "dense_h_to_4h", "dense_4h_to_h",
           "query", "key", "value", "q_lin", "k_lin", "v_lin", "out_lin", "lin1", "lin2",
           "qkv", "fc_in", "fc_out", "w1", "w2", "w3"}
DEFAULT = ["llama-past", "gpt2-legacy", "qwen2-legacy", "cohere-past", "gemma-genai",
           "gpt_neox-legacy", "mixtral-legacy"]


def save_adapter(folder, tensors):
    os.makedirs(folder)
    header, blobs, offset = {}, [], 0
    for key, value in tensors.items():
        data = value.astype("<f4").tobytes()
        header[key] = {"dtype": "F32", "shape": list(value.shape),
                       "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    with open(os.path.join(folder, "adapter_model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    with open(os.path.join(folder, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 2}, f)


def block_linears(model, experts):
    """module path -> (initializer, stored [in, out]?, fan_in, fan_out) for
    every MatMul / Gemm a module path names (the legacy exporter's node names)."""
    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    out = {}
    for n in model.graph.node:
        if n.op_type not in ("MatMul", "Gemm") or not n.name.startswith("/"):
            continue
        parts = n.name[1:].split("/")[:-1]
        if not parts or parts[-1] not in TARGETS:
            continue
        if not experts and any("expert" in p for p in parts):
            continue
        value, flip = n.input[1], False
        while value not in inits and value in producer and \
                producer[value].op_type in ("Transpose", "Cast", "Identity"):
            flip ^= producer[value].op_type == "Transpose"
            value = producer[value].input[0]
        if value not in inits or len(inits[value].dims) != 2 or inits[value].data_type != 1:
            continue
        trans_b = n.op_type == "Gemm" and any(a.name == "transB" and a.i for a in n.attribute)
        in_out = (not trans_b) ^ flip
        d0, d1 = inits[value].dims
        out[".".join(parts)] = (value, in_out, *((d0, d1) if in_out else (d1, d0)))
    return out


def check(case, args, tmp, experts=True):
    """One case; returns a list of failures (empty: passed)."""
    d = os.path.join(ZOO, case)
    model = onnx.load(os.path.join(d, "model.onnx"))
    linears = block_linears(model, experts)
    if not linears:
        return [f"{case}: no named block linears"]
    rng = np.random.default_rng(0)
    tensors = {}
    for path, (_, _, fan_in, fan_out) in linears.items():
        tensors[f"base_model.model.{path}.lora_A.weight"] = \
            rng.standard_normal((2, fan_in)) / fan_in ** 0.5
        tensors[f"base_model.model.{path}.lora_B.weight"] = rng.standard_normal((fan_out, 2)) * 0.3
    adapter = os.path.join(tmp, "adapter")
    save_adapter(adapter, tensors)
    # The reference: the same update added by numpy (scaling alpha / r = 1).
    inits = {i.name: i for i in model.graph.initializer}
    for path, (name, in_out, _, _) in linears.items():
        w = numpy_helper.to_array(inits[name]).copy()
        delta = (tensors[f"base_model.model.{path}.lora_B.weight"]
                 @ tensors[f"base_model.model.{path}.lora_A.weight"]).astype(np.float32)
        w += delta.T if in_out else delta
        inits[name].CopyFrom(numpy_helper.from_array(w.astype(np.float32), name))
    in_dir = os.path.join(d, "inputs")
    feeds = {f[:-4]: np.load(os.path.join(in_dir, f)) for f in os.listdir(in_dir)}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    first = model.graph.output[0].name
    ref = session.run([first], feeds)[0]

    failures, cells = [], []
    moe = experts and any("expert" in p for p in linears)
    for kind, flags, lora in (("merged", ["--lora", adapter], None),
                              ("runtime", [f"--lora-adapter=x={adapter}"], "x")):
        pkg = os.path.join(tmp, kind + ".qpkg")
        rc, _, err = check_zoo.run([args.qcc, os.path.join(d, "model.onnx"), "--no-cuda",
                                    "--quiet", "-o", pkg] + flags)
        if kind == "runtime" and moe:
            ok = rc != 0 and "its linear reads rows gathered from the batch's tokens" in err
            cells.append("runtime experts refused" if ok else "runtime experts NOT refused")
            if not ok:
                failures.append(f"{case}: runtime adapters on experts must be refused: "
                                f"{check_zoo.first_error_line(err) or 'compiled'}")
            return failures, cells
        if rc != 0:
            failures.append(f"{case} {kind}: {check_zoo.first_error_line(err)}")
            continue
        out = os.path.join(tmp, kind + "_out")
        cmd = [args.qrun, pkg, "--backend=cpu", "--quiet", "--output-dir", out]
        cmd += ["--lora", lora] if lora else []
        for name in feeds:
            cmd += ["--input", f"{name}={os.path.join(in_dir, name)}.npy"]
        rc, _, err = check_zoo.run(cmd)
        if rc != 0:
            failures.append(f"{case} {kind} qrun: {check_zoo.first_error_line(err)}")
            continue
        got = np.load(os.path.join(out, first.replace("/", "_") + ".npy"))
        e, why = check_zoo.compare(ref, got, [])
        cells.append(f"{kind} {e:.1e}" if e is not None else f"{kind} {why}")
        if why or e > TOLERANCE:
            failures.append(f"{case} {kind}: max rel err {e} vs onnxruntime ({why})")
    runtime, merged = os.path.join(tmp, "runtime.qpkg"), os.path.join(tmp, "merged.qpkg")
    if os.path.exists(runtime) and os.path.exists(merged):
        rc, out, err = check_zoo.run([args.kv_check, f"{runtime}@x={merged}"])
        encoder = "no KV cache in the artifact" in out and case.split("-")[0] in (
            "bert", "distilbert")
        if encoder:
            cells.append("kv - (encoder)")
        else:
            cells.append("kv PASS" if rc == 0 else "kv FAIL")
            if rc != 0:
                failures.append(f"{case} kv: {(out or err).strip()[-300:]}")
    return failures, cells


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bin_dir = os.path.join(check_zoo.ROOT, "build", "bin")
    ap.add_argument("cases", nargs="*")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--qcc", default=os.path.join(bin_dir, "qcc"))
    ap.add_argument("--qrun", default=os.path.join(bin_dir, "qrun"))
    ap.add_argument("--kv-check", default=os.path.join(bin_dir, "qcc-kv-check"))
    args = ap.parse_args()
    cases = args.cases or (sorted(c for c in os.listdir(ZOO)
                                  if os.path.isfile(os.path.join(ZOO, c, "model.onnx")))
                           if args.all else DEFAULT)
    failed = passed = skipped = 0
    for case in cases:
        runs = [(case, True)]
        if case.startswith(("mixtral", "qwen2_moe", "qwen3_moe")):
            runs.append((case + " (attention only)", False))
        for label, experts in runs:
            tmp = tempfile.mkdtemp(prefix="lora-zoo-")
            try:
                result = check(case, args, tmp, experts)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(result, list):  # nothing to adapt (dynamo, int4)
                print(f"{label}: skipped: {result[0].split(': ', 1)[1]}", flush=True)
                skipped += 1
                continue
            failures, cells = result
            print(f"{label}: {'PASS' if not failures else 'FAIL'} ({'; '.join(cells)})",
                  flush=True)
            for f in failures:
                print("   ", f)
            failed += bool(failures)
            passed += not failures
    print(f"lora-zoo: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
