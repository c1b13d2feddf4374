#!/usr/bin/env python3
"""Writes this folder's LoRA adapter for the demo model (examples/austen):
rank 2 on every block's attn.c_attn and mlp.c_fc, in PEFT's on-disk format
(adapter_config.json + adapter_model.safetensors, tensors named
base_model.model.<module>.lora_A/B.weight). Random factors (seed 0), large
enough to change the greedy text: the lit tests check the plumbing (flags,
placement on the CUDA backend, refusals); test/e2e/check_lora.py checks the
numbers against PEFT itself. Needs numpy only.

    .venv/bin/python test/runtime/Inputs/austen-lora/make_adapter.py
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
LAYERS, HIDDEN, RANK = 4, 256, 2
SHAPES = {"attn.c_attn": (HIDDEN, 3 * HIDDEN), "mlp.c_fc": (HIDDEN, 4 * HIDDEN)}


def main():
    rng = np.random.default_rng(0)
    tensors = {}
    for layer in range(LAYERS):
        for name, (fan_in, fan_out) in SHAPES.items():
            key = f"base_model.model.h.{layer}.{name}"
            tensors[key + ".lora_A.weight"] = rng.standard_normal((RANK, fan_in)) / fan_in ** 0.5
            tensors[key + ".lora_B.weight"] = rng.standard_normal((fan_out, RANK))
    header, blobs, offset = {}, [], 0
    for key in sorted(tensors):
        data = tensors[key].astype("<f4").tobytes()
        header[key] = {"dtype": "F32", "shape": list(tensors[key].shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(HERE, "adapter_model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config = {"peft_type": "LORA", "r": RANK, "lora_alpha": 4, "use_rslora": False,
              "bias": "none", "modules_to_save": None,
              "target_modules": sorted(SHAPES), "task_type": "CAUSAL_LM"}
    with open(os.path.join(HERE, "adapter_config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
