#!/usr/bin/env python3
"""A tiny LLaMA-style ONNX model for the artifact-run fuzz target's seeds.

    .venv-fixtures/bin/python fuzz/make_tiny_fixture.py OUT.onnx   # + calib/input_ids.npy beside it

The seed a fuzzer mutates is read, packed and run once per execution, so its
size sets the rate: the llama fixture (vocab 256, width 64, 2 layers) gives a
523 KB seed that runs at tens of executions a second under ASan. This is the
same module (test/models/gen_fixtures.py's LlamaForCausalLM, so the same
exporter patterns: rotary, GQA, SwiGLU, RMSNorm) at vocab 32, width 32, one
layer, 2 query heads over 1 KV head, MLP 32 (K a multiple of 32: 2:4 applies): a few KB of weights. Deterministic
(fixed seed); needs torch and onnx (scripts/setup_fixtures.sh).
"""
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "models"))
import gen_fixtures  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    torch.set_num_threads(1)
    torch.manual_seed(4242)
    vocab = 32
    model = gen_fixtures.LlamaForCausalLM(vocab=vocab, hidden=32, n_layer=1, n_heads=2,
                                          n_kv_heads=1, intermediate=32).eval()
    ids = torch.randint(0, vocab, (2, 8), dtype=torch.int64, generator=torch.Generator().manual_seed(99))
    path = sys.argv[1]
    # The legacy exporter at opset 17, as the fixtures (the dynamo exporter's
    # reshapes of this module hide the sequence dim from kv-cache-layout).
    with torch.no_grad():
        torch.onnx.export(model, (ids,), path, opset_version=gen_fixtures.OPSET,
                          do_constant_folding=True, input_names=["input_ids"],
                          output_names=["logits"], dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in ("input_ids", "logits")})
    print("%s: %d bytes" % (path, os.path.getsize(path)))
    # Calibration input for the W8A8 seeds: 4 windows of 16 ids.
    calib = os.path.join(os.path.dirname(os.path.abspath(path)), "calib")
    os.makedirs(calib, exist_ok=True)
    np.save(os.path.join(calib, "input_ids.npy"), (np.arange(64).reshape(4, 16) * 7 % vocab).astype(np.int64))


if __name__ == "__main__":
    main()
