"""Writes issue 12's benchmark model: a LLaMA-style ~1B decoder as ONNX, the way users' files look.

transformers' LlamaForCausalLM with its own random initialisation (seed 0): 16 layers, width 2048,
32 query / 8 KV heads of 64, SwiGLU intermediate 5632, vocab 32000, untied LM head, rope theta
10000, RMSNorm eps 1e-5 (852M parameters). The weights are random: the model is for timing, and
qrun's synthetic weights (qcc --synthetic-weights) replace them in the GPU bundle anyway.

Writes into --out (default build/llama1b/):
  model.onnx, model.onnx.data  float32, opset 17, torch.onnx.export(dynamo=False) as
                               examples/smollm2/convert.py does; inputs input_ids int64
                               [batch, seq] and attention_mask int64 [batch, seq], output logits
                               float32 [batch, seq, 32000]; every initializer in one external
                               data file (the model is over protobuf's 2 GB)
  calib/input_ids.npy          W8A8 calibration without a tokenizer (qcc --calib=DIR): --calib-samples
  calib/attention_mask.npy     random-id sequences of --calib-len tokens (int64 [N, L]), mask all ones
  llama1b.json                 config, parameter count, seed, export time, versions

    .venv-real/bin/python bench/llama_1b.py [--out DIR] [--shape llama32-1b|mqa]
    qcc DIR/model.onnx -o f16.qpkg
    qcc DIR/model.onnx --quant=w8a8 --kv-dtype=i8 --calib=DIR/calib --calib-samples=8 \
        --calib-stats=DIR/stats.json -o w8a8.qpkg
    qcc ... the same plus --sparsity=2:4 --prune=magnitude -o w8a8-sparse.qpkg
"""
import argparse
import importlib.metadata
import json
import os
import resource
import shutil
import sys
import tempfile
import time

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples", "smollm2"))
from convert import Forward  # noqa: E402  input_ids, attention_mask -> logits, no KV cache
from hf_export import traceable_masks  # noqa: E402  (on convert's path: examples/common)
# The shape of issue 12 (and of bench/gpu_reference.py's PyTorch models).
CONFIG = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
              num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096,
              rms_norm_eps=1e-5, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
# --shape llama32-1b: Llama-3.2-1B's shape (its config.json on the Hugging Face hub: FFN 8192,
# vocab 128256, tied embeddings, rope theta 500000; 1.24B parameters), so the GPU table compares
# with published batch-1 decode figures of that model. Plain rope (no llama3 frequency scaling):
# the same kernels and bytes. gpu_reference.py --shape llama32-1b is the PyTorch side.
SHAPES = {"issue12": CONFIG,
          "llama32-1b": dict(CONFIG, intermediate_size=8192, vocab_size=128256,
                             tie_word_embeddings=True, max_position_embeddings=131072,
                             rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
          # --shape mqa: one KV head for 8 query heads of 128 (multi-query attention, as Gemma-2B,
          # Falcon-7B and StarCoder have), 8 layers of width 1024, 154M parameters: the CPU
          # backend's decode attention when a sequence has fewer (sequence, kv head) pairs than
          # threads (runtime/cpu/KvAttention.cpp's decode split).
          "mqa": dict(CONFIG, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                      num_attention_heads=8, num_key_value_heads=1)}
SEED = 0


def log(msg, t0=time.time()):
    print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def build_model(config=None):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**(config or CONFIG), attn_implementation="eager")
    torch.manual_seed(SEED)
    # eager attention, as examples/smollm2/convert.py exports (the SDPA path traces into the same
    # ops but with transformers' tracing-time branches on the query length baked in).
    return LlamaForCausalLM(cfg).to(torch.float32).eval()


def export(model, path):
    """Legacy exporter into a scratch folder (it writes one file per tensor over 2 GB), then one
    model.onnx + model.onnx.data beside `path`."""
    import onnx
    ids = torch.randint(0, 1000, (2, 16), dtype=torch.long)
    mask = torch.ones_like(ids)
    out_dir = os.path.dirname(path)
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        raw = os.path.join(scratch, "model.onnx")

        def run():
            torch.onnx.export(
                Forward(model), (ids, mask), raw,
                dynamo=False, opset_version=17, do_constant_folding=True,
                input_names=["input_ids", "attention_mask"], output_names=["logits"],
                dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                              "attention_mask": {0: "batch", 1: "seq"},
                              "logits": {0: "batch", 1: "seq"}})
        with torch.no_grad():
            try:
                run()
            except IndexError as e:  # as examples/smollm2/convert.py: transformers 4.57's vmap masks
                log(f"legacy export failed ({e}); again with optimum's vmap-free mask functions")
                with traceable_masks():
                    run()
        log(f"exported (peak RSS {peak_rss_mib():.0f} MiB); gathering the external data")
        proto = onnx.load(raw, load_external_data=True)
        data = os.path.basename(path) + ".data"
        for f in (path, path + ".data"):
            if os.path.exists(f):
                os.remove(f)
        tmp = os.path.join(scratch, "final.onnx")
        onnx.save_model(proto, tmp, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=data, size_threshold=1024)
        del proto
        os.replace(os.path.join(scratch, data), path + ".data")
        os.replace(tmp, path)
    onnx.checker.check_model(path)  # by path: checks the external data references too


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "build", "llama1b"))
    ap.add_argument("--calib-samples", type=int, default=8)
    ap.add_argument("--calib-len", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="issue12")
    args = ap.parse_args()
    config = SHAPES[args.shape]
    if args.calib_samples < 1 or args.calib_len < 1:
        sys.exit("llama_1b.py: --calib-samples and --calib-len must be >= 1")
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    t = time.time()
    model = build_model(config)
    params = sum(p.numel() for p in model.parameters())
    init_s = time.time() - t
    log(f"LlamaForCausalLM: {params:,} parameters, initialised in {init_s:.1f}s")

    path = os.path.join(args.out, "model.onnx")
    t = time.time()
    export(model, path)
    export_s = time.time() - t
    log(f"wrote {path} + .data ({os.path.getsize(path + '.data') / 2**30:.2f} GiB) in {export_s:.0f}s")

    calib = os.path.join(args.out, "calib")
    os.makedirs(calib, exist_ok=True)
    rng = np.random.default_rng(SEED)
    ids = rng.integers(0, config["vocab_size"], size=(args.calib_samples, args.calib_len), dtype=np.int64)
    np.save(os.path.join(calib, "input_ids.npy"), ids)
    np.save(os.path.join(calib, "attention_mask.npy"), np.ones_like(ids))
    log(f"wrote {calib}/input_ids.npy, attention_mask.npy ({args.calib_samples} x {args.calib_len})")

    meta = {"shape": args.shape, "config": config, "parameters": params, "seed": SEED,
            "init": "transformers LlamaForCausalLM default (normal, std initializer_range=0.02)",
            "export": "torch.onnx.export(dynamo=False, opset_version=17, do_constant_folding=True)",
            "export_seconds": round(export_s, 1), "peak_rss_mib": round(peak_rss_mib()),
            "calibration": {"samples": args.calib_samples, "tokens": args.calib_len,
                            "ids": "numpy default_rng(0).integers(0, vocab)"},
            "versions": {k: importlib.metadata.version(k) for k in ("torch", "transformers", "onnx")}}
    with open(os.path.join(args.out, "llama1b.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    log(f"done; peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
