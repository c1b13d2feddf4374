#!/usr/bin/env python3
"""Hostile ONNX models, one per root cause of the qcc crashes found by
mutation fuzzing (issue 13). Each is tiny and valid protobuf; qcc must refuse
each with one error line and exit status 1 (test/import/hostile.test).

    .venv/bin/python test/models/hostile/gen_hostile.py

Most import opset 20, where qcc skips ONNX's checker (the library knows
opsets up to 17): the importer's own validation must catch them.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=20, value_info=()):
    g = helper.make_graph(nodes, "hostile", inputs, outputs, list(inits),
                          value_info=list(value_info))
    m = helper.make_model(g, producer_name="qcc/test/models/hostile",
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def save(name, m, patch=None):
    data = m.SerializeToString()
    if patch:
        data = data.replace(*patch)
    with open(os.path.join(HERE, name + ".onnx"), "wb") as f:
        f.write(data)


def external(name, dims, **fields):
    t = TensorProto()
    t.name, t.data_type = name, F
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in [("location", "hostile.bin")] + list(fields.items()):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def add_with(w):
    return model([helper.make_node("Add", ["X", "W"], ["Y"], name="add")],
                 [vi("X", [4])], [vi("Y", [4])], [w])


def main():
    with open(os.path.join(HERE, "hostile.bin"), "wb") as f:
        f.write(bytes(64))
    # External data fields: not a number (std::stoll threw), beyond int64
    # (std::stoll threw), offset + length wrapping past the file's end.
    save("ext_offset_nan", add_with(external("W", [4], offset="1e3", length="16")))
    save("ext_offset_huge", add_with(external("W", [4], offset="99999999999999999999")))
    save("ext_range_wrap", add_with(external("W", [4], offset="16",
                                             length="18446744073709551600")))
    # Initializer data shorter than its dims (ONNX's shape inference read
    # past it), dims too large to allocate, a negative declared dimension.
    short = numpy_helper.from_array(np.zeros(2, np.float32), "W")
    short.dims[:] = [4]
    save("init_short", add_with(short))
    huge = numpy_helper.from_array(np.zeros(4, np.float32), "W")
    huge.dims[:] = [4, 2**40]
    save("init_huge_dims", add_with(huge))
    save("negative_dim", model([helper.make_node("Relu", ["X"], ["Y"], name="relu")],
                               [vi("X", [-2, 4])], [vi("Y", [4])]))
    # Arity: an input missing, a required input omitted ("").
    save("arity_missing", model([helper.make_node("Add", ["X"], ["Y"], name="add1")],
                                [vi("X", [4])], [vi("Y", [4])]))
    save("arity_omitted", model([helper.make_node("Mul", ["", "X"], ["Y"], name="mul")],
                                [vi("X", [4])], [vi("Y", [4])]))
    # An attribute of the wrong type (read as 0 before), axes out of range.
    n = helper.make_node("Softmax", ["X"], ["Y"], name="softmax")
    n.attribute.append(helper.make_attribute("axis", 1.5))
    save("attr_type", model([n], [vi("X", [2, 4])], [vi("Y", [2, 4])]))
    idx = numpy_helper.from_array(np.array([0], np.int64), "I")
    save("gather_axis", model([helper.make_node("Gather", ["X", "I"], ["Y"], name="gather", axis=-7)],
                              [vi("X", [2, 4])], [vi("Y", ["a", "b"])], [idx]))
    save("concat_axis", model([helper.make_node("Concat", ["X", "X"], ["Y"], name="concat", axis=5)],
                              [vi("X", [2, 4])], [vi("Y", ["a", "b"])]))
    axes = numpy_helper.from_array(np.array([1, 1], np.int64), "A")
    save("unsqueeze_axes", model([helper.make_node("Unsqueeze", ["X", "A"], ["Y"], name="unsqueeze")],
                                 [vi("X", [2, 4])], [vi("Y", ["a", "b", "c"])], [axes]))
    save("transpose_perm", model([helper.make_node("Transpose", ["X"], ["Y"], name="transpose", perm=[0, 0])],
                                 [vi("X", [2, 4])], [vi("Y", ["a", "b"])]))
    s = numpy_helper.from_array(np.array(0, np.int64), "S")
    save("slice_rank", model([helper.make_node("Slice", ["X", "S", "S"], ["Y"], name="slice")],
                             [vi("X", [2, 4])], [vi("Y", ["a", "b"])], [s]))
    # ONNX 1.12's shape inference (qcc no longer runs it) trusted what it
    # read, at opset 17, where the checker passes: its data propagation
    # dereferenced the type of a value whose inference failed (Transpose of
    # a rank-1 Reshape); LayerNormalization's axis indexed the input shape.
    shape = numpy_helper.from_array(np.array([8], np.int64), "shape")
    save("shape_propagation", model(
        [helper.make_node("Reshape", ["X", "shape"], ["R"], name="reshape"),
         helper.make_node("Transpose", ["R"], ["T"], name="transpose", perm=[0, 2, 1]),
         helper.make_node("Shape", ["T"], ["Y"], name="shape_of")],
        [vi("X", [2, 4])], [vi("Y", [3], TensorProto.INT64)], [shape], opset=17))
    scale = numpy_helper.from_array(np.ones(4, np.float32), "scale")
    save("layernorm_axis", model([helper.make_node("LayerNormalization", ["X", "scale"], ["Y", "mean"],
                                                   name="layernorm", axis=2**31)],
                                 [vi("X", [2, 4])], [vi("Y", [2, 4])], [scale], opset=17))
    # Names: invalid UTF-8 (the artifact writer's JSON threw), a reference
    # to nothing, a value assigned twice, a subgraph.
    save("bad_utf8_name", model([helper.make_node("Relu", ["X"], ["Y"], name="QCCBADNAME")],
                                [vi("X", [4])], [vi("Y", [4])]),
         patch=(b"QCCBADNAME", b"relu\xff\xfe\x80abc"))
    save("undefined_input", model([helper.make_node("Relu", ["Z"], ["Y"], name="relu")],
                                  [vi("X", [4])], [vi("Y", [4])]))
    save("assigned_twice", model([helper.make_node("Relu", ["X"], ["Y"], name="relu1"),
                                  helper.make_node("Relu", ["X"], ["Y"], name="relu2")],
                                 [vi("X", [4])], [vi("Y", [4])]))
    # A declared type at odds with what the node computes (it was trusted),
    # a result too large for any machine.
    save("declared_rank", model([helper.make_node("Relu", ["X"], ["R"], name="relu"),
                                 helper.make_node("Relu", ["R"], ["Y"], name="relu2")],
                                [vi("X", [2, 4])], [vi("Y", ["a", "b"])], value_info=[vi("R", [8])]))
    save("huge_result", model([helper.make_node("Mul", ["A", "B"], ["Y"], name="outer")],
                              [vi("A", [2**30, 1]), vi("B", [1, 2**30])], [vi("Y", ["a", "b"])]))
    print("wrote", len([f for f in os.listdir(HERE) if f.endswith(".onnx")]), "models")


if __name__ == "__main__":
    main()
