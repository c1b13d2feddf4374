#!/usr/bin/env python3
"""Checks that gpt2_past.onnx (explicit past/present) computes what gpt2.onnx
computes on the whole sequence. Needs only numpy and onnxruntime:

    .venv/bin/python test/models/check_past.py

Runs gpt2_past over a 5-token prefix (empty past), then over the next 4
tokens with the presents of the first call, then one token at a time, and
compares every call's logits with gpt2.onnx's logits for the same positions
of the whole 12-token sequence. Also checks that the final presents hold the
keys/values of all 12 tokens. Exits non-zero when they differ by more than
1e-4.
"""

import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS, HEADS, HEAD_DIM, VOCAB = 2, 4, 16, 256


def main():
    input_names = ["input_ids"]
    output_names = ["logits"]
    for i in range(LAYERS):
        input_names += ["past.%d.key" % i, "past.%d.value" % i]
        output_names += ["present.%d.key" % i, "present.%d.value" % i]
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    past_sess = ort.InferenceSession(os.path.join(HERE, "gpt2_past.onnx"), opts,
                                     providers=["CPUExecutionProvider"])
    full_sess = ort.InferenceSession(os.path.join(HERE, "gpt2.onnx"), opts,
                                     providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    batch, total = 2, 12
    ids = rng.integers(0, VOCAB, (batch, total), dtype=np.int64)
    full = full_sess.run(["logits"], {"input_ids": ids})[0]
    past = [np.zeros((batch, HEADS, 0, HEAD_DIM), dtype=np.float32)] * (2 * LAYERS)
    pieces = [(0, 5), (5, 9)] + [(t, t + 1) for t in range(9, total)]
    err = 0.0
    for lo, hi in pieces:
        outs = past_sess.run(output_names, dict(zip(input_names, [ids[:, lo:hi]] + past)))
        err = max(err, float(np.max(np.abs(outs[0] - full[:, lo:hi]))))
        past = outs[1:]
    shapes_ok = all(p.shape == (batch, HEADS, total, HEAD_DIM) for p in past)
    print("   gpt2_past (prefix 5, then 4, then %d single tokens) vs gpt2 on all %d "
          "tokens: logits max|diff| = %.3g, presents [%d, %d, %d, %d]: %s" % (
              total - 9, total, err, batch, HEADS, total, HEAD_DIM,
              "ok" if shapes_ok else "WRONG"))
    return 0 if err <= 1e-4 and shapes_ok else 1


if __name__ == "__main__":
    sys.exit(main())
