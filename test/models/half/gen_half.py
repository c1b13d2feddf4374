#!/usr/bin/env python3
"""Write f16 and bf16 versions of zoo llama exports, as a `.half()` export would, with references.

    .venv/bin/python test/models/half/gen_half.py

Needs numpy, onnx and onnxruntime (the check, test/e2e/check_half.py, needs only numpy).
For each case below it reads test/models/zoo/<source>/ (a float32 HuggingFace llama export)
and writes test/models/half/<case>/: model.onnx, inputs/*.npy, outputs/*.npy, meta.json.

The conversion is what `torch.onnx.export(model.half())` writes for HF llama:
  - every float initializer, Constant, ConstantOfShape value, graph input/output and
    Cast(to=float) becomes the half type (weights rounded to nearest even by numpy;
    f32's finfo.min in the mask builder becomes the half type's finfo.min);
  - except two f32 islands, as the model's own code upcasts there: RMSNorm's
    pow/mean/add/sqrt/div/mul (`hidden_states.to(torch.float32)`, then `.to(input_dtype)`
    before the weight multiply) and the rotary cos/sin builder (inv_freq @ positions,
    cos, sin in f32, then `.to(x.dtype)`); Cast nodes go in at the island borders.

References:
  - f16: onnxruntime (CPUExecutionProvider) on the converted f16 graph itself. Where the
    CPU provider has no f16 kernel it runs the op in f32 between inserted casts (its
    InsertCastTransformer), so it rounds to f16 at different places than qrun, which
    rounds every f16 value a node writes: the check's tolerance covers that.
  - bf16: onnxruntime's CPU provider has (almost) no bf16 kernels, so the reference is
    the float32 model's own onnxruntime output (the zoo's outputs/), and the tolerance is
    derived from bf16's precision (meta.json "reference").
"""
import json
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.join(os.path.dirname(HERE), "zoo")

# case -> (zoo source, half type)
CASES = {
    "llama-f16": ("llama-legacy", TensorProto.FLOAT16),
    "llama-past-f16": ("llama-past", TensorProto.FLOAT16),
    "llama-bf16": ("llama-legacy", TensorProto.BFLOAT16),
}
FLOAT = TensorProto.FLOAT


def elem_types(model):
    """Element type of every tensor name (after shape inference)."""
    m = shape_inference.infer_shapes(model)
    types = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        types[vi.name] = vi.type.tensor_type.elem_type
    for t in m.graph.initializer:
        types[t.name] = t.data_type
    return types


def const_value(graph, name):
    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            return numpy_helper.to_array(n.attribute[0].t)
    return None


def f32_islands(graph, types):
    """Indices of the nodes the model computes in float32 (RMSNorm cores, rotary cos/sin)."""
    nodes = list(graph.node)
    consumers = {}
    producer = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            consumers.setdefault(x, []).append(i)
        for y in n.output:
            producer[y] = i
    island = set()
    # RMSNorm: Pow(x, 2) -> ... -> Mul(x, r): every node on the way.
    for i, n in enumerate(nodes):
        if n.op_type != "Pow":
            continue
        e = const_value(graph, n.input[1])
        if e is None or float(np.asarray(e).reshape(-1)[0]) != 2.0:
            continue
        x, chain, cur = n.input[0], [i], n.output[0]
        while True:
            users = consumers.get(cur, [])
            if len(users) != 1:
                break
            u = nodes[users[0]]
            chain.append(users[0])
            if u.op_type == "Mul" and x in u.input:
                island.update(chain)
                # The upcast `hidden_states.to(torch.float32)` belongs to it.
                p = producer.get(x)
                if p is not None and nodes[p].op_type == "Cast":
                    island.add(p)
                break
            cur = u.output[0]
    # Rotary: Cos / Sin, their float ancestors (inv_freq @ positions) and the
    # attention_scaling Mul after them (up to the `.to(x.dtype)` Cast).
    stack = [i for i, n in enumerate(nodes) if n.op_type in ("Cos", "Sin")]
    for i in list(stack):
        users = consumers.get(nodes[i].output[0], [])
        while len(users) == 1 and nodes[users[0]].op_type == "Mul":
            island.add(users[0])
            users = consumers.get(nodes[users[0]].output[0], [])
    while stack:
        i = stack.pop()
        if i in island:
            continue
        island.add(i)
        for x in nodes[i].input:
            p = producer.get(x)
            if p is not None and types.get(x) == FLOAT and nodes[p].op_type != "Constant":
                stack.append(p)
    return island


def convert(model, half):
    """The model with float tensors in `half`, except the f32 islands."""
    g = model.graph
    types = elem_types(model)
    island = f32_islands(g, types)
    nodes = list(g.node)
    # Which float tensors stay f32: outputs of island nodes, and constants read only there.
    readers = {}
    for i, n in enumerate(nodes):
        for x in n.input:
            readers.setdefault(x, set()).add(i)
    stays32 = set()
    for i in island:
        stays32.update(nodes[i].output)
    for n in nodes:
        if n.op_type == "Constant" and readers.get(n.output[0], set()) <= island:
            stays32.add(n.output[0])
    for t in g.initializer:
        if readers.get(t.name, set()) <= island:
            stays32.add(t.name)

    def new_type(name):
        t = types.get(name)
        return t if t != FLOAT or name in stays32 else half

    # torch.finfo(half).min/max: the mask constants (f32's finfo.min) as a half model has them.
    limit = 65504.0 if half == TensorProto.FLOAT16 else 3.3895313892515355e38

    def to_half(t):
        arr = numpy_helper.to_array(t).astype(np.float32)
        arr = np.where(np.isfinite(arr), np.clip(arr, -limit, limit), arr).astype(np.float32)
        if half == TensorProto.FLOAT16:
            out = numpy_helper.from_array(arr.astype(np.float16), t.name)
        else:  # bf16: the top 16 bits, rounded to nearest even (weights hold no NaN)
            u = arr.view(np.uint32).astype(np.uint64)
            bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
            out = helper.make_tensor(t.name, TensorProto.BFLOAT16, arr.shape,
                                     bits.tobytes(), raw=True)
        return out

    for t in g.initializer:
        if t.data_type == FLOAT and new_type(t.name) == half:
            t.CopyFrom(to_half(t))
    out_nodes = []
    casts = {}

    upcast_of = {n.output[0]: n.input[0] for i, n in enumerate(nodes)
                 if n.op_type == "Cast" and i in island and new_type(n.input[0]) == half}

    def cast_to(name, to):
        if to == half and name in upcast_of:  # the value before its upcast (exact)
            return upcast_of[name]
        key = (name, to)
        if key not in casts:
            y = f"{name}__to_{'f32' if to == FLOAT else 'half'}"
            out_nodes.append(helper.make_node("Cast", [name], [y], to=to, name=y))
            casts[key] = y
        return casts[key]

    for i, n in enumerate(nodes):
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == FLOAT:
                a.i = FLOAT if i in island else half
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == FLOAT and \
                    new_type(n.output[0]) == half:
                a.t.CopyFrom(to_half(a.t))
        want = FLOAT if i in island else half
        for k, x in enumerate(n.input):
            if x and types.get(x) == FLOAT and new_type(x) != want and \
                    not (n.op_type == "Cast"):
                n.input[k] = cast_to(x, want)
        out_nodes.append(n)
    del g.node[:]
    g.node.extend(out_nodes)
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == FLOAT:
            vi.type.tensor_type.elem_type = new_type(vi.name)
    del g.value_info[:]
    onnx.checker.check_model(shape_inference.infer_shapes(model, strict_mode=True),
                             full_check=True)
    return model


def main():
    import onnxruntime as ort
    for case, (source, half) in CASES.items():
        src = os.path.join(ZOO, source)
        out = os.path.join(HERE, case)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(os.path.join(out, "inputs"))
        os.makedirs(os.path.join(out, "outputs"))
        model = convert(onnx.load(os.path.join(src, "model.onnx")), half)
        onnx.save(model, os.path.join(out, "model.onnx"))
        src_meta = json.load(open(os.path.join(src, "meta.json")))
        feeds = {}
        for vi in model.graph.input:
            a = np.load(os.path.join(src, "inputs", vi.name + ".npy"))
            if a.dtype == np.float32 and half == TensorProto.FLOAT16:
                a = a.astype(np.float16)  # past keys/values, as the half model gets them
            elif a.dtype == np.float32:
                raise SystemExit(f"{case}: bf16 float inputs have no .npy dtype")
            np.save(os.path.join(out, "inputs", vi.name + ".npy"), a)
            feeds[vi.name] = a
        if half == TensorProto.FLOAT16:
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
            names = [o.name for o in sess.get_outputs()]
            for name, v in zip(names, sess.run(names, feeds)):
                np.save(os.path.join(out, "outputs", name + ".npy"), v)
            reference = "onnxruntime on this f16 graph"
        else:
            for vi in model.graph.output:
                shutil.copy(os.path.join(src, "outputs", vi.name + ".npy"),
                            os.path.join(out, "outputs", vi.name + ".npy"))
            reference = f"onnxruntime on the float32 model ({source})"
        meta = {
            "source": source,
            "half": TensorProto.DataType.Name(half),
            "reference": reference,
            "ignore_positions": src_meta.get("ignore_positions", {}),
            "file_bytes": os.path.getsize(os.path.join(out, "model.onnx")),
            "source_file_bytes": os.path.getsize(os.path.join(src, "model.onnx")),
            "casts_inserted": sum(1 for n in model.graph.node if n.name.endswith(("__to_f32", "__to_half"))),
            "versions": {"numpy": np.__version__, "onnx": onnx.__version__,
                         "onnxruntime": ort.__version__},
        }
        with open(os.path.join(out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.write("\n")
        print(case, meta["file_bytes"], "bytes,", meta["casts_inserted"], "casts inserted")


if __name__ == "__main__":
    main()
