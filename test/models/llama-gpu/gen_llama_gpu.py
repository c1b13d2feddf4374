"""A tiny LLaMA as Hugging Face users export it, for the CUDA backend's tests.

The zoo's LLaMA-family fixtures (test/models/zoo) have 16-wide heads, which the CUDA attention
kernels do not take (multiples of 32): this one has the same graph as a real HF LLaMA export
(transformers LlamaForCausalLM, torch.onnx.export(dynamo=False), opset 17: rotary cos/sin
computed in the graph from the positions, shape arithmetic around the attention) with 32-wide
heads, so that its prefill and decode run on the GPU: 2 layers, width 128, 4 query / 2 KV heads,
SwiGLU 256, vocab 3000 (examples/austen/tokenizer.model's, so qrun can take prompts with
`qcc --tokenizer examples/austen/tokenizer.model`), tied embeddings; random weights (seed 0).

    .venv-real/bin/python test/models/llama-gpu/gen_llama_gpu.py

writes model.onnx beside this file. The committed model.onnx was written at 89be5cd (2026-11-27) by
the earlier form of this script (its own wrapper, no mask patch) with the transformers of that
time; transformers 4.57 (.venv-real today) builds masks with torch.vmap, so the script now
patches them (hf_export.traceable_masks) and writes a graph of another size (4,354,437 against
4,347,959 bytes). The committed file is kept: test/models/llama-gpu/stats.json and the GPU runs
of docs/GPU_NOTES.md are about it.
"""
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "common"))
import hf_export  # noqa: E402 (Forward, export_legacy: the examples' exporter)


def main():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=3000, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=True,
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg).eval()
    out = os.path.join(HERE, "model.onnx")
    hf_export.export_legacy(hf_export.Forward(model), out, patch_masks=True)
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
