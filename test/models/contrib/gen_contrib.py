#!/usr/bin/env python3
"""Hand-built graphs of onnxruntime's contrib ops with onnxruntime's outputs.

    .venv/bin/python test/models/contrib/gen_contrib.py

(numpy, onnx and onnxruntime only: the project's .venv.) Writes one case folder per op,
in the zoo's layout, which test/e2e/check_contrib.py holds qcc + qrun to:

    <case>/model.onnx   several nodes of the op, one per variant, each its own output
    <case>/inputs/<name>.npy, <case>/outputs/<name>.npy (onnxruntime, CPU EP)
    <case>/meta.json

    matmulnbits     com.microsoft.MatMulNBits: 4-bit symmetric (no zero points), 4-bit with
                    packed uint8 zero points and a bias (K = 80: a partial last block and an odd
                    number of blocks, so each zero-point row is padded), 8-bit with zero
                    points, 4-bit with float zero points, 2-bit, and y_ramp, whose small
                    weights the lit test reads back; accuracy_level 0 (float32
                    activations: at 4 onnxruntime's CPU quantizes A to int8, about 7e-3 off
                    the op's definition)
    rotary          com.microsoft.RotaryEmbedding: rotate-half and interleaved; full and
                    partial (rotary_embedding_dim); position_ids [batch, seq] and one offset
                    [1]; [batch, seq, hidden] and [batch, heads, seq, head_size] inputs
    skiplayernorm   com.microsoft.SkipLayerNormalization: gamma + beta + bias with
                    input_skip_bias_sum; gamma only with a [seq, hidden] skip

and refused forms, each with the node qcc names in its one-line error
(test/import/onnxruntime-contrib-invalid.test):

    invalid/matmulnbits_g_idx.onnx       MatMulNBits with a g_idx input
    invalid/matmulnbits_bits3.onnx       MatMulNBits with bits = 3
    invalid/matmulnbits_input_b.onnx     MatMulNBits whose B is a graph input
    invalid/uint8_cast.onnx              a uint8 initializer read by Cast
    invalid/rotary_packed.onnx           RotaryEmbedding with is_packed_batching = 1
    invalid/skiplayernorm_mean.onnx      SkipLayerNormalization whose mean output is used

Deterministic (fixed seeds); the same package versions give the same files.
"""
import importlib.metadata as md
import json
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261123
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
PRODUCER = "qcc/test/models/contrib/gen_contrib.py"


def make_model(nodes, inputs, outputs, inits, name):
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, producer_name=PRODUCER, opset_imports=OPSETS)
    model.ir_version = 8
    return model


def value(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def write_case(name, model, feeds, notes, w8a8=False):
    case = os.path.join(HERE, name)
    shutil.rmtree(case, ignore_errors=True)
    for d in ("inputs", "outputs"):
        os.makedirs(os.path.join(case, d))
    path = os.path.join(case, "model.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for k, v in feeds.items():
        np.save(os.path.join(case, "inputs", k + ".npy"), v)
    for k, v in outs.items():
        np.save(os.path.join(case, "outputs", k + ".npy"), v)
    meta = {
        "export": "hand-built (gen_contrib.py)",
        "notes": notes,
        "w8a8": w8a8,
        "inputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in feeds.items()},
        "outputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in outs.items()},
        "versions": {n: md.version(n) for n in ("onnx", "onnxruntime", "numpy")},
    }
    with open(os.path.join(case, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {name}: {', '.join(outs)}")


# ---------------------------------------------------------------- MatMulNBits

def pack_codes(codes, bits):
    """[..., n] codes of `bits` bits -> [..., n * bits / 8] bytes, low bits first."""
    per = 8 // bits
    c = codes.reshape(codes.shape[:-1] + (codes.shape[-1] // per, per)).astype(np.uint16)
    out = np.zeros(c.shape[:-1], np.uint16)
    for i in range(per):
        out |= c[..., i] << (i * bits)
    return out.astype(np.uint8)


def matmulnbits_node(rng, name, a, k, n, block, bits, zero_points, bias, inits):
    """A MatMulNBits node `name` on input `a` with random codes and scales."""
    n_blocks = (k + block - 1) // block
    codes = rng.integers(0, 2 ** bits, size=(n, n_blocks, block))
    inits.append(numpy_helper.from_array(pack_codes(codes, bits), f"{name}_B"))
    inits.append(numpy_helper.from_array(
        (0.02 + 0.1 * rng.random((n, n_blocks))).astype(np.float32), f"{name}_scales"))
    ins = [a, f"{name}_B", f"{name}_scales"]
    if zero_points == "packed":  # uint8 [N, ceil(n_blocks * bits / 8)], rows padded
        row = (n_blocks * bits + 7) // 8
        zp = np.zeros((n, row * 8 // bits), np.int64)
        zp[:, :n_blocks] = rng.integers(0, 2 ** bits, size=(n, n_blocks))
        inits.append(numpy_helper.from_array(pack_codes(zp, bits), f"{name}_zp"))
        ins.append(f"{name}_zp")
    elif zero_points == "float":
        zp = (rng.random((n, n_blocks)) * 2 ** bits).astype(np.float32)
        inits.append(numpy_helper.from_array(zp, f"{name}_zp"))
        ins.append(f"{name}_zp")
    if bias:
        inits.append(numpy_helper.from_array(
            rng.standard_normal(n).astype(np.float32), f"{name}_bias"))
        ins += [""] * (5 - len(ins)) + [f"{name}_bias"]
    return helper.make_node("MatMulNBits", ins, [name], name=name, domain="com.microsoft",
                            K=k, N=n, bits=bits, block_size=block, accuracy_level=0)


def ramp_node(inits):
    """y_ramp: K 16, N 2, one block whose codes are 0..15 in order, scales 0.5 and 0.25,
    packed zero points 8 and 3: W[k] = (k - 8) * 0.5 and (k - 3) * 0.25, small enough to
    print (test/import/onnxruntime-contrib.test checks the values)."""
    codes = np.tile(np.arange(16), (2, 1, 1))
    inits += [numpy_helper.from_array(pack_codes(codes, 4), "y_ramp_B"),
              numpy_helper.from_array(np.array([[0.5], [0.25]], np.float32), "y_ramp_scales"),
              numpy_helper.from_array(np.array([[8], [3]], np.uint8), "y_ramp_zp")]
    return helper.make_node("MatMulNBits", ["a16", "y_ramp_B", "y_ramp_scales", "y_ramp_zp"],
                            ["y_ramp"], name="y_ramp", domain="com.microsoft", K=16, N=2,
                            bits=4, block_size=16, accuracy_level=0)


def matmulnbits():
    rng = np.random.default_rng(SEED)
    inits = []
    variants = [  # name, input, K, N, block, bits, zero points, bias
        ("y_4bit", "a64", 64, 48, 32, 4, None, False),
        ("y_4bit_zp_bias", "a80", 80, 40, 32, 4, "packed", True),
        ("y_8bit_zp", "a80", 80, 40, 16, 8, "packed", False),
        ("y_4bit_float_zp", "a64", 64, 48, 16, 4, "float", False),
        ("y_2bit", "a64", 64, 32, 16, 2, None, False),
    ]
    nodes = [matmulnbits_node(rng, name, a, k, n, block, bits, zp, bias, inits)
             for name, a, k, n, block, bits, zp, bias in variants]
    nodes.append(ramp_node(inits))
    inputs = [value("a64", TensorProto.FLOAT, ["batch", "seq", 64]),
              value("a80", TensorProto.FLOAT, ["batch", "seq", 80]),
              value("a16", TensorProto.FLOAT, ["batch", "seq", 16])]
    outputs = [value(name, TensorProto.FLOAT, ["batch", "seq", n])
               for name, _, _, n, *_ in variants]
    outputs.append(value("y_ramp", TensorProto.FLOAT, ["batch", "seq", 2]))
    model = make_model(nodes, inputs, outputs, inits, "matmulnbits")
    feeds = {"a64": rng.standard_normal((2, 5, 64)).astype(np.float32),
             "a80": rng.standard_normal((2, 5, 80)).astype(np.float32),
             "a16": rng.standard_normal((2, 5, 16)).astype(np.float32)}
    write_case("matmulnbits", model, feeds,
               "accuracy_level 0 (float32 activations), so onnxruntime computes the op's "
               "definition; qcc dequantizes the weights at import and computes in float32",
               w8a8=True)


# ---------------------------------------------------------------- RotaryEmbedding

def rotary():
    rng = np.random.default_rng(SEED + 1)
    heads, head, max_pos = 3, 16, 32
    inits = []
    for r in (16, 8):  # full and partial rotary caches [max_pos, r / 2]
        inits.append(numpy_helper.from_array(
            rng.standard_normal((max_pos, r // 2)).astype(np.float32), f"cos{r}"))
        inits.append(numpy_helper.from_array(
            rng.standard_normal((max_pos, r // 2)).astype(np.float32), f"sin{r}"))
    variants = [  # name, input, positions, rotary dim, interleaved
        ("rot_half", "x", "pos", 16, 0),
        ("rot_interleaved", "x", "pos", 16, 1),
        ("rot_partial", "x", "pos", 8, 0),
        ("rot_partial_interleaved", "x", "pos", 8, 1),
        ("rot_offset", "x", "offset", 16, 0),
        ("rot_offset_interleaved", "x", "offset", 16, 1),
        ("rot_bnsh", "x4", "pos", 16, 0),
        ("rot_bnsh_partial_interleaved", "x4", "pos", 8, 1),
    ]
    nodes = []
    for name, x, pos, r, inter in variants:
        attrs = {"interleaved": inter}
        if r != head:
            attrs.update(num_heads=heads, rotary_embedding_dim=r)
        nodes.append(helper.make_node("RotaryEmbedding", [x, pos, f"cos{r}", f"sin{r}"], [name],
                                      name=name, domain="com.microsoft", **attrs))
    inputs = [value("x", TensorProto.FLOAT, ["batch", "seq", heads * head]),
              value("x4", TensorProto.FLOAT, ["batch", heads, "seq", head]),
              value("pos", TensorProto.INT64, ["batch", "seq"]),
              value("offset", TensorProto.INT64, [1])]
    shape = {"x": ["batch", "seq", heads * head], "x4": ["batch", heads, "seq", head]}
    outputs = [value(name, TensorProto.FLOAT, shape[x]) for name, x, *_ in variants]
    model = make_model(nodes, inputs, outputs, inits, "rotary")
    b, s = 2, 5
    feeds = {"x": rng.standard_normal((b, s, heads * head)).astype(np.float32),
             "x4": rng.standard_normal((b, heads, s, head)).astype(np.float32),
             "pos": rng.integers(0, max_pos, size=(b, s)).astype(np.int64),
             "offset": np.array([7], np.int64)}
    write_case("rotary", model, feeds,
               "position_ids [batch, seq] (random positions) or one offset [1]; "
               "rotary_embedding_dim 8 of head size 16 for the partial variants")


# ---------------------------------------------------------------- SkipLayerNormalization

def skiplayernorm():
    rng = np.random.default_rng(SEED + 2)
    hidden = 32
    inits = [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(hidden)).astype(np.float32),
                                     "gamma"),
             numpy_helper.from_array((0.1 * rng.standard_normal(hidden)).astype(np.float32),
                                     "beta"),
             numpy_helper.from_array((0.1 * rng.standard_normal(hidden)).astype(np.float32),
                                     "bias")]
    nodes = [
        helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"],
                         ["sln", "", "", "sln_sum"], name="sln", domain="com.microsoft",
                         epsilon=1e-5),
        helper.make_node("SkipLayerNormalization", ["x", "skip_seq", "gamma"], ["sln_plain"],
                         name="sln_plain", domain="com.microsoft"),
    ]
    full = ["batch", "seq", hidden]
    inputs = [value("x", TensorProto.FLOAT, full), value("skip", TensorProto.FLOAT, full),
              value("skip_seq", TensorProto.FLOAT, ["seq", hidden])]
    outputs = [value(n, TensorProto.FLOAT, full) for n in ("sln", "sln_sum", "sln_plain")]
    model = make_model(nodes, inputs, outputs, inits, "skiplayernorm")
    b, s = 2, 5
    feeds = {"x": (3 * rng.standard_normal((b, s, hidden)) + 1).astype(np.float32),
             "skip": rng.standard_normal((b, s, hidden)).astype(np.float32),
             "skip_seq": rng.standard_normal((s, hidden)).astype(np.float32)}
    write_case("skiplayernorm", model, feeds,
               "gamma + beta + bias (epsilon 1e-5) with input_skip_bias_sum; gamma only "
               "(default epsilon 1e-12) with a [seq, hidden] skip broadcast over the batch")


# ---------------------------------------------------------------- refused forms

def invalid():
    rng = np.random.default_rng(SEED + 3)
    out_dir = os.path.join(HERE, "invalid")
    os.makedirs(out_dir, exist_ok=True)
    a = value("a", TensorProto.FLOAT, ["batch", 64])
    y = value("y", TensorProto.FLOAT, ["batch", 32])

    def save(name, model):
        path = os.path.join(out_dir, name)
        onnx.save(model, path)
        print(f"wrote invalid/{name}")

    def nbits(name, **overrides):
        inits = []
        node = matmulnbits_node(rng, "y", "a", 64, 32, 32, 4, None, False, inits)
        for k, v in overrides.items():
            node.attribute.remove(next(x for x in node.attribute if x.name == k))
            node.attribute.append(helper.make_attribute(k, v))
        node.name = name
        return node, inits

    node, inits = nbits("mnb_g_idx")
    inits.append(numpy_helper.from_array(np.arange(64, dtype=np.int32) // 32, "g_idx"))
    node.input.extend(["", "g_idx"])
    save("matmulnbits_g_idx.onnx", make_model([node], [a], [y], inits, "g_idx"))

    node, inits = nbits("mnb_bits3", bits=3)
    save("matmulnbits_bits3.onnx", make_model([node], [a], [y], inits, "bits3"))

    node, inits = nbits("mnb_input_b")
    b_in = value("y_B", TensorProto.UINT8, [32, 2, 16])
    save("matmulnbits_input_b.onnx",
         make_model([node], [a, b_in], [y], [i for i in inits if i.name != "y_B"], "input_b"))

    codes = numpy_helper.from_array(rng.integers(0, 255, size=(4,)).astype(np.uint8), "codes")
    cast = helper.make_node("Cast", ["codes"], ["f"], name="cast_codes", to=TensorProto.FLOAT)
    save("uint8_cast.onnx", make_model([cast], [], [value("f", TensorProto.FLOAT, [4])],
                                       [codes], "uint8_cast"))

    x = value("x", TensorProto.FLOAT, ["batch", "seq", 32])
    pos = value("pos", TensorProto.INT64, ["batch", "seq"])
    caches = [numpy_helper.from_array(np.ones((16, 8), np.float32), n) for n in ("cos", "sin")]
    rot = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["r"],
                           name="rot_packed", domain="com.microsoft", is_packed_batching=1)
    save("rotary_packed.onnx", make_model([rot], [x, pos], [value("r", TensorProto.FLOAT,
                                                                  ["batch", "seq", 32])],
                                          caches, "rotary_packed"))

    gamma = numpy_helper.from_array(np.ones(32, np.float32), "gamma")
    sln = helper.make_node("SkipLayerNormalization", ["x", "x", "gamma"], ["o", "mean"],
                           name="sln_mean", domain="com.microsoft")
    save("skiplayernorm_mean.onnx",
         make_model([sln], [x], [value("o", TensorProto.FLOAT, ["batch", "seq", 32]),
                                 value("mean", TensorProto.FLOAT, ["batch", "seq", 1])],
                    [gamma], "sln_mean"))


def main():
    matmulnbits()
    rotary()
    skiplayernorm()
    invalid()


if __name__ == "__main__":
    main()
