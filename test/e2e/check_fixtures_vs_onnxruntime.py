#!/usr/bin/env python3
"""Compare qcc + qrun (CPU reference backend) with onnxruntime on the model fixtures.

    .venv/bin/python test/e2e/check_fixtures_vs_onnxruntime.py \
        --qcc build/bin/qcc --qrun build/bin/qrun [--models M.onnx ...]

For test/models/{gpt2,llama,bert}.onnx and every examples/*/model.onnx: compile
once with qcc, then for (batch, seq) in {(1,1), (2,7), (3,16)} feed the same
random int64 token ids in [0, vocab) (fixed seed) to qrun and to onnxruntime
(CPUExecutionProvider). An `attention_mask` input gets ones with some trailing
zeros (padding) in every row but the first; every row keeps at least one token.

Error measure, per output: max|a - b| / max(max|b|, 1e-6), a = qrun, b =
onnxruntime. The error is normalized by the largest reference magnitude, not
elementwise: logits and hidden states have many entries near zero where an
elementwise relative error blows up on float32 rounding noise (and is
undefined where the reference is exactly 0), while an error that is small
against the tensor's scale is what matters for argmax / next-token results.
Must be <= 1e-4 (fp32 end to end; both sides differ only by summation order).
Exit status 1 on any FAIL. Python is only the test driver and the reference.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

SHAPES = [(1, 1), (2, 7), (3, 16)]
TOLERANCE = 1e-4
SEED = 20240917
TIMEOUT_S = 300
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_models():
    models = [os.path.join(ROOT, "test", "models", m)
              for m in ("gpt2.onnx", "llama.onnx", "bert.onnx")]
    models += sorted(glob.glob(os.path.join(ROOT, "examples", "*", "model.onnx")))
    return models


def vocab_size(model, ids_name):
    """Rows of the embedding table indexed by the token ids, else logits' last dim."""
    inits = {t.name: t for t in model.graph.initializer}
    consts = {}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = a.t
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == ids_name:
            table = inits.get(n.input[0]) or consts.get(n.input[0])
            if table is not None and len(table.dims) == 2:
                return int(table.dims[0])
    for o in model.graph.output:
        dims = o.type.tensor_type.shape.dim
        if len(dims) == 3 and dims[-1].HasField("dim_value"):
            return int(dims[-1].dim_value)
    raise RuntimeError("cannot tell the vocabulary size (no embedding Gather on "
                       f"'{ids_name}', no static last dim on a rank-3 output)")


def make_inputs(model, batch, seq, rng):
    inits = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in inits]
    ids_name = next((i.name for i in graph_inputs if "ids" in i.name), graph_inputs[0].name)
    vocab = vocab_size(model, ids_name)
    feeds = {}
    for gi in graph_inputs:
        elem = gi.type.tensor_type.elem_type
        if gi.name == ids_name:
            feeds[gi.name] = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
        elif "mask" in gi.name:
            mask = np.ones((batch, seq), dtype=np.int64)
            for b in range(1, batch):
                if seq > 1:
                    pad = int(rng.integers(1, seq))  # 1 .. seq-1 trailing zeros
                    mask[b, seq - pad:] = 0
            feeds[gi.name] = mask.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
        elif "token_type" in gi.name:
            feeds[gi.name] = np.zeros((batch, seq), dtype=np.int64)
        else:
            raise RuntimeError(f"don't know how to make input '{gi.name}'")
    return feeds, vocab


def run(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT_S} s"
    if p.returncode != 0:
        msg = (p.stderr or p.stdout).strip().splitlines()
        return f"exit {p.returncode}: {msg[-1] if msg else '(no message)'}"
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qcc", required=True)
    ap.add_argument("--qrun", required=True)
    ap.add_argument("--models", nargs="*", help="default: the fixtures and examples/*/model.onnx")
    args = ap.parse_args()
    models = args.models or default_models()

    rows = []  # model, shape, output, max abs, max rel, verdict / reason
    failed = False
    with tempfile.TemporaryDirectory(prefix="qcc-fixtures.") as tmp:
        for path in models:
            mname = os.path.relpath(path, ROOT) if path.startswith(ROOT) else path
            if not os.path.exists(path):
                rows.append((mname, "-", "-", "-", "-", "FAIL: model file missing"))
                failed = True
                continue
            work = tempfile.mkdtemp(dir=tmp)
            qpkg = os.path.join(work, "model.qpkg")
            err = run([args.qcc, path, "--no-cuda", "-o", qpkg])
            if err:
                rows.append((mname, "-", "-", "-", "-", f"FAIL: qcc {err}"))
                failed = True
                continue
            model = onnx.load(path)
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            out_names = [o.name for o in sess.get_outputs()]
            rng = np.random.default_rng(SEED)
            for batch, seq in SHAPES:
                shape = f"({batch},{seq})"
                feeds, _ = make_inputs(model, batch, seq, rng)
                case = os.path.join(work, f"b{batch}s{seq}")
                os.makedirs(case)
                cmd = [args.qrun, qpkg, "--output-dir", os.path.join(case, "out")]
                for name, arr in feeds.items():
                    f = os.path.join(case, name.replace("/", "_") + ".npy")
                    np.save(f, arr)
                    cmd += ["--input", f"{name}={f}"]
                err = run(cmd)
                if err:
                    rows.append((mname, shape, "-", "-", "-", f"FAIL: qrun {err}"))
                    failed = True
                    continue
                refs = sess.run(out_names, feeds)
                for oname, ref in zip(out_names, refs):
                    got_path = os.path.join(case, "out", oname.replace("/", "_") + ".npy")
                    if not os.path.exists(got_path):
                        rows.append((mname, shape, oname, "-", "-", "FAIL: qrun wrote no output"))
                        failed = True
                        continue
                    got = np.load(got_path)
                    if got.shape != ref.shape or got.dtype != ref.dtype:
                        rows.append((mname, shape, oname, "-", "-",
                                     f"FAIL: got {got.dtype}{list(got.shape)}, "
                                     f"expected {ref.dtype}{list(ref.shape)}"))
                        failed = True
                        continue
                    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
                    max_abs = float(diff.max()) if diff.size else 0.0
                    scale = max(float(np.abs(ref).max()) if ref.size else 0.0, 1e-6)
                    max_rel = max_abs / scale
                    ok = np.isfinite(got).all() and max_rel <= TOLERANCE
                    if not np.isfinite(got).all():
                        verdict = "FAIL: non-finite values"
                    else:
                        verdict = "PASS" if ok else "FAIL"
                    failed |= not ok
                    rows.append((mname, shape, oname, f"{max_abs:.3e}", f"{max_rel:.3e}", verdict))

    header = ("model", "shape", "output", "max abs err", "max rel err", "result")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*header))
    print(fmt.format(*("-" * w for w in widths)))
    for r in rows:
        print(fmt.format(*r))
    n_fail = sum(1 for r in rows if r[-1] != "PASS")
    print(f"fixtures vs onnxruntime: {len(rows) - n_fail} passed, {n_fail} failed "
          f"(max rel err = max|qrun - ort| / max(max|ort|, 1e-6) <= {TOLERANCE:g})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
