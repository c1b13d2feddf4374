#!/usr/bin/env python3
"""The GPU machine's ceilings and PyTorch's f16 figures for issue 12's table.

    python3 bench/gpu_reference.py [--json FILE] [--compile]
    python3 bench/gpu_reference.py --shape llama32-1b --lean-graph-only [--json FILE]

Runs on the device tool's machine (PyTorch and transformers are there).
Measures, with CUDA events (median of repeats, after warm-up, on random
data — never zeros):
  - device-to-device copy bandwidth of a 2 GiB buffer, counting bytes read
    plus bytes written (the MBU denominator);
  - dense f16 (torch.matmul) and int8 (torch._int_mm) matrix rates at
    8192^3 (the MFU denominators);
  - a LLaMA-style ~1B model (16 layers, width 2048, 32/8 GQA heads, SwiGLU
    5632, vocab 32000) in f16 through transformers, not compiled: decode
    tokens/s at batch 1, 8, 32 after a 512-token prompt, and prefill tokens/s
    of a 2048-token prompt; --compile adds torch.compile's decode;
  - the same model written lean in plain PyTorch (LeanLlama below: fused QKV
    and gate/up matmuls, RoPE, SDPA, a static preallocated KV cache, no
    transformers), f16, with the same weights: decode tokens/s at batch 1, 8,
    32 with 512 tokens of context, eager and with the decode step captured in
    one CUDA graph (torch.cuda.CUDAGraph), and prefill of 2048 tokens.
--shape llama32-1b takes Llama-3.2-1B's shape instead (FFN 8192, vocab 128256,
tied embeddings, rope theta 500000: bench/llama_1b.py --shape llama32-1b);
--lean-graph-only measures only the lean CUDA-graph decode (and the ceilings).
Prints one table and writes the numbers as JSON. test/e2e/check_lean_llama.py
checks LeanLlama against transformers' LlamaForCausalLM on the CPU.
"""
import argparse
import json
import statistics
import sys
import time

import torch

LAYERS, WIDTH, HEADS, KV_HEADS, FFN, VOCAB = 16, 2048, 32, 8, 5632, 32000
ROPE_THETA, RMS_EPS, TIED = 10000.0, 1e-5, False
# --shape: bench/llama_1b.py's shapes.
SHAPES = {"issue12": dict(FFN=5632, VOCAB=32000, ROPE_THETA=10000.0, TIED=False),
          "llama32-1b": dict(FFN=8192, VOCAB=128256, ROPE_THETA=500000.0, TIED=True)}
CONTEXT, DECODE_STEPS, WARMUP_STEPS, PREFILL = 512, 32, 3, 2048


def timed(fn, warmup=3, repeat=10):
    """Median milliseconds of fn() with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def ceilings():
    n = 1 << 30  # 2 GiB of f16 elements
    src = torch.randn(n, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), repeat=20)
    copy_gbs = 2 * src.numel() * 2 / (ms * 1e-3) / 1e9
    del src, dst
    m = 8192
    a = torch.randn(m, m, dtype=torch.float16, device="cuda")
    b = torch.randn(m, m, dtype=torch.float16, device="cuda")
    ms = timed(lambda: torch.matmul(a, b))
    f16_tflops = 2 * m**3 / (ms * 1e-3) / 1e12
    ai = torch.randint(-127, 128, (m, m), dtype=torch.int8, device="cuda")
    bi = torch.randint(-127, 128, (m, m), dtype=torch.int8, device="cuda")
    try:
        ms = timed(lambda: torch._int_mm(ai, bi))
        i8_tops = 2 * m**3 / (ms * 1e-3) / 1e12
    except RuntimeError as e:  # _int_mm's shape rules differ by version
        print("int8 matmul: " + str(e).splitlines()[0], file=sys.stderr)
        i8_tops = float("nan")
    return {"copy_GBps": copy_gbs, "f16_TFLOPs": f16_tflops,
            "i8_TOPs": i8_tops}


class LeanLlama:
    """A LLaMA decoder in plain PyTorch, inference only: what a careful
    hand-written eager implementation does, for the reference column.

    Weights come from a transformers LlamaForCausalLM's state_dict (so the
    two can be compared); Q/K/V and gate/up are concatenated into one matmul
    each. RMSNorm in float32 as transformers does; RoPE from position ids
    (rotate-half convention, theta ROPE_THETA); attention by torch SDPA.

    The KV cache is static, [layers, batch, kv_heads, max_len, head_dim] for
    K and for V, preallocated; forward() with a cache writes the new
    positions (shared by every row, as in these benchmarks) and attends over
    the whole buffer with a mask `slot <= position`, so a decode step has
    fixed shapes and no host-side values: it can be captured in a CUDA graph.
    GQA without copying K/V: each KV head's n_rep query heads are folded
    into the query length ([B, kv_heads, n_rep * T, D] against
    [B, kv_heads, S, D]). Without a cache (prefill timing), SDPA's causal
    path with enable_gqa (flash attention on the GPU), else K/V expanded.
    """

    def __init__(self, state, heads, kv_heads, eps=RMS_EPS, theta=ROPE_THETA,
                 max_positions=8192):
        def w(name):
            return state[name]
        self.heads, self.kv_heads = heads, kv_heads
        self.eps = eps
        self.embed = w("model.embed_tokens.weight")
        self.width = self.embed.shape[1]
        self.head_dim = self.width // heads
        self.layers = []
        i = 0
        while "model.layers.%d.input_layernorm.weight" % i in state:
            pre = "model.layers.%d." % i
            self.layers.append({
                "ln1": w(pre + "input_layernorm.weight"),
                "qkv": torch.cat([w(pre + "self_attn.%s_proj.weight" % n)
                                  for n in ("q", "k", "v")]),
                "o": w(pre + "self_attn.o_proj.weight"),
                "ln2": w(pre + "post_attention_layernorm.weight"),
                "gate_up": torch.cat([w(pre + "mlp.gate_proj.weight"),
                                      w(pre + "mlp.up_proj.weight")]),
                "down": w(pre + "mlp.down_proj.weight")})
            i += 1
        self.norm = w("model.norm.weight")
        self.lm_head = w("lm_head.weight")
        dev, dt = self.embed.device, self.embed.dtype
        inv = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2, device=dev,
                                            dtype=torch.float32)
                               / self.head_dim))
        ang = torch.arange(max_positions, device=dev,
                           dtype=torch.float32)[:, None] * inv[None, :]
        ang = torch.cat([ang, ang], dim=-1)
        self.cos, self.sin = ang.cos().to(dt), ang.sin().to(dt)

    def new_cache(self, batch, max_len):
        shape = (len(self.layers), batch, self.kv_heads, max_len, self.head_dim)
        return (torch.zeros(shape, dtype=self.embed.dtype, device=self.embed.device),
                torch.zeros(shape, dtype=self.embed.dtype, device=self.embed.device))

    def _rms(self, x, g):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return g * xf.to(x.dtype)

    @staticmethod
    def _rope(x, cos, sin):
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin

    def forward(self, ids, positions, cache=None):
        """ids [B, T] int64; positions [T] int64 (the same for every row).
        With `cache` (new_cache's pair), writes K/V at `positions` and
        attends to every slot <= its position; without, causal over ids.
        Returns logits [B, T, vocab] in the weights' dtype."""
        F = torch.nn.functional
        B, T = ids.shape
        H, KV, D = self.heads, self.kv_heads, self.head_dim
        rep = H // KV
        x = self.embed[ids]
        cos = self.cos[positions][None, None]  # [1, 1, T, D]
        sin = self.sin[positions][None, None]
        if cache is not None:
            slots = cache[0].shape[3]
            mask = (torch.arange(slots, device=ids.device)[None, :]
                    <= positions[:, None])          # [T, S]
            mask = mask.repeat(rep, 1)              # [rep * T, S]
        for li, L in enumerate(self.layers):
            h = self._rms(x, L["ln1"])
            qkv = F.linear(h, L["qkv"])
            q, k, v = qkv.split([H * D, KV * D, KV * D], dim=-1)
            q = self._rope(q.view(B, T, H, D).transpose(1, 2), cos, sin)
            k = self._rope(k.view(B, T, KV, D).transpose(1, 2), cos, sin)
            v = v.view(B, T, KV, D).transpose(1, 2)
            if cache is not None:
                kc, vc = cache[0][li], cache[1][li]
                kc.index_copy_(2, positions, k)
                vc.index_copy_(2, positions, v)
                a = F.scaled_dot_product_attention(
                    q.reshape(B, KV, rep * T, D), kc, vc, attn_mask=mask)
                a = a.reshape(B, KV, rep, T, D).reshape(B, H, T, D)
            else:
                try:
                    a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                       enable_gqa=True)
                except TypeError:  # a PyTorch before enable_gqa (2.5)
                    k = k[:, :, None].expand(B, KV, rep, T, D).reshape(B, H, T, D)
                    v = v[:, :, None].expand(B, KV, rep, T, D).reshape(B, H, T, D)
                    a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + F.linear(a.transpose(1, 2).reshape(B, T, H * D), L["o"])
            h = self._rms(x, L["ln2"])
            g, u = F.linear(h, L["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, L["down"])
        return F.linear(self._rms(x, self.norm), self.lm_head)


def lean_llama(model, gen, graph_only=False):
    """LeanLlama's f16 figures on the GPU with `model`'s weights: decode
    eager and as one CUDA graph per step, prefill of PREFILL tokens (with
    `graph_only`, the CUDA-graph decode alone)."""
    lean = LeanLlama({k: v.detach() for k, v in model.state_dict().items()},
                     HEADS, KV_HEADS, eps=model.config.rms_norm_eps,
                     theta=ROPE_THETA)
    out = {}
    # The static cache holds the prompt, the warm-up (twice with a graph:
    # before the capture and after) and the timed steps, rounded up to 64
    # slots (SDPA's masked kernels want aligned mask rows): each step attends
    # over all of them (masked), ~9% beyond the ~530 live ones here.
    max_len = (CONTEXT + 2 * WARMUP_STEPS + DECODE_STEPS + 63) // 64 * 64

    @torch.no_grad()
    def decode(batch, graph):
        cache = lean.new_cache(batch, max_len)
        prompt = torch.randint(0, VOCAB, (batch, CONTEXT), device="cuda",
                               generator=gen)
        logits = lean.forward(prompt, torch.arange(CONTEXT, device="cuda"), cache)
        tok = logits[:, -1:].argmax(-1)         # static input of the step
        pos = torch.tensor([CONTEXT], device="cuda")

        def step():
            nxt = lean.forward(tok, pos, cache)[:, -1:].argmax(-1)
            tok.copy_(nxt)
            pos.add_(1)
        run = step
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up outside the capture
                for _ in range(WARMUP_STEPS):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                step()
            run = g.replay
        for _ in range(WARMUP_STEPS):
            run()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(DECODE_STEPS):
            run()
        end.record()
        end.synchronize()
        step_ms = start.elapsed_time(end) / DECODE_STEPS
        return batch / (step_ms * 1e-3), step_ms

    for graph, name in ((False, "lean"), (True, "lean_graph")):
        if graph_only and not graph:
            continue
        for batch in (1, 8, 32):
            tps, ms = decode(batch, graph)
            out["%s_decode_b%d_tokps" % (name, batch)] = tps
            out["%s_decode_b%d_step_ms" % (name, batch)] = ms
    if graph_only:
        return out
    ids = torch.randint(0, VOCAB, (1, PREFILL), device="cuda", generator=gen)
    pos = torch.arange(PREFILL, device="cuda")
    with torch.no_grad():
        ms = timed(lambda: lean.forward(ids, pos), repeat=5)
    out["lean_prefill_2048_tokps"] = PREFILL / (ms * 1e-3)
    return out


def llama(compile_decode, lean_graph_only=False):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=WIDTH,
                      intermediate_size=FFN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                      max_position_embeddings=4096, tie_word_embeddings=TIED,
                      rms_norm_eps=RMS_EPS,
                      rope_parameters={"rope_type": "default",
                                       "rope_theta": ROPE_THETA})
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.float16).eval()
    params = sum(p.numel() for p in model.parameters())
    out = {"params": params, "weight_bytes": 2 * params}
    gen = torch.Generator(device="cuda").manual_seed(1)
    if lean_graph_only:
        out.update(lean_llama(model, gen, graph_only=True))
        return out

    @torch.no_grad()
    def decode_rate(batch, context=CONTEXT, steps=DECODE_STEPS, fwd=model):
        ids = torch.randint(0, VOCAB, (batch, context), device="cuda",
                            generator=gen)
        res = fwd(input_ids=ids, use_cache=True)
        past = res.past_key_values
        tok = res.logits[:, -1:].argmax(-1)
        # Warm-up steps, then timed steps continuing the same cache.
        for _ in range(WARMUP_STEPS):
            res = fwd(input_ids=tok, past_key_values=past, use_cache=True)
            past, tok = res.past_key_values, res.logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            res = fwd(input_ids=tok, past_key_values=past, use_cache=True)
            past, tok = res.past_key_values, res.logits[:, -1:].argmax(-1)
        end.record()
        end.synchronize()
        step_ms = start.elapsed_time(end) / steps
        return batch / (step_ms * 1e-3), step_ms

    for batch in (1, 8, 32):
        tps, ms = decode_rate(batch)
        out["decode_b%d_tokps" % batch] = tps
        out["decode_b%d_step_ms" % batch] = ms
    ids = torch.randint(0, VOCAB, (1, PREFILL), device="cuda", generator=gen)
    with torch.no_grad():
        ms = timed(lambda: model(input_ids=ids, use_cache=False), repeat=5)
    out["prefill_2048_tokps"] = PREFILL / (ms * 1e-3)
    # Matmul FLOPs of the prefill (linears + LM head; attention's QK/PV
    # excluded, as in the MFU convention of the SmoothQuant/vLLM tables).
    linear_params = params - VOCAB * WIDTH  # the embedding is a gather
    out["prefill_2048_TFLOPs"] = 2 * linear_params * PREFILL / (ms * 1e-3) / 1e12
    try:
        out.update(lean_llama(model, gen))
    except Exception as e:  # noqa: BLE001 - report, keep the HF figures
        out["lean_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300])
        print("lean PyTorch LLaMA failed: " + out["lean_error"], file=sys.stderr)
    if compile_decode:
        t0 = time.time()
        compiled = torch.compile(model, mode="reduce-overhead")
        try:
            tps, ms = decode_rate(1, fwd=compiled)
            out["compile_decode_b1_tokps"] = tps
            out["compile_seconds"] = time.time() - t0
        except Exception as e:  # noqa: BLE001 - report, keep the table
            out["compile_error"] = str(e).splitlines()[0][:200]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="issue12")
    ap.add_argument("--lean-graph-only", action="store_true")
    args = ap.parse_args()
    globals().update(SHAPES[args.shape])
    if not torch.cuda.is_available():
        print("SKIP: no GPU for PyTorch")
        return 77
    props = torch.cuda.get_device_properties(0)
    res = {"device": props.name, "sms": props.multi_processor_count,
           "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d"),
           # The model's shape and the decode counts, for bench/gpu_bench.py.
           "layers": LAYERS, "width": WIDTH, "heads": HEADS, "kv_heads": KV_HEADS,
           "head_dim": WIDTH // HEADS, "ffn": FFN, "vocab": VOCAB,
           "shape": args.shape, "tied": TIED,
           "context": CONTEXT, "decode_steps": DECODE_STEPS,
           "warmup_steps": WARMUP_STEPS, "prefill": PREFILL}
    res.update(ceilings())
    res.update(llama(args.compile, args.lean_graph_only))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    print("| %s | %s |" % ("quantity", "value"))
    print("|---|---|")
    for k, v in res.items():
        print("| %s | %s |" % (k, ("%.4g" % v) if isinstance(v, float) else v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
