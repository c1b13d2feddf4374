"""Helpers shared by the real-model examples' convert.py scripts (examples/smollm2, examples/gemma3).

Import from a convert.py with

    sys.path.insert(0, os.path.join(REPO, "examples", "common"))
    import hf_export

Everything here is model-independent: logging, atomic file replacement, the cache-less logits
wrapper, the legacy (TorchScript) ONNX export, greedy continuations, windowed perplexity and the
onnxruntime checks written into reference.json.
"""
import contextlib
import math
import json
import os
import resource
import time

import numpy as np
import torch

T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def atomic_replace(tmp, final):
    os.replace(tmp, final)


class Forward(torch.nn.Module):
    """input_ids, attention_mask -> logits, no KV cache."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


def write_json(path, obj):
    """Writes obj as indented UTF-8 JSON to path (through a temporary file)."""
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    atomic_replace(path + ".tmp", path)


@contextlib.contextmanager
def traceable_masks():
    """transformers >= 4.53 builds (sliding-window) attention masks with torch.vmap, which the
    TorchScript exporter cannot trace; swap in optimum-onnx's vmap-free versions (the patch
    optimum applies for its own exports, and test/models/zoo/gen_zoo.py for the zoo)."""
    import transformers.masking_utils as mu
    from optimum.exporters.onnx import model_patcher as mp

    reg = mu.ALL_MASK_ATTENTION_FUNCTIONS
    saved = (reg["sdpa"], reg["eager"], mu.find_packed_sequence_indices)
    reg.register("sdpa", mp.sdpa_mask_without_vmap)
    reg.register("eager", mp.eager_mask_without_vmap)
    mu.find_packed_sequence_indices = mp.find_packed_sequence_indices_patched
    try:
        yield
    finally:
        reg.register("sdpa", saved[0])
        reg.register("eager", saved[1])
        mu.find_packed_sequence_indices = saved[2]


def export_legacy(wrapper, path, patch_masks=False):
    """torch.onnx.export(dynamo=False, opset 17), constant-folded, batch and seq dynamic."""
    tmp = path + ".tmp"
    ids = torch.randint(0, 1000, (2, 16), dtype=torch.long)
    mask = torch.ones_like(ids)
    ctx = traceable_masks() if patch_masks else contextlib.nullcontext()
    with torch.no_grad(), ctx:
        torch.onnx.export(
            wrapper, (ids, mask), tmp,
            dynamo=False, opset_version=17, do_constant_folding=True,
            input_names=["input_ids", "attention_mask"], output_names=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                          "attention_mask": {0: "batch", 1: "seq"},
                          "logits": {0: "batch", 1: "seq"}},
        )
    atomic_replace(tmp, path)


def ort_session(path, threads=2):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


@torch.no_grad()
def greedy(model, ids, n, pad_id):
    """Greedy with transformers' generate (KV cache), EOS not stopping it; then one no-cache
    forward over prompt + continuation must give the same argmax at every generated position
    (which is what a cache-less greedy loop would pick). Returns (new ids, agree)."""
    x = torch.tensor([ids], dtype=torch.long)
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                         eos_token_id=None, pad_token_id=pad_id)[0].tolist()
    full = torch.tensor([out[:-1]], dtype=torch.long)
    logits = model(input_ids=full, attention_mask=torch.ones_like(full), use_cache=False).logits
    agree = logits[0, len(ids) - 1 :].argmax(-1).tolist() == out[len(ids):]
    return out[len(ids):], agree


@torch.no_grad()
def windowed_perplexity(model, held, W, prefix=(), batch=8):
    """Non-overlapping windows held[W k : W k + W]; each runs from an empty context (after the
    optional `prefix` ids, e.g. BOS, which are not scored); every token after the window's first
    is scored. Returns (total natural-log CE, scored tokens, windows)."""
    import torch.nn.functional as F

    P = len(prefix)
    pre = torch.tensor(list(prefix), dtype=torch.long)
    total, count = 0.0, 0
    starts = list(range(0, held.numel() - 1, W))
    for i in range(0, len(starts), batch):
        ws = [held[s : s + W] for s in starts[i : i + batch]]
        for L in sorted({w.numel() for w in ws}):
            b = torch.stack([torch.cat([pre, w]) for w in ws if w.numel() == L])
            logits = model(input_ids=b, attention_mask=torch.ones_like(b), use_cache=False).logits
            y = b[:, P + 1 :]
            total += F.cross_entropy(logits[:, P:-1].reshape(-1, logits.size(-1)), y.reshape(-1),
                                     reduction="sum").item()
            count += y.numel()
    return total, count, len(starts)


def op_counts(path):
    import onnx

    g = onnx.load(path, load_external_data=False).graph
    ops = {}
    for n in g.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return dict(sorted(ops.items()))


def ort_check(path, wrapper, ids, mask, continuations, threads=2, speed_ids=None):
    """onnxruntime vs torch logits on (ids, mask); whether ORT reproduces each greedy continuation
    (cache-less argmax); optionally the best-of-5 time of one forward over speed_ids [1, T]."""
    import onnx

    onnx.checker.check_model(path)
    with torch.no_grad():
        ref = wrapper(ids, mask).numpy()
    sess = ort_session(path, threads)
    got = sess.run(["logits"], {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
    valid = mask.numpy().astype(bool)
    greedy_ok = True
    for c in continuations:
        seq = np.array([c["prompt_ids"] + c["new_ids"][:-1]], dtype=np.int64)
        lg = sess.run(["logits"], {"input_ids": seq, "attention_mask": np.ones_like(seq)})[0]
        greedy_ok &= lg[0, len(c["prompt_ids"]) - 1 :].argmax(-1).tolist() == c["new_ids"]
    out = {
        "batch": list(ids.shape),
        "max_abs_logits_diff_all_positions": float(np.abs(got - ref).max()),
        "max_abs_logits_diff_unmasked_positions": float(np.abs(got - ref)[valid].max()),
        "argmax_agree_unmasked": bool((got.argmax(-1) == ref.argmax(-1))[valid].all()),
        "reproduces_greedy_continuations": bool(greedy_ok),
    }
    if speed_ids is not None:
        x = speed_ids.numpy()
        feed = {"input_ids": x, "attention_mask": np.ones_like(x)}
        sess.run(["logits"], feed)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            sess.run(["logits"], feed)
            times.append(time.perf_counter() - t)
        best = min(times)
        T = x.shape[1]
        out.update({
            f"ort_forward_1x{T}_seconds_best_of_5": round(best, 4),
            f"ort_forward_1x{T}_seconds_median_of_5": round(sorted(times)[2], 4),
            f"ort_tokens_per_second_1x{T}": round(T / best, 1),
            "ort_threads": threads,
            "load_average_1min_at_timing": round(os.getloadavg()[0], 2),
        })
    return out
