#!/usr/bin/env python3
"""Plant LLM.int8()/SmoothQuant-style activation outliers in a pre-LN GPT ONNX model.

    python3 examples/austen-outliers/make_outliers.py \
        [--input examples/austen/model.onnx] --output OUT_DIR/model.onnx \
        [--channels 13,77,150,201,238] [--factor 100] [--check]

Large language models grow a few hidden channels whose activations are one to two
orders of magnitude larger than the rest, in the same channels at every layer
(Dettmers et al., LLM.int8(), 2022; Xiao et al., SmoothQuant, 2023). They come from
the LayerNorm scale: the norm's output at those channels is huge and the weights that
read them are correspondingly small. Quantizing such an activation per tensor (or even
per token) spends the whole int8 range on the outliers and rounds every other channel
to a handful of levels; SmoothQuant migrates the outliers into the weights.

The demo model is too small and too briefly trained to have them, so this script
plants them without changing the function the float model computes: for every
LayerNormalization whose output feeds a MatMul with a constant [K, N] weight
(ln_1 -> c_attn, ln_2 -> c_fc in each block, ln_f -> LM head), gamma[c] and beta[c]
are multiplied by FACTOR (default 100) and row c of every consuming MatMul weight is divided by
FACTOR, for each chosen channel c. In exact arithmetic the logits are unchanged; in
float32 they differ by rounding only. The LM head's weight is the separate
[n_embd, vocab] MatMul initializer of the exported graph, not the tied embedding
table (which is left alone: the embedding is not a consumer of ln_f).

tokenizer.model beside --input is copied beside --output (qcc embeds the tokenizer it
finds beside the model). --check compares the two models' logits with onnxruntime
(when it is importable) on a few random inputs and prints the max relative error.

Needs only onnx and numpy (Debian's /usr/bin/python3 with onnx 1.12, or the project's
.venv). No torch.
"""
import argparse
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DEFAULT_CHANNELS = "13,77,150,201,238"
DEFAULT_FACTOR = 100.0


def plant(model, channels, factor):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    uses = {}
    for n in g.node:
        for i in n.input:
            uses.setdefault(i, []).append(n)
    for o in g.output:
        uses.setdefault(o.name, []).append(None)

    def replace(name, array):
        t = inits[name]
        t.CopyFrom(numpy_helper.from_array(array.astype(np.float32), name))

    def only_user(name, node):
        users = [u for u in uses.get(name, []) if u is not node]
        if users:
            raise RuntimeError(f"initializer '{name}' is shared by several nodes; "
                               "refusing to rescale it")

    touched = []
    for n in g.node:
        if n.op_type != "LayerNormalization":
            continue
        out = n.output[0]
        matmuls = [u for u in uses.get(out, [])
                   if u is not None and u.op_type == "MatMul" and u.input[0] == out
                   and u.input[1] in inits]
        if not matmuls:
            continue
        others = [u for u in uses.get(out, [])
                  if u is None or (u.op_type not in ("MatMul", "Shape"))]
        if others:
            kinds = ", ".join("graph output" if u is None else u.op_type for u in others)
            raise RuntimeError(f"{n.name}: output also read by {kinds}; scaling it would "
                               "change the model's function")
        if any(u.op_type == "MatMul" and u not in matmuls for u in uses.get(out, [])
               if u is not None):
            raise RuntimeError(f"{n.name}: feeds a MatMul with a non-constant weight")
        gamma_name = n.input[1]
        beta_name = n.input[2] if len(n.input) > 2 and n.input[2] else None
        for name in [gamma_name] + ([beta_name] if beta_name else []):
            if name not in inits:
                raise RuntimeError(f"{n.name}: '{name}' is not an initializer")
            only_user(name, n)
            arr = numpy_helper.to_array(inits[name]).copy()
            if max(channels) >= arr.shape[-1]:
                raise RuntimeError(f"{n.name}: channel {max(channels)} >= width {arr.shape[-1]}")
            arr[channels] *= factor
            replace(name, arr)
        for mm in matmuls:
            w_name = mm.input[1]
            only_user(w_name, mm)
            w = numpy_helper.to_array(inits[w_name]).copy()
            if w.ndim != 2:
                raise RuntimeError(f"{mm.name}: weight '{w_name}' is not 2-D")
            w[channels, :] /= factor
            replace(w_name, w)
        touched.append((n.name, [(mm.name, mm.input[1]) for mm in matmuls]))
    if not touched:
        raise RuntimeError("no LayerNormalization feeding a constant-weight MatMul found")
    return touched


def check(original, planted, seed=7):
    try:
        import onnxruntime as ort
    except ImportError:
        print("check: onnxruntime not importable here; skipped "
              "(run with the project's .venv/bin/python)")
        return None
    a = ort.InferenceSession(original, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(planted, providers=["CPUExecutionProvider"])
    name = a.get_inputs()[0].name
    vocab = a.get_outputs()[0].shape[-1]
    vocab = vocab if isinstance(vocab, int) else 1000
    rng = np.random.default_rng(seed)
    worst = 0.0
    for batch, seq in [(1, 1), (1, 64), (2, 128), (1, 256)]:
        ids = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
        ra = a.run(None, {name: ids})[0]
        rb = b.run(None, {name: ids})[0]
        err = float(np.max(np.abs(ra - rb)) / max(float(np.max(np.abs(ra))), 1e-6))
        print(f"check: batch {batch} seq {seq:3d}: max|new - old| / max|old| = {err:.3e}")
        worst = max(worst, err)
    return worst


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", default=os.path.join(root, "examples", "austen", "model.onnx"))
    p.add_argument("--output", required=True, help="path of the model.onnx to write")
    p.add_argument("--channels", default=DEFAULT_CHANNELS,
                   help=f"comma-separated hidden channels (default {DEFAULT_CHANNELS})")
    p.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                   help=f"outlier magnitude factor (default {DEFAULT_FACTOR:g})")
    p.add_argument("--check", action="store_true",
                   help="compare logits with onnxruntime (max relative error must be <= 1e-4)")
    args = p.parse_args()
    channels = sorted({int(c) for c in args.channels.split(",") if c.strip()})
    if not channels or args.factor <= 0:
        p.error("need at least one channel and a positive factor")

    model = onnx.load(args.input)
    touched = plant(model, channels, args.factor)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, args.output)
    for ln, mms in touched:
        print(f"{ln}: gamma/beta x{args.factor:g} at {channels}; rows / {args.factor:g} in "
              + ", ".join(f"{m} ({w})" for m, w in mms))
    tok = os.path.join(os.path.dirname(os.path.abspath(args.input)), "tokenizer.model")
    if os.path.exists(tok):
        dst = os.path.join(out_dir, "tokenizer.model")
        if os.path.abspath(dst) != tok:
            shutil.copyfile(tok, dst)
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes)")
    if args.check:
        worst = check(args.input, args.output)
        if worst is not None:
            print(f"check: worst max relative error {worst:.3e} (limit 1e-4)")
            if worst > 1e-4:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
