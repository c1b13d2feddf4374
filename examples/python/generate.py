#!/usr/bin/env python3
"""qcc from Python, end to end, on the demo model (examples/austen) or any
decoder ONNX file with its tokenizer beside it:

    .venv/bin/python examples/python/generate.py               # float32
    .venv/bin/python examples/python/generate.py --quant w8a8  # W8A8 SmoothQuant,
                                                               # calibrated on Austen

Compiles the model (with CUDA kernels, as qcc does, unless --no-cuda), opens a
session (the GPU when there is one, else the CPU), and shows generation (greedy,
sampled with a seed, streamed, with a stop string), a batch of prompts, the
perplexity of held-out text and a forward pass on token ids. Needs the package:
scripts/python_package.sh (or `pip install .`) installs it into .venv.
"""
import argparse
import pathlib
import sys
import tempfile
import time

import numpy as np

import qcc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=ROOT / "examples/austen/model.onnx", type=pathlib.Path)
    p.add_argument("--quant", default="none", choices=["none", "w8a8", "w4a16"])
    p.add_argument("--no-cuda", action="store_true", help="no GPU kernels in the artifact")
    p.add_argument("--out", type=pathlib.Path, help="artifact path (default: a temporary folder)")
    p.add_argument("--prompt", default="It is a truth universally acknowledged, that")
    p.add_argument("--max-new-tokens", type=int, default=40)
    args = p.parse_args()

    out = args.out or pathlib.Path(tempfile.mkdtemp(prefix="qcc-")) / "model.qpkg"
    options = {}
    if args.quant != "none":
        # Calibration text: the Austen novels' training split (not held out).
        calib = out.parent / "calib.txt"
        calib.write_text("\n\n".join(
            t[: int(len(t) * 0.9)] for t in
            (f.read_text(encoding="utf-8") for f in sorted((ROOT / "data/austen").glob("*.txt")))),
            encoding="utf-8")
        options = dict(calib=calib, calib_samples=16)
    t0 = time.perf_counter()
    qcc.compile(args.model, out, quant=args.quant, cuda=not args.no_cuda, **options)
    print(f"compiled {args.model.name} ({args.quant}) to {out} "
          f"({out.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")

    session = qcc.Session(out)
    print(f"session: {session.backend} ({session.backend_line})")

    greedy = session.generate(args.prompt, args.max_new_tokens)
    print(f"\ngreedy:   {args.prompt}{greedy.text!r}  [{greedy.finish_reason}, "
          f"{len(greedy.token_ids)} tokens]")
    sampled = session.generate(args.prompt, args.max_new_tokens, temperature=0.5,
                               top_k=40, top_p=0.9, repeat_penalty=1.2, seed=2)
    print(f"sampled:  {args.prompt}{sampled.text!r}")
    stop = session.generate(args.prompt, args.max_new_tokens, stop=[",", "."])
    print(f"stop=,.:  {args.prompt}{stop.text!r}  [{stop.finish_reason}]")
    print("streamed: " + args.prompt, end="", flush=True)
    for piece in session.stream(args.prompt, args.max_new_tokens, temperature=0.5,
                                top_k=40, seed=2):
        print(piece, end="", flush=True)
    print()
    batch = session.generate(["Emma was", "Mr. Darcy said", "The weather"], 12)
    for g in batch:
        print(f"batch:    {g.text!r}")

    heldout = ROOT / "examples/austen/heldout.txt"
    if args.model == ROOT / "examples/austen/model.onnx":
        r = session.perplexity(heldout.read_text(encoding="utf-8")[:20000])
        print(f"\nperplexity {r['perplexity']:.2f} over {r['predicted']} predicted tokens "
              f"(the first 20,000 characters of {heldout.relative_to(ROOT)})")

    ids = np.array([session.tokenize(args.prompt)], dtype=np.int64)
    logits = session.run({"input_ids": ids})["logits"]
    print(f"run: logits {logits.dtype}{list(logits.shape)}; next token "
          f"{session.detokenize([int(logits[0, -1].argmax())])!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
