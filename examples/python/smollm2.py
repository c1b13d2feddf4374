#!/usr/bin/env python3
"""The real pretrained SmolLM2-135M-Instruct through qcc from Python, end to end
(examples/smollm2/README.md makes model.onnx and tokenizer.json; the shell
version is examples/smollm2/run.sh):

    .venv/bin/python examples/python/smollm2.py [--quant w8a8] [--no-cuda]

Compiles the model (float32, or W8A8 SmoothQuant O1 at alpha 0.85 calibrated
on the Austen training split: 64 windows of 256 tokens, as run.sh), checks the
greedy continuations of reference.json's three prompts (two plain, one chat)
against torch's token ids, chats with a stop string, and prints held-out
perplexity on reference.json's protocol (the first 8,192 tokens of
examples/austen/heldout.txt, windows of 256) beside torch's.
"""
import argparse
import json
import pathlib
import sys
import time

import qcc

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "examples/smollm2"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quant", default="none", choices=["none", "w8a8"])
    p.add_argument("--no-cuda", action="store_true", help="no GPU kernels in the artifact")
    p.add_argument("--out", type=pathlib.Path, default=ROOT / "build/smollm2-python")
    args = p.parse_args()
    model = HERE / "model.onnx"
    if not model.is_file() or not (HERE / "tokenizer.json").is_file():
        print(f"{model} or tokenizer.json missing: run examples/smollm2/convert.py first "
              "(examples/smollm2/README.md)", file=sys.stderr)
        return 1
    reference = json.loads((HERE / "reference.json").read_text(encoding="utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)

    options = {}
    if args.quant == "w8a8":
        train = args.out / "train.txt"
        train.write_text("\n\n".join(
            t[: int(len(t) * 0.9)] for t in
            (f.read_text(encoding="utf-8") for f in sorted((ROOT / "data/austen").glob("*.txt")))),
            encoding="utf-8")
        options = dict(calib=train, calib_samples=64, calib_seq_len=256,
                       smoothquant_alpha=0.85, calib_stats=args.out / "calib.json")
    artifact = args.out / f"{args.quant}.qpkg"
    t0 = time.perf_counter()
    qcc.compile(model, artifact, quant=args.quant, cuda=not args.no_cuda, quiet=False,
                **options)
    print(f"compiled {model.relative_to(ROOT)} ({args.quant}) in {time.perf_counter() - t0:.0f} s: "
          f"{artifact.stat().st_size / 1e6:.0f} MB")
    session = qcc.Session(artifact)
    print(f"session: {session.backend} ({session.backend_line})")

    # Greedy continuations against torch's ids (reference.json), up to EOS.
    eos = session.tokenize("<|im_end|>", add_special_tokens=False)
    for c in reference["greedy"]["continuations"]:
        want = c["new_ids"]
        if eos and eos[0] in want:
            want = want[: want.index(eos[0])]
        assert session.tokenize(c["prompt"]) == c["prompt_ids"], c["name"]
        g = session.generate(c["prompt"], len(c["new_ids"]))
        same = sum(1 for _ in zip(g.token_ids, want) if _[0] == _[1])
        agree = next((i for i, (a, b) in enumerate(zip(g.token_ids, want)) if a != b),
                     min(len(g.token_ids), len(want)))
        print(f"{c['name']}: {g.text!r}\n  first {agree} of torch's {len(want)} greedy tokens "
              f"agree ({'all' if g.token_ids == want else f'{same} in place'})")

    # A chat turn with the ChatML template, stopped at the end of the turn.
    chat = ("<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n")
    g = session.generate(chat, 48, stop=["<|im_start|>", "\n\n"])
    print(f"chat: {g.text!r} [{g.finish_reason}]")

    heldout = (ROOT / "examples/austen/heldout.txt").read_text(encoding="utf-8")
    ids = session.tokenize(heldout, add_special_tokens=False)[:8192]
    t0 = time.perf_counter()
    r = session.perplexity(ids, context=256)
    torch_ppl = reference["perplexity"]["perplexity"]
    print(f"perplexity {r['perplexity']:.3f} over {r['predicted']} predicted tokens "
          f"({time.perf_counter() - t0:.0f} s); torch float32: {torch_ppl} "
          f"({100 * (r['perplexity'] / torch_ppl - 1):+.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
