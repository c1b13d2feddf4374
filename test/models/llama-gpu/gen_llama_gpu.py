"""A tiny LLaMA as Hugging Face users export it, for the CUDA backend's tests.

The zoo's LLaMA-family fixtures (test/models/zoo) have 16-wide heads, which the CUDA attention
kernels do not take (multiples of 32): this one has the same graph as a real HF LLaMA export
(transformers LlamaForCausalLM, torch.onnx.export(dynamo=False), opset 17: rotary cos/sin
computed in the graph from the positions, shape arithmetic around the attention) with 32-wide
heads, so that its prefill and decode run on the GPU: 2 layers, width 128, 4 query / 2 KV heads,
SwiGLU 256, vocab 3000 (examples/austen/tokenizer.model's, so qrun can take prompts with
`qcc --tokenizer examples/austen/tokenizer.model`), tied embeddings; random weights (seed 0).

    .venv-real/bin/python test/models/llama-gpu/gen_llama_gpu.py

writes model.onnx beside this file.
"""
import os

import torch
from transformers import LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))


class Forward(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).logits


def main():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=3000, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=512, rms_norm_eps=1e-5, tie_word_embeddings=True,
                      attn_implementation="eager")
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 3000, (2, 16), dtype=torch.long)
    out = os.path.join(HERE, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(Forward(model), (ids, torch.ones_like(ids)), out, dynamo=False,
                          opset_version=17, do_constant_folding=True,
                          input_names=["input_ids", "attention_mask"], output_names=["logits"],
                          dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                                        "attention_mask": {0: "batch", 1: "seq"},
                                        "logits": {0: "batch", 1: "seq"}})
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
