"""Check examples/austen/model.onnx with onnxruntime against torch's reference logits.

train.py writes /tmp/austen_ref_ids.npy (int64 [1, T]) and /tmp/austen_ref_logits.npy
(float32 [1, T, vocab]) for a fixed prompt. Run with the repo's venv (no torch needed):

    .venv/bin/python examples/austen/verify_onnx.py [--tol 1e-4]

Besides the full prompt it also runs batch 2 and a shorter prefix (the model is causal, so a
prefix's logits must equal the first rows of the full prompt's) to exercise the dynamic axes.
"""
import argparse
import os

import numpy as np
import onnx
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))

ap = argparse.ArgumentParser()
ap.add_argument("--model", default=os.path.join(HERE, "model.onnx"))
ap.add_argument("--ids", default="/tmp/austen_ref_ids.npy")
ap.add_argument("--logits", default="/tmp/austen_ref_logits.npy")
ap.add_argument("--tol", type=float, default=1e-4)
args = ap.parse_args()

onnx.checker.check_model(onnx.load(args.model))
ids = np.load(args.ids)
ref = np.load(args.logits)
sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
print("inputs:", [(i.name, i.type, i.shape) for i in sess.get_inputs()])
print("outputs:", [(o.name, o.type, o.shape) for o in sess.get_outputs()])

worst = 0.0
cases = [
    ("prompt", ids, ref),
    ("batch2", np.concatenate([ids, ids]), np.concatenate([ref, ref])),
    ("prefix5", ids[:, :5], ref[:, :5]),
]
for name, x, want in cases:
    (got,) = sess.run(["logits"], {"input_ids": x})
    assert got.shape == want.shape, (name, got.shape, want.shape)
    diff = float(np.abs(got - want).max())
    worst = max(worst, diff)
    print(f"{name}: input {list(x.shape)} -> logits {list(got.shape)}, max |ort - torch| = {diff:.3e}")
print(f"max abs diff {worst:.3e} (tolerance {args.tol:g}):", "OK" if worst <= args.tol else "FAIL")
raise SystemExit(0 if worst <= args.tol else 1)
