#!/usr/bin/env python3
"""Generate small hand-built ONNX models for qcc's importer error tests.

Run from the repository root, after gen_fixtures.py (truncated.onnx is cut
from gpt2.onnx):

    /usr/bin/python3 test/models/gen_invalid.py

Any interpreter that has the `onnx` package and numpy works (no torch needed).
All models use the onnx.helper API, IR version 8, opset 17 unless stated.

Produces, next to this script:
    invalid/unsupported_op.onnx  Det on a [3,3] input (node "det_node"): valid ONNX, op qcc does not support
    invalid/truncated.onnx       first 60% of the bytes of gpt2.onnx: not parseable
    invalid/opset12.onnx         valid Add model importing default-domain opset 12 (qcc requires 13..17)
    invalid/bad_attr.onnx        LayerNormalization(axis=1) on [2,3,4] (node "ln_axis1"): qcc only normalises the last axis
    invalid/unknown_rank.onnx    Add whose input X has an elem_type but no shape field (node "add_unranked")
    external/linear_ext.onnx     MatMul(X[batch,8], W[8,4]) + Add(bias[4]); W and bias are ONNX external data
    external/linear_ext.bin      ... stored in this file
    opsets/reduce_mean_opset18.onnx  ReduceMean-18 (axes input): newer than Debian's onnx knows, imported
    opsets/reduce_mean_opset22.onnx  the same at opset 22: newer than qcc knows, refused
    diagnostics/unraised_attention.onnx  attention over heads of q, k, v [batch, seq, 64]
                                 whose Softmax ("probs_over_queries") normalizes over
                                 the query axis: valid, compiles, not raised (a warning)
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
INVALID = os.path.join(HERE, "invalid")
EXTERNAL = os.path.join(HERE, "external")
IR_VERSION = 8
PRODUCER = "qcc/test/models/gen_invalid.py"


def make_model(graph, opset=17):
    model = helper.make_model(graph, producer_name=PRODUCER,
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION
    return model


def save_checked(model, path):
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    print("wrote %s (%d bytes)" % (os.path.relpath(path), os.path.getsize(path)))


def unsupported_op():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 3])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [])
    node = helper.make_node("Det", ["X"], ["Y"], name="det_node")
    graph = helper.make_graph([node], "unsupported_op", [x], [y])
    save_checked(make_model(graph), os.path.join(INVALID, "unsupported_op.onnx"))


def truncated():
    src = os.path.join(HERE, "gpt2.onnx")
    if not os.path.exists(src):
        sys.exit("error: %s not found; run test/models/gen_fixtures.py first" % src)
    with open(src, "rb") as f:
        data = f.read()
    prefix = data[: int(len(data) * 0.6)]
    path = os.path.join(INVALID, "truncated.onnx")
    with open(path, "wb") as f:
        f.write(prefix)
    try:
        onnx.load_model_from_string(prefix)
    except Exception as e:  # expected: DecodeError
        print("wrote %s (%d bytes; %d%% of gpt2.onnx; onnx.load fails: %s)" % (
            os.path.relpath(path), len(prefix), 60, type(e).__name__))
    else:
        sys.exit("error: truncated gpt2.onnx unexpectedly parses")


def opset12():
    a = helper.make_tensor_value_info("A", TensorProto.FLOAT, [2, 3])
    b = helper.make_tensor_value_info("B", TensorProto.FLOAT, [2, 3])
    c = helper.make_tensor_value_info("C", TensorProto.FLOAT, [2, 3])
    node = helper.make_node("Add", ["A", "B"], ["C"], name="add_node")
    graph = helper.make_graph([node], "opset12", [a, b], [c])
    save_checked(make_model(graph, opset=12), os.path.join(INVALID, "opset12.onnx"))


def bad_attr():
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3, 4])
    # With axis=1 the normalised shape is X.shape[1:] = [3, 4]; Scale/B match it.
    scale = numpy_helper.from_array(np.ones((3, 4), dtype=np.float32), "scale")
    bias = numpy_helper.from_array(np.zeros((3, 4), dtype=np.float32), "bias")
    node = helper.make_node("LayerNormalization", ["X", "scale", "bias"], ["Y"], name="ln_axis1",
                            axis=1, epsilon=1e-5)
    graph = helper.make_graph([node], "bad_attr", [x], [y], initializer=[scale, bias])
    save_checked(make_model(graph), os.path.join(INVALID, "bad_attr.onnx"))


def unknown_rank():
    # shape=None: TypeProto.Tensor has elem_type but no `shape` field at all
    # (unknown rank), as opposed to a shape with unknown dims.  This is the
    # only defect: the same graph with X:[2,3] passes onnx.checker.  (onnx's
    # checker itself rejects main-graph inputs without a shape field --
    # "Field 'shape' of 'type' is required but missing" -- so this model is
    # saved unchecked.)
    def build(x_shape):
        x = helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)
        y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
        z = helper.make_tensor_value_info("Z", TensorProto.FLOAT, [2, 3])
        node = helper.make_node("Add", ["X", "Y"], ["Z"], name="add_unranked")
        return make_model(helper.make_graph([node], "unknown_rank", [x, y], [z]))

    onnx.checker.check_model(build([2, 3]), full_check=True)
    model = build(None)
    assert not model.graph.input[0].type.tensor_type.HasField("shape")
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    path = os.path.join(INVALID, "unknown_rank.onnx")
    onnx.save(model, path)
    print("wrote %s (%d bytes)" % (os.path.relpath(path), os.path.getsize(path)))


def linear_ext():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 4])
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["XW"], name="matmul"),
        helper.make_node("Add", ["XW", "bias"], ["Y"], name="add_bias"),
    ]
    graph = helper.make_graph(nodes, "linear_ext", [x], [y],
                              initializer=[numpy_helper.from_array(w, "W"),
                                           numpy_helper.from_array(b, "bias")])
    model = make_model(graph)
    onnx.checker.check_model(model, full_check=True)

    path = os.path.join(EXTERNAL, "linear_ext.onnx")
    bin_path = os.path.join(EXTERNAL, "linear_ext.bin")
    if os.path.exists(bin_path):
        os.remove(bin_path)  # onnx appends to an existing external data file
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="linear_ext.bin", size_threshold=0)

    # Re-load (resolving external data) and check the round trip.
    reloaded = onnx.load(path)
    onnx.checker.check_model(path)  # path form: resolves external data relative to the model
    got = {i.name: numpy_helper.to_array(i) for i in reloaded.graph.initializer}
    assert np.array_equal(got["W"], w) and np.array_equal(got["bias"], b)
    raw = onnx.load(path, load_external_data=False)
    for init in raw.graph.initializer:
        assert init.data_location == TensorProto.EXTERNAL, init.name
        info = {e.key: e.value for e in init.external_data}
        print("   %s: external %s" % (init.name, info))
    print("wrote %s (%d bytes) + %s (%d bytes)" % (
        os.path.relpath(path), os.path.getsize(path), os.path.relpath(bin_path),
        os.path.getsize(bin_path)))


def reduce_mean(opset, name):
    """ReduceMean with axes as an input (its opset-18 form) in a newer opset
    than Debian's onnx library knows: qcc imports it node by node."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 1])
    axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
    node = helper.make_node("ReduceMean", ["X", "axes"], ["Y"], name="mean18",
                            keepdims=1)
    graph = helper.make_graph([node], name, [x], [y], [axes])
    onnx.save(make_model(graph, opset=opset), os.path.join(HERE, "opsets", name + ".onnx"))


def unraised_attention():
    """Four-head attention written out as exporters do, except that the
    Softmax normalizes over the query axis (2), not the keys: a valid model
    qcc compiles as separate ops, warning that the attention is not raised."""
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", "seq", 64])
           for n in ("q", "k", "v")]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 64])
    heads = numpy_helper.from_array(np.array([0, 0, 4, 16], dtype=np.int64), "heads")
    merged = numpy_helper.from_array(np.array([0, 0, 64], dtype=np.int64), "merged")
    four = numpy_helper.from_array(np.array(4.0, dtype=np.float32), "four")
    nodes = [helper.make_node("Reshape", [n, "heads"], [n + "4"], name=n + "_split")
             for n in ("q", "k", "v")]
    nodes += [
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qh", "kt"], ["qk"], name="qk"),
        helper.make_node("Div", ["qk", "four"], ["scores"], name="scale"),
        helper.make_node("Softmax", ["scores"], ["p"], name="probs_over_queries",
                         axis=2),
        helper.make_node("MatMul", ["p", "vh"], ["pv"], name="pv"),
        helper.make_node("Transpose", ["pv"], ["pvt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["pvt", "merged"], ["out"], name="merge"),
    ]
    graph = helper.make_graph(nodes, "unraised_attention", ins, [out],
                              [heads, merged, four])
    os.makedirs(os.path.join(HERE, "diagnostics"), exist_ok=True)
    save_checked(make_model(graph),
                 os.path.join(HERE, "diagnostics", "unraised_attention.onnx"))


def main():
    os.makedirs(INVALID, exist_ok=True)
    os.makedirs(EXTERNAL, exist_ok=True)
    unsupported_op()
    truncated()
    opset12()
    bad_attr()
    unknown_rank()
    linear_ext()
    os.makedirs(os.path.join(HERE, "opsets"), exist_ok=True)
    reduce_mean(18, "reduce_mean_opset18")
    reduce_mean(22, "reduce_mean_opset22")
    unraised_attention()


if __name__ == "__main__":
    main()
