#!/usr/bin/env python3
"""Issue 12's benchmark table: qrun's CUDA backend against PyTorch f16 on one GPU.

    python3 gpu_bench.py --qrun QRUN --artifacts DIR --reference torch-reference.json [--json OUT]

Runs on the GPU machine with python3 + numpy only (no torch: PyTorch's figures come from
bench/gpu_reference.py's JSON of the same run, which also holds the copy bandwidth). DIR holds
the 1B LLaMA (bench/llama_1b.py) compiled three ways (scripts/gpu_bundle.sh --bench):
f16.qpkg (float model: f16 GEMMs, f32 KV cache), w8a8.qpkg (SmoothQuant O1, int8 KV cache) and
w8a8-sparse.qpkg (the same with 2:4 sparse linears); a missing one is left out.

Measurements, per artifact (each a separate qrun process):
  decode   `qrun ART --backend=cuda --bench-generate B CONTEXT STEPS` for B in --batches.
           qrun runs the same generation once as a warm-up on the same cache (weights
           uploaded, kernels loaded, decode graphs captured), then times it: its decode time
           runs from the first decode step to the last, host sampling included.
           decode tok/s = qrun's; step_s = B / decode tok/s.
  prefill  `qrun ART --backend=cuda --bench-generate 1 PREFILL 1 --profile --profile-json F`:
           "wall" = qrun's prefill tokens/s of the timed call (after the warm-up), including
           uploading the ids, the host nodes, and copying the logits to the host (through
           prefill_last, docs/KV_CACHE.md: the last position's [1, 1, vocab]; an artifact
           without it copies every position's);
           "kernels" = PREFILL / the summed CUDA-event times of the prefill's kernels and host
           nodes (the profile), i.e. without the launch gaps and the logits copy.
Formulas (stated once; the JSON holds every input):
  weight bytes W(B)  the constants the decode step's GPU kernels read, once each: numel x element
                     size as the device holds it (an f32 weight a GEMM takes as f16: 2 bytes; int8:
                     1; 2:4 sparse: the compressed values and metadata as stored), except an
                     embedding table, of which only the B gathered rows count. From the artifact's
                     manifest (JSON after the 64-byte header; format/ArtifactFormat.h,
                     runtime/core/Artifact.h); synthetic-weight records keep their value's dtype/shape.
  KV bytes   KV(B)   B x layers x 2 (K, V) x kv_heads x head_dim x ctx x element size
                     (+ the per-layer, per-head scales of an int8 cache: layers x 2 x kv_heads x 4),
                     ctx = the mean number of cached tokens a timed step attends to:
                     CONTEXT + (STEPS + 1) / 2 for qrun (its timed run, after an identical
                     warm-up run on the same cache), and for PyTorch's
                     runs CONTEXT + warm-up + (steps + 1) / 2 (gpu_reference.py's counts; its
                     CUDA graph row warms up twice);
                     PyTorch's cache is f16, the float artifact's f32, W8A8's int8.
  MBU(B)             (W(B) + KV(B)) / step_s / copy bandwidth, the copy bandwidth being
                     gpu_reference.py's 2 GiB device-to-device copy (bytes read + bytes written)
                     measured in the same run.
  prefill MFU        2 x P_lin x PREFILL / prefill time / peak, P_lin = the linear layers'
                     parameters (all but the embedding; the LM head included; attention's
                     QK/PV FLOPs not counted), i.e. dense-equivalent model FLOPs, against the
                     datasheet's dense peak of the row's GEMM precision (H100 SXM: f16 989
                     TFLOP/s, int8 1979 TOP/s) and against gpu_reference.py's measured 8192^3
                     f16 torch.matmul rate (for every row: torch._int_mm's int8 rate is no
                     ceiling, docs/GPU_NOTES.md).
  GEMM MFU           from the prefill profile: the GEMM kernels' dense-equivalent FLOPs (a 2:4
                     kernel's MNK multiply-adds counted as the dense 2MNK) over their summed time,
                     over the dense peak (issue 12's target: int8 >= 60%).
Off-loading (issue 41; docs/MEMORY.md), for the W8A8 artifact (--offload none to skip): the
same batch-1 generation (`--bench-generate 1 CONTEXT STEPS`) with every weight on the GPU,
with the weights streamed under `--gpu-memory-limit` (the all-GPU run's device peak less a
quarter, then half, of its device weights: 75% and 50% of the weights fit), and split by
layers with `--gpu-layers` (half, then a quarter, of the blocks on the GPU); prefill tok/s
(the CONTEXT-token prompt) and decode tok/s, each also as a fraction of the all-GPU run's.
Prints one markdown table (plus the notes and targets under it) and writes it with the raw
numbers to --json.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402  (beside this file, also in the GPU bundle)

HEADER = struct.Struct("<8sIIQQQQQII")  # format/ArtifactFormat.h's Header
MAGIC = b"QCCPKG\r\n"
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i8": 1, "bool": 1}
# Datasheet dense peaks (runtime/core/Roofline.cpp's table): H100 SXM5 and H200 share them.
DENSE_PEAK = {"f16": 989e12, "i8": 1979e12}
ARTIFACTS = [("f16", "f16.qpkg", "f16"), ("W8A8", "w8a8.qpkg", "i8"),
             ("2:4 W8A8", "w8a8-sparse.qpkg", "i8")]
HF_ROW, GRAPH_ROW = "PyTorch f16 eager (HF)", "PyTorch f16 lean + CUDA graph"
TARGETS = ["W8A8 decode b1 >= 80% MBU", "W8A8 decode b1 >= 1.7x PyTorch f16 eager (HF)",
           "prefill int8 GEMMs >= 60% of the dense int8 peak (2048 tokens)"]


def manifest(path):
    """The manifest JSON of a .qpkg (the header checked, not the CRC: qrun does that)."""
    with open(path, "rb") as f:
        head = f.read(HEADER.size)
        if len(head) < HEADER.size or head[:8] != MAGIC:
            raise ValueError("%s: not a qcc artifact" % path)
        _, _, _, offset, size, _, _, _, _, _ = HEADER.unpack(head)
        f.seek(offset)
        return json.loads(f.read(size))


def numel(shape):
    n = 1
    for d in shape:
        if d < 0:
            raise ValueError("dynamic constant shape %s" % shape)
        n *= d
    return n


def operand_refs(params):
    """(operand index, as_f16) of every launch parameter bound to an operand."""
    for p in params:
        if "operand" in p:
            yield p["operand"], False
        elif "operand_f16" in p:
            yield p["operand_f16"], True


def decode_weight_bytes(m, batch):
    """W(batch) of the module docstring, and what it is made of."""
    values = m["values"]
    constants = {c["value"] for c in m["constants"]}
    plan = next(f for f in m["gpu_functions"] if f["name"] == "decode")
    elem = {}       # constant value id -> bytes per element as the device reads it
    gathered = {}   # embedding table value id -> bytes of `batch` rows
    host_nodes = []
    for node in plan["nodes"]:
        k = node.get("attrs", {}).get("kernel", -1) if node["op"] == "kernel" else -1
        if k < 0 or "launch" not in m["kernels"][k]:
            if node["op"] != "split":  # split runs on the device without a kernel
                host_nodes.append(node["op"] if k < 0 else
                                  "%s kernel without CUDA code (%s)"
                                  % (m["kernels"][k]["kind"], m["kernels"][k].get("unsupported", "?")))
            continue
        rec = m["kernels"][k]
        for step in rec["launch"]["steps"]:
            for idx, as_f16 in operand_refs(step["params"]):
                v = node["in"][idx]
                if v not in constants:
                    continue
                dtype, shape = values[v]["dtype"], values[v]["shape"]
                if rec["kind"] == "embedding" and idx == 0:
                    gathered[v] = batch * numel(shape[1:]) * DTYPE_BYTES[dtype]
                else:
                    size = 2 if as_f16 else DTYPE_BYTES[dtype]
                    elem[v] = max(elem.get(v, 0), size)
    total = sum(numel(values[v]["shape"]) * e for v, e in elem.items()) + sum(gathered.values())
    return total, {"constants": len(elem), "embedding_tables": len(gathered),
                   "host_nodes_in_decode_plan": host_nodes}


def kv_bytes(kv, batch, ctx):
    """KV(batch) of the module docstring for a cache config (manifest "kv_cache")."""
    elem = {"f32": 4, "i8": 1, "f16": 2}[kv["dtype"]]
    if kv["dtype"] == "i8" and kv.get("scales", "per-head") != "per-head":
        raise ValueError("KV scales %r: this script counts per-head scales only" % kv["scales"])
    scales = kv["layers"] * 2 * kv["kv_heads"] * 4 if kv["dtype"] == "i8" else 0
    return batch * kv["layers"] * 2 * kv["kv_heads"] * kv["head_dim"] * ctx * elem + scales


GEN = re.compile(r"batch (\d+) context (\d+): prefill ([0-9.eE+-]+) tokens/s, "
                 r"decode ([0-9.eE+-]+) tokens/s")
CUDA = re.compile(r"\[qrun\] CUDA: (\d+) runs, (\d+) kernel launches, (\d+) graphs captured, "
                  r"(\d+) replayed, (\d+) nodes on the host(.*)")
MEMORY = re.compile(r"\[qrun\] CUDA memory: peak (\d+) bytes on the device, weights (\d+) bytes")


def run_qrun(qrun, art, batch, context, steps, profile_json=None, backend="cuda", timeout=120,
             extra=()):
    cmd = [qrun, art, "--backend=" + backend, "--bench-generate", str(batch), str(context), str(steps)]
    cmd += list(extra)
    if profile_json:
        cmd += ["--profile", "--profile-json", profile_json]
    t0 = time.time()
    p = measure.run(cmd, timeout=timeout)  # its peak RSS too
    if p["timed_out"]:
        return {"cmd": " ".join(cmd), "error": "no result in %d s" % timeout}
    res = {"cmd": " ".join(cmd), "seconds": round(time.time() - t0, 2), "rc": p["rc"],
           "host_peak_rss": p["maxrss"]}
    g = GEN.search(p["out"])
    if p["rc"] != 0 or not g:
        res["error"] = (p["err"].strip().splitlines() or ["no output"])[-1][:300]
        return res
    res["prefill_tokps"], res["decode_tokps"] = float(g.group(3)), float(g.group(4))
    mem = MEMORY.search(p["err"])
    if mem:
        res["device_peak"], res["device_weights"] = int(mem.group(1)), int(mem.group(2))
    c = CUDA.search(p["err"])
    if c:
        res["cuda"] = {"runs": int(c.group(1)), "launches": int(c.group(2)),
                       "graphs_captured": int(c.group(3)), "graph_replays": int(c.group(4)),
                       "host_nodes": int(c.group(5)), "host_ops": c.group(6).strip()}
    return res


def qrun_row(args, art, ref, dtype):
    m = manifest(art)
    kv = m["kv_cache"]
    row = {"artifact": os.path.basename(art), "artifact_bytes": os.path.getsize(art),
           "kv_cache": {k: kv[k] for k in ("dtype", "layers", "kv_heads", "head_dim", "layout")},
           "precision": dtype, "decode": {}, "runs": []}
    # qrun --bench-generate warms up with the same generation before the timed
    # one (weights uploaded, kernels loaded, decode graphs captured), so one
    # run's decode time per step is the steady state's.
    steps = args.steps
    ctx = args.context + (steps + 1) / 2.0
    for b in args.batches:
        run = run_qrun(args.qrun, art, b, args.context, steps, backend=args.backend)
        row["runs"].append(run)
        d = {}
        if "error" in run:
            d["error"] = run["error"]
        else:
            step = b / run["decode_tokps"]
            w, parts = decode_weight_bytes(m, b)
            k = kv_bytes(kv, b, ctx)
            d.update({"step_s": step, "tokps": run["decode_tokps"],
                      "weight_bytes": w, "kv_bytes": k, "mean_ctx": ctx, "weight_parts": parts,
                      "mbu": (w + k) / step / (ref["copy_GBps"] * 1e9)})
        row["decode"][b] = d
    with tempfile.TemporaryDirectory() as tmp:
        pj = os.path.join(args.profile_dir or tmp, "profile-%s-prefill.json"
                          % os.path.splitext(os.path.basename(art))[0])
        pre = run_qrun(args.qrun, art, 1, args.prefill, 1, profile_json=pj, backend=args.backend)
        row["runs"].append(pre)
        p = {}
        if "error" in pre:
            p["error"] = pre["error"]
        else:
            p["wall_tokps"] = pre["prefill_tokps"]
            prof = json.load(open(pj))
            # Generation prefills through prefill_last when the artifact has
            # it (the LM head at each row's last token only), else prefill.
            rows = [r for r in prof["rows"] if r["function"] in ("prefill", "prefill_last")]
            kernel_s = sum(r["seconds"] for r in rows)
            gemm = [r for r in rows if r["kind"].startswith("gemm")]
            gemm_s = sum(r["seconds"] for r in gemm)
            dense = sum(r["flops"] * (2 if r["kind"].endswith("_sp") else 1) for r in gemm)
            p.update({"kernel_seconds": kernel_s, "kernels_tokps": args.prefill / kernel_s,
                      "gemm_seconds": gemm_s, "gemm_dense_flops": dense,
                      "gemm_precisions": sorted({r["precision"] for r in gemm}),
                      "gemm_mfu": dense / gemm_s / DENSE_PEAK[dtype] if gemm_s > 0 else None,
                      "profile_rows": rows})
        row["prefill"] = p
    return row


def torch_rows(ref, context, width, vocab):
    """The PyTorch rows from gpu_reference.py's JSON (f16 weights and KV cache)."""
    kv = {"dtype": "f16", "layers": ref["layers"], "kv_heads": ref["kv_heads"],
          "head_dim": ref["head_dim"]}
    rows = []
    for name, prefix, prefill_key, warmups in (
            (HF_ROW, "decode", "prefill_2048_tokps", 1),
            ("PyTorch f16 lean eager", "lean_decode", "lean_prefill_2048_tokps", 1),
            (GRAPH_ROW, "lean_graph_decode", None, 2),  # warm-up before and after the capture
            # gpu_reference.py --compile only (HF model, mode="reduce-overhead", batch 1).
            ("PyTorch f16 torch.compile (HF)", "compile_decode", None, 1)):
        ctx = context + warmups * ref["warmup_steps"] + (ref["decode_steps"] + 1) / 2.0
        row = {"precision": "f16", "decode": {}, "prefill": {}}
        for b in (1, 8, 32):
            tps = ref.get("%s_b%d_tokps" % (prefix, b))
            if tps is None:
                continue
            # The embedding: b rows (its table is the LM head too when tied).
            w = 2 * ref["params"] - (0 if ref.get("tied") else 2 * vocab * width) + b * 2 * width
            k = kv_bytes(kv, b, ctx)
            step = b / tps
            row["decode"][b] = {"tokps": tps, "step_s": step, "weight_bytes": w, "kv_bytes": k,
                                "mean_ctx": ctx, "mbu": (w + k) / step / (ref["copy_GBps"] * 1e9)}
        if prefill_key and prefill_key in ref:
            row["prefill"] = {"wall_tokps": ref[prefill_key]}
        if row["decode"] or row["prefill"]:
            rows.append((name, row))
    return rows


def fmt(x, spec="%.0f"):
    return "–" if x is None else spec % x


def pct(x):
    return "–" if x is None else "%.0f%%" % (100 * x)


def table(rows, ref, p_lin, prefill, batches):
    by_name = dict(rows)
    hf_b1 = by_name.get(HF_ROW, {}).get("decode", {}).get(1, {}).get("tokps")
    graph_b1 = by_name.get(GRAPH_ROW, {}).get("decode", {}).get(1, {}).get("tokps")
    head = (["row"] + ["decode tok/s b%d" % b for b in batches] + ["MBU b%d" % b for b in batches]
            + ["prefill tok/s %d (wall)" % prefill, "prefill tok/s (kernels)",
               "prefill MFU (dense peak)", "prefill MFU (vs f16 matmul)", "GEMM MFU prefill",
               "x HF eager b1", "x lean+graph b1"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, r in rows:
        d, p = r["decode"], r.get("prefill", {})
        measured = ref["f16_TFLOPs"] * 1e12  # torch.matmul's (_int_mm's int8 is no peak: GPU_NOTES.md)
        mfu_peak = mfu_meas = None
        wall = p.get("wall_tokps")
        if wall:
            flops = 2 * p_lin * wall  # FLOP/s at that token rate
            mfu_peak = flops / DENSE_PEAK[r["precision"]]
            mfu_meas = flops / measured if measured == measured and measured > 0 else None
        b1 = d.get(1, {}).get("tokps")
        cells = ([name] + [fmt(d.get(b, {}).get("tokps"), "%.1f") for b in batches]
                 + [pct(d.get(b, {}).get("mbu")) for b in batches]
                 + [fmt(wall), fmt(p.get("kernels_tokps")), pct(mfu_peak), pct(mfu_meas),
                    pct(p.get("gemm_mfu")),
                    fmt(b1 / hf_b1 if b1 and hf_b1 else None, "%.2fx"),
                    fmt(b1 / graph_b1 if b1 and graph_b1 else None, "%.2fx")])
        r["prefill_mfu_peak"], r["prefill_mfu_measured"] = mfu_peak, mfu_meas
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def offload_table(args, art, row):
    """Issue 41's off-loading rows for one artifact (see the module's docstring), from its
    batch-1 decode run with every weight on the GPU."""
    base = next((r for r in row["runs"] if "--profile" not in r.get("cmd", "")
                 and " --bench-generate 1 %d " % args.context in r.get("cmd", "")), None)
    if not base or "error" in base or not base.get("device_weights"):
        return None, []
    peak, weights = base["device_peak"], base["device_weights"]
    layers = row["kv_cache"]["layers"]
    settings = [("all on the GPU", [], base)]
    for keep in (0.75, 0.5):
        limit = peak - int(weights * (1 - keep))
        settings.append(("streamed, %d%% of the weights fit" % (keep * 100),
                         ["--gpu-memory-limit", str(limit)], None))
    for n in sorted({max(1, layers // 2), max(1, layers // 4)}, reverse=True):
        settings.append(("%d of %d blocks on the GPU" % (n, layers), ["--gpu-layers", str(n)], None))
    lines = ["| off-loading (%s, batch 1) | flags | prefill tok/s | decode tok/s | of all-GPU "
             "prefill / decode | device weights MiB | host peak RSS MiB |" % row["artifact"],
             "|---|---|---|---|---|---|---|"]
    runs = []
    for name, flags, run in settings:
        if run is None:
            run = run_qrun(args.qrun, art, 1, args.context, args.steps, backend=args.backend,
                           extra=flags)
            runs.append(run)
        if "error" in run:
            lines.append("| %s | `%s` | %s | | | | |" % (name, " ".join(flags), run["error"]))
            continue
        lines.append("| %s | `%s` | %.0f | %.1f | %.2f / %.2f | %.0f | %.0f |" % (
            name, " ".join(flags) or "-", run["prefill_tokps"], run["decode_tokps"],
            run["prefill_tokps"] / base["prefill_tokps"], run["decode_tokps"] / base["decode_tokps"],
            run.get("device_weights", 0) / 2**20, (run.get("host_peak_rss") or 0) / 2**20))
    return "\n".join(lines), runs


def memory_table(rows):
    """Issue 41's memory columns per qrun row: the largest of its decode runs
    (the profiled prefill run also measures the machine's peaks, with buffers
    of its own)."""
    mib = lambda b: "%.0f" % (b / 2**20) if b else "–"
    lines = ["| row | artifact MiB | device peak MiB | device weights MiB | host peak RSS MiB "
             "| KV bytes/token |", "|---|---|---|---|---|---|"]
    for name, r in rows:
        runs = [x for x in r.get("runs", []) if "--profile" not in x.get("cmd", "")]
        if not runs:
            continue
        most = lambda k: max((x.get(k) or 0 for x in runs), default=0)
        kv = r["kv_cache"]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            name, mib(r["artifact_bytes"]), mib(most("device_peak")), mib(most("device_weights")),
            mib(most("host_peak_rss")), "{:,}".format(int(kv_bytes(kv, 1, 1)))))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qrun", required=True)
    ap.add_argument("--artifacts", required=True, help="folder with f16.qpkg, w8a8.qpkg, w8a8-sparse.qpkg")
    ap.add_argument("--reference", required=True, help="bench/gpu_reference.py's JSON from the same run")
    ap.add_argument("--json", help="write the table and the raw numbers here")
    ap.add_argument("--profile-dir", help="keep the prefill profiles (qrun --profile-json) here")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=64,
                    help="decode steps of each timed run (default 64; qrun warms up first)")
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--backend", default="cuda", choices=["cuda", "cpu"],
                    help="qrun's backend (cpu: only to test this script)")
    ap.add_argument("--offload", default="W8A8",
                    help="the row whose artifact gets the off-loading table (none: no table)")
    args = ap.parse_args()
    if args.steps <= 0:
        sys.exit("gpu_bench.py: --steps needs a positive number")
    try:
        ref = json.load(open(args.reference))
    except (OSError, ValueError) as e:
        sys.exit("gpu_bench.py: --reference %s: %s" % (args.reference, e))
    missing = [k for k in ("copy_GBps", "params", "f16_TFLOPs", "i8_TOPs", "layers", "kv_heads",
                           "head_dim", "width", "vocab", "decode_steps", "warmup_steps")
               if k not in ref]
    if missing:
        sys.exit("gpu_bench.py: %s lacks %s (an older gpu_reference.py?)" % (args.reference, ", ".join(missing)))
    # All but the embedding table (which is the LM head, a linear, when tied).
    p_lin = ref["params"] - (0 if ref.get("tied") else ref["vocab"] * ref["width"])

    rows, notes = [], []
    for name, file, dtype in ARTIFACTS:
        art = os.path.join(args.artifacts, file)
        if not os.path.exists(art):
            notes.append("%s: %s not in %s, row left out" % (name, file, args.artifacts))
            continue
        print("gpu_bench: %s (%s)" % (name, file), file=sys.stderr, flush=True)
        row = qrun_row(args, art, ref, dtype)
        kv = row["kv_cache"]
        if (kv["layers"], kv["kv_heads"], kv["head_dim"]) != (ref["layers"], ref["kv_heads"], ref["head_dim"]):
            notes.append("%s: the artifact's cache shape %s is not PyTorch's model's" % (name, kv))
        for b, d in row["decode"].items():
            if "error" in d:
                notes.append("%s decode b%d: %s" % (name, b, d["error"]))
            parts = d.get("weight_parts", {})
            host = parts.get("host_nodes_in_decode_plan")
            if host and b == args.batches[0]:
                counts = {}
                for h in host:
                    counts[h] = counts.get(h, 0) + 1
                # Host nodes need not stop a graph: they become its prologue
                # (GpuSession::placements); qrun's counters say what happened.
                run = next((r for r in row["runs"] if "--bench-generate %d %d " % (b, args.context)
                            in r.get("cmd", "")), {})
                graphs = run.get("cuda", {}).get("graphs_captured")
                how = ("qrun captured %d CUDA graph(s); these run before each replay" % graphs if graphs
                       else "qrun captured no CUDA graph" if graphs == 0 else "graphs unknown")
                notes.append("%s: %d nodes of each decode step run on the host (%s): %s" % (
                    name, len(host), how, "; ".join(
                        "%s x%d" % (h, n) for h, n in sorted(counts.items()))))
        if "error" in row["prefill"]:
            notes.append("%s prefill: %s" % (name, row["prefill"]["error"]))
        rows.append((name, row))
    rows += torch_rows(ref, args.context, ref["width"], ref["vocab"])

    offload, offload_runs = None, []
    if args.offload != "none" and args.backend == "cuda" and args.offload in dict(rows):
        file = next(f for n, f, _ in ARTIFACTS if n == args.offload)
        print("gpu_bench: off-loading (%s)" % file, file=sys.stderr, flush=True)
        offload, offload_runs = offload_table(args, os.path.join(args.artifacts, file),
                                              dict(rows)[args.offload])
    text = table(rows, ref, p_lin, args.prefill, args.batches)
    w8 = dict(rows).get("W8A8", {})
    hf = dict(rows).get(HF_ROW, {})
    w8_b1 = w8.get("decode", {}).get(1, {}) if w8 else {}
    status = [
        "%s: %s" % (TARGETS[0], pct(w8_b1.get("mbu"))),
        "%s: %s" % (TARGETS[1], fmt(w8_b1["tokps"] / hf["decode"][1]["tokps"]
                                    if w8_b1.get("tokps") and hf.get("decode", {}).get(1) else None, "%.2fx")),
        "%s: %s" % (TARGETS[2], pct(w8.get("prefill", {}).get("gemm_mfu") if w8 else None)),
    ]
    out = [text, "", "Memory (the largest of each row's decode runs; docs/MEMORY.md):", "",
           memory_table(rows), ""] + ([
           "Off-loading (docs/MEMORY.md; the host's peak RSS includes the page-locked copies of "
           "the streamed weights and the CPU half's packed weights):", "", offload, ""]
           if offload else []) + [
           "%s, %s; copy %.0f GB/s (read + write), f16 matmul %.0f TFLOP/s, int8 %.0f TOP/s measured; "
           "decode: %d tokens of context, %d timed steps after a warm-up run; prefill: one %d-token prompt."
           % (ref.get("device", "?"), ref.get("date", "?"), ref["copy_GBps"], ref["f16_TFLOPs"],
              ref["i8_TOPs"], args.context, args.steps, args.prefill),
           "Targets (issue 12): " + "; ".join(status)] + ["Note: " + n for n in notes]
    print("\n".join(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"table": "\n".join(out), "rows": dict(rows), "reference": ref,
                       "offload_runs": offload_runs,
                       "settings": vars(args), "p_lin": p_lin}, f, indent=1, default=str)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
