#!/usr/bin/env python3
"""bench/gpu_reference.py's LeanLlama against transformers' LlamaForCausalLM, on the CPU.

A tiny LLaMA (2 layers, width 64, 4 query / 2 KV heads, SwiGLU 96, vocab 101, float32) with
transformers' random weights, scaled up so that attention is far from uniform (a wrong mask,
RoPE or GQA head mapping changes the logits by O(1)), and random RMSNorm gains. Checks:
  - the cache-free causal forward (the prefill timing path) on a batch of 2 x 13 ids;
  - the cached path as the decode benchmark drives it: a 9-token prompt into a static cache
    of 24 slots, then 4 one-token steps, each against transformers' full forward over the
    sequence so far (last position).
Tolerance: max |lean - transformers| <= 1e-4 * max |logits| (float32 with unit roundoff 6e-8;
the two differ only in summation order: fused matmuls, SDPA vs eager softmax, over K <= 96 and
2 layers, which measured ~1e-6 relative; a real error is O(1)).

    .venv-real/bin/python test/e2e/check_lean_llama.py
Exit 77 (skip) when torch or transformers is missing.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

try:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    print("SKIP: %s" % e)
    sys.exit(77)

from gpu_reference import LeanLlama  # noqa: E402

REL_TOL = 1e-4  # see the docstring


def check(name, got, want):
    err = (got - want).abs().max().item()
    scale = want.abs().max().item()
    ok = err <= REL_TOL * scale
    print("%-28s max |diff| %.3g, max |logit| %.3g: %s" % (name, err, scale, "ok" if ok else "FAIL"))
    return ok


def main():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, initializer_range=0.15,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg).float().eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    lean = LeanLlama({k: v.detach() for k, v in model.state_dict().items()},
                     cfg.num_attention_heads, cfg.num_key_value_heads, eps=cfg.rms_norm_eps,
                     theta=10000.0, max_positions=64)
    ok = True
    with torch.no_grad():
        ids = torch.randint(0, cfg.vocab_size, (2, 13))
        want = model(input_ids=ids, use_cache=False).logits
        ok &= check("causal forward, 2 x 13", lean.forward(ids, torch.arange(13)), want)

        prompt, steps = 9, 4
        seq = torch.randint(0, cfg.vocab_size, (2, prompt + steps))
        cache = lean.new_cache(2, 24)
        got = lean.forward(seq[:, :prompt], torch.arange(prompt), cache)
        want = model(input_ids=seq[:, :prompt], use_cache=False).logits
        ok &= check("cached prompt, 2 x %d" % prompt, got, want)
        for i in range(prompt, prompt + steps):
            got = lean.forward(seq[:, i:i + 1], torch.tensor([i]), cache)[:, -1]
            want = model(input_ids=seq[:, :i + 1], use_cache=False).logits[:, -1]
            ok &= check("decode step at position %d" % i, got, want)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
