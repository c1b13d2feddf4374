#!/usr/bin/env python3
"""Compare qcc + qrun with onnxruntime on single-op models of the ops whose
results depend on run-time values: Tile, TopK, OneHot, NonZero,
ScatterElements and ScatterND's reductions.

    .venv/bin/python test/e2e/check_ops_vs_onnxruntime.py \
        --qcc build/bin/qcc --qrun build/bin/qrun

Every operand is a graph input, so nothing folds at compile time and qrun's
CPU kernels compute each result. The cases are the ones the ONNX node tests
leave out (their OneHot and TopK tests import opset 11, below qcc's 13): ties
and NaNs in TopK, negative and out-of-range indices in OneHot, NaN and -0.0 in
NonZero, every reduction of ScatterElements and ScatterND with repeated
indices, f16, int64 and bool data. These ops move or compare elements without arithmetic (but
ScatterElements' add and mul): results must be equal, floats within 1e-6
relative. Exit status 1 on any FAIL. Python is only the driver and the
reference.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

TIMEOUT_S = 60
TYPES = {np.float32: onnx.TensorProto.FLOAT, np.float16: onnx.TensorProto.FLOAT16,
         np.int64: onnx.TensorProto.INT64, np.int32: onnx.TensorProto.INT32,
         np.bool_: onnx.TensorProto.BOOL}


def model(op, inputs, n_out, opset=18, static=(), **attrs):
    """(a model of one `op` node whose operands are graph inputs, of dynamic
    sizes but those named in `static`; its inputs)."""
    outs = [f"out{i}" for i in range(n_out)]
    g = helper.make_graph(
        [helper.make_node(op, list(inputs), outs, name=op.lower(), **attrs)], op,
        [helper.make_tensor_value_info(n, TYPES[a.dtype.type],
                                       list(a.shape) if n in static else
                                       [f"{n}_{i}" for i in range(a.ndim)])
         for n, a in inputs.items()],
        [helper.make_value_info(o, onnx.TypeProto()) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return onnx.shape_inference.infer_shapes(m), inputs


def cases():
    rng = np.random.default_rng(20261129)
    nan = np.nan
    ties = np.array([[1, nan, 3, nan, 2, 3, 0], [5, 5, 5, -0.0, 0.0, -1, 5],
                     [np.inf, -np.inf, 2, 2, nan, 7, 2]], np.float32)
    # Tile
    yield "tile f32 [2,3,4] x [2,1,3]", model("Tile", {
        "x": rng.standard_normal((2, 3, 4)).astype(np.float32), "r": np.array([2, 1, 3], np.int64)}, 1)
    yield "tile int64 x [0, 2]", model("Tile", {
        "x": np.arange(6, dtype=np.int64).reshape(2, 3), "r": np.array([0, 2], np.int64)}, 1)
    yield "tile bool", model("Tile", {
        "x": np.array([[True, False]]), "r": np.array([3, 2], np.int64)}, 1)
    yield "tile f16", model("Tile", {
        "x": rng.standard_normal((2, 3)).astype(np.float16), "r": np.array([2, 2], np.int64)}, 1)
    yield "tile scalar", model("Tile", {
        "x": np.array(2.5, np.float32), "r": np.zeros(0, np.int64)}, 1)
    # TopK
    for largest in (1, 0):
        for k in (0, 3, 7):
            yield f"top_k ties/NaN largest={largest} k={k}", model("TopK", {
                "x": ties, "k": np.array([k], np.int64)}, 2, axis=-1, largest=largest)
    yield "top_k axis 0", model("TopK", {
        "x": ties, "k": np.array([2], np.int64)}, 2, axis=0)
    yield "top_k int64 ties", model("TopK", {
        "x": np.array([[3, 1, 3, 2, 3], [0, 0, -5, 9, 0]], np.int64), "k": np.array([4], np.int64)}, 2)
    yield "top_k f16 [2,5,3] axis 1", model("TopK", {
        "x": rng.standard_normal((2, 5, 3)).astype(np.float16), "k": np.array([3], np.int64)}, 2, axis=1)
    yield "top_k router [6,8] k=2", model("TopK", {
        "x": rng.random((6, 8)).astype(np.float32), "k": np.array([2], np.int64)}, 2, axis=-1)
    # OneHot
    idx = np.array([[0, 4, -1], [-5, 5, 9]], np.int64)
    for axis in (-1, 0, 1, -3):
        yield f"one_hot axis {axis}", model("OneHot", {
            "i": idx, "d": np.array(5, np.int64), "v": np.array([-1, 3], np.float32)}, 1, axis=axis)
    yield "one_hot float depth, int32 values", model("OneHot", {
        "i": np.array([0, 2, -3, 3], np.int64), "d": np.array([3.7], np.float32),
        "v": np.array([0, 1], np.int32)}, 1)
    yield "one_hot int32 indices", model("OneHot", {
        "i": np.array([[1, -2], [2, 0]], np.int32), "d": np.array(3, np.int32),
        "v": np.array([2, 5], np.float32)}, 1, axis=1)
    yield "one_hot float indices", model("OneHot", {
        "i": np.array([[0.0, 2.9], [-1.5, 7.0]], np.float32), "d": np.array(3.0, np.float32),
        "v": np.array([0, 1], np.float32)}, 1)
    # NonZero
    yield "non_zero f32 NaN and -0.0", model("NonZero", {
        "x": np.array([[nan, -0.0, 0, 1], [0, 0, 2, -3]], np.float32)}, 1)
    yield "non_zero bool [2,3,2]", model("NonZero", {"x": rng.random((2, 3, 2)) > 0.5}, 1)
    yield "non_zero int64 all zero", model("NonZero", {"x": np.zeros((3, 2), np.int64)}, 1)
    # A scalar counts as a vector of one element (onnxruntime: [1, n]; ONNX's
    # shape inference declares [0, n], which qcc refuses as a contradiction).
    m, feeds = model("NonZero", {"x": np.array(4.0, np.float32)}, 1)
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 1
    yield "non_zero scalar", (m, feeds)
    # ScatterElements
    data = np.array([[1, nan, 3, 4, 5], [6, 7, 8, 9, 10], [0, 0, 0, 0, 0], [1, 2, 3, 4, 5]],
                    np.float32)
    sidx = np.array([[0, 1, 1, -4, 3], [3, 1, 1, 0, -1], [0, 0, 2, 2, 2]], np.int64)
    upd = np.array([[2, 2, 7, nan, -1], [3, 9, -2, 4, 6], [5, 1, nan, 8, 0]], np.float32)
    for red in ("none", "add", "mul", "max", "min"):
        yield f"scatter_elements axis 0 {red}", model("ScatterElements", {
            "d": data, "i": sidx, "u": upd}, 1, axis=0, reduction=red)
    yield "scatter_elements axis 1 negative indices", model("ScatterElements", {
        "d": data, "i": np.array([[-1, 0], [4, -5]], np.int64),
        "u": np.array([[1, 2], [3, 4]], np.float32)}, 1, axis=1)
    yield "scatter_elements int64 add", model("ScatterElements", {
        "d": np.arange(6, dtype=np.int64).reshape(2, 3), "i": np.array([[2, 2, 2]], np.int64),
        "u": np.array([[10, 20, 2**62]], np.int64)}, 1, axis=1, reduction="add")
    # ScatterND's reductions (versions 16 and 18) share ScatterElements' code
    # (qcc needs the index tuple length, the indices' last dimension, static).
    nd_idx = np.array([[2], [-1], [0], [2]], np.int64)
    nd_upd = np.array([[10, nan, 1], [3, 4, -5], [7, 8, 9], [nan, 0, 2]], np.float32)
    nd_data = np.array([[1, 2, 3], [4, 5, 6], [nan, 8, 9]], np.float32)
    for red in ("add", "mul", "max", "min"):
        yield f"scatter_nd {red}", model("ScatterND", {
            "d": nd_data, "i": nd_idx, "u": nd_upd}, 1, static=("i",), reduction=red)
    yield "scatter_nd int64 add", model("ScatterND", {
        "d": np.arange(6, dtype=np.int64).reshape(2, 3), "i": np.array([[1, 2], [1, -1]], np.int64),
        "u": np.array([5, 2**62], np.int64)}, 1, static=("i",), reduction="add")
    yield "scatter_elements f16 opset 13", model("ScatterElements", {
        "d": np.zeros((3, 3), np.float16), "i": np.array([[1, 0, 2], [0, 2, 1]], np.int64),
        "u": rng.standard_normal((2, 3)).astype(np.float16)}, 1, opset=13)


def compare(got, want):
    if got.shape != want.shape:
        return f"shape {list(got.shape)} != {list(want.shape)}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        ok = np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-6, atol=0,
                        equal_nan=True)
        if ok.all():
            return ""
        bad = np.argwhere(~ok)[0]
        return f"differs at {bad.tolist()}: {got[tuple(bad)]} != {want[tuple(bad)]}"
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        return f"differs at {bad.tolist()}: {got[tuple(bad)]} != {want[tuple(bad)]}"
    return ""


def check(name, m, feeds, args, work):
    path = os.path.join(work, "model.onnx")
    onnx.save(m, path)
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3  # errors only
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001 - onnxruntime lacks some type combinations
        return "SKIP", f"onnxruntime: {str(e).splitlines()[0][:160]}"
    qpkg = os.path.join(work, "model.qpkg")
    p = subprocess.run([args.qcc, path, "--no-cuda", "-o", qpkg], capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    if p.returncode != 0:
        return "FAIL", "qcc: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    cmd = [args.qrun, qpkg, "--output-dir", os.path.join(work, "out")]
    for n, a in feeds.items():
        f = os.path.join(work, n + ".npy")
        np.save(f, a)
        cmd += ["--input", f"{n}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if p.returncode != 0:
        return "FAIL", "qrun: " + (p.stderr.strip().splitlines() or ["?"])[-1]
    for o, w in zip(m.graph.output, want):
        got = np.load(os.path.join(work, "out", o.name + ".npy"))
        if w.dtype == np.float16 and got.dtype == np.float32:
            got = got.astype(np.float16)  # qrun writes f16 outputs as they are
        why = compare(got, w)
        if why:
            return "FAIL", f"output {o.name}: {why}"
    return "PASS", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qcc", required=True)
    ap.add_argument("--qrun", required=True)
    args = ap.parse_args()
    failed = passed = skipped = 0
    with tempfile.TemporaryDirectory(prefix="qcc-ops-") as tmp:
        for i, (name, (m, feeds)) in enumerate(cases()):
            work = os.path.join(tmp, str(i))
            os.makedirs(work)
            outcome, why = check(name, m, feeds, args, work)
            print(f"{name}: {outcome}{' (' + why + ')' if why else ''}")
            failed += outcome == "FAIL"
            passed += outcome == "PASS"
            skipped += outcome == "SKIP"
    print(f"ops vs onnxruntime: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
