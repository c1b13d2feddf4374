"""The peers' copies of a model for bench/bench_cpu.py: the same weights as
the ONNX file qrun compiles, written in the formats onnxruntime and llama.cpp
run, each checked against onnxruntime on the original ONNX before any timing.

- gpt2_gguf: a GPT-2-style ONNX (HF names: wte, wpe, h.N.ln_1/attn.c_attn/
  attn.c_proj/ln_2/mlp.c_fc/mlp.c_proj, ln_f; tied LM head), as the demo model
  examples/austen/model.onnx, to a float32 GGUF of llama.cpp's `gpt2`
  architecture (tensor names of llama.cpp's llama-arch.cpp). Without `vocab`
  no tokenizer (`no_vocab` with the vocabulary size: bench_cpu.py feeds token
  ids); with `vocab`, a SentencePiece model (the demo's tokenizer.model), its
  pieces, scores and types as llama.cpp's `llama` (SPM) tokenizer, so that
  llama.cpp's server takes text (bench_serve.py).
- dequantized_gguf: a GGUF whose tensors are quantized (SmolLM2's Q4_1, from
  which examples/smollm2/model.onnx was dequantized) to float32, metadata kept:
  the same weights as that ONNX file.
- quantize_gguf: llama.cpp's own quantizer (q8_0).
- gpt2_past_onnx: the GPT-2-style ONNX with an explicit cache (input_ids,
  position_ids, past_key_values.N.key/value -> logits, present.N.key/value),
  built node by node from its initializers, for onnxruntime's decode loop.

Needs onnx, numpy and gguf (scripts/setup_bench.sh's .venv-bench).
"""
import re

import numpy as np


def _onnx_weights(model):
    """{name: array} of the initializers, plus the MatMul weights named by the
    bias their output is added to ("h.0.attn.c_attn.weight" from
    "h.0.attn.c_attn.bias"; the exporter leaves them anonymous) and the LM
    head's weight as "lm_head.weight" (the MatMul without a bias)."""
    from onnx import numpy_helper
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consumers = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    out = dict(inits)
    for n in model.graph.node:
        if n.op_type != "MatMul" or n.input[1] not in inits:
            continue
        bias = None
        for c in consumers.get(n.output[0], []):
            if c.op_type == "Add":
                bias = next((i for i in c.input if i.endswith(".bias") and i in inits), None)
        if bias:
            out[bias[:-len(".bias")] + ".weight"] = inits[n.input[1]]
        elif inits[n.input[1]].shape[-1] == inits["wte.weight"].shape[0]:
            out["lm_head.weight"] = inits[n.input[1]]
    return out


def gpt2_config(w):
    vocab, embd = w["wte.weight"].shape
    layers = 1 + max(int(m.group(1)) for k in w for m in [re.match(r"h\.(\d+)\.", k)] if m)
    return {"vocab": vocab, "embd": embd, "layers": layers,
            "positions": w["wpe.weight"].shape[0], "ff": w["h.0.mlp.c_fc.weight"].shape[1]}


def load_gpt2(onnx_path, heads):
    import onnx
    w = _onnx_weights(onnx.load(onnx_path))
    for k in ("wte.weight", "wpe.weight", "ln_f.weight", "h.0.attn.c_attn.weight",
              "h.0.mlp.c_fc.weight"):
        if k not in w:
            raise SystemExit(f"{onnx_path}: not a GPT-2-style ONNX (no {k})")
    cfg = gpt2_config(w)
    cfg["heads"] = heads
    if "lm_head.weight" in w and not np.array_equal(w["lm_head.weight"], w["wte.weight"].T):
        raise SystemExit(f"{onnx_path}: the LM head is not tied to wte (llama.cpp's gpt2 "
                         "GGUF here assumes it is)")
    return w, cfg


def _spm_vocab(wr, path, vocab_size):
    """Writes SentencePiece model `path` as llama.cpp's `llama` tokenizer."""
    import gguf
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=str(path))
    if sp.get_piece_size() != vocab_size:
        raise ValueError(f"{path}: {sp.get_piece_size()} pieces, the model has {vocab_size}")
    types = []
    for i in range(vocab_size):
        t = gguf.TokenType.NORMAL
        if sp.is_unknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.is_control(i):
            t = gguf.TokenType.CONTROL
        elif sp.is_byte(i):
            t = gguf.TokenType.BYTE
        elif sp.is_unused(i):
            t = gguf.TokenType.UNUSED
        types.append(t)
    wr.add_tokenizer_model("llama")
    wr.add_token_list([sp.id_to_piece(i).encode("utf-8") for i in range(vocab_size)])
    wr.add_token_scores([sp.get_score(i) for i in range(vocab_size)])
    wr.add_token_types(types)
    for setter, tid in ((wr.add_bos_token_id, sp.bos_id()), (wr.add_eos_token_id, sp.eos_id()),
                        (wr.add_unk_token_id, sp.unk_id())):
        if tid >= 0:
            setter(tid)
    wr.add_add_bos_token(False)  # qcc's tokenizer adds none to a prompt either


def gpt2_gguf(onnx_path, out_path, heads, eps=1e-5, vocab=None):
    """A float32 GGUF (llama.cpp `gpt2`) of a GPT-2-style ONNX; `vocab`: its
    SentencePiece model, written as the GGUF's tokenizer."""
    import gguf
    w, c = load_gpt2(onnx_path, heads)
    wr = gguf.GGUFWriter(out_path, "gpt2")
    wr.add_name("qcc-bench")
    wr.add_context_length(c["positions"])
    wr.add_embedding_length(c["embd"])
    wr.add_feed_forward_length(c["ff"])
    wr.add_block_count(c["layers"])
    wr.add_head_count(heads)
    wr.add_layer_norm_eps(eps)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    if vocab:
        _spm_vocab(wr, vocab, c["vocab"])
    else:
        wr.add_tokenizer_model("no_vocab")
    wr.add_vocab_size(c["vocab"])
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)
    # ggml's ne is numpy's shape reversed: a [out, in] array is llama.cpp's
    # {in, out} weight; ONNX MatMul weights are [in, out], so transposed.
    wr.add_tensor("token_embd.weight", f32(w["wte.weight"]))
    wr.add_tensor("position_embd.weight", f32(w["wpe.weight"]))
    wr.add_tensor("output_norm.weight", f32(w["ln_f.weight"]))
    wr.add_tensor("output_norm.bias", f32(w["ln_f.bias"]))
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for i in range(c["layers"]):
        for src, dst in names.items():
            wt = w[f"h.{i}.{src}.weight"]
            wr.add_tensor(f"blk.{i}.{dst}.weight", f32(wt if src.startswith("ln") else wt.T))
            wr.add_tensor(f"blk.{i}.{dst}.bias", f32(w[f"h.{i}.{src}.bias"]))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def dequantized_gguf(src_path, out_path):
    """SRC's tensors dequantized to float32 (1-D ones already are), metadata
    copied: llama.cpp's float32 copy of a quantized GGUF."""
    import gguf
    r = gguf.GGUFReader(src_path)
    arch = r.fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    wr = gguf.GGUFWriter(out_path, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name in ("general.architecture", "general.file_type"):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            if sub == gguf.GGUFValueType.STRING:
                val = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
            else:
                val = [field.parts[i].tolist()[0] for i in field.data]
            wr.add_key_value(name, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            wr.add_key_value(name, bytes(field.parts[field.data[0]]).decode(), vtype)
        else:
            wr.add_key_value(name, field.parts[field.data[0]].tolist()[0], vtype)
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    for t in r.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        wr.add_tensor(t.name, a.reshape([int(d) for d in reversed(t.shape)]))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def quantize_gguf(src_path, out_path, ftype_name="MOSTLY_Q8_0", threads=0):
    """llama.cpp's quantizer (llama_model_quantize) on a float GGUF."""
    import ctypes

    import llama_cpp
    global _quiet  # llama.cpp keeps the callback: it must outlive this call
    _quiet = llama_cpp.llama_log_callback(lambda level, text, data: None)
    llama_cpp.llama_log_set(_quiet, ctypes.c_void_p())  # not a line per tensor
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_" + ftype_name)
    params.nthread = threads
    if llama_cpp.llama_model_quantize(src_path.encode(), out_path.encode(),
                                      ctypes.byref(params)) != 0:
        raise SystemExit(f"llama_model_quantize failed on {src_path}")


def gpt2_past_onnx(onnx_path, out_path, heads, eps=1e-5):
    """The GPT-2-style ONNX with an explicit KV cache, same weights: inputs
    input_ids [B, S], position_ids [B, S], past_key_values.N.key/value
    [B, H, P, D]; outputs logits [B, S, V], present.N.key/value [B, H, P+S, D]
    (optimum's text-generation-with-past names). Query i attends to keys
    0..P+i (causal over past and new tokens). Exact (erf) GELU."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w, c = load_gpt2(onnx_path, heads)
    E, H, L = c["embd"], heads, c["layers"]
    D = E // H
    nodes, inits = [], []

    def const(name, value, dtype=np.float32):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def linear(x, prefix):
        y = node("MatMul", [x, const(prefix + ".weight", w[prefix + ".weight"])], prefix + ".mm")
        return node("Add", [y, const(prefix + ".bias", w[prefix + ".bias"])], prefix + ".out")

    def layernorm(x, prefix):
        return node("LayerNormalization", [x, const(prefix + ".weight", w[prefix + ".weight"]),
                                           const(prefix + ".bias", w[prefix + ".bias"])],
                    prefix + ".out", axis=-1, epsilon=eps)

    const("wte", w["wte.weight"])
    const("wte_t", np.ascontiguousarray(w["wte.weight"].T))
    const("wpe", w["wpe.weight"])
    const("heads_shape", [0, 0, H, D], np.int64)
    const("embd_shape", [0, 0, E], np.int64)
    const("split3", [E, E, E], np.int64)
    const("scale", 1.0 / np.sqrt(D))
    const("neg_inf", -np.inf)
    const("half", 0.5)
    const("one", 1.0)
    const("inv_sqrt2", 1.0 / np.sqrt(2.0))
    const("i2", [2], np.int64)
    const("s0", 0, np.int64)
    const("s1", 1, np.int64)
    const("ax0", [0], np.int64)
    const("ax1", [1], np.int64)

    x = node("Add", [node("Gather", ["wte", "input_ids"], "tok"),
                     node("Gather", ["wpe", "position_ids"], "pos")], "embed")
    # Causal mask over [P + S] keys: key j is visible to query i iff j <= P + i.
    S = node("Squeeze", [node("Slice", [node("Shape", ["input_ids"], "ids_shape"),
                                        "ax1", "i2", "ax0"], "S1"), "ax0"], "S")
    P = node("Squeeze", [node("Slice", [node("Shape", ["past_key_values.0.key"], "past_shape"),
                                        "i2", node("Add", ["i2", "ax1"], "i3"), "ax0"], "P1"),
                         "ax0"], "P")
    T = node("Add", [P, S], "T")
    rows = node("Unsqueeze", [node("Range", [P, T, "s1"], "qpos"), "ax1"], "qpos_col")
    cols = node("Range", ["s0", T, "s1"], "kpos")
    mask = node("LessOrEqual", [cols, rows], "mask")  # [S, T]
    presents = []
    for i in range(L):
        p = f"h.{i}"
        h = layernorm(x, p + ".ln_1")
        qkv = linear(h, p + ".attn.c_attn")
        nodes.append(helper.make_node("Split", [qkv, "split3"], [p + ".q", p + ".k", p + ".v"],
                                      name=p + ".split", axis=2))
        q, k, v = [node("Transpose", [node("Reshape", [p + "." + t, "heads_shape"], p + f".{t}4")],
                        p + f".{t}h", perm=[0, 2, 1, 3]) for t in "qkv"]
        k = node("Concat", [f"past_key_values.{i}.key", k], f"present.{i}.key", axis=2)
        v = node("Concat", [f"past_key_values.{i}.value", v], f"present.{i}.value", axis=2)
        presents += [f"present.{i}.key", f"present.{i}.value"]
        s = node("Mul", [node("MatMul", [q, node("Transpose", [k], p + ".kt", perm=[0, 1, 3, 2])],
                              p + ".qk"), "scale"], p + ".scores")
        s = node("Where", [mask, s, "neg_inf"], p + ".masked")
        a = node("MatMul", [node("Softmax", [s], p + ".probs", axis=-1), v], p + ".attn")
        a = node("Reshape", [node("Transpose", [a], p + ".attn_t", perm=[0, 2, 1, 3]),
                             "embd_shape"], p + ".attn_e")
        x = node("Add", [x, linear(a, p + ".attn.c_proj")], p + ".res1")
        f = linear(layernorm(x, p + ".ln_2"), p + ".mlp.c_fc")
        g = node("Mul", [node("Mul", [f, "half"], p + ".gh"),
                         node("Add", ["one", node("Erf", [node("Mul", [f, "inv_sqrt2"], p + ".gs")],
                                                  p + ".erf")], p + ".g1")], p + ".gelu")
        x = node("Add", [x, linear(g, p + ".mlp.c_proj")], p + ".res2")
    node("MatMul", [layernorm(x, "ln_f"), "wte_t"], "logits")

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [helper.make_tensor_value_info("input_ids", i64, ["batch", "seq"]),
              helper.make_tensor_value_info("position_ids", i64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch", "seq", c["vocab"]])]
    for i in range(L):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", f32,
                                                        ["batch", H, "past", D]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", f32,
                                                         ["batch", H, "total", D]))
    graph = helper.make_graph(nodes, "gpt2_with_past", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


def check_past_onnx(onnx_path, past_path, tokens=24, tol=1e-3):
    """Max |logit difference| between PAST (prefill of TOKENS - 4 ids, then 4
    one-token steps fed present -> past) and the ONNX's forward over the same
    TOKENS ids; raises past TOL."""
    import onnxruntime as ort
    full = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    past = ort.InferenceSession(past_path, providers=["CPUExecutionProvider"])
    vocab = full.get_outputs()[0].shape[-1]
    ids = np.random.default_rng(2).integers(0, vocab, size=(1, tokens), dtype=np.int64)
    ref = full.run(None, {full.get_inputs()[0].name: ids})[0][0]
    names = [o.name for o in past.get_outputs()]
    kv = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
          for i in past.get_inputs() if i.name.startswith("past_key_values.")}
    got, start = [], 0
    for end in list(range(tokens - 4, tokens + 1)):
        r = dict(zip(names, past.run(None, {
            "input_ids": ids[:, start:end],
            "position_ids": np.arange(start, end, dtype=np.int64)[None], **kv})))
        got.append(r["logits"][0])
        kv = {n: r[n.replace("past_key_values.", "present.")] for n in kv}
        start = end
    err = float(np.abs(np.concatenate(got) - ref).max())
    if err > tol:
        raise SystemExit(f"{past_path}: logits differ from {onnx_path}'s by {err:.3g}")
    return err


if __name__ == "__main__":
    # The demo model's GGUF with its vocabulary, for bench/bench_serve.py:
    #   .venv-bench/bin/python bench/peer_models.py OUT.gguf
    import argparse
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]
    p = argparse.ArgumentParser(description="the demo model as a float32 GGUF with its vocabulary")
    p.add_argument("out")
    p.add_argument("--model", default=str(root / "examples" / "austen" / "model.onnx"))
    p.add_argument("--vocab", default=str(root / "examples" / "austen" / "tokenizer.model"))
    p.add_argument("--heads", type=int, default=4, help="the demo's 4 (examples/austen/model.json)")
    a = p.parse_args()
    gpt2_gguf(a.model, a.out, a.heads, vocab=a.vocab)
