#!/usr/bin/env python3
"""Small models of single ONNX ops whose results depend on run-time values,
for the importer's types and refusals (test/import/ops.test) and qrun's
errors on hostile values (test/runtime/ops-errors.test). Deterministic; needs
onnx + numpy only.

    .venv/bin/python test/models/ops/gen_ops.py

Writes ok_*.onnx (import and run; the values that decide a result's shape
are graph inputs where the tests feed hostile ones, inputs/*.npy) and
bad_*.onnx (refused at import with one line naming the node).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "inputs")
F, I64 = TensorProto.FLOAT, TensorProto.INT64


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, producer_name="qcc/test/models/ops",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def npy(name, value):
    np.save(os.path.join(INPUTS, name + ".npy"), np.asarray(value))


def main():
    os.makedirs(INPUTS, exist_ok=True)
    node = helper.make_node

    # Tile: repeats from the graph (known at run time) and constant; refused:
    # a repeat per dimension missing, a negative one, a result too large.
    save("ok_tile_dynamic", [node("Tile", ["X", "R"], ["Y"], name="tile")],
         [vi("X", ["batch", 4]), vi("R", [2], I64)], [vi("Y", ["a", "b"])])
    save("ok_tile_const", [node("Tile", ["X", "R"], ["Y"], name="tile")],
         [vi("X", ["batch", 3])], [vi("Y", ["a", "b"])], [const("R", np.array([1, 2], np.int64))])
    save("bad_tile_repeats", [node("Tile", ["X", "R"], ["Y"], name="tile")],
         [vi("X", [2, 3])], [vi("Y", ["a", "b"])], [const("R", np.array([2, 2, 2], np.int64))])
    save("bad_tile_negative", [node("Tile", ["X", "R"], ["Y"], name="tile")],
         [vi("X", [2, 3])], [vi("Y", ["a", "b"])], [const("R", np.array([2, -1], np.int64))])
    save("bad_tile_huge", [node("Tile", ["X", "R"], ["Y"], name="tile")],
         [vi("X", [2, 3])], [vi("Y", ["a", "b"])], [const("R", np.array([2**62, 1], np.int64))])
    npy("x_2x4", np.arange(8, dtype=np.float32).reshape(2, 4))
    npy("repeats_negative", np.array([1, -1], np.int64))
    npy("repeats_huge", np.array([2**62, 2**62], np.int64))

    # TopK: k from the graph and constant (a router's experts per token);
    # refused: a constant k larger than the axis, a k of rank 2.
    save("ok_topk_dynamic", [node("TopK", ["X", "K"], ["V", "I"], name="topk", axis=-1)],
         [vi("X", ["batch", 6]), vi("K", [1], I64)], [vi("V", ["a", "b"]), vi("I", ["a", "b"], I64)])
    save("ok_topk_const", [node("TopK", ["X", "K"], ["V", "I"], name="topk", axis=1, largest=0)],
         [vi("X", ["batch", 4])], [vi("V", ["a", "b"]), vi("I", ["a", "b"], I64)],
         [const("K", np.array([2], np.int64))])
    save("bad_topk_k", [node("TopK", ["X", "K"], ["V", "I"], name="topk")],
         [vi("X", [2, 4])], [vi("V", ["a", "b"]), vi("I", ["a", "b"], I64)],
         [const("K", np.array([5], np.int64))])
    save("bad_topk_k_rank", [node("TopK", ["X", "K"], ["V", "I"], name="topk")],
         [vi("X", [2, 4])], [vi("V", ["a", "b"]), vi("I", ["a", "b"], I64)],
         [const("K", np.array([[1]], np.int64))])
    npy("x_2x6", np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]], np.float32))
    npy("k_7", np.array([7], np.int64))
    npy("k_negative", np.array([-1], np.int64))

    # OneHot: depth from the graph and constant (a float, truncated); refused:
    # values not a pair, the new axis out of range, a depth of 0.
    values = const("values", np.array([0, 1], np.float32))
    save("ok_onehot_dynamic", [node("OneHot", ["I", "depth", "values"], ["Y"], name="onehot")],
         [vi("I", ["n"], I64), vi("depth", [], I64)], [vi("Y", ["a", "b"])], [values])
    save("ok_onehot_const", [node("OneHot", ["I", "depth", "values"], ["Y"], name="onehot", axis=0)],
         [vi("I", ["n", 2], I64)], [vi("Y", ["a", "b", "c"])],
         [values, const("depth", np.array(5.9, np.float32))])
    save("bad_onehot_values", [node("OneHot", ["I", "depth", "values"], ["Y"], name="onehot")],
         [vi("I", [3], I64)], [vi("Y", ["a", "b"])],
         [const("depth", np.array(4, np.int64)), const("values", np.array([0, 1, 2], np.float32))])
    save("bad_onehot_axis", [node("OneHot", ["I", "depth", "values"], ["Y"], name="onehot", axis=2)],
         [vi("I", [3], I64)], [vi("Y", ["a", "b"])],
         [const("depth", np.array(4, np.int64)), values])
    save("bad_onehot_depth", [node("OneHot", ["I", "depth", "values"], ["Y"], name="onehot")],
         [vi("I", [3], I64)], [vi("Y", ["a", "b"])],
         [const("depth", np.array(0, np.int64)), values])
    npy("indices_3", np.array([0, 2, -1], np.int64))
    npy("depth_0", np.array(0, np.int64))
    npy("depth_huge", np.array(2**61, np.int64))

    # NonZero: a second dimension known only at run time.
    save("ok_nonzero", [node("NonZero", ["X"], ["Y"], name="nonzero")],
         [vi("X", ["batch", 3])], [vi("Y", ["a", "b"], I64)])
    npy("data_2x3", np.zeros((2, 3), np.float32))

    # ScatterElements: indices from the graph; refused: indices of another
    # rank, a reduction ONNX does not define.
    save("ok_scatter_elements", [node("ScatterElements", ["D", "I", "U"], ["Y"],
                                      name="scatter", axis=1, reduction="add")],
         [vi("D", [2, 3]), vi("I", [2, 2], I64), vi("U", [2, 2])], [vi("Y", [2, 3])], opset=18)
    save("bad_scatter_elements_rank", [node("ScatterElements", ["D", "I", "U"], ["Y"], name="scatter")],
         [vi("D", [2, 3]), vi("I", [2], I64), vi("U", [2])], [vi("Y", [2, 3])])
    save("bad_scatter_elements_reduction",
         [node("ScatterElements", ["D", "I", "U"], ["Y"], name="scatter", reduction="sub")],
         [vi("D", [2, 3]), vi("I", [2, 2], I64), vi("U", [2, 2])], [vi("Y", [2, 3])], opset=18)
    npy("updates_2x2", np.ones((2, 2), np.float32))
    npy("indices_out_of_range", np.array([[0, 3], [1, 2]], np.int64))
    npy("indices_negative", np.array([[0, -4], [1, 2]], np.int64))

    # A router after a GEMM (a kernel region in the GPU plan): the ops on the
    # host read its result, NonZero's size known only once it has run.
    rng = np.random.default_rng(7)
    w = const("W", (rng.standard_normal((64, 64)) / 8).astype(np.float32))
    save("ok_router", [
        node("MatMul", ["X", "W"], ["H"], name="gate"),
        node("TopK", ["H", "K"], ["V", "I"], name="topk", axis=-1),
        node("OneHot", ["I", "depth", "values"], ["M"], name="onehot"),
        node("ReduceSum", ["M", "axes"], ["S"], name="hits", keepdims=0),
        node("NonZero", ["S"], ["E"], name="experts"),
        node("ScatterElements", ["H", "I", "V"], ["U"], name="scatter", axis=1, reduction="add"),
        node("Tile", ["V", "R"], ["T"], name="tile")],
        [vi("X", ["n", 64])],
        [vi("M", ["n", 2, 64]), vi("E", [1, "e"], I64), vi("U", ["n", 64]), vi("T", ["n", 4])],
        [w, const("K", np.array([2], np.int64)), const("depth", np.array(64, np.int64)), values,
         const("axes", np.array([0, 1], np.int64)), const("R", np.array([1, 2], np.int64))])
    npy("x_3x64", rng.standard_normal((3, 64)).astype(np.float32))

    print("wrote", len([f for f in os.listdir(HERE) if f.endswith(".onnx")]), "models")


if __name__ == "__main__":
    main()
