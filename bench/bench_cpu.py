#!/usr/bin/env python3
"""qrun's CPU backend side by side with onnxruntime and llama.cpp: one table per model.

    scripts/setup_bench.sh                       # .venv-bench: onnxruntime, llama-cpp-python, gguf
    .venv-bench/bin/python bench/bench_cpu.py    # the demo model (examples/austen)
    .venv-bench/bin/python bench/bench_cpu.py --model examples/smollm2/model.onnx \\
        --past-model examples/smollm2/model_past.onnx --gguf SmolLM2-135M-Instruct.Q4_1.gguf

Rows (the same weights in each engine's format, the same thread count for all):
  qrun float32, qrun W8A8 (SmoothQuant O1 per-token), qrun W8A8 + f16 KV cache
  (llama.cpp's default cache), qrun W8A8 + int8 KV cache,
  qrun W8A8 + 2:4 (magnitude pruning: a speed row, its quality is docs/SPARSITY.md's),
  qrun W4A16 (int4 round to nearest, scale + min per 32 weights, LM head too),
  qrun W4A8 (the same int4 weights, int8 activations per token, no SmoothQuant)
  (artifacts compiled here with qcc --no-cuda; W8A8 calibrated on --calib text),
  onnxruntime on the same ONNX (decode: a with-past export fed present -> past
  through IO binding; for a GPT-2-style model without one, bench/peer_models.py
  builds it from the ONNX's initializers), llama.cpp float32 and q8_0 (through
  llama-cpp-python: a GGUF written from the ONNX's initializers for GPT-2-style
  models, or --gguf dequantized to float32; q8_0 and Q4_K_M by llama.cpp's own
  quantizer).
  The f32 GGUF's logits are compared with onnxruntime's on the ONNX before timing.
Columns: prefill tokens/s (one forward pass of a batch-1 prompt, logits at
  every position, as `qrun --bench 1 S` and the ONNX forward compute them) at
  --prompts tokens; decode tokens/s at --batches sequences after a --context
  token prompt (greedy, --steps timed steps); peak RSS of the engine's own
  processes (each measurement runs in a fresh subprocess; os.wait4's ru_maxrss,
  the largest of the row); batch-1 decode MBU: (weight bytes + KV bytes read) per
  step / step time / the bandwidth of a STREAM-like copy measured in the same run.
A second table, memory (issue 41): each engine generates --memory-new-tokens greedy tokens
  after a --memory-prompt token prompt (batch 1) in a process of its own: peak RSS
  (ru_maxrss), and the same less the process's base (the peak of the same program that loads
  no model: `qrun --version`; a Python interpreter that imports the peer's module), the model
  file's bytes, and the KV cache's bytes per token. --only memory runs just that table.
Prompts and contexts are clamped to the model's positions (the table says so).
Measurements are interleaved (every engine once per cell, --repeats rounds);
a cell is the best of its rounds, each round the median of --iterations runs.
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import measure
from cpu_info import cpu_has_amx, cpu_has_bf16, machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
TTY = sys.stderr.isatty()


def progress(msg):
    if TTY:
        print(f"\r\033[K[bench_cpu] {msg}", end="", file=sys.stderr, flush=True)


def affinity_threads():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# --------------------------------------------------------------------------
# Workers: one measurement each, in a fresh process (--worker JSON), so that
# its peak RSS is the engine's own. They print one JSON line.
# --------------------------------------------------------------------------

def ort_session(model, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def ort_forward_feeds(sess, ids):
    """An exporter's inputs as qrun fills them (runtime sequenceInputs):
    attention_mask all ones, position_ids 0..S-1."""
    batch, seq = ids.shape
    feeds = {}
    for i, inp in enumerate(sess.get_inputs()):
        if i == 0:
            feeds[inp.name] = ids
        elif inp.name == "attention_mask":
            feeds[inp.name] = np.ones((batch, seq), np.int64)
        elif inp.name == "position_ids":
            feeds[inp.name] = np.tile(np.arange(seq, dtype=np.int64), (batch, 1))
        else:
            raise SystemExit(f"bench_cpu: input '{inp.name}' is not one a forward pass fills")
    return feeds


def ort_prefill(j):
    sess = ort_session(j["model"], j["threads"])
    vocab = sess.get_outputs()[0].shape[-1]
    ids = np.random.default_rng(0).integers(0, vocab, size=(1, j["seq"]), dtype=np.int64)
    feeds = ort_forward_feeds(sess, ids)
    sess.run(None, feeds)  # warm-up
    times = []
    for _ in range(j["iterations"]):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return {"tokens_per_s": j["seq"] / float(np.median(times))}


def ort_decode(j):
    """Greedy decode: prefill CONTEXT tokens from an empty past, then STEPS
    one-token steps; present.* stay OrtValues bound as the next past_key_values.*
    (IO binding: no copy through numpy). Only the steps are timed."""
    import onnxruntime as ort
    sess = ort_session(j["model"], j["threads"])
    batch, context, steps = j["batch"], j["context"], j["steps"]
    ins = {i.name: i for i in sess.get_inputs()}
    outs = [o.name for o in sess.get_outputs()]
    pasts = [n for n in ins if n.startswith("past_key_values.")]
    if "input_ids" not in ins or not pasts:
        raise SystemExit(f"bench_cpu: {j['model']} has no input_ids / past_key_values.* inputs")
    presents = [n.replace("past_key_values.", "present.") for n in pasts]
    if any(p not in outs for p in presents):
        raise SystemExit(f"bench_cpu: {j['model']} lacks a present.* output for a past input")
    vocab = sess.get_outputs()[0].shape[-1]
    dtype = np.float16 if "float16" in ins[pasts[0]].type else np.float32
    past = {n: ort.OrtValue.ortvalue_from_numpy(
        np.zeros((batch, ins[n].shape[1], 0, ins[n].shape[3]), dtype)) for n in pasts}
    io = sess.io_binding()

    def step(ids, past_len):
        total = past_len + ids.shape[1]
        io.clear_binding_inputs()
        io.clear_binding_outputs()
        io.bind_cpu_input("input_ids", ids)
        if "attention_mask" in ins:
            io.bind_cpu_input("attention_mask", np.ones((batch, total), np.int64))
        if "position_ids" in ins:
            io.bind_cpu_input("position_ids",
                              np.tile(np.arange(past_len, total, dtype=np.int64), (batch, 1)))
        for n in pasts:
            io.bind_ortvalue_input(n, past[n])
        for o in outs:
            io.bind_output(o, "cpu")
        sess.run_with_iobinding(io)
        r = dict(zip(outs, io.get_outputs()))
        for n, p in zip(pasts, presents):
            past[n] = r[p]
        logits = r[outs[0]].numpy()
        return logits[:, -1, :].argmax(-1).reshape(batch, 1).astype(np.int64)

    rng = np.random.default_rng(0)
    nxt = step(rng.integers(0, vocab, size=(batch, context), dtype=np.int64), 0)
    t0 = time.perf_counter()
    for i in range(steps):
        nxt = step(nxt, context + i)
    return {"tokens_per_s": batch * steps / (time.perf_counter() - t0)}


class LlamaCpp:
    """A llama.cpp model and context through llama-cpp-python's C API."""

    def __init__(self, gguf, threads, n_ctx, n_seq, n_batch):
        import ctypes
        import llama_cpp as ll
        self.ll, self.ctypes = ll, ctypes
        self._quiet = ll.llama_log_callback(lambda level, text, data: None)
        ll.llama_log_set(self._quiet, ctypes.c_void_p())
        ll.llama_backend_init()
        mp = ll.llama_model_default_params()
        # --llama-repack (main() passes it on to the worker processes).
        mp.use_extra_bufts = os.environ.get("QCC_BENCH_LLAMA_REPACK", "1") == "1"
        self.model = ll.llama_model_load_from_file(gguf.encode(), mp)
        if not self.model:
            raise SystemExit(f"bench_cpu: llama.cpp cannot load {gguf}")
        cp = ll.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_batch, n_batch, n_seq
        cp.n_threads = cp.n_threads_batch = threads
        self.ctx = ll.llama_init_from_model(self.model, cp)
        if not self.ctx:
            raise SystemExit(f"bench_cpu: llama.cpp cannot make a context for {gguf}")
        self.vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        self.batch = ll.llama_batch_init(n_batch, 0, n_seq)

    def clear(self):
        self.ll.llama_memory_clear(self.ll.llama_get_memory(self.ctx), True)

    def decode(self, rows, all_logits):
        """rows: (seq, pos, token) triples in one llama_batch; returns the
        logits of the rows that asked for them, [n, vocab]."""
        b = self.batch
        for i, (seq, pos, tok) in enumerate(rows):
            b.token[i], b.pos[i], b.n_seq_id[i] = int(tok), int(pos), 1
            b.seq_id[i][0] = int(seq)
            b.logits[i] = 1 if all_logits or i == len(rows) - 1 else 0
        b.n_tokens = len(rows)
        if self.ll.llama_decode(self.ctx, b) != 0:
            raise SystemExit("bench_cpu: llama_decode failed")
        n = len(rows) if all_logits else 1
        ptr = self.ll.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(n * self.vocab,)).reshape(n, self.vocab)


def llama_prefill(j):
    seq = j["seq"]
    m = LlamaCpp(j["gguf"], j["threads"], n_ctx=max(seq, 256), n_seq=1, n_batch=seq)
    ids = np.random.default_rng(0).integers(0, m.vocab, size=seq)
    rows = [(0, p, t) for p, t in enumerate(ids)]
    m.decode(rows, True)  # warm-up
    times = []
    for _ in range(j["iterations"]):
        m.clear()
        t0 = time.perf_counter()
        m.decode(rows, True)
        times.append(time.perf_counter() - t0)
    return {"tokens_per_s": seq / float(np.median(times))}


def llama_decode(j):
    """Greedy decode of BATCH sequences (seq ids 0..B-1, one llama_batch per
    step with a token of each); the prompt goes in one sequence per call."""
    batch, context, steps = j["batch"], j["context"], j["steps"]
    per_seq = -(-(context + steps + 1) // 256) * 256  # llama.cpp splits n_ctx over sequences
    m = LlamaCpp(j["gguf"], j["threads"], n_ctx=batch * per_seq, n_seq=batch,
                 n_batch=max(context, batch))
    rng = np.random.default_rng(0)
    nxt = []
    for s in range(batch):
        ids = rng.integers(0, m.vocab, size=context)
        nxt.append(int(m.decode([(s, p, t) for p, t in enumerate(ids)], False)[0].argmax()))
    t0 = time.perf_counter()
    for i in range(steps):
        logits = m.decode([(s, context + i, nxt[s]) for s in range(batch)], True)
        nxt = [int(r.argmax()) for r in logits]
    return {"tokens_per_s": batch * steps / (time.perf_counter() - t0)}


def python_baseline(j):
    """Imports what a peer's worker imports and loads nothing: the
    interpreter's share of that peer's peak RSS."""
    if j["engine"] == "onnxruntime":
        import onnxruntime  # noqa: F401
    else:
        import llama_cpp
        llama_cpp.llama_backend_init()
    return {}


def llama_logits(j):
    m = LlamaCpp(j["gguf"], j["threads"], n_ctx=max(len(j["ids"]), 256), n_seq=1,
                 n_batch=len(j["ids"]))
    logits = m.decode([(0, p, t) for p, t in enumerate(j["ids"])], True)
    np.save(j["out"], logits)
    return {}


WORKERS = {"ort_prefill": ort_prefill, "ort_decode": ort_decode,
           "llama_prefill": llama_prefill, "llama_decode": llama_decode,
           "llama_logits": llama_logits, "python_baseline": python_baseline}


# --------------------------------------------------------------------------
# The parent: runs each measurement in its own process and keeps its peak RSS.
# --------------------------------------------------------------------------

def run_measured(cmd, env=None):
    """(stdout, peak RSS in bytes) of CMD (bench/measure.py); raises with its
    stderr on failure."""
    r = measure.run(cmd, env)
    if r["rc"] != 0:
        err = r["err"].strip()
        raise RuntimeError(f"{os.path.basename(cmd[0])}: exit {r['rc']}: "
                           f"{err.splitlines()[-1] if err else ''}")
    return r["out"], r["maxrss"]


def worker(job):
    out, rss = run_measured([sys.executable, os.path.abspath(__file__), "--worker",
                             json.dumps(job)], env=thread_env(job["threads"]))
    return json.loads(out.strip().splitlines()[-1]), rss


def thread_env(threads):
    # qrun's GEMMs run on OpenBLAS threads, its elementwise ops on OpenMP's.
    return dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))


_qrun_has_threads = {}


def qrun_measure(qrun, qpkg, args, threads, key):
    # A qrun with its own --threads (one pool for the process) gets it too.
    if qrun not in _qrun_has_threads:
        help_text = subprocess.run([qrun, "--help"], capture_output=True, text=True).stdout
        _qrun_has_threads[qrun] = "--threads" in help_text
    if _qrun_has_threads[qrun]:
        args = args + ["--threads", str(threads)]
    out, rss = run_measured([qrun, qpkg, "--backend=cpu"] + args, env=thread_env(threads))
    m = re.search(key, out)
    if not m:
        raise RuntimeError(f"qrun printed no '{key}': {out.strip()}")
    return float(m.group(1)), rss


def stream_copy_bandwidth(threads, mib=256, repeats=5):
    """Bytes/s of a STREAM-like copy (numpy copyto of a MIB-MiB float64 array,
    split over THREADS threads: numpy releases the GIL), counting read + write
    (STREAM's convention). Best of REPEATS."""
    n = mib * 1024 * 1024 // 8
    src, dst = np.ones(n), np.empty(n)
    chunks = [slice(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    best = 0.0
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in range(repeats):
            t0 = time.perf_counter()
            list(pool.map(lambda s: np.copyto(dst[s], src[s]), chunks))
            best = max(best, 2 * src.nbytes / (time.perf_counter() - t0))
    return best


class ModelInfo:
    """What the table needs from the ONNX: positions, MatMul weight parameters,
    KV geometry (from the with-past export, else from --heads)."""

    def __init__(self, model, past_model, heads):
        import onnx
        m = onnx.load(model)
        inits = {t.name: t for t in m.graph.initializer}
        numel = lambda t: int(np.prod(t.dims))
        self.matmul_params = sum(numel(inits[n.input[1]]) for n in m.graph.node
                                 if n.op_type in ("MatMul", "Gemm") and n.input[1] in inits)
        self.positions = inits["wpe.weight"].dims[0] if "wpe.weight" in inits else None
        self.gpt2 = "wpe.weight" in inits and "h.0.ln_1.weight" in inits
        self.vocab = None
        for o in m.graph.output[:1]:
            self.vocab = o.type.tensor_type.shape.dim[-1].dim_value
        del m
        if past_model:
            p = onnx.load(past_model, load_external_data=False)
            pasts = [i for i in p.graph.input if i.name.startswith("past_key_values.")]
            dims = pasts[0].type.tensor_type.shape.dim
            self.layers = len(pasts) // 2
            self.kv_dim = dims[1].dim_value * dims[3].dim_value
        elif self.gpt2:
            self.layers = 1 + max(int(t.split(".")[1]) for t in inits if t.startswith("h."))
            self.kv_dim = inits["wpe.weight"].dims[1]
        else:
            self.layers = self.kv_dim = None


# W4A16 as llama.cpp's 4-bit files are made: round to nearest, no calibration,
# scale + min per group of 32 (Q4_1's grid), the LM head too.
W4A16_FLAGS = ["--quant=w4a16", "--w4-method=rtn", "--w4-asym", "--group-size=32",
               "--w4-lm-head"]
# W4A8: those weights with int8 activations per token (the int8 x int4 VNNI
# linear of runtime/cpu/CpuW4A8Kernels.h), without SmoothQuant (docs/QUANTIZATION.md
# section 13: it moves the weights off their Q4_1 grid).
W4A8_FLAGS = ["--quant=w4a8"] + W4A16_FLAGS[1:] + ["--no-smoothquant"]


# Rows that run another row's artifact with qrun flags of their own: bf16
# linears (float32 weights packed as bf16, --cpu-precision; CPUs with
# AVX512_BF16 only).
RUN_FLAGS = {"qrun float32 as bf16": ["--cpu-precision", "bf16"]}
SAME_ARTIFACT = {"qrun float32 as bf16": "qrun float32"}


def compile_qrun_variants(a, info, work):
    """{row: qpkg}: float32, W8A8, W8A8 + f16 / int8 KV cache, 2:4, W4A16, W4A8 (compiled
    unless a newer artifact is in WORK)."""
    variants = {"qrun float32": [],
                "qrun W8A8": ["--quant=w8a8", "--act-quant=per-token"],
                "qrun W8A8 + f16 KV": ["--quant=w8a8", "--act-quant=per-token", "--kv-dtype=f16"],
                "qrun W8A8 + int8 KV": ["--quant=w8a8", "--act-quant=per-token", "--kv-dtype=i8"],
                "qrun W8A8 + 2:4": ["--quant=w8a8", "--act-quant=per-token", "--sparsity=2:4",
                                    "--prune=magnitude"],
                "qrun W4A16": W4A16_FLAGS,
                "qrun W4A8": W4A8_FLAGS}
    calib = [f"--calib={a.calib}", f"--calib-samples={4 if a.quick else 16}",
             "--calib-seq-len=128", f"--calib-stats={os.path.join(work, 'calib.json')}"]
    out = {}
    for row, flags in variants.items():
        path = os.path.join(work, re.sub(r"\W+", "_", row) + ".qpkg")
        fresh = os.path.exists(path) and os.path.getmtime(path) > max(
            os.path.getmtime(a.model), os.path.getmtime(a.qcc))
        if not fresh:
            progress(f"qcc: {row}")
            cmd = [a.qcc, a.model, "--no-cuda", "--quiet", "-o", path] + flags
            subprocess.run(cmd + (calib if "--quant=w8a8" in flags else []), check=True)
        out[row] = path
    if cpu_has_bf16():
        for row, base in SAME_ARTIFACT.items():
            out[row] = out[base]
    return out


def prepare_peers(a, info, work):
    """The peers' model files: onnxruntime's with-past ONNX and llama.cpp's
    GGUFs (f32, q8_0), each checked against onnxruntime's logits on --model.
    Returns (past model or None, {row: gguf}, notes)."""
    import peer_models
    notes = []
    past = a.past_model
    if not past and info.gpt2:
        past = os.path.join(work, "model_past.onnx")
        if not os.path.exists(past) or os.path.getmtime(past) < os.path.getmtime(a.model):
            progress("onnxruntime: with-past ONNX from the initializers")
            peer_models.gpt2_past_onnx(a.model, past, a.heads)
        err = peer_models.check_past_onnx(a.model, past)
        notes.append("onnxruntime decode: a with-past ONNX built by bench/peer_models.py from "
                     f"{os.path.relpath(a.model, ROOT)}'s initializers (the same weights; its "
                     f"prefill + 4 steps match the ONNX's logits within {err:.1g})")
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        notes.append("llama.cpp: llama-cpp-python is not importable here (run "
                     "scripts/setup_bench.sh and .venv-bench/bin/python)")
        return past, {}, notes
    ggufs = {"llama.cpp f32": os.path.join(work, "model-f32.gguf"),
             "llama.cpp q8_0": os.path.join(work, "model-q8_0.gguf"),
             "llama.cpp Q4_K_M": os.path.join(work, "model-q4_k_m.gguf")}
    stale = lambda path, src: not os.path.exists(path) or \
        os.path.getmtime(path) < os.path.getmtime(src)
    if stale(ggufs["llama.cpp f32"], a.gguf or a.model):
        progress("llama.cpp: float32 GGUF")
        if a.gguf:
            peer_models.dequantized_gguf(a.gguf, ggufs["llama.cpp f32"])
        elif info.gpt2:
            peer_models.gpt2_gguf(a.model, ggufs["llama.cpp f32"], a.heads)
        else:
            notes.append("llama.cpp: no --gguf and not a GPT-2-style ONNX: no llama.cpp rows")
            return past, {}, notes
    if stale(ggufs["llama.cpp q8_0"], ggufs["llama.cpp f32"]):
        progress("llama.cpp: q8_0 GGUF (llama_model_quantize)")
        peer_models.quantize_gguf(ggufs["llama.cpp f32"], ggufs["llama.cpp q8_0"])
    if stale(ggufs["llama.cpp Q4_K_M"], ggufs["llama.cpp f32"]):
        progress("llama.cpp: Q4_K_M GGUF (llama_model_quantize)")
        peer_models.quantize_gguf(ggufs["llama.cpp f32"], ggufs["llama.cpp Q4_K_M"],
                                  "MOSTLY_Q4_K_M")
    notes.append("llama.cpp Q4_K_M: llama_model_quantize's mix (Q4_K with some Q6_K; a tensor "
                 "whose rows are not a multiple of 256 takes its fallback type); qrun W4A16: "
                 + " ".join(W4A16_FLAGS) + "; qrun W4A8: " + " ".join(W4A8_FLAGS))
    notes.append(check_gguf(a, info, ggufs["llama.cpp f32"], work))
    return past, ggufs, notes


def check_gguf(a, info, gguf, work):
    """llama.cpp's f32 logits against onnxruntime's on the ONNX, 64 tokens."""
    progress("llama.cpp: checking its logits against onnxruntime")
    seq = 64
    ids = np.random.default_rng(1).integers(0, info.vocab, size=(1, seq), dtype=np.int64)
    sess = ort_session(a.model, a.threads)
    ref = sess.run(None, ort_forward_feeds(sess, ids))[0][0]
    del sess
    out = os.path.join(work, "llama_logits.npy")
    worker({"kind": "llama_logits", "gguf": gguf, "ids": ids[0].tolist(), "out": out,
            "threads": a.threads})
    got = np.load(out)
    err = np.abs(got - ref).max()
    scale = np.abs(ref).max()
    agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
    # llama.cpp's gpt2 graph uses GELU's tanh form (ggml_gelu, from an f16
    # table) where the ONNX has erf: about 1e-3 per activation, so 1% of the
    # logits' range; a wrong tensor layout is off by the whole range.
    if err > 0.01 * scale or agree < 0.95:
        raise SystemExit(f"bench_cpu: llama.cpp's logits differ from onnxruntime's: max |diff| "
                         f"{err:.3g} (logits up to {scale:.3g}), argmax agrees on {agree:.0%}: "
                         "the GGUF is wrong, so its timings would mean nothing")
    return (f"llama.cpp f32 GGUF checked against onnxruntime on {seq} tokens: max |logit diff| "
            f"{err:.2g} of max |logit| {scale:.3g}, argmax agrees at {agree:.0%} of positions "
            "(tolerance 1% of the range, argmax >= 95%)")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    default = os.path.join(ROOT, "examples", "austen", "model.onnx")
    p.add_argument("--model", default=default, help="the ONNX (no cache) qrun compiles")
    p.add_argument("--past-model", help="with-past export of the same model for onnxruntime's "
                   "decode (default for GPT-2-style models: built from --model)")
    p.add_argument("--gguf", help="a GGUF of the same weights (quantized ones are dequantized "
                   "to f32); default for GPT-2-style models: written from --model")
    p.add_argument("--heads", type=int, help="attention heads (GPT-2-style models; default: "
                   "n_head of model.json beside --model)")
    p.add_argument("--threads", type=int, default=affinity_threads(),
                   help="threads for every engine (default: the affinity mask's count)")
    p.add_argument("--prompts", default="128,512", help="prefill prompt lengths")
    p.add_argument("--batches", default="1,8", help="decode batch sizes")
    p.add_argument("--context", type=int, default=512, help="decode: prompt tokens")
    p.add_argument("--steps", type=int, default=32, help="decode: timed steps")
    p.add_argument("--iterations", type=int, default=5, help="prefill: timed runs per round")
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    p.add_argument("--quick", action="store_true", help="a short run: 1 round, 8 decode "
                   "steps, 2 prefill iterations, 4 calibration windows")
    p.add_argument("--calib", default=os.path.join(ROOT, "examples", "austen", "heldout.txt"),
                   help="calibration text for the W8A8 artifacts (speed only)")
    p.add_argument("--qcc", default=os.path.join(ROOT, "build", "bin", "qcc"))
    p.add_argument("--qrun", default=os.path.join(ROOT, "build", "bin", "qrun"))
    p.add_argument("--work-dir", help="artifacts and peer models (default build/bench/MODEL)")
    p.add_argument("--llama-repack", choices=["auto", "on", "off"], default="auto",
                   help="llama.cpp's extra buffer types (weight repacking, AMX; its "
                   "--no-repack is off). auto: off on CPUs with AMX-INT8, where "
                   "llama-cpp-python 0.3.36's AMX matmul segfaults (ggml_backend_amx_mul_mat)")
    p.add_argument("--only", choices=["all", "speed", "memory"], default="all",
                   help="which tables to measure and print")
    p.add_argument("--memory-prompt", type=int, default=128,
                   help="memory table: prompt tokens of the generation")
    p.add_argument("--memory-new-tokens", type=int, default=64,
                   help="memory table: tokens generated after the prompt")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        job = json.loads(a.worker)
        print(json.dumps(WORKERS[job["kind"]](job)))
        return
    repack = a.llama_repack == "on" or (a.llama_repack == "auto" and not cpu_has_amx())
    os.environ["QCC_BENCH_LLAMA_REPACK"] = "1" if repack else "0"
    if a.quick:  # shorter defaults; flags given explicitly win
        for name, value in (("repeats", 1), ("steps", 8), ("iterations", 2)):
            if getattr(a, name) == p.get_default(name):
                setattr(a, name, value)
    measure.start()
    a.model = os.path.abspath(a.model)
    stem = os.path.basename(os.path.dirname(a.model)) + "-" + \
        os.path.splitext(os.path.basename(a.model))[0]
    work = a.work_dir or os.path.join(ROOT, "build", "bench", stem)
    os.makedirs(work, exist_ok=True)
    if a.heads is None:
        cfg = os.path.join(os.path.dirname(a.model), "model.json")
        if os.path.exists(cfg):
            a.heads = json.load(open(cfg)).get("n_head")

    info = ModelInfo(a.model, a.past_model, a.heads)
    if info.gpt2 and not a.heads:
        sys.exit("bench_cpu: a GPT-2-style model needs --heads (no model.json beside it)")
    notes = []
    qpkgs = compile_qrun_variants(a, info, work)
    past, ggufs, peer_notes = prepare_peers(a, info, work)
    notes += peer_notes
    if ggufs and os.environ["QCC_BENCH_LLAMA_REPACK"] == "0":
        notes.append("llama.cpp runs without its extra buffer types (use_extra_bufts = false, "
                     "its --no-repack; --llama-repack " + a.llama_repack + "): on this AMX CPU "
                     "its AMX matmul segfaults in ggml_backend_amx_mul_mat")

    # Cells, clamped to the model's positions.
    prompts = []
    for s in (int(x) for x in a.prompts.split(",")):
        if info.positions and s > info.positions:
            notes.append(f"prefill {s} clamped to the model's {info.positions} positions")
            s = info.positions
        if s not in prompts:
            prompts.append(s)
    context = a.context
    if info.positions and context + a.steps > info.positions:
        context = info.positions - a.steps
        notes.append(f"decode context {a.context} clamped to {context}: {context} + {a.steps} "
                     f"steps fill the model's {info.positions} positions")
    batches = [int(x) for x in a.batches.split(",")]
    cells = [("prefill", s) for s in prompts] + [("decode", b) for b in batches]

    rows = list(qpkgs) + ["onnxruntime"] + list(ggufs)

    def measure_cell(row, kind, n):
        if row in qpkgs:
            if kind == "prefill":
                return qrun_measure(a.qrun, qpkgs[row], ["--bench", "1", str(n), "--iterations",
                                    str(a.iterations)] + RUN_FLAGS.get(row, []), a.threads,
                                    r"tokens/s ([0-9.e+]+)")
            return qrun_measure(a.qrun, qpkgs[row], ["--bench-generate", str(n), str(context),
                                str(a.steps)] + RUN_FLAGS.get(row, []), a.threads,
                                r"decode ([0-9.e+]+) tokens/s")
        job = {"threads": a.threads, "iterations": a.iterations, "seq": n, "batch": n,
               "context": context, "steps": a.steps}
        if row == "onnxruntime":
            if kind == "decode" and not past:
                raise RuntimeError("no with-past ONNX (--past-model)")
            job.update(kind="ort_" + kind, model=a.model if kind == "prefill" else past)
        else:
            job.update(kind="llama_" + kind, gguf=ggufs[row])
        r, rss = worker(job)
        return r["tokens_per_s"], rss

    bandwidth = [stream_copy_bandwidth(a.threads)]
    start_load = f"{machine()} at the start, {a.threads} thread(s)"
    best = {}
    rss = {}
    errors = {}
    for rnd in range(a.repeats if a.only != "memory" else 0):
        for kind, n in cells:
            for row in rows:
                progress(f"round {rnd + 1}/{a.repeats}: {kind} {n}: {row}")
                if (row, kind, n) in errors:
                    continue
                try:
                    v, r = measure_cell(row, kind, n)
                except RuntimeError as e:
                    errors[(row, kind, n)] = str(e)
                    continue
                best[(row, kind, n)] = max(best.get((row, kind, n), 0.0), v)
                rss[row] = max(rss.get(row, 0), r)
    bandwidth.append(stream_copy_bandwidth(a.threads))
    bw = max(bandwidth)
    if TTY:
        print("\r\033[K", end="", file=sys.stderr, flush=True)

    # MBU at batch 1: every MatMul weight read once per step, plus the cache
    # (K and V of every layer, CONTEXT + steps/2 tokens on average).
    weight_bytes = {"qrun float32": 4, "qrun float32 as bf16": 2, "qrun W8A8": 1, "qrun W8A8 + f16 KV": 1,
                    "qrun W8A8 + int8 KV": 1,
                    "qrun W8A8 + 2:4": 1, "qrun W4A16": 0.625, "qrun W4A8": 0.625,
                    "onnxruntime": 4, "llama.cpp f32": 4,
                    "llama.cpp q8_0": 34 / 32, "llama.cpp Q4_K_M": 4.5 / 8}

    def mbu(row):
        v = best.get((row, "decode", 1))
        if not v or info.layers is None:
            return None
        step_bytes = info.matmul_params * weight_bytes[row] + \
            2 * info.layers * info.kv_dim * (context + a.steps / 2) * KV_BYTES.get(row, 4)
        return step_bytes * v / bw

    memory = measure_memory(a, info, rows, qpkgs, past, ggufs, errors) \
        if a.only != "speed" else {}

    rel = os.path.relpath(a.model, ROOT) if a.model.startswith(ROOT) else a.model
    cols = [f"prefill {s} tok/s" for s in prompts] + \
        [f"decode b{b} tok/s" for b in batches] + ["peak RSS MiB", "MBU b1"]
    print(f"## {rel}\n")
    print(f"{start_load}, {os.getloadavg()[0]:.2f} at the end; "
          f"{time.strftime('%Y-%m-%d %H:%M %Z')}; STREAM-like copy "
          f"(numpy, {a.threads} thread(s), 256 MiB, read + write) {bw / 1e9:.1f} GB/s; "
          f"decode context {context}, {a.steps} steps; best of {a.repeats} interleaved rounds")
    print()
    if a.only != "memory":
        print_speed(a, info, rows, cells, cols, prompts, batches, best, rss, bw, context, mbu,
                    notes)
    if memory:
        print_memory(a, info, rows, memory, notes)
    for (row, kind, n), e in sorted(errors.items()):
        notes.append(f"{row}, {kind} {n}: {e}")
    print("\nNotes:")
    for n in notes:
        print(f"- {n}")
    print(f"\nCommand: {' '.join([os.path.relpath(sys.executable, ROOT)] + sys.argv)}")


# The decode MBU's and the memory table's bytes per KV element, per row
# (f32 elsewhere).
KV_BYTES = {"qrun W8A8 + f16 KV": 2, "qrun W8A8 + int8 KV": 1, "llama.cpp f32": 2,
            "llama.cpp q8_0": 2,
            "llama.cpp Q4_K_M": 2}


def print_speed(a, info, rows, cells, cols, prompts, batches, best, rss, bw, context, mbu,
                notes):
    print("| engine | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))

    def cell(row, kind, n):
        v = best.get((row, kind, n))
        return f"{v:.0f}" if v and v >= 100 else (f"{v:.1f}" if v else "-")

    for row in rows:
        vals = [cell(row, k, n) for k, n in cells]
        m = mbu(row)
        vals += [f"{rss[row] / 2**20:.0f}" if row in rss else "-",
                 f"{m:.0%}" if m is not None else "-"]
        print(f"| {row} | " + " | ".join(vals) + " |")

    def ratio(x, y, kind, n):
        u, v = best.get((x, kind, n)), best.get((y, kind, n))
        return u / v if u and v else None

    pairs = [("qrun float32", "onnxruntime"), ("qrun float32", "llama.cpp f32"),
             ("qrun float32 as bf16", "onnxruntime"), ("qrun float32 as bf16", "llama.cpp f32"),
             ("qrun W8A8", "onnxruntime"), ("qrun W8A8", "llama.cpp q8_0"),
             ("qrun W8A8 + f16 KV", "llama.cpp q8_0"),
             ("qrun W8A8 + int8 KV", "llama.cpp q8_0"), ("qrun W4A16", "llama.cpp Q4_K_M"),
             ("qrun W4A8", "llama.cpp Q4_K_M"),
             ("qrun W8A8", "qrun float32")]
    print()
    print("| ratio | " + " | ".join(c.replace(" tok/s", "") for c in cols[:len(cells)]) + " |")
    print("|---|" + "---|" * len(cells))
    for x, y in pairs:
        if x in rows and y in rows:
            vals = [ratio(x, y, k, n) for k, n in cells]
            print(f"| {x} / {y} | " + " | ".join(f"{v:.2f}x" if v else "-" for v in vals) + " |")

    # Issue 16's targets, shown (not asserted).
    def target(name, value, goal):
        if value is None:
            return f"- {name}: not measured"
        verdict = "met" if value >= goal else f"missed by {(goal - value) / goal:.0%}"
        return f"- {name}: {value:.2f} (target >= {goal:g}): {verdict}"

    print("\nTargets (issue 16):")
    pre = [ratio("qrun float32", "onnxruntime", "prefill", s) for s in prompts]
    dec = [ratio("qrun float32", "onnxruntime", "decode", b) for b in batches]
    worst = lambda xs: min((x for x in xs if x), default=None)
    print(target("qrun float32 / onnxruntime, prefill (worst prompt)", worst(pre), 1.0))
    print(target("qrun float32 / onnxruntime, decode (worst batch)", worst(dec), 1.0))
    print(target("qrun W8A8 / llama.cpp q8_0, decode (worst batch)",
                 worst([ratio("qrun W8A8", "llama.cpp q8_0", "decode", b) for b in batches]), 1.0))
    print(target("qrun W8A8 / qrun float32, decode (worst batch)",
                 worst([ratio("qrun W8A8", "qrun float32", "decode", b) for b in batches]), 1.5))
    print(target("qrun float32 batch-1 decode MBU", mbu("qrun float32"), 0.6))
    print(target("qrun W8A8 batch-1 decode MBU", mbu("qrun W8A8"), 0.6))

    notes.append("MBU b1 = (MatMul weights x bytes per weight in the engine's format [f32 4, "
                 "int8 1, q8_0 34/32, qrun W4A16 and W4A8 0.625 with their scales and mins, "
                 "Q4_K_M's nominal 4.5 "
                 "bits; other scales ignored] + K and V of every layer over the average "
                 "context [f32 4, f16 2 (qrun's f16 KV, llama.cpp's cache), int8 1]) per step x steps/s / the "
                 f"copy's bandwidth; {info.matmul_params / 1e6:.1f} M MatMul weights"
                 + ("; a model this small stays in the last-level cache, so MBU against DRAM "
                    "bandwidth can pass 100%" if info.matmul_params * 4 < 64 * 2**20 else ""))
    notes.append("peak RSS: the largest ru_maxrss of the row's processes (qrun itself; "
                 "onnxruntime and llama.cpp inside a Python interpreter with numpy)")


def measure_memory(a, info, rows, qpkgs, past, ggufs, errors):
    """{row: (peak RSS, peak RSS less the process's base, file bytes)}: each
    row generates --memory-new-tokens after --memory-prompt tokens in a fresh
    process, the smallest peak of --repeats rounds."""
    P, N = a.memory_prompt, a.memory_new_tokens
    out = {}
    baseline = {}
    for rnd in range(a.repeats):
        for row in rows:
            progress(f"memory round {rnd + 1}/{a.repeats}: {row}")
            key = (row, "generate", P)
            if key in errors:
                continue
            try:
                if row in qpkgs:
                    # --bench-generate: the prompt's prefill and N decode steps
                    # through the KV cache (after the same run as a warm-up).
                    _, peak = qrun_measure(a.qrun, qpkgs[row], ["--bench-generate", "1", str(P),
                                           str(N)] + RUN_FLAGS.get(row, []), a.threads,
                                           r"decode ([0-9.e+]+) tokens/s")
                    if "qrun" not in baseline:
                        baseline["qrun"] = run_measured([a.qrun, "--version"])[1]
                    own, path = peak - baseline["qrun"], qpkgs[row]
                else:
                    engine = "onnxruntime" if row == "onnxruntime" else "llama.cpp"
                    job = {"threads": a.threads, "batch": 1, "context": P, "steps": N}
                    if engine == "onnxruntime":
                        if not past:
                            raise RuntimeError("no with-past ONNX (--past-model)")
                        job.update(kind="ort_decode", model=past)
                        path = past
                    else:
                        job.update(kind="llama_decode", gguf=ggufs[row])
                        path = ggufs[row]
                    _, peak = worker(job)
                    if engine not in baseline:
                        _, baseline[engine] = worker({"kind": "python_baseline",
                                                      "engine": engine,
                                                      "threads": a.threads})
                    own = peak - baseline[engine]
            except RuntimeError as e:
                errors[key] = str(e)
                continue
            prev = out.get(row)
            if not prev or peak < prev[0]:
                out[row] = (peak, own, os.path.getsize(path))
    if TTY:
        print("\r\033[K", end="", file=sys.stderr, flush=True)
    return out


def print_memory(a, info, rows, memory, notes):
    P, N = a.memory_prompt, a.memory_new_tokens
    mib = lambda b: f"{b / 2**20:.0f}"
    print(f"\nMemory: batch 1, generate {N} tokens after a {P}-token prompt (issue 41)\n")
    print("| engine | model file MiB | KV bytes/token | peak RSS MiB | peak RSS less the "
          "process's base MiB |")
    print("|---|---|---|---|---|")
    for row in rows:
        if row not in memory:
            continue
        peak, own, size = memory[row]
        kv = (f"{2 * info.layers * info.kv_dim * KV_BYTES.get(row, 4):,}"
              if info.layers else "-")
        print(f"| {row} | {mib(size)} | {kv} | {mib(peak)} | {mib(own)} |")
    print("\nTargets (issue 41): qrun's peak RSS <= llama.cpp's at the same precision (both "
          "less their process's base; whole peaks in brackets)")
    for ours, peer in (("qrun float32", "llama.cpp f32"), ("qrun W8A8", "llama.cpp q8_0")):
        if ours in memory and peer in memory:
            q, l = memory[ours][1], memory[peer][1]
            verdict = "met" if q <= l else f"missed by {(q - l) / l:.0%}"
            print(f"- {ours} {mib(q)} MiB vs {peer} {mib(l)} MiB: {q / l:.2f}x: {verdict} "
                  f"({mib(memory[ours][0])} vs {mib(memory[peer][0])} MiB)")
        else:
            print(f"- {ours} vs {peer}: not measured")
    notes.append(f"memory: peak RSS = ru_maxrss of the process that generates (qrun "
                 f"--bench-generate 1 {P} {N}, which runs the generation twice, the first as a "
                 "warm-up; the peers' decode workers, one run), the smallest of --repeats "
                 "rounds; qrun maps its artifact and counts what it touches, as llama.cpp "
                 "counts its mapped GGUF; a process's base is the peak of the same program "
                 "loading no model (qrun --version: its shared libraries; for the peers a "
                 "Python interpreter that imports numpy and their module)")
    notes.append("KV bytes/token: 2 (K, V) x layers x kv_heads x head_dim x bytes per element "
                 "(f32 4; qrun's f16 KV 2, int8 KV 1, its scales ignored; llama.cpp's f16 "
                 "cache 2)")


if __name__ == "__main__":
    main()
