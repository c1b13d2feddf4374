#!/usr/bin/env python3
"""2:4 sparsity quality and size: held-out perplexity of qcc's pruned variants.

    .venv/bin/python bench/sparsity_report.py [--model examples/austen/model.onnx]
        [--text examples/austen/heldout.txt] [--max-chars 60000]
        [--calib-text TRAIN.txt] [--calib-samples 64] [--calib-seq-len 128]
        [--alpha 0.5] [--context 128] [--qcc build/bin/qcc] [--qrun build/bin/qrun]
        [--keep DIR] [--only NAME,...] [--reuse-stats] [--timeout S]

For dense, 2:4 magnitude, 2:4 Wanda and 2:4 SparseGPT (docs/SPARSITY.md), each in
float and as SmoothQuant W8A8 (O1, per-token) with an int8 KV cache, builds the
artifact with qcc (--no-cuda), measures `qrun X.qpkg --perplexity HELDOUT --context N`
and prints one markdown table: perplexity, change against dense float, .qpkg size.

| variant | qcc flags |
|---|---|
| dense | (none) / --quant=w8a8 --smoothquant-alpha=A --kv-dtype=i8 |
| 2:4 METHOD | --sparsity=2:4 --prune=METHOD [+ the W8A8 flags] |

Calibration is bench/quality_report.py's (the Austen train split by default, never the
held-out text). The SparseGPT float variant compiles first among the calibrated ones,
so the statistics it saves with --calib-stats (activation absmax, and the pruning
statistics: Gram matrices and input norms) serve every later variant: calibration runs
once. Exit status: 0 when every variant built and ran, 1 otherwise.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality_report as qr  # noqa: E402

METHODS = ["magnitude", "wanda", "sparsegpt"]


def variants(alpha):
    """(name, flags) in report order."""
    w8a8 = ["--quant=w8a8", f"--smoothquant-alpha={alpha:g}", "--act-quant=per-token",
            "--kv-dtype=i8"]
    rows = [("dense float32", []), ("dense W8A8 + int8 KV", w8a8)]
    for m in METHODS:
        sp = ["--sparsity=2:4", f"--prune={m}"]
        rows += [(f"2:4 {m} float32", sp), (f"2:4 {m} W8A8 + int8 KV", sp + w8a8)]
    return rows


def run_order(chosen):
    """Dense float first, then SparseGPT float (it saves the full statistics), the
    other float rows, then the W8A8 ones."""
    first = [v for v in chosen if v[0] in ("dense float32", "2:4 sparsegpt float32")]
    rest = [v for v in chosen if v not in first]
    return first + [v for v in rest if "W8A8" not in v[0]] + [v for v in rest if "W8A8" in v[0]]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=qr.DEFAULT_MODEL)
    qr.add_common_args(p, max_chars=60000)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--keep", default=None, help="work in this folder and keep it")
    p.add_argument("--only", default=None,
                   help="comma-separated variant names to run (default: all)")
    p.add_argument("--timeout", type=int, default=qr.TIMEOUT_S,
                   help="seconds per compile or perplexity run (a real model's "
                        "SparseGPT calibration on 2 cores takes longer than the default)")
    p.add_argument("--reuse-stats", action="store_true",
                   help="reuse the calibration statistics an earlier run left in --keep")
    args = qr.check_common_args(p.parse_args())

    work = args.keep or tempfile.mkdtemp(prefix="qcc-sparsity-")
    os.makedirs(work, exist_ok=True)
    t_start = time.perf_counter()
    try:
        model = os.path.abspath(args.model)
        heldout = qr.write_slice(args.text, args.max_chars, os.path.join(work, "heldout-slice.txt"))
        calib_text = args.calib_text or qr.write_train_split(
            args.data_dir, os.path.join(work, "calib-train.txt"))
        chosen = variants(args.alpha)
        if args.only:
            names = [n.strip() for n in args.only.split(",")]
            unknown = [n for n in names if n not in [v[0] for v in chosen]]
            if unknown:
                sys.exit(f"--only: unknown variant(s) {unknown}; known: {[v[0] for v in chosen]}")
            chosen = [v for v in chosen if v[0] in names]
        rows = qr.measure(args.qcc, args.qrun, model, heldout, calib_text, work,
                          run_order(chosen), args.calib_samples, args.calib_seq_len,
                          args.context, reuse_stats=args.reuse_stats,
                          timeout=args.timeout)
        by_name = {r["name"]: r for r in rows}
        rows = [by_name[name] for name, _ in chosen]
        print()
        print(f"Model: {os.path.relpath(args.model, qr.ROOT)}")
        print(qr.held_out_line(args, rows))
        print()
        print(qr.table(rows).replace("vs float32", "vs dense float32"))
        return qr.finish(rows, t_start)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
