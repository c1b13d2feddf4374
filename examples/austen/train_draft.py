#!/usr/bin/env python3
"""Train the draft model for speculative decoding with the Austen demo model (docs/SPECULATIVE.md).

A 1-layer, 128-wide GPT of the same architecture as train.py's, on the same train split, with the
demo model's tokenizer.model (the draft must share the target's tokenizer: qrun checks it). It
writes examples/austen/draft/model.onnx and draft.json.

Run from the repository root with the fixtures venv (torch and onnx; no sentencepiece needed):

    .venv-fixtures/bin/python examples/austen/train_draft.py              # 480 s of training
    .venv-fixtures/bin/python examples/austen/train_draft.py --budget 60  # quick run

The tokenizer is applied by a small SentencePiece-BPE encoder below (the pieces and scores read
from tokenizer.model with transformers' bundled protobuf schema): nmt_nfkc-style normalization
(NFKC, whitespace runs to one space), "▁" for spaces, whitespace-split words, then repeatedly the
adjacent pair whose merge is the highest-scoring piece, byte fallback for the rest. That is
SentencePiece's BPE encoding; a rare difference from it would only cost the draft a little
quality, never correctness (the target verifies every token).
"""
import argparse
import json
import math
import os
import re
import sys
import time
import unicodedata

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import GPT, load_split, nll_windows  # noqa: E402  (same model code and split)


class SpmBpe:
    """SentencePiece BPE encoding of tokenizer.model (see the module docstring)."""

    def __init__(self, path):
        from transformers.utils import sentencepiece_model_pb2_new as pb

        m = pb.ModelProto()
        with open(path, "rb") as fh:
            m.ParseFromString(fh.read())
        self.ids = {}
        self.score = {}
        for i, p in enumerate(m.pieces):
            # type 1 = NORMAL, 4 = USER_DEFINED: pieces text can merge into
            if p.type in (1, 4):
                self.ids[p.piece] = i
                self.score[p.piece] = p.score
            if p.type == 6:  # BYTE: <0xXX>
                self.ids[p.piece] = i
        self.cache = {}

    def encode_word(self, w):
        if w in self.cache:
            return self.cache[w]
        syms = list(w)
        while len(syms) > 1:
            best, at = None, -1
            for i in range(len(syms) - 1):
                s = self.score.get(syms[i] + syms[i + 1])
                if s is not None and (best is None or s > best):
                    best, at = s, i
            if at < 0:
                break
            syms[at : at + 2] = [syms[at] + syms[at + 1]]
        out = []
        for s in syms:
            if s in self.ids:
                out.append(self.ids[s])
            else:
                out.extend(self.ids["<0x%02X>" % b] for b in s.encode("utf-8"))
        self.cache[w] = out
        return out

    def encode(self, text):
        text = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()
        ids = []
        for w in text.split(" "):
            ids.extend(self.encode_word("\u2581" + w))
        return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=480.0, help="training wall-clock seconds")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "draft"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()

    sp = SpmBpe(os.path.join(HERE, "tokenizer.model"))
    _, train_texts, _ = load_split()
    train_ids = torch.tensor([i for t in train_texts for i in sp.encode(t)], dtype=torch.long)
    with open(os.path.join(HERE, "heldout.txt"), encoding="utf-8") as fh:
        held_ids = torch.tensor(sp.encode(fh.read()), dtype=torch.long)
    V = 3000
    print(f"tokens: train {train_ids.numel()}, held-out {held_ids.numel()} ({time.time() - t_start:.1f}s)", flush=True)

    cfg = dict(vocab_size=V, n_layer=args.layers, n_embd=args.width, n_head=args.heads,
               n_hidden=4 * args.width, block_size=256)
    model = GPT(**cfg)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    n_starts = train_ids.numel() - args.seq - 1
    step, t0 = 0, time.time()
    model.train()
    while time.time() - t0 < args.budget:
        frac = (time.time() - t0) / args.budget
        lr = args.lr * (step + 1) / 50 if step < 50 else \
            args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, n_starts, (args.batch,), generator=gen).tolist()
        x = torch.stack([train_ids[s : s + args.seq] for s in starts])
        y = torch.stack([train_ids[s + 1 : s + args.seq + 1] for s in starts])
        loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0 or step == 1:
            print(f"step {step:5d} | loss {loss.item():.4f} | lr {lr:.2e} | elapsed {time.time() - t0:6.1f}s",
                  flush=True)
    train_seconds = time.time() - t0
    model.eval()
    nll, n = nll_windows(model, held_ids, list(range(0, held_ids.numel() - 1, 128)), 128)
    ppl = math.exp(nll / n)
    print(f"training done: {step} steps in {train_seconds:.1f}s; held-out perplexity {ppl:.2f}", flush=True)

    onnx_path = os.path.join(args.out, "model.onnx")
    dummy = torch.tensor([sp.encode("It is a truth universally acknowledged")], dtype=torch.long)
    torch.onnx.export(model, (dummy,), onnx_path, input_names=["input_ids"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
                      opset_version=17, do_constant_folding=True, dynamo=False)
    with open(os.path.join(args.out, "draft.json"), "w") as fh:
        json.dump({"role": "draft model for examples/austen/model.onnx (same tokenizer.model)",
                   "config": cfg, "parameters": n_params, "budget_seconds": args.budget, "steps": step,
                   "batch": args.batch, "seq": args.seq, "lr": args.lr, "seed": args.seed,
                   "train_seconds": round(train_seconds, 1), "heldout_perplexity": round(ppl, 3),
                   "torch_version": torch.__version__}, fh, indent=1)
        fh.write("\n")
    print(f"wrote {onnx_path} ({os.path.getsize(onnx_path) / 1e6:.1f} MB)", flush=True)


if __name__ == "__main__":
    main()
