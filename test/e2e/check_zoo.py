#!/usr/bin/env python3
"""Run qcc + qrun on the model zoo (test/models/zoo) and compare with onnxruntime's outputs.

    .venv/bin/python test/e2e/check_zoo.py [CASE_DIR ...] [--qcc build/bin/qcc]
        [--qrun build/bin/qrun] [--report-only] [--markdown]

For every case folder (default: every test/models/zoo/*/ holding a model.onnx):
  1. `qcc model.onnx --no-cuda -o m.qpkg`; if that fails, again with
     `--kv-cache=none` (the "compiles" column says which worked, or gives the
     first error line of the default compile);
  2. `qcc model.onnx --emit=mlir`: counts the raised transformer ops in @main
     (attention, linear, rms_norm, layer_norm, rotary, gelu, silu, embedding, moe;
     kv_attention is counted over the whole module, it lives in prefill/decode)
     and the leftover non-glue ops (matmul, softmax, elementwise math...);
  3. `qrun m.qpkg --backend=cpu --input NAME=inputs/NAME.npy ... --output-dir out`;
  4. for every outputs/NAME.npy: max|qrun - ref| / max|ref| <= 1e-4, skipping the
     (batch, position) rows meta.json lists in ignore_positions (left-padding
     query tokens of a decoder: every key is masked, the result is undefined);
  5. when the artifact has a KV cache (prefill/decode), `qcc-kv-check` on it:
     ragged prefill + decode logits equal `main` over the whole sequences and
     greedy generation through the cache equals full recompute ("kv" column;
     "-" with qcc's warning when it compiled without a cache);
  6. the phases a --no-cuda compile skips: `qcc model.onnx -o m.qpkg` with the
     CUDA kernels (form-kernels, emit, NVRTC; --gpu-phases=emit stops after
     the CUDA emitter, without NVRTC) and `qcc model.onnx --report`: any
     failure there, a crash above all, fails the case ("gpu" column).

Every decoder (a *ForCausalLM / *LMHeadModel architecture in meta.json) must
get a KV cache: one compiled without is a failure.

Cases listed in test/models/zoo/expected_refusals.txt ("case: reason") may be
refused by qcc with that reason (a compile error, or for a decoder the reason
it got no KV cache): they count as REFUSED, not failed, and the list says what
is left to do. A listed case that compiles is reported so the line can go.

One table row per case: case | compiles | raised | leftover | max rel err | result.
Exit status 1 if any case fails (0 with --report-only), 2 on a usage error.
Needs only numpy (no torch / transformers / onnxruntime): the references are
the .npy files written by test/models/zoo/gen_zoo.py.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.path.join(ROOT, "test", "models", "zoo")
# Both sides compute in float32 with different summation orders (BLAS blocking,
# fused vs separate softmax/norm reductions): over two layers that is a few
# ulps of the largest output, about 1e-6 relative; 1e-4 of max|ref| leaves room
# for deeper models while any wrong op (a mask, a rotary half, a scale) shows as
# 1e-2 or more. Relative to the output's maximum, since elementwise relative
# error is meaningless near zero.
TOLERANCE = 1e-4
# W8A8 (int8 weights per channel, activations per token) on random-weight
# two-layer models: a sanity bound that catches a wrong scale, a lost
# smoothing factor or a garbage kernel (errors of 1 or more), not a quality
# target (issue: beyond SmoothQuant measures quality on a real model).
W8A8_SANITY = 0.2
# Mixture-of-experts models pick experts by top-k: an int8 error that moves a
# token's router scores across a near tie routes it to another expert, and
# that position's outputs then differ by as much as two experts do (0.23 at
# one position of mixtral-legacy, 0.01 elsewhere). That is the model's
# discontinuity, not a quantization bug, so for them the bound holds for the
# median position and the worst one only has to stay below MOE_W8A8_WORST
# (a garbage kernel still fails both).
MOE_W8A8_WORST = 1.0
TIMEOUT_S = 600

RAISED = ["attention", "kv_attention", "linear", "qlinear", "rms_norm", "layer_norm", "rotary",
          "gelu", "silu", "embedding", "moe"]
# Data movement, shapes, constants and the residual add: expected around raised ops.
GLUE = {"constant", "cast", "transpose", "reshape", "flatten", "squeeze", "unsqueeze", "concat",
        "split", "slice", "gather", "shape", "constant_of_shape", "range", "expand", "add",
        "kv_cache"}
ABBREV = {"attention": "attn", "kv_attention": "kv_attn", "linear": "lin", "qlinear": "qlin",
          "rms_norm": "rms", "layer_norm": "ln", "rotary": "rope", "gelu": "gelu",
          "silu": "silu", "embedding": "emb", "moe": "moe"}

OP_RE = re.compile(r'^\s*(?:%[^=]*=\s*)?"?qcc\.([a-z_0-9]+)"?[\s(<{:]')
FUNC_RE = re.compile(r"^\s*func\.func\s+(?:\w+\s+)?@([\w.$-]+)")


def progress(msg):
    if sys.stderr.isatty():
        print(msg, file=sys.stderr, flush=True)


def first_error_line(text, drop=None):
    """The first line that says error (else the first line), without the model's path."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "(no message)")
    if drop:
        line = line.replace(drop + ": ", "").replace(drop, "MODEL")
    return line


def run(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"error: timed out after {TIMEOUT_S} s: {' '.join(cmd)}"


def check_gpu_phases(qcc, model, tmp, gpu_phases):
    """Step 6: "" when the GPU plan's phases and the report run, else why."""
    if gpu_phases == "compile":
        cmd = [qcc, model, "--quiet", "-o", os.path.join(tmp, "gpu.qpkg")]
    else:
        cmd = [qcc, model, "--quiet", "--emit=emit"]
    for what, c in (("with CUDA kernels", cmd), ("--report", [qcc, model, "--report"])):
        rc, _, err = run(c)
        if rc != 0:
            kind = f"crashed (signal {-rc})" if rc < 0 else f"exit {rc}"
            return f"qcc {what}: {kind}: {first_error_line(err, model)}"
    return ""


def count_ops(mlir):
    """{op: count} in @main, and {op: count} over the whole module."""
    main, whole = {}, {}
    func = None
    for line in mlir.splitlines():
        fm = FUNC_RE.match(line)
        if fm:
            func = fm.group(1)
            continue
        m = OP_RE.match(line)
        if not m:
            continue
        op = m.group(1)
        whole[op] = whole.get(op, 0) + 1
        if func == "main":
            main[op] = main.get(op, 0) + 1
    return main, whole


def fmt_counts(main, whole):
    raised = []
    for op in RAISED:
        n = whole.get(op, 0) if op == "kv_attention" else main.get(op, 0)
        if n:
            raised.append(f"{ABBREV[op]}:{n}")
    left = sorted(((n, op) for op, n in main.items() if op not in GLUE and op not in RAISED),
                  key=lambda x: (-x[0], x[1]))
    return " ".join(raised) or "-", " ".join(f"{op}:{n}" for n, op in left) or "-"


def compare(ref, got, ignore):
    if got.shape != ref.shape:
        return None, f"shape {list(got.shape)} != reference {list(ref.shape)}"
    r, g = ref.astype(np.float64), got.astype(np.float64)
    if ignore and r.ndim >= 2:
        keep = np.ones(r.shape[:2], dtype=bool)
        for b, s in ignore:
            if b < keep.shape[0] and s < keep.shape[1]:
                keep[b, s] = False
        r, g = r[keep], g[keep]
    if not np.all(np.isfinite(g)):
        return float("inf"), "non-finite values"
    err = float(np.max(np.abs(g - r))) / max(float(np.max(np.abs(r))), 1e-6)
    return err, None


def load_expected_refusals(path):
    out = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and ":" in line:
                    case, reason = line.split(":", 1)
                    out[case.strip()] = reason.strip()
    return out


def run_qrun(qrun, pkg, in_dir, out_dir):
    cmd = [qrun, pkg, "--backend=cpu", "--output-dir", out_dir]
    for f in sorted(os.listdir(in_dir)):
        if f.endswith(".npy"):
            cmd += ["--input", f"{f[:-4]}={os.path.join(in_dir, f)}"]
    return run(cmd)


def position_errors(ref, got, ignore):
    """Per (batch, position) row: max |got - ref| over the row / max |ref|."""
    r, g = ref.astype(np.float64), got.astype(np.float64)
    scale = max(float(np.max(np.abs(r))), 1e-6)
    rows = np.abs(g - r).reshape(r.shape[0], r.shape[1], -1).max(-1) / scale
    keep = np.ones(rows.shape, dtype=bool)
    for b, pos in ignore:
        if b < keep.shape[0] and pos < keep.shape[1]:
            keep[b, pos] = False
    return rows[keep]


def check_w8a8(qcc, qrun, model, in_dir, ref_dir, ignore, tmp, moe=False):
    """W8A8 SmoothQuant (O1) calibrated on the case's own inputs: compiles,
    runs, and stays within W8A8_SANITY of onnxruntime's float outputs (for
    a mixture of experts: the median position within it, the worst within
    MOE_W8A8_WORST). Returns (table cell, problem or None)."""
    pkg = os.path.join(tmp, "w8a8.qpkg")
    rc, _, err = run([qcc, model, "--no-cuda", "--quant=w8a8", f"--calib={in_dir}", "-o", pkg])
    if rc != 0:
        return "no", first_error_line(err, model)
    out_dir = os.path.join(tmp, "w8a8-out")
    rc, _, err = run_qrun(qrun, pkg, in_dir, out_dir)
    if rc != 0:
        return "no", "qrun: " + first_error_line(err, pkg)
    worst = median = 0.0
    for f in sorted(os.listdir(ref_dir)):
        if f.endswith(".npy") and os.path.exists(os.path.join(out_dir, f)):
            ref = np.load(os.path.join(ref_dir, f))
            got = np.load(os.path.join(out_dir, f))
            e, why = compare(ref, got, ignore.get(f[:-4], []))
            if why:
                return "no", why
            worst = max(worst, e)
            if moe and ref.ndim >= 3:
                median = max(median, float(np.median(
                    position_errors(ref, got, ignore.get(f[:-4], [])))))
    cell = f"{worst:.1e}"
    if moe:
        cell += f" (median {median:.1e})"
        bad = median > W8A8_SANITY or worst > MOE_W8A8_WORST
        return cell, (f"error {cell} > {W8A8_SANITY} (median) or {MOE_W8A8_WORST}"
                      if bad else None)
    return cell, (None if worst <= W8A8_SANITY else f"error {cell} > {W8A8_SANITY}")


def check_case(case_dir, qcc, qrun, kv_check=None, expected_refusal=None, w8a8=True,
               gpu_phases="compile"):
    name = os.path.basename(os.path.normpath(case_dir))
    row = {"case": name, "compiles": "", "raised": "-", "leftover": "-", "err": None,
           "result": "FAIL", "note": "", "kv": "-", "w8a8": "-", "gpu": "-"}
    has_cache = False
    model = os.path.join(case_dir, "model.onnx")
    meta = {}
    if os.path.exists(os.path.join(case_dir, "meta.json")):
        with open(os.path.join(case_dir, "meta.json")) as f:
            meta = json.load(f)
    ignore = meta.get("ignore_positions", {})

    rc, out, err = run([qcc, model, "--emit=mlir"])
    if rc == 0:
        main_ops, whole_ops = count_ops(out)
        row["raised"], row["leftover"] = fmt_counts(main_ops, whole_ops)
        has_cache = whole_ops.get("kv_attention", 0) > 0

    with tempfile.TemporaryDirectory(prefix="qcc-zoo-") as tmp:
        pkg = os.path.join(tmp, "m.qpkg")
        rc, _, err = run([qcc, model, "--no-cuda", "-o", pkg])
        if rc == 0:
            row["compiles"] = "yes"
            warning = next((ln for ln in err.splitlines() if "warning:" in ln), "")
            if warning and not has_cache:
                row["kv"] = "- (" + warning.split("warning:", 1)[1].replace(
                    model + ": ", "").strip() + ")"
        else:
            first = first_error_line(err, model)
            rc2, _, _ = run([qcc, model, "--no-cuda", "--kv-cache=none", "-o", pkg])
            if rc2 != 0:
                row["compiles"] = first
                if expected_refusal and expected_refusal in first:
                    row["result"] = "REFUSED"
                return row
            row["compiles"] = "yes (--kv-cache=none)"
            row["note"] = f"default compile: {first}"

        in_dir, ref_dir = os.path.join(case_dir, "inputs"), os.path.join(case_dir, "outputs")
        rc, _, err = run_qrun(qrun, pkg, in_dir, os.path.join(tmp, "out"))
        if rc != 0:
            row["note"] = "qrun: " + first_error_line(err, pkg)
            return row
        worst, problems = 0.0, []
        for f in sorted(os.listdir(ref_dir)):
            if not f.endswith(".npy"):
                continue
            out_name = f[:-4]
            got_path = os.path.join(tmp, "out", f)
            if not os.path.exists(got_path):
                problems.append(f"{out_name}: not written by qrun")
                continue
            e, why = compare(np.load(os.path.join(ref_dir, f)), np.load(got_path),
                             ignore.get(out_name, []))
            if why:
                problems.append(f"{out_name}: {why}")
            if e is not None:
                worst = max(worst, e)
        row["err"] = worst
        kv_ok = True
        if has_cache and kv_check and row["compiles"] == "yes":
            rc, out, err = run([kv_check, pkg])
            kv_ok = rc == 0
            row["kv"] = "PASS" if kv_ok else "FAIL"
            if not kv_ok:
                problems.append("kv: " + first_error_line(out + err, pkg))
        why = check_gpu_phases(qcc, model, tmp, gpu_phases)
        row["gpu"] = "PASS" if not why else "FAIL"
        if why:
            problems.append(why)
        if w8a8:
            config = meta.get("config", {})
            moe = bool(config.get("num_experts") or config.get("num_local_experts"))
            row["w8a8"], why = check_w8a8(qcc, qrun, model, in_dir, ref_dir, ignore, tmp, moe)
            if why:
                problems.append("w8a8: " + why)
        decoder = meta.get("architecture", "").endswith(("ForCausalLM", "LMHeadModel"))
        if decoder and not has_cache:
            why = row["kv"][3:-1] if row["kv"].startswith("- (") else \
                "no qcc.kv_attention (attention not raised)"
            # Listed: refused as expected, provided everything else held
            # (the full-sequence results match, the other phases pass).
            if expected_refusal and expected_refusal in why and not problems \
                    and worst <= TOLERANCE:
                row["result"] = "REFUSED"
                row["note"] = "no KV cache: " + why
                return row
            problems.append("decoder without a KV cache: " + why)
        if problems:
            row["note"] = "; ".join(problems)
        elif worst <= TOLERANCE and kv_ok:
            row["result"] = "PASS"
        if expected_refusal:
            row["note"] = (row["note"] + "; " if row["note"] else "") + \
                "listed in expected_refusals.txt but compiles: remove the line"
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="case folders (default: every zoo case)")
    ap.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    ap.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))
    ap.add_argument("--kv-check", default=os.path.join(ROOT, "build", "bin", "qcc-kv-check"),
                    help="qcc-kv-check, run on artifacts with a KV cache ('' to skip)")
    ap.add_argument("--expected-refusals", default=os.path.join(ZOO, "expected_refusals.txt"))
    ap.add_argument("--report-only", action="store_true", help="exit 0 even when cases fail")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--gpu-phases", choices=["compile", "emit"], default="compile",
                    help="step 6: compile the CUDA kernels with NVRTC (default) or stop "
                         "after the emitter")
    args = ap.parse_args()

    for tool in (args.qcc, args.qrun):
        if not os.access(tool, os.X_OK):
            print(f"check_zoo: {tool} not found or not executable (build qcc first)",
                  file=sys.stderr)
            return 2
    cases = args.cases or sorted(
        os.path.join(ZOO, d) for d in os.listdir(ZOO)
        if os.path.isfile(os.path.join(ZOO, d, "model.onnx")))
    for c in cases:
        if not os.path.isfile(os.path.join(c, "model.onnx")):
            print(f"check_zoo: {c}: no model.onnx", file=sys.stderr)
            return 2

    refusals = load_expected_refusals(args.expected_refusals)
    kv_check = args.kv_check if args.kv_check and os.access(args.kv_check, os.X_OK) else None
    rows = []
    for i, c in enumerate(cases):
        name = os.path.basename(os.path.normpath(c))
        progress(f"[{i + 1}/{len(cases)}] {name}")
        rows.append(check_case(c, args.qcc, args.qrun, kv_check, refusals.get(name),
                               gpu_phases=args.gpu_phases))

    header = ["case", "compiles", "raised (in @main)", "leftover non-glue ops", "max rel err",
              "kv cache", "w8a8 rel err", "gpu phases", "result"]
    table = []
    for r in rows:
        err = "-" if r["err"] is None else f"{r['err']:.2e}"
        res = r["result"] + (f" ({r['note']})" if r["note"] and r["result"] != "REFUSED" else "")
        table.append([r["case"], r["compiles"], r["raised"], r["leftover"], err, r["kv"],
                      r["w8a8"], r["gpu"], res])
    if args.markdown:
        esc = lambda s: s.replace("|", "\\|")  # noqa: E731
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for t in table:
            print("| " + " | ".join(esc(x) for x in t) + " |")
    else:
        print(" | ".join(header))
        for t in table:
            print(" | ".join(t))
    n_pass = sum(r["result"] == "PASS" for r in rows)
    n_refused = sum(r["result"] == "REFUSED" for r in rows)
    n_fail = len(rows) - n_pass - n_refused
    print(f"zoo: {n_pass} passed, {n_fail} failed, {n_refused} refused as expected")
    return 0 if args.report_only or n_fail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
