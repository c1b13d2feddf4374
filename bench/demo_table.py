#!/usr/bin/env python3
"""The demo's variant table: the demo model as float32, W8A8 SmoothQuant and W8A8 2:4 sparse.

    .venv/bin/python bench/demo_table.py --out-dir build/demo
        [--qcc build/bin/qcc] [--qrun build/bin/qrun] [--model examples/austen/model.onnx]
        [--text examples/austen/heldout.txt] [--max-chars 20000]
        [--calib-text TRAIN.txt | --data-dir DIR] [--calib-samples 64] [--calib-seq-len 128]
        [--alpha 0.5] [--bench-generate 1 128 100] [--repeats 3] [--cuda auto|on|off]

Compiles --model with qcc into OUT_DIR/float32.qpkg, OUT_DIR/w8a8.qpkg and
OUT_DIR/w8a8-sparse.qpkg (kept: scripts/demo.sh generates from them) and prints one
markdown table on stdout:

| column | how |
|---|---|
| artifact MB | the .qpkg's size, 10^6 bytes |
| held-out ppl | `qrun X.qpkg --perplexity SLICE --context 128`: the first --max-chars characters of --text, the protocol of examples/austen/README.md |
| prefill / decode tok/s | `qrun X.qpkg --bench-generate B C S`: B random prompts of C tokens, S decode steps through the KV cache; the median of --repeats runs |

W8A8 is `--quant=w8a8 --smoothquant-alpha=A --act-quant=per-token` (SmoothQuant O1,
docs/QUANTIZATION.md), calibrated on the Austen train split (per novel the first 90% of
characters, as bench/quality_report.py; never the held-out text) or on --calib-text.
W8A8 2:4 adds `--sparsity=2:4 --prune=sparsegpt` (docs/SPARSITY.md): the transformer
blocks' linears keep 2 of every 4 weights, chosen and compensated by SparseGPT with the
same calibration text's Hessians (its own statistics file: they hold the Gram matrices).
--cuda auto compiles the GPU kernels into the artifacts only when `qrun --devices` lists
a GPU (they would not run here otherwise, and their bytes would count in the size).

Progress lines go to stderr when it is a terminal; nothing else is printed there but
errors. Exit status 0 when every variant built and ran, 1 otherwise (the table shows
the failure). Python (stdlib only) is only the driver: qcc and qrun do the work.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import quality_report as qr  # noqa: E402

CONTEXT = 128  # perplexity windows: the protocol of examples/austen/README.md


def variants(alpha):
    """(file stem, table name, qcc flags)."""
    return [
        ("float32", "float32", []),
        ("w8a8", "W8A8 SmoothQuant",
         ["--quant=w8a8", f"--smoothquant-alpha={alpha:g}", "--act-quant=per-token"]),
        ("w8a8-sparse", "W8A8 + 2:4 SparseGPT",
         ["--quant=w8a8", f"--smoothquant-alpha={alpha:g}", "--act-quant=per-token",
          "--sparsity=2:4", "--prune=sparsegpt"]),
    ]


def shown(path):
    """`path` relative to the repository when it is inside it."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return path if rel.startswith("..") else rel


def progress(msg):
    if sys.stderr.isatty():
        print(msg, file=sys.stderr, flush=True)


def gpu_listed(qrun):
    """Whether `qrun --devices` lists a device ("0: NAME, sm_90, ... MiB")."""
    p = subprocess.run([qrun, "--devices"], capture_output=True, text=True)
    return p.returncode == 0 and re.search(r"^\d+: ", p.stdout, re.M) is not None


def bench_generate(qrun, artifact, shape, repeats):
    """Median prefill and decode tokens/s of `repeats` runs, and qrun's backend line."""
    pre, dec, backend = [], [], ""
    for _ in range(repeats):
        p = subprocess.run([qrun, artifact, "--bench-generate"] + [str(x) for x in shape],
                           capture_output=True, text=True, timeout=qr.TIMEOUT_S)
        m = re.search(r"prefill ([0-9.eE+-]+) tokens/s, decode ([0-9.eE+-]+) tokens/s",
                      p.stdout)
        if p.returncode != 0 or not m:
            raise RuntimeError(qr.first_error_line(p.stderr or p.stdout))
        pre.append(float(m.group(1)))
        dec.append(float(m.group(2)))
        b = re.search(r"^\[qrun\] (.*)$", p.stderr, re.M)
        backend = b.group(1) if b else backend
    return statistics.median(pre), statistics.median(dec), backend


def calib_flags(args, calib_text, stem):
    """Calibration flags; each variant family its own fresh statistics file (2:4
    pruning needs the Gram matrices that W8A8 alone does not collect)."""
    stats = os.path.join(args.out_dir, f"calib-stats-{stem}.json")
    for path in (stats, stats + ".gram"):
        if os.path.exists(path):
            os.remove(path)
    return [f"--calib={calib_text}", f"--calib-samples={args.calib_samples}",
            f"--calib-seq-len={args.calib_seq_len}", f"--calib-stats={stats}"]


def measure(args, heldout, calib_text, cuda):
    chosen = variants(args.alpha)
    rows, backend = [], ""
    for i, (stem, name, flags) in enumerate(chosen):
        step = f"[{i + 1}/{len(chosen)}] {name}"
        out = os.path.join(args.out_dir, stem + ".qpkg")
        progress(f"{step}: compile" + (f", calibrating on {args.calib_samples} x "
                                       f"{args.calib_seq_len} train tokens" if flags else "")
                 + ", then held-out perplexity")
        r = qr.run_variant(args.qcc, args.qrun, os.path.abspath(args.model), flags, out,
                           heldout, calib_flags(args, calib_text, stem) if flags else [],
                           CONTEXT, cuda=cuda)
        r["name"] = name
        if not r["error"]:
            progress(f"{step}: qrun --bench-generate "
                     f"{' '.join(map(str, args.bench_generate))} x {args.repeats}")
            try:
                r["prefill"], r["decode"], backend = bench_generate(
                    args.qrun, out, args.bench_generate, args.repeats)
            except RuntimeError as e:
                r["error"] = str(e)
        rows.append(r)
    return rows, backend


def render(rows):
    """One markdown table, columns padded so that it also reads in a terminal."""
    head = ["variant", "artifact MB", "held-out ppl", "prefill tok/s", "decode tok/s"]
    body = []
    for r in rows:
        if r["error"]:
            body.append([r["name"], f"failed: {r['error']}", "", "", ""])
        else:
            body.append([r["name"], f"{r['size'] / 1e6:.1f}", f"{r['ppl']:.2f}",
                         f"{r['prefill']:.0f}", f"{r['decode']:.0f}"])
    width = [max(len(x[c]) for x in [head] + body) for c in range(len(head))]

    def line(cells):
        return "| " + " | ".join(
            (c.ljust(w) if i == 0 else c.rjust(w)) for i, (c, w) in enumerate(zip(cells, width))
        ) + " |"

    sep = "|" + "|".join(("-" * (w + 2)) if i == 0 else ("-" * (w + 1) + ":")
                         for i, w in enumerate(width)) + "|"
    return "\n".join([line(head), sep] + [line(b) for b in body])


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", required=True, help="where the artifacts are written and kept")
    p.add_argument("--model", default=qr.DEFAULT_MODEL)
    qr.add_common_args(p, max_chars=20000)  # 20,000: about 5,100 scored tokens
    p.add_argument("--bench-generate", type=int, nargs=3, default=[1, 128, 100],
                   metavar=("BATCH", "CONTEXT", "STEPS"))
    p.add_argument("--repeats", type=int, default=3, help="timed runs per variant (median)")
    p.add_argument("--cuda", choices=["auto", "on", "off"], default="auto",
                   help="compile GPU kernels into the artifacts (auto: when a GPU is listed)")
    args = qr.check_common_args(p.parse_args())
    os.makedirs(args.out_dir, exist_ok=True)
    cuda = args.cuda == "on" or (args.cuda == "auto" and gpu_listed(args.qrun))
    heldout = qr.write_slice(args.text, args.max_chars,
                             os.path.join(args.out_dir, "heldout-slice.txt"))
    try:
        calib_text = args.calib_text or qr.write_train_split(
            args.data_dir, os.path.join(args.out_dir, "calib-train.txt"))
    except RuntimeError as e:
        sys.exit(f"demo_table.py: {e} (or give --calib-text)")
    rows, backend = measure(args, heldout, calib_text, cuda)

    tokens = next((r["tokens"] for r in rows if r["tokens"]), None)
    b, c, s = args.bench_generate
    print(render(rows))
    print()
    print("held-out ppl: " + (f"the first {args.max_chars:,} characters of "
                              if args.max_chars > 0 else "") + shown(args.text)
          + (f" ({tokens:,} scored tokens, windows of {CONTEXT})" if tokens else "")
          + f"; W8A8: SmoothQuant alpha {args.alpha:g}, per-token int8 activations, "
          f"calibrated on {args.calib_samples} x {args.calib_seq_len} tokens of "
          + (shown(args.calib_text) if args.calib_text else "the train split")
          + "; 2:4: the blocks' linears pruned by SparseGPT with the same calibration"
          + f".\ntokens/s: qrun --bench-generate {b} {c} {s} (batch {b}, {c}-token prompts, "
          f"{s} decode steps), median of {args.repeats}"
          + (f"; {backend}" if backend else "") + ".")
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
