#!/usr/bin/env python3
"""W8A8 quantization quality: held-out perplexity of qcc's quantized variants.

    .venv/bin/python bench/quality_report.py [--model examples/austen/model.onnx]
        [--outliers] [--text examples/austen/heldout.txt] [--max-chars 60000]
        [--calib-text TRAIN.txt] [--calib-samples 64] [--calib-seq-len 128]
        [--alpha 0.5] [--o1-sweep | --fallback | --methods | --rotation | --pareto SVG]
        [--qcc build/bin/qcc] [--qrun build/bin/qrun]
        [--keep DIR]

Builds each variant with qcc (docs/QUANTIZATION.md), measures
`qrun X.qpkg --perplexity HELDOUT --context 128` on the first --max-chars characters
of the held-out text, and prints a markdown table: perplexity, change against the
float32 artifact, and .qpkg size.

| variant | qcc flags |
|---|---|
| float32 | (none) |
| naive W8A8 O1 / O2 / O3 | --quant=w8a8 --no-smoothquant --act-quant=per-token / per-tensor / static |
| SmoothQuant W8A8 O1 / O2 / O3 | --quant=w8a8 --smoothquant-alpha=A --act-quant=per-token / per-tensor / static |
| SmoothQuant O1 + int8 KV | --quant=w8a8 --smoothquant-alpha=A --act-quant=per-token --kv-dtype=i8 |

--o1-sweep reports SmoothQuant O1 instead, alpha 0.5, 0.85 and auto (per group, chosen on the
calibration rows), each smoothing only norm -> linear groups (--smoothquant-norms-only) and
every group (also GLU up -> down and V -> O); docs/QUANTIZATION.md section 2.

--fallback reports O1 with and without the LLM.int8()-style float outlier columns
(--int8-fallback=auto, docs/QUANTIZATION.md section 3): naive, alpha 0.85 and auto.

--rotation reports W8A8 and FP8 with and without qcc --rotate (the residual stream rotated
into the weights, QuaRot; docs/QUANTIZATION.md section 10): float32 rotated (the same function),
naive and SmoothQuant O1, rotated O1 and O2, FP8 O1 plain and rotated.

--methods reports every method of docs/QUANTIZATION.md in one table, on one build: float32;
SmoothQuant W8A8 O1 at alpha 0.5, 0.85 and auto, and auto + int8 fallback; W4A16 at
--group-size (default 128) by round to nearest, GPTQ and GPTQ act-order, and W4A8 by round to
nearest (each again with the asymmetric grid, --w4-asym, where qcc has it); the float model with an int8 KV cache,
per-head and kivi scales. Beside each perplexity: the artifact's bytes and the bytes one decode
step reads at --context cached tokens (weights + activations + KV, `qcc --report=json`'s
decode total for the same flags).

--pareto SVG is the quality-against-speed view (issue 39's Pareto plot): one variant per
method at its best measured flags (float32, f16 KV, W8A8 O1 at alpha 0.85 and auto + fallback,
the latter with int8 kivi and FP8 KV caches, FP8 O1, W8A8 + 2:4 SparseGPT, W4A16 GPTQ asymmetric
with and without act-order, W4A8 GPTQ asymmetric without SmoothQuant), each artifact also timed: batch-1 decode tokens/s on the CPU
backend (`qrun --bench-generate 1 CONTEXT STEPS` with --speed-context and --speed-steps,
the best of --speed-rounds rounds
interleaved over the variants). The table gains the speed and whether the variant is on the
frontier (no other is both faster and better); the SVG plots perplexity against tokens/s with
the frontier joined.

Calibration never sees the held-out text: by default the calibration file is the train
split of the Austen corpus (per novel the first 90% of characters, int(len*0.9), as in
examples/austen/train.py), written to a temporary folder; --calib-text uses a given file
instead. The first quantized compile writes the calibration statistics with
--calib-stats=FILE and every later variant reads them back, so calibration runs once
per model.

--outliers first regenerates the outlier fixture (examples/austen-outliers/
make_outliers.py: a few hidden channels scaled up 100x at every LayerNorm feeding a
MatMul, the consuming weight rows scaled down, same float function) from --model into
the work folder and reports on it instead. Nothing large is stored in the repository.

Exit status: 0 when every variant built and ran, 1 otherwise (the table shows the
failures). Python is only the driver; qcc and qrun do the work.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_info import cpu_has_bf16  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "examples", "austen", "model.onnx")
DEFAULT_TEXT = os.path.join(ROOT, "examples", "austen", "heldout.txt")
DEFAULT_DATA = os.path.join(ROOT, "data", "austen")
MAKE_OUTLIERS = os.path.join(ROOT, "examples", "austen-outliers", "make_outliers.py")
TIMEOUT_S = 900


def variants(alpha):
    """(name, qcc flags) in report order; quantized flags lack the calibration ones."""
    naive = ["--quant=w8a8", "--no-smoothquant"]
    sq = ["--quant=w8a8", f"--smoothquant-alpha={alpha:g}"]
    return [
        ("float32", []),
        ("naive W8A8 O1 (per-token)", naive + ["--act-quant=per-token"]),
        ("naive W8A8 O2 (per-tensor)", naive + ["--act-quant=per-tensor"]),
        ("naive W8A8 O3 (static)", naive + ["--act-quant=static"]),
        (f"SmoothQuant a={alpha:g} O1 (per-token)", sq + ["--act-quant=per-token"]),
        (f"SmoothQuant a={alpha:g} O2 (per-tensor)", sq + ["--act-quant=per-tensor"]),
        (f"SmoothQuant a={alpha:g} O3 (static)", sq + ["--act-quant=static"]),
        (f"SmoothQuant a={alpha:g} O1 + int8 KV", sq + ["--act-quant=per-token", "--kv-dtype=i8"]),
    ]


def o1_sweep():
    """(name, qcc flags): SmoothQuant O1 by alpha, norm groups only vs every group."""
    out = [("float32", [])]
    for alpha in ("0.5", "0.85", "auto"):
        for norms_only in (True, False):
            out.append((f"SmoothQuant a={alpha} O1, " + ("norms only" if norms_only else "all groups"),
                        ["--quant=w8a8", f"--smoothquant-alpha={alpha}"]
                        + (["--smoothquant-norms-only"] if norms_only else [])))
    return out


def fallback_sweep():
    """(name, qcc flags): O1 without and with --int8-fallback=auto."""
    out = [("float32", [])]
    for name, flags in (("naive O1", ["--no-smoothquant"]),
                        ("SmoothQuant a=0.85 O1", ["--smoothquant-alpha=0.85"]),
                        ("SmoothQuant a=auto O1", ["--smoothquant-alpha=auto"])):
        out.append((name, ["--quant=w8a8"] + flags))
        out.append((name + " + int8 fallback",
                    ["--quant=w8a8"] + flags + ["--int8-fallback=auto"]))
    return out


def methods_sweep(group_size, asym):
    """(name, qcc flags): every method, one row each (--methods)."""
    w8 = ["--quant=w8a8"]
    w4 = ["--quant=w4a16", f"--group-size={group_size}"]
    out = [("float32", []),
           ("W8A8 O1, SmoothQuant a=0.5", w8 + ["--smoothquant-alpha=0.5"]),
           ("W8A8 O1, SmoothQuant a=0.85", w8 + ["--smoothquant-alpha=0.85"]),
           ("W8A8 O1, SmoothQuant a=auto", w8 + ["--smoothquant-alpha=auto"]),
           ("W8A8 O1, a=auto + int8 fallback",
            w8 + ["--smoothquant-alpha=auto", "--int8-fallback=auto"])]
    for grid in ([], ["--w4-asym"]) if asym else ([],):
        tag = ", asymmetric" if grid else ""
        out += [(f"W4A16 RTN, G={group_size}{tag}", w4 + ["--w4-method=rtn"] + grid),
                (f"W4A16 GPTQ, G={group_size}{tag}", w4 + grid),
                (f"W4A16 GPTQ act-order, G={group_size}{tag}", w4 + ["--act-order"] + grid),
                (f"W4A8 RTN, G={group_size}{tag}",
                 ["--quant=w4a8"] + w4[1:] + ["--w4-method=rtn", "--no-smoothquant"] + grid)]
    out += [("float32 + int8 KV, per-head scales", ["--kv-dtype=i8"]),
            ("float32 + int8 KV, kivi scales", ["--kv-dtype=i8", "--kv-scales=kivi"]),
            ("float32 + FP8 KV, per-head scales", ["--kv-dtype=fp8"]),
            ("float32 + f16 KV", ["--kv-dtype=f16"])]
    return out


def rotation_sweep():
    """(name, qcc flags): W8A8 and FP8 with and without the residual rotation
    (--rotation; docs/QUANTIZATION.md sections 10 and 11)."""
    w8, f8, rot = ["--quant=w8a8"], ["--quant=fp8"], ["--rotate"]
    naive, auto = ["--no-smoothquant"], ["--smoothquant-alpha=auto"]
    return [("float32", []),
            ("float32, rotated", rot),
            ("W8A8 O1, naive", w8 + naive),
            ("W8A8 O1, a=auto + int8 fallback", w8 + auto + ["--int8-fallback=auto"]),
            ("W8A8 O1, rotated", rot + w8 + naive),
            ("W8A8 O1, rotated + int8 fallback", rot + w8 + naive + ["--int8-fallback=auto"]),
            ("W8A8 O1, rotated + a=auto", rot + w8 + auto),
            ("W8A8 O2, rotated", rot + w8 + naive + ["--act-quant=per-tensor"]),
            ("FP8 O1", f8 + naive),
            ("FP8 O1, a=auto", f8 + auto),
            ("FP8 O1, rotated", rot + f8 + naive),
            ("FP8 O1, rotated + a=auto", rot + f8 + auto)]


def pareto_sweep(group_size):
    """(name, qcc flags): the variants of the quality-vs-speed view (--pareto), one
    per method at its best measured flags, plus the KV cache formats."""
    w8 = ["--quant=w8a8", "--act-quant=per-token"]
    best_o1 = w8 + ["--smoothquant-alpha=auto", "--int8-fallback=auto"]
    w4 = ["--quant=w4a16", f"--group-size={group_size}", "--w4-asym"]
    bf16 = ([("float32 as bf16 (qrun --cpu-precision=bf16)",
              [QRUN_FLAG + "--cpu-precision=bf16"])] if cpu_has_bf16() else [])
    return [("float32", []),
            ("float32 + f16 KV", ["--kv-dtype=f16"])] + bf16 + [
            ("W8A8 O1, a=0.85", w8 + ["--smoothquant-alpha=0.85"]),
            ("W8A8 O1, a=auto + int8 fallback", best_o1),
            ("W8A8 O1, a=auto + fallback + int8 KV kivi",
             best_o1 + ["--kv-dtype=i8", "--kv-scales=kivi"]),
            ("W8A8 O1, a=auto + fallback + FP8 KV", best_o1 + ["--kv-dtype=fp8"]),
            ("FP8 O1, a=auto", ["--quant=fp8", "--smoothquant-alpha=auto"]),
            ("W8A8 O1 + 2:4 sparsegpt", w8 + ["--smoothquant-alpha=0.85", "--sparsity=2:4",
                                              "--prune=sparsegpt"]),
            (f"W4A16 GPTQ act-order, G={group_size}, asymmetric", w4 + ["--act-order"]),
            (f"W4A16 GPTQ, G={group_size}, asymmetric", w4),
            (f"W4A8 GPTQ, G={group_size}, asymmetric",
             ["--quant=w4a8"] + w4[1:] + ["--no-smoothquant"])]


def decode_speed(qrun, artifact, context, steps, timeout=TIMEOUT_S, run_flags=()):
    """Batch-1 decode tokens/s after `context` tokens (qrun --bench-generate 1 CONTEXT
    STEPS on the CPU backend, with the variant's qrun flags), or None."""
    p = subprocess.run([qrun, artifact, "--backend=cpu", "--bench-generate", "1",
                        str(context), str(steps)] + list(run_flags), capture_output=True,
                       text=True, timeout=timeout)
    m = re.search(r"decode ([0-9.]+) tokens/s", p.stdout + p.stderr)
    return float(m.group(1)) if p.returncode == 0 and m else None


def pareto_front(rows):
    """Names of the rows no other row beats on both axes (faster decode and lower
    perplexity, or as good on one and better on the other)."""
    ok = [r for r in rows if not r["error"] and r.get("speed")]
    front = set()
    for r in ok:
        if not any((o["speed"] >= r["speed"] and o["ppl"] <= r["ppl"]) and
                   (o["speed"] > r["speed"] or o["ppl"] < r["ppl"]) for o in ok):
            front.add(r["name"])
    return front


def pareto_svg(rows, title, path):
    """Perplexity (y) against batch-1 decode tokens/s (x), the frontier joined;
    standard library only, as bench/roofline_plot.py."""
    ok = [r for r in rows if not r["error"] and r.get("speed")]
    if not ok:
        return
    front = pareto_front(rows)
    W, H, L, R, T, B = 900, 560, 80, 300, 50, 60
    xs, ys = [r["speed"] for r in ok], [r["ppl"] for r in ok]
    x0, x1 = min(xs) * 0.9, max(xs) * 1.1
    y0, y1 = min(ys), max(ys)
    pad = (y1 - y0) * 0.08 or y0 * 0.01
    y0, y1 = y0 - pad, y1 + pad

    def X(v):
        return L + (v - x0) / (x1 - x0) * (W - L - R)

    def Y(v):
        return T + (y1 - v) / (y1 - y0) * (H - T - B)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="24" text-anchor="middle" font-size="15">{title}</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{(L + W - R) / 2}" y="{H - 18}" text-anchor="middle">'
           'batch-1 decode tokens/s (CPU backend; higher is better)</text>',
           f'<text x="20" y="{(T + H - B) / 2}" text-anchor="middle" '
           f'transform="rotate(-90 20 {(T + H - B) / 2})">held-out perplexity (lower is '
           'better)</text>']
    for i in range(6):
        xv, yv = x0 + (x1 - x0) * i / 5, y0 + (y1 - y0) * i / 5
        out.append(f'<text x="{X(xv):.1f}" y="{H - B + 16}" text-anchor="middle">{xv:.0f}</text>')
        out.append(f'<text x="{L - 6}" y="{Y(yv) + 4:.1f}" text-anchor="end">{yv:.2f}</text>')
        out.append(f'<line x1="{L}" y1="{Y(yv):.1f}" x2="{W - R}" y2="{Y(yv):.1f}" '
                   'stroke="#eee"/>')
    pts = sorted((r for r in ok if r["name"] in front), key=lambda r: r["speed"])
    if len(pts) > 1:
        out.append('<polyline fill="none" stroke="#d62728" stroke-width="1.5" points="'
                   + " ".join(f"{X(r['speed']):.1f},{Y(r['ppl']):.1f}" for r in pts) + '"/>')
    for i, r in enumerate(ok):
        on = r["name"] in front
        out.append(f'<circle cx="{X(r["speed"]):.1f}" cy="{Y(r["ppl"]):.1f}" r="5" '
                   f'fill="{"#d62728" if on else "#1f77b4"}"/>')
        out.append(f'<text x="{X(r["speed"]) + 8:.1f}" y="{Y(r["ppl"]) - 6:.1f}">{i + 1}</text>')
        out.append(f'<text x="{W - R + 12}" y="{T + 16 * i}">{i + 1}. {r["name"]}'
                   f'{" (frontier)" if on else ""}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def qcc_has_flag(qcc, flag):
    """Whether this qcc takes `flag` (hidden flags included)."""
    p = subprocess.run([qcc, "--help-hidden"], capture_output=True, text=True, timeout=60)
    return flag in p.stdout


def decode_step_bytes(qcc, model, flags, calib, context, timeout=TIMEOUT_S):
    """Bytes one decode step reads at `context` cached tokens (qcc --report=json, the
    decode function's total; main's where the model has no decode), or None."""
    cmd = [qcc, model] + flags + (calib if flags else []) + [
        "--report=json", f"--report-context={context}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return None
    fns = {f["name"]: f for f in json.loads(p.stdout)["functions"]}
    fn = fns.get("decode") or fns.get("main")
    return int(fn["total"]["bytes"]) if fn else None


def write_train_split(data_dir, path):
    """The train split of examples/austen/train.py: first 90% of each novel's characters."""
    files = sorted(glob.glob(os.path.join(data_dir, "*.txt")))
    if not files:
        raise RuntimeError(f"{data_dir}: no *.txt novels for the calibration (train) split")
    parts = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        parts.append(text[:int(len(text) * 0.9)])
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n\n".join(parts))
    return path


def write_slice(text_path, max_chars, path):
    with open(text_path, encoding="utf-8") as fh:
        text = fh.read()
    if max_chars and max_chars > 0:
        text = text[:max_chars]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def make_outlier_model(model, out_dir, python=sys.executable, factor=None, channels=None):
    out = os.path.join(out_dir, "model.onnx")
    cmd = [python, MAKE_OUTLIERS, "--input", model, "--output", out, "--check"]
    if factor is not None:
        cmd += ["--factor", str(factor)]
    if channels:
        cmd += ["--channels", channels]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    if p.returncode != 0:
        raise RuntimeError("make_outliers.py failed:\n" + p.stdout + p.stderr)
    check = [l for l in p.stdout.splitlines() if l.startswith("check: worst")]
    return out, (check[0] if check else "")


def first_error_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[0] if lines else "(no message)"


# A variant's flag that qrun takes rather than qcc ("qrun:--cpu-precision=bf16": the
# float32 artifact run with bf16 linears).
QRUN_FLAG = "qrun:"


def split_flags(flags):
    """(qcc flags, qrun flags) of a variant."""
    return ([f for f in flags if not f.startswith(QRUN_FLAG)],
            [f[len(QRUN_FLAG):] for f in flags if f.startswith(QRUN_FLAG)])


def run_variant(qcc, qrun, model, flags, out, heldout, calib, context, timeout=TIMEOUT_S,
                cuda=False):
    """Compile one variant and measure its perplexity: dict with ppl/tokens/size/error.

    cuda: also compile the GPU kernels into the artifact (default: --no-cuda)."""
    res = {"flags": flags, "ppl": None, "tokens": None, "size": None, "error": None,
           "compile_s": None, "ppl_s": None}
    flags, run_flags = split_flags(flags)
    cmd = [qcc, model] + flags
    if flags:
        cmd += calib
    cmd += ([] if cuda else ["--no-cuda"]) + ["-o", out]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    res["compile_s"] = time.perf_counter() - t0
    if p.returncode != 0:
        res["error"] = first_error_line(p.stderr or p.stdout)
        return res
    res["size"] = os.path.getsize(out)
    t0 = time.perf_counter()
    p = subprocess.run([qrun, out, "--perplexity", heldout, "--context", str(context)]
                       + run_flags, capture_output=True, text=True, timeout=timeout)
    res["ppl_s"] = time.perf_counter() - t0
    m = re.search(r"perplexity ([0-9.eE+-]+|nan|inf) over (\d+)", p.stdout)
    if p.returncode != 0 or not m:
        res["error"] = first_error_line(p.stderr or p.stdout)
        return res
    res["ppl"] = float(m.group(1))
    res["tokens"] = int(m.group(2))
    return res


def measure(qcc, qrun, model, heldout, calib_text, work, chosen, samples, seq_len,
            context=128, log=sys.stderr, reuse_stats=False, timeout=TIMEOUT_S,
            step_bytes=False, speed=None):
    """Build and measure each (name, flags) of `chosen`; calibration stats are shared
    (and kept from an earlier run in `work` with reuse_stats). speed: (context, steps,
    rounds): also each artifact's batch-1 decode tokens/s, the best of `rounds`
    rounds interleaved over the variants (row key "speed")."""
    def calib_for(flags):
        # The alpha search and the int8 fallback need statistics with sampled
        # rows: their own file.
        rows = "-rows" if ("--smoothquant-alpha=auto" in flags or
                           "--int8-fallback=auto" in flags) else ""
        # GPTQ reads the Gram matrices (a sidecar only it asks for).
        if (any(q in flags for q in ("--quant=w4a16", "--quant=w4a8")) and
                "--w4-method=rtn" not in flags) or any(
                f in flags for f in ("--prune=sparsegpt", "--prune=wanda")):
            rows += "-gram"
        # A rotated model's statistics are its own (qcc refuses others).
        if "--rotate" in flags:
            rows += "-rot"
        stats = os.path.join(work, f"calib-stats-{samples}x{seq_len}{rows}.json")
        return [f"--calib={calib_text}", f"--calib-samples={samples}",
                f"--calib-seq-len={seq_len}", f"--calib-stats={stats}"]
    for name, flags in chosen:
        stats = calib_for(flags)[-1].split("=", 1)[1]
        if os.path.exists(stats) and not reuse_stats:
            os.remove(stats)
    rows = []
    for i, (name, flags) in enumerate(chosen):
        calib = calib_for(flags)
        out = os.path.join(work, f"variant{i}.qpkg")
        print(f"[{i + 1}/{len(chosen)}] {name}: qcc {' '.join(flags) or '(float)'}",
              file=log, flush=True)
        r = run_variant(qcc, qrun, model, flags, out, heldout, calib, context, timeout)
        r["name"] = name
        if step_bytes and not r["error"]:
            r["step_bytes"] = decode_step_bytes(qcc, model, flags, calib, context, timeout)
        if r["error"]:
            print(f"    FAILED: {r['error']}", file=log, flush=True)
        else:
            print(f"    ppl {r['ppl']:.3f} over {r['tokens']} tokens; {r['size']} bytes; "
                  f"compile {r['compile_s']:.1f} s, perplexity {r['ppl_s']:.1f} s",
                  file=log, flush=True)
        if os.path.exists(out) and not speed:
            os.remove(out)  # artifacts are ~tens of MB each; only the sizes are kept
        r["artifact"] = out
        rows.append(r)
    if speed:
        ctx, steps, rounds = speed
        for k in range(rounds):
            for r in rows:
                if r["error"]:
                    continue
                print(f"[speed {k + 1}/{rounds}] {r['name']}", file=log, flush=True)
                v = decode_speed(qrun, r["artifact"], ctx, steps, timeout,
                                 split_flags(r["flags"])[1])
                if v and v > (r.get("speed") or 0):
                    r["speed"] = v
        for r in rows:
            if os.path.exists(r["artifact"]):
                os.remove(r["artifact"])
    return rows


def table(rows):
    base = rows[0]["ppl"] if rows and rows[0]["ppl"] else None
    steps = any("step_bytes" in r for r in rows)
    speeds = any("speed" in r for r in rows)
    front = pareto_front(rows) if speeds else set()
    lines = ["| variant | qcc flags | perplexity | vs float32 | .qpkg bytes |"
             + (" bytes / decode step |" if steps else "")
             + (" decode b1 tok/s | on the frontier |" if speeds else ""),
             "|---|---|---:|---:|---:|" + ("---:|" if steps else "")
             + ("---:|---|" if speeds else "")]
    for r in rows:
        flags = " ".join(f"`{f}`" for f in r["flags"]) or "(none)"
        if r["error"]:
            lines.append(f"| {r['name']} | {flags} | failed: {r['error']} | | |"
                         + (" |" if steps else "") + (" | |" if speeds else ""))
            continue
        delta = f"{(r['ppl'] / base - 1) * 100:+.2f}%" if base else "n/a"
        step = ""
        if steps:
            b = r.get("step_bytes")
            step = f" {b:,} |" if b else " n/a |"
        if speeds:
            v = r.get("speed")
            step += (f" {v:.1f} |" if v else " n/a |") + (
                " yes |" if r["name"] in front else " |")
        lines.append(f"| {r['name']} | {flags} | {r['ppl']:.4f} | {delta} | {r['size']:,} |"
                     + step)
    return "\n".join(lines)


def sizes_line(rows):
    f = rows[0]["size"] if rows and not rows[0]["error"] else None
    q = [r for r in rows[1:] if not r["error"] and " KV" not in r["name"] and
         "--quant=w8a8" in r["flags"]]
    if not f or not q:
        return ""
    qs = q[0]["size"]
    return (f"Artifact size: float32 {f:,} bytes, W8A8 {qs:,} bytes "
            f"({qs / f * 100:.1f}% of float).")


def held_out_line(args, rows):
    """What was measured on what: the held-out slice and the calibration."""
    tokens = next((r["tokens"] for r in rows if r["tokens"]), None)
    return (f"Held-out: first {args.max_chars or 'all'} characters of "
            f"{os.path.relpath(args.text, ROOT)}"
            + (f" ({tokens} scored tokens, windows of {args.context})" if tokens else "")
            + f"; calibration: {args.calib_samples} x {args.calib_seq_len} tokens of "
            + (os.path.relpath(args.calib_text, ROOT) if args.calib_text
               else "the train split"))


def finish(rows, t_start):
    """Prints the elapsed time; the exit status (1 when a variant failed)."""
    print(f"\n({time.perf_counter() - t_start:.0f} s)")
    return 1 if any(r["error"] for r in rows) else 0


def add_common_args(p, max_chars):
    """Held-out text, calibration and tool options (also bench/demo_table.py's)."""
    p.add_argument("--text", default=DEFAULT_TEXT, help="held-out text for perplexity")
    p.add_argument("--max-chars", type=int, default=max_chars,
                   help=f"use the first N characters of --text (0: all; default {max_chars})")
    p.add_argument("--calib-text", default=None,
                   help="calibration text (default: the Austen train split, built from --data-dir)")
    p.add_argument("--data-dir", default=DEFAULT_DATA)
    p.add_argument("--calib-samples", type=int, default=64)
    p.add_argument("--calib-seq-len", type=int, default=128)
    p.add_argument("--alpha", type=float, default=0.5, help="SmoothQuant migration strength")
    p.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    p.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))


def check_common_args(args):
    """Exits with one line when a tool is missing or the calibration is the held-out text."""
    for tool in (args.qcc, args.qrun):
        if not os.access(tool, os.X_OK):
            sys.exit(f"{tool}: not found (build first: cmake --build build)")
    if args.calib_text and os.path.abspath(args.calib_text) == os.path.abspath(args.text):
        sys.exit("refusing to calibrate on the held-out text")
    return args


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--outliers", action="store_true",
                   help="report on the outlier fixture generated from --model")
    p.add_argument("--outlier-factor", type=float, default=None,
                   help="make_outliers.py --factor (default: its default, 100)")
    p.add_argument("--outlier-channels", default=None,
                   help="make_outliers.py --channels (default: its default)")
    add_common_args(p, max_chars=60000)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--o1-sweep", action="store_true",
                   help="SmoothQuant O1 at alpha 0.5, 0.85, auto, norms only vs all groups")
    p.add_argument("--fallback", action="store_true",
                   help="O1 (naive, alpha 0.85, auto) without and with --int8-fallback=auto")
    p.add_argument("--methods", action="store_true",
                   help="every method in one table (W8A8 O1, fallback, W4A16, f16, int8 and FP8 KV), "
                        "with bytes per decode step")
    p.add_argument("--rotation", action="store_true",
                   help="W8A8 and FP8 with and without --rotate (QuaRot)")
    p.add_argument("--pareto", metavar="SVG", default=None,
                   help="the quality-vs-speed view: one variant per method at its best "
                        "flags and the KV formats, each also timed (batch-1 decode on the "
                        "CPU backend, --speed-context tokens then --speed-steps steps, best of "
                        "--speed-rounds interleaved rounds); writes the plot to SVG")
    p.add_argument("--speed-context", type=int, default=256)
    p.add_argument("--speed-steps", type=int, default=128)
    p.add_argument("--speed-rounds", type=int, default=5)
    p.add_argument("--group-size", type=int, default=128,
                   help="W4A16 group size (--methods, --pareto)")
    p.add_argument("--keep", default=None, help="work in this folder and keep it")
    args = check_common_args(p.parse_args())

    work = args.keep or tempfile.mkdtemp(prefix="qcc-quality-")
    os.makedirs(work, exist_ok=True)
    t_start = time.perf_counter()
    try:
        model = os.path.abspath(args.model)
        note = ""
        if args.outliers:
            model, note = make_outlier_model(model, os.path.join(work, "outliers"),
                                             factor=args.outlier_factor,
                                             channels=args.outlier_channels)
        heldout = write_slice(args.text, args.max_chars, os.path.join(work, "heldout-slice.txt"))
        calib_text = args.calib_text or write_train_split(args.data_dir,
                                                          os.path.join(work, "calib-train.txt"))
        if args.pareto:
            chosen = pareto_sweep(args.group_size)
        elif args.methods:
            chosen = methods_sweep(args.group_size, qcc_has_flag(args.qcc, "--w4-asym"))
        elif args.rotation:
            chosen = rotation_sweep()
        elif args.o1_sweep:
            chosen = o1_sweep()
        elif args.fallback:
            chosen = fallback_sweep()
        else:
            chosen = variants(args.alpha)
        rows = measure(args.qcc, args.qrun, model, heldout, calib_text, work, chosen,
                       args.calib_samples, args.calib_seq_len, args.context,
                       step_bytes=args.methods,
                       speed=((args.speed_context, args.speed_steps, args.speed_rounds)
                              if args.pareto else None))
        name = os.path.relpath(args.model, ROOT)
        print()
        print(f"Model: {name}" + (" + planted outliers (examples/austen-outliers/make_outliers.py)"
                                  if args.outliers else ""))
        if note:
            print(f"Outlier model vs original, onnxruntime logits: {note[len('check: '):]}")
        print(held_out_line(args, rows))
        print()
        print(table(rows))
        if args.pareto:
            pareto_svg(rows, f"{name}: quality against CPU decode speed", args.pareto)
            print()
            print(f"Decode: batch 1 after {args.speed_context} tokens, {args.speed_steps} steps, "
                  f"best of {args.speed_rounds} interleaved rounds, "
                  f"{os.cpu_count()} CPUs; plot: {args.pareto}")
        s = sizes_line(rows)
        if s:
            print()
            print(s)
        return finish(rows, t_start)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
