#!/usr/bin/env python3
"""The GPU machine's ceilings and PyTorch's f16 figures for issue 12's table.

    python3 bench/gpu_reference.py [--json FILE] [--compile]

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
    of a 2048-token prompt; --compile adds torch.compile's decode.
Prints one table and writes the numbers as JSON.
"""
import argparse
import json
import statistics
import sys
import time

import torch

LAYERS, WIDTH, HEADS, KV_HEADS, FFN, VOCAB = 16, 2048, 32, 8, 5632, 32000


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


def llama(compile_decode):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=WIDTH,
                      intermediate_size=FFN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                      max_position_embeddings=4096, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.float16).eval()
    params = sum(p.numel() for p in model.parameters())
    out = {"params": params, "weight_bytes": 2 * params}
    gen = torch.Generator(device="cuda").manual_seed(1)

    @torch.no_grad()
    def decode_rate(batch, context=512, steps=32, fwd=model):
        ids = torch.randint(0, VOCAB, (batch, context), device="cuda",
                            generator=gen)
        res = fwd(input_ids=ids, use_cache=True)
        past = res.past_key_values
        tok = res.logits[:, -1:].argmax(-1)
        # Warm-up steps, then timed steps continuing the same cache.
        for _ in range(3):
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
    ids = torch.randint(0, VOCAB, (1, 2048), device="cuda", generator=gen)
    with torch.no_grad():
        ms = timed(lambda: model(input_ids=ids, use_cache=False), repeat=5)
    out["prefill_2048_tokps"] = 2048 / (ms * 1e-3)
    # Matmul FLOPs of the prefill (linears + LM head; attention's QK/PV
    # excluded, as in the MFU convention of the SmoothQuant/vLLM tables).
    linear_params = params - VOCAB * WIDTH  # the embedding is a gather
    out["prefill_2048_TFLOPs"] = 2 * linear_params * 2048 / (ms * 1e-3) / 1e12
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
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: no GPU for PyTorch")
        return 77
    props = torch.cuda.get_device_properties(0)
    res = {"device": props.name, "sms": props.multi_processor_count,
           "torch": torch.__version__,
           "date": time.strftime("%Y-%m-%d")}
    res.update(ceilings())
    res.update(llama(args.compile))
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
