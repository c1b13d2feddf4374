"""Tiny Hugging Face decoders as users export them, for the CUDA backend's tests of kernels
only some families need (test/e2e/check_gpu.py).

The zoo's fixtures (test/models/zoo) have 16-wide heads, which the CUDA attention kernels do not
take (multiples of 32). These have the zoo's graphs (transformers *ForCausalLM,
torch.onnx.export(dynamo=False), opset 17, eager attention) with 32-wide heads: 2 layers, width
128, 4 heads, vocab 3000 (examples/austen/tokenizer.model's, so qrun takes prompts with
`qcc --tokenizer examples/austen/tokenizer.model`); random weights (seed 0). Inputs input_ids
and attention_mask [batch, seq], output logits.

    .venv-real/bin/python test/models/hf-gpu/gen_hf_gpu.py [NAME ...]

writes NAME.onnx beside this file for each of:
  bloom    BloomForCausalLM: ALiBi attention (the slopes of kv_attention in the CUDA kernels).
  mixtral  MixtralForCausalLM: mixture of experts (4 experts, top-2, SwiGLU 256; 2 KV heads),
           raised to qcc.moe (the moe kernel kind).
"""
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "common"))
import hf_export  # noqa: E402 (Forward, export_legacy: the examples' exporter)
VOCAB = 3000


def bloom():
    return transformers.BloomForCausalLM(transformers.BloomConfig(
        vocab_size=VOCAB, hidden_size=128, n_layer=2, n_head=4, layer_norm_epsilon=1e-5,
        attn_implementation="eager"))


def mixtral():
    return transformers.MixtralForCausalLM(transformers.MixtralConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=512, rms_norm_eps=1e-5,
        tie_word_embeddings=True, attn_implementation="eager"))


MODELS = {"bloom": bloom, "mixtral": mixtral}


def export(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    out = os.path.join(HERE, name + ".onnx")
    hf_export.export_legacy(hf_export.Forward(model), out, patch_masks=True)
    print("wrote", out, os.path.getsize(out), "bytes")


def main():
    names = sys.argv[1:] or list(MODELS)
    for name in names:
        if name not in MODELS:
            sys.exit("gen_hf_gpu.py: unknown model %r (%s)" % (name, ", ".join(MODELS)))
        export(name)


if __name__ == "__main__":
    main()
