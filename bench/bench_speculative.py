#!/usr/bin/env python3
"""Speculative decoding and prompt lookup on the CPU against plain decoding
(docs/SPECULATIVE.md), measured side by side in one run.

The demo model (examples/austen/model.onnx) is the target; the draft is
examples/austen/draft/model.onnx (train_draft.py). Two greedy tasks:
  open    continue a short prompt (96 new tokens)
  copy    continue a held-out passage given the same passage as --reference
          (the prompt is its first sentences; LLMA's copy-heavy case)
For each mode: decode tokens/s (best of --repeats; the prefill is timed
apart by qrun) and the mean tokens per target forward pass (plain: 1). Every
mode's text must equal plain decoding's (greedy exactness); the script fails
otherwise.

    .venv/bin/python bench/bench_speculative.py [--threads 1] [--repeats 3]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from cpu_info import machine  # noqa: E402

AUSTEN = os.path.join(ROOT, "examples", "austen")


def passage(words=170, prompt_words=40):
    """A held-out passage (reference) and its first `prompt_words` words."""
    with open(os.path.join(AUSTEN, "heldout.txt"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    start = text.find("Elizabeth")  # a stable place in the held-out text
    ws = text[start:].split(" ")[:words]
    return " ".join(ws), " ".join(ws[:prompt_words])


def run(qrun, args, env, repeats):
    best, text, per_step = 0.0, None, 1.0
    for _ in range(repeats):
        p = subprocess.run([qrun] + args, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"qrun {' '.join(args)}: {p.stderr.strip()}")
        m = re.search(r"decode: \d+ tokens in [0-9.e+-]+ s \(([0-9.e+-]+) tokens/s\)", p.stderr)
        best = max(best, float(m.group(1)))
        s = re.search(r"([0-9.]+) tokens per step", p.stderr)
        if s:
            per_step = float(s.group(1))
        text = p.stdout
    return best, per_step, text


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=1,
                    help="OMP/OpenBLAS threads (1: see docs/SPECULATIVE.md)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new-tokens", type=int, default=96)
    args = ap.parse_args()
    qcc, qrun = (os.path.join(args.build, "bin", t) for t in ("qcc", "qrun"))
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    tmp = tempfile.mkdtemp(prefix="qcc-spec-")
    target, draft = os.path.join(tmp, "austen.qpkg"), os.path.join(tmp, "draft.qpkg")
    subprocess.run([qcc, os.path.join(AUSTEN, "model.onnx"), "--no-cuda", "-o", target],
                   check=True)
    subprocess.run([qcc, os.path.join(AUSTEN, "draft", "model.onnx"), "--no-cuda",
                    "--tokenizer", os.path.join(AUSTEN, "tokenizer.model"), "-o", draft],
                   check=True)
    ref_text, copy_prompt = passage()
    ref = os.path.join(tmp, "reference.txt")
    with open(ref, "w", encoding="utf-8") as f:
        f.write(ref_text)
    tasks = {
        # One prompt each: speculation runs sequences one at a time, and a
        # batch would give plain decoding a batched-GEMV advantage.
        "open": ["--prompt", "It is a truth universally acknowledged"],
        "copy": ["--prompt", copy_prompt],
    }
    modes = [("plain", [])]
    modes += [(f"draft K={k}", ["--draft", draft, "--draft-tokens", str(k)]) for k in range(2, 9)]
    modes += [("lookup N=3 K=4", ["--lookup", "3", "--draft-tokens", "4"]),
              ("lookup N=3 K=8", ["--lookup", "3", "--draft-tokens", "8"])]

    print(f"# {machine()}, {args.threads} thread(s), best of {args.repeats}, "
          f"greedy, {args.new_tokens} new tokens per prompt")
    print("| task | mode | decode tokens/s | speedup | tokens per target pass |")
    print("|---|---|---:|---:|---:|")
    for task, prompt in tasks.items():
        base_args = [target] + prompt + ["--max-new-tokens", str(args.new_tokens)]
        plain = None
        for name, extra in modes:
            extra = list(extra)
            if task == "copy" and extra[:1] == ["--lookup"]:
                extra += ["--reference", ref]
            tps, per_step, text = run(qrun, base_args + extra, env, args.repeats)
            if plain is None:
                plain = (tps, text)
            elif text != plain[1]:
                sys.exit(f"{task} {name}: the text differs from plain decoding")
            print(f"| {task} | {name} | {tps:.1f} | {tps / plain[0]:.2f}x | {per_step:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
