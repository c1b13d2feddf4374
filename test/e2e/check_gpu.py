#!/usr/bin/env python3
"""The CUDA backend against the CPU reference backend (needs a GPU).

    python3 test/e2e/check_gpu.py --qrun build/bin/qrun [--qcc build/bin/qcc]
        [--work DIR] [--compile-only]

Exits 77 (ctest: skipped) with a message when `qrun --devices` finds no GPU
and the machine has no GPU device either (/dev/nvidia0 or
/proc/driver/nvidia/gpus/); where a device is present, a driver that fails to
load is a FAIL. Artifacts of the demo model (examples/austen) are compiled with
qcc into --work when --qcc is given, else taken from there (a GPU machine
without LLVM runs artifacts compiled elsewhere: scripts/gpu_bundle.sh runs
this script with --compile-only):
  f32.qpkg         float, paged cache (the main command's artifact)
  w8a8.qpkg        W8A8 SmoothQuant O1, int8 KV cache, paged
  w8a8-contig.qpkg W8A8 O1, f32 KV cache, contiguous
  w4a16.qpkg       W4A16 round to nearest, groups of 128 (gemm_w4)
  w4a16-asym.qpkg  the same with --w4-asym (gemm_w4 reading the offsets)
  llama-f32.qpkg, llama-w8a8.qpkg
                   test/models/llama-gpu (a Hugging Face LLaMA export,
                   random weights): rotary cos/sin and shape arithmetic run
                   as the decode graph's host prologue
  bloom-f32.qpkg   test/models/hf-gpu/bloom.onnx (a Hugging Face BLOOM
                   export, random weights): ALiBi slopes in the prefill and
                   decode attention kernels
  mixtral-f32.qpkg test/models/hf-gpu/mixtral.onnx (Mixtral, 4 experts,
                   top-2, random weights): the moe kernel (grouped GEMMs
                   over the routed tokens)
  w8a8-fallback.qpkg
                   the demo model with planted outliers (examples/austen-
                   outliers/make_outliers.py), naive W8A8 O1 with
                   --int8-fallback=auto, calibrated on 16 x 128 tokens of the
                   train split (data/austen): its outlier columns stay in
                   float, so gemm_i8_mixed runs
  f32-sparse.qpkg, w8a8-sparse.qpkg
                   the first two with every linear but the LM head 2:4
                   sparse (magnitude), compiled by qcc-sparse-fixture (next
                   to --qcc): the sparse GEMM kinds (mma.sp) and GEMVs

Each artifact's kernel kinds are read from its own `qrun --list-kernels`: a
kind the artifact holds that no `check` line of step 1 covers fails (a kernel
that never ran was not checked). For each artifact:
 1. every kernel region against the CPU backend on the same operands
    (qrun --check-gpu, through `main` on a [3, 37] batch of random ids, then
    through prefill and 4 decode steps of the 3 prompts below: the decode
    kernels, skinny-M GEMVs and split-K attention, run only there);
    tolerances per kind, as max |gpu - cpu| / max(1, max |cpu|):
      gemm_f16      1e-2  f32 linears run as f16 GEMMs: x and W rounded to
                          f16 (relative 2^-11 each), f32 accumulation
      gemm_f16+gelu 1e-2  the same
      gemm_i8       0     bit-exact: int32 accumulation is exact and the
                          float epilogue (dequantize, bias, residual) runs in
                          the documented order without FMA on both sides
      gemm_i8+gelu  1e-5  the formulas are the CPU's (codegen/kernels/
      gemm_i8+silu        numerics.h), but erff / expf / tanh differ by ulps
                          between the CUDA and glibc math libraries
      gemm_i8_sp    0     as gemm_i8: the 2:4 GEMM's int32 sums are exact
                          (the CPU: the same sums over the kept weights)
      gemm_i8_sp+gelu, gemm_i8_sp+silu  1e-5, as gemm_i8's
      gemm_i8_mixed 0     as gemm_i8, plus the float outlier columns summed
                          with the CPU's f32 steps in the CPU's order
      gemm_i8_mixed+gelu, gemm_i8_mixed+silu  1e-5, as gemm_i8's
      gemm_f16_sp   1e-2  as gemm_f16 (f16 inputs, f32 accumulation); the
                          CPU multiplies the same kept weights in f32
      gemm_f16_sp+gelu, gemm_f16_sp+silu  1e-2
      gemm_w4       1e-2  as gemm_f16: x rounded to f16 (the int4 weights
                          are exact in f32 on both sides), f32 accumulation
                          in another order (fma on the GPU)
      gemm_w4+gelu, gemm_w4+silu  1e-2
      embedding     0     a copy
      elementwise   1e-5  same float ops; transcendental ulps
      norm          1e-4  float reductions in a different order
      attention     1e-4  online softmax vs two-pass, f32
      quantize      1e-6  its scales: max|x| / 127 from the same operands,
                          one rounded division on each side
      norm_quantize 1e-4  its scales follow the norm's reduction (as norm)
      quantize / norm_quantize int8 outputs: elements may differ by 1 where
                          x/scale lands within rounding noise of a .5 tie (at
                          most 0.1% of elements), never by more
    A kind with no tolerance here fails: every tolerance is stated.
 2. end to end: logits of `main` (same batch), max |gpu - cpu| / max |cpu|
    <= 1e-2 for float (its linears run as f16 GEMMs: the per-GEMM f16 input
    rounding accumulated over 4 layers), <= 2e-2 for W8A8 (an activation
    that rounds to the other int8 neighbour moves its product by one step of
    the scale; an estimate, to be confirmed by the first GPU run);
 3. generation: greedy text of a ragged batch of 3 prompts, 32 new tokens,
    through prefill and decode (paged/contiguous cache on the device, decode
    in CUDA graphs) equals the CPU backend's (on failure it says whether the
    graph-less checked run of step 1 gave the GPU's text or the CPU's). For
    artifacts with f16 GEMMs, whose inputs the GPU rounds to f16, a text that
    parts at a near-tie passes when the graph replay's text equals the
    graph-less run's (step 4 then bounds the numerics);
 4. perplexity of the first 16,000 characters of examples/austen/
    heldout.txt within 1% of the CPU backend's;
 5. the greedy text of 3 again with the weights streamed under
    `--gpu-memory-limit` (the peak of 3 less half of its weights): the text
    of 3 (with or without graphs: streaming runs without them), and the
    device peak within the limit;
 6. the model split by layers, `--gpu-layers 1` (the first block on the
    GPU, the rest on the CPU backend): main's logits within step 2's
    tolerance of the CPU's, the greedy text of 3 the CPU's or the GPU's
    (artifacts with f16 GEMMs: may part at a near-tie, as in 3), and fewer
    weight bytes on the device than in 3.
Prints a table; exit status 1 on any failure.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "examples", "austen", "model.onnx")
STATS = os.path.join(ROOT, "test", "codegen", "Inputs", "austen-stats.json")
HELDOUT = os.path.join(ROOT, "examples", "austen", "heldout.txt")
PPL_CHARS = 16000
# A Hugging Face LLaMA export (rotary cos/sin and shape arithmetic in the
# graph: the decode graph's host prologue) with 32-wide heads, random weights,
# the demo's tokenizer (test/models/llama-gpu/gen_llama_gpu.py).
LLAMA = os.path.join(ROOT, "test", "models", "llama-gpu", "model.onnx")
TOKENIZER_FLAGS = ["--tokenizer=" + os.path.join(ROOT, "examples", "austen",
                                              "tokenizer.model")]
LLAMA_STATS = os.path.join(ROOT, "test", "models", "llama-gpu", "stats.json")
# Hugging Face exports of other families with 32-wide heads, the same
# tokenizer (test/models/hf-gpu/gen_hf_gpu.py): BLOOM's ALiBi attention,
# Mixtral's experts.
BLOOM = os.path.join(ROOT, "test", "models", "hf-gpu", "bloom.onnx")
MIXTRAL = os.path.join(ROOT, "test", "models", "hf-gpu", "mixtral.onnx")
# Models whose main also takes the attention mask (Hugging Face exports).
HF_EXPORTS = (LLAMA, BLOOM, MIXTRAL)
# The demo model with planted activation outliers, written into --work when
# compiling (examples/austen-outliers/make_outliers.py).
OUTLIERS = "outliers/model.onnx"
CALIB_TRAIN = "calib-train.txt"  # the train split of data/austen, written too
# Artifacts compiled from another model than the demo: name -> model (a
# relative path is under --work).
MODELS = {"llama-f32.qpkg": LLAMA, "llama-w8a8.qpkg": LLAMA,
          "bloom-f32.qpkg": BLOOM, "mixtral-f32.qpkg": MIXTRAL,
          "w8a8-fallback.qpkg": OUTLIERS}
ARTIFACTS = {
    "f32.qpkg": [],
    "w8a8.qpkg": ["--quant=w8a8", "--kv-dtype=i8", "--calib-stats=" + STATS],
    "w8a8-kivi.qpkg": ["--quant=w8a8", "--kv-dtype=i8", "--kv-scales=kivi",
                       "--calib-stats=" + STATS],
    "w8a8-contig.qpkg": ["--quant=w8a8", "--kv-cache=contiguous",
                         "--calib-stats=" + STATS],
    "w4a16.qpkg": ["--quant=w4a16", "--w4-method=rtn"],
    "w4a16-asym.qpkg": ["--quant=w4a16", "--w4-method=rtn", "--w4-asym"],
    "llama-f32.qpkg": TOKENIZER_FLAGS,
    "llama-w8a8.qpkg": TOKENIZER_FLAGS + ["--quant=w8a8", "--kv-dtype=i8",
                                      "--calib-stats=" + LLAMA_STATS],
    "bloom-f32.qpkg": TOKENIZER_FLAGS,
    "mixtral-f32.qpkg": TOKENIZER_FLAGS,
    # {work} is --work (the calibration text and its statistics live there).
    # QuaRot (--rotate): the hadamard kernel before each down projection.
    "w8a8-rotated.qpkg": ["--rotate", "--quant=w8a8", "--no-smoothquant"],
    "w8a8-fallback.qpkg": ["--quant=w8a8", "--no-smoothquant",
                           "--act-quant=per-token", "--int8-fallback=auto",
                           "--calib={work}/" + CALIB_TRAIN, "--calib-samples=16",
                           "--calib-seq-len=128",
                           "--calib-stats={work}/fallback-stats.json"],
}
# Compiled by qcc-sparse-fixture (test/fake/SparseFixture.cpp) with these
# options.
SPARSE_ARTIFACTS = {
    "f32-sparse.qpkg": [],
    "w8a8-sparse.qpkg": ["--quant=w8a8", "--kv-dtype=i8",
                         "--calib-stats=" + STATS],
}
KIND_TOLERANCE = {"gemm_i8": 0.0, "gemm_i8+gelu": 1e-5, "gemm_i8+silu": 1e-5,
                  "gemm_f16": 1e-2, "gemm_f16+gelu": 1e-2,
                  "gemm_f16+silu": 1e-2, "gemm_i8_sp": 0.0,
                  "gemm_i8_sp+gelu": 1e-5, "gemm_i8_sp+silu": 1e-5,
                  "gemm_i8_mixed": 0.0, "gemm_i8_mixed+gelu": 1e-5,
                  "gemm_i8_mixed+silu": 1e-5,
                  "gemm_f16_sp": 1e-2, "gemm_f16_sp+gelu": 1e-2,
                  "gemm_f16_sp+silu": 1e-2, "gemm_w4": 1e-2,
                  "gemm_w4+gelu": 1e-2, "gemm_w4+silu": 1e-2, "embedding": 0.0,
                  "elementwise": 1e-5, "norm": 1e-4, "attention": 1e-4,
                  "quantize": 1e-6, "norm_quantize": 1e-4,
                  # f32 products as the CPU's, summed in another order over
                  # K <= 256 here (~K ulp), then a gate-weighted sum.
                  "moe": 1e-4,
                  # the CPU's formulas but the library exp and the order of
                  # a double sum (router.cuh): gates within an ulp or two,
                  # expert ids exact (no integer may differ).
                  "router": 1e-6,
                  # f32 butterflies and DCT sums where the CPU rotates in
                  # double (HadamardKernelEmulationTest: below 1e-6).
                  "hadamard": 1e-5}
PROMPTS = ["It is a truth universally acknowledged, that",
           "Mr. Darcy", "She"]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if p.returncode != 0:
        raise RuntimeError(" ".join(cmd) + " failed:\n" + p.stderr + p.stdout)
    return p


def compile_artifacts(args, work):
    """Every artifact into `work` (the outlier model and calibration text too)."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import quality_report as qr  # only when compiling: it reads data/austen
    qr.make_outlier_model(MODEL, os.path.join(work, os.path.dirname(OUTLIERS)))
    qr.write_train_split(qr.DEFAULT_DATA, os.path.join(work, CALIB_TRAIN))
    for name, flags in ARTIFACTS.items():
        model = os.path.join(work, MODELS.get(name, MODEL))
        run([args.qcc, model, *[f.replace("{work}", work) for f in flags], "-o",
             os.path.join(work, name)])
    fixture = os.path.join(os.path.dirname(args.qcc), "qcc-sparse-fixture")
    for name, flags in SPARSE_ARTIFACTS.items():
        run([fixture, MODEL, os.path.join(work, name), *flags])


def kernel_kinds(args, art):
    """The kernel kinds `qrun --list-kernels` lists with CUDA code for an
    artifact (a kind whose regions all say "unsupported" runs on the host,
    so no GPU check can cover it)."""
    out = run([args.qrun, art, "--list-kernels"]).stdout
    return {m.group(1) for m in re.finditer(r"^  \S+ (\w+) (?!unsupported)", out, re.M)}


def gpu_device_present():
    """A GPU device node or the NVIDIA kernel driver's list, whatever libcuda says."""
    gpus = "/proc/driver/nvidia/gpus"
    return os.path.exists("/dev/nvidia0") or (os.path.isdir(gpus) and bool(os.listdir(gpus)))


def check_artifact(args, work, name, mask, ids_path, text, text_path, rows,
                   failures):
    """Steps 1-5 for artifact `name`: rows and failures appended."""
    art = os.path.join(work, name)
    if not os.path.exists(art):
        failures.append(name + ": missing (pass --qcc)")
        return
    declared = kernel_kinds(args, art)
    if not declared:
        failures.append(name + ": no GPU kernels (qrun --list-kernels)")
    # 1. Kernel regions against the CPU: `main` on the [3, 37] batch,
    # then prefill and decode while generating (the skinny-M GEMVs, the
    # split-K decode attention and the cache appends run only there).
    gen = [args.qrun, art, "--backend=cuda", "--check-gpu",
           "--max-new-tokens", "32"]
    for prompt in PROMPTS:
        gen += ["--prompt", prompt]
    checks = [("", [args.qrun, art, "--backend=cuda", "--check-gpu",
                    "--input", "input_ids=" + ids_path, *mask, "--output-dir",
                    os.path.join(work, name + ".gpu")]),
              (" (generate)", gen)]
    lines = []
    for label, cmd in checks:
        p = run(cmd)
        sys.stderr.write(p.stderr)
        lines += [(label, line) for line in p.stdout.splitlines()]
    # The checked generation runs without CUDA graphs: its text tells a
    # graph replay bug from a numerical near-tie (step 3).
    checked_text = "".join(line + "\n" for label, line in lines
                           if label and re.match(r"\[\d+\] ", line))
    checked = set()
    for label, line in lines:
        m = re.match(r"check ([\w+]+): worst region (\S+) max abs error (\S+) "
                     r"\(max \|cpu\| (\S+)\), integer elements off by 1: "
                     r"(\d+) of (\d+), off by more: (\d+)", line)
        if not m:
            continue
        kind, region = m.group(1), m.group(2)
        checked.add(kind.split("+")[0])
        err, ref = float(m.group(3)), float(m.group(4))
        off1, ints, offMore = (int(m.group(5)), int(m.group(6)),
                               int(m.group(7)))
        rel = err / max(1.0, ref)
        if kind not in KIND_TOLERANCE:
            failures.append("%s: kernel kind %s has no stated tolerance"
                            % (name, kind))
            continue
        tol = KIND_TOLERANCE[kind]
        # A router's integers are expert ids: each must be the CPU's.
        ok = rel <= tol and offMore == 0 and (off1 == 0 if kind == "router"
                                              else off1 <= 0.001 * ints)
        rows.append((name, "kernel " + kind + label, region, "%.2e" % rel,
                     "%.0e" % tol, "int8 off by 1: %d of %d" % (off1, ints),
                     "PASS" if ok else "FAIL"))
        if not ok:
            failures.append("%s: kernel %s%s (%s) error %.3g > %.3g or "
                            "integer mismatches %d/%d" %
                            (name, kind, label, region, rel, tol, off1,
                             offMore))
    for kind in sorted(declared - checked):
        rows.append((name, "kernel " + kind, "", "", "", "no check line", "FAIL"))
        failures.append("%s: kernel kind %s is in the artifact (--list-kernels) "
                        "but no check covered it" % (name, kind))
    # 2. Logits end to end.
    run([args.qrun, art, "--backend=cpu", "--input", "input_ids=" + ids_path, *mask,
         "--output-dir", os.path.join(work, name + ".cpu")])
    gpu = np.load(os.path.join(work, name + ".gpu", "logits.npy"))
    cpu = np.load(os.path.join(work, name + ".cpu", "logits.npy"))
    rel = float(np.abs(gpu - cpu).max() / np.abs(cpu).max())
    tol = 1e-2 if "f32" in name else 2e-2
    ok = rel <= tol
    rows.append((name, "logits main", "[3, 37]", "%.2e" % rel, "%.0e" % tol,
                 "", "PASS" if ok else "FAIL"))
    if not ok:
        failures.append("%s: logits error %.3g > %.3g" % (name, rel, tol))
    # 3. Greedy generation.
    texts = {}
    memory = None
    for backend in ("cpu", "cuda"):
        cmd = [args.qrun, art, "--backend=" + backend, "--max-new-tokens", "32"]
        for prompt in PROMPTS:
            cmd += ["--prompt", prompt]
        p = run(cmd)
        texts[backend] = p.stdout
        if backend == "cuda":
            sys.stderr.write(p.stderr)
            memory = re.search(r"CUDA memory: peak (\d+) bytes on the device, "
                               r"weights (\d+) bytes", p.stderr)
    same = texts["cpu"] == texts["cuda"]
    # f16 GEMMs (float and W4A16 artifacts) round x and W to f16 where
    # the CPU multiplies in f32: a greedy text may part where two logits
    # lie within that rounding (seen once: f32-sparse, prompt 0, token 6,
    # with every kernel within tolerance and perplexity equal to 4e-6).
    # There the check asks that the graph replay's text equal the
    # graph-less checked run's and that step 4's perplexity agree.
    f16_gemms = (name.startswith("f32") or name.startswith("w4a16") or
                 name.endswith("-f32.qpkg"))
    near_tie = not same and f16_gemms and checked_text == texts["cuda"]
    rows.append((name, "greedy 32 tokens", "3 prompts", "", "",
                 "identical" if same else
                 "differs at an f16 near-tie; graphs = no graphs"
                 if near_tie else "differs",
                 "PASS" if same or near_tie else "FAIL"))
    if near_tie:
        sys.stderr.write("%s: greedy text parts from the CPU's:\n--- cpu\n"
                         "%s--- cuda\n%s" % (name, texts["cpu"],
                                             texts["cuda"]))
    elif not same:
        failures.append("%s: greedy text differs:\n--- cpu\n%s--- cuda\n%s"
                        "--- cuda without graphs: %s" %
                        (name, texts["cpu"], texts["cuda"],
                         "the same as cuda" if checked_text == texts["cuda"]
                         else "the same as cpu" if checked_text == texts["cpu"]
                         else "\n" + checked_text))
    # 5. Weights streamed under a device memory limit (docs/MEMORY.md): a
    # budget that holds half of the weights; the same kernels on the same
    # operands, so the same text as step 3's graph-less run; the peak within
    # the budget, or (a model whose largest node's weights pass half of all,
    # e.g. the tiny llama's embedding table) qrun saying it is over and the
    # peak no higher than without a limit.
    if memory:
        peak, weights = int(memory.group(1)), int(memory.group(2))
        limit = peak - weights // 2
        cmd = [args.qrun, art, "--backend=cuda", "--max-new-tokens", "32",
               "--gpu-memory-limit", str(limit)]
        for prompt in PROMPTS:
            cmd += ["--prompt", prompt]
        p = run(cmd)
        m = re.search(r"CUDA memory: peak (\d+) bytes", p.stderr)
        streamed_peak = int(m.group(1)) if m else None
        same_text = p.stdout in (checked_text, texts["cuda"])
        over = "(over the limit" in p.stderr
        ok = same_text and streamed_peak is not None and (
            streamed_peak <= limit or (over and streamed_peak <= peak))
        rows.append((name, "greedy, weights streamed", "limit %d MiB" % (limit >> 20),
                     "", "", "peak %s MiB%s, text %s" % (
                         streamed_peak and streamed_peak >> 20,
                         " (over: one node's weights)" if over else "",
                         "identical" if same_text else "differs"),
                     "PASS" if ok else "FAIL"))
        if not ok:
            failures.append("%s: --gpu-memory-limit %d: peak %s, text %s" % (
                name, limit, streamed_peak, "identical" if same_text else
                "differs:\n" + p.stdout))
    else:
        failures.append("%s: qrun printed no CUDA memory line" % name)
    # 6. The model split by layers (--gpu-layers 1: the first block on the
    # GPU, the rest on the CPU backend with a host cache): main's logits
    # within step 2's tolerance of the CPU's (each half is within it of the
    # other backend); the greedy text of 3 the CPU's or the GPU's (f16 GEMMs:
    # a near-tie may part it, as in step 3); fewer weights on the device.
    split_dir = os.path.join(work, name + ".split")
    p = run([args.qrun, art, "--backend=cuda", "--gpu-layers", "1", "--input",
             "input_ids=" + ids_path, *mask, "--output-dir", split_dir])
    split_rel = float("inf")
    if p.returncode == 0:
        split = np.load(os.path.join(split_dir, "logits.npy"))
        split_rel = float(np.abs(split - cpu).max() / np.abs(cpu).max())
    cmd = [args.qrun, art, "--backend=cuda", "--gpu-layers", "1",
           "--max-new-tokens", "32"]
    for prompt in PROMPTS:
        cmd += ["--prompt", prompt]
    p = run(cmd)
    sys.stderr.write(p.stderr)
    m = re.search(r"CUDA memory: peak \d+ bytes on the device, weights (\d+)",
                  p.stderr)
    split_weights = int(m.group(1)) if m else None
    text_ok = p.stdout in (texts["cpu"], texts["cuda"], checked_text)
    ok = (split_rel <= tol and (text_ok or f16_gemms) and memory is not None
          and split_weights is not None and
          split_weights < int(memory.group(2)))
    rows.append((name, "split --gpu-layers 1", "logits, 3 prompts",
                 "%.2e" % split_rel, "%.0e" % tol,
                 "text %s, device weights %s of %s MiB" % (
                     "identical" if text_ok else
                     "differs (f16 near-tie)" if f16_gemms else "differs",
                     split_weights and split_weights >> 20,
                     memory and int(memory.group(2)) >> 20),
                 "PASS" if ok else "FAIL"))
    if not ok:
        failures.append("%s: --gpu-layers 1: logits error %.3g (tol %.3g), "
                        "device weights %s, text:\n%s%s" % (
                            name, split_rel, tol, split_weights, p.stdout,
                            p.stderr[-2000:]))
    # 4. Perplexity of held-out text on both backends: a greedy text can
    # part at a near-tie; the mean NLL cannot move much. Tolerance 1%:
    # per-token NLL moves by at most the logit error (|logit| ~ 10 times
    # the 1e-3 relative f16 / int8-rounding error above, ~0.01 nats), so
    # the perplexity ratio stays under e^0.01.
    ppl = {}
    for backend in ("cpu", "cuda"):
        p = run([args.qrun, art, "--backend=" + backend, "--perplexity",
                 text_path])
        m = re.search(r"perplexity[^0-9]*([0-9.]+)", p.stdout + p.stderr)
        ppl[backend] = float(m.group(1)) if m else float("nan")
    rel = abs(ppl["cuda"] / ppl["cpu"] - 1)
    ok = rel <= 1e-2
    rows.append((name, "perplexity", "%d chars" % len(text), "%.2e" % rel,
                 "1e-02", "cpu %.4f cuda %.4f" % (ppl["cpu"], ppl["cuda"]),
                 "PASS" if ok else "FAIL"))
    if not ok:
        failures.append("%s: perplexity cpu %.4f cuda %.4f" %
                        (name, ppl["cpu"], ppl["cuda"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qrun", required=True)
    ap.add_argument("--qcc")
    ap.add_argument("--work", default=None)
    ap.add_argument("--compile-only", action="store_true",
                    help="compile the artifacts into --work and stop (needs --qcc)")
    ap.add_argument("--skip", action="append", default=[], metavar="NAME",
                    help="leave artifact NAME out, saying so (a bundle that had to drop it "
                    "to fit the device tool's 64 MiB)")
    args = ap.parse_args()
    if args.compile_only and not (args.qcc and args.work):
        ap.error("--compile-only needs --qcc and --work")

    work = args.work or tempfile.mkdtemp(prefix="qcc-gpu-")
    if args.compile_only:
        os.makedirs(work, exist_ok=True)
        compile_artifacts(args, work)
        return 0
    devices = subprocess.run([args.qrun, "--devices"], capture_output=True,
                             text=True).stdout
    if not devices.startswith("CUDA driver"):
        if gpu_device_present():
            print("FAIL: the machine has a GPU device but qrun --devices says: "
                  + devices.strip())
            print("gpu-vs-cpu: 1 checks, 1 failed")
            return 1
        print("SKIP: no GPU: " + devices.strip())
        return 77
    print(devices.strip())
    os.makedirs(work, exist_ok=True)
    if args.qcc:
        compile_artifacts(args, work)

    rng = np.random.default_rng(20261122)
    ids = rng.integers(0, 3000, size=(3, 37), dtype=np.int64)
    ids_path = os.path.join(work, "ids.npy")
    np.save(ids_path, ids)
    # A Hugging Face export's main also takes the attention mask.
    mask_path = os.path.join(work, "attention_mask.npy")
    np.save(mask_path, np.ones_like(ids))

    # Held-out text for the perplexity check (the bundle carries a slice).
    with open(HELDOUT, encoding="utf-8") as f:
        text = f.read(PPL_CHARS)
    text_path = os.path.join(work, "heldout.txt")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(text)

    failures = []
    rows = []
    for name in list(ARTIFACTS) + list(SPARSE_ARTIFACTS):
        if name in args.skip:
            rows.append((name, "skipped (--skip)", "", "", "", "", "SKIP"))
            continue
        mask = (["--input", "attention_mask=" + mask_path]
                if MODELS.get(name) in HF_EXPORTS else [])
        # One artifact's error (a qrun failure) is its failure, not the
        # end of the others' checks.
        try:
            check_artifact(args, work, name, mask, ids_path, text, text_path,
                           rows, failures)
        except RuntimeError as e:
            rows.append((name, "run", "", "", "", str(e).splitlines()[0][:120],
                         "FAIL"))
            failures.append("%s: %s" % (name, e))

    print("| artifact | check | where | error | tolerance | note | result |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    for f in failures:
        print("FAIL: " + f)
    print("gpu-vs-cpu: %d checks, %d failed" % (len(rows), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
