#!/usr/bin/env python3
"""Train qcc's bundled demo model: a small GPT-2-style decoder on five Jane Austen novels.

Run from the repository root with the fixtures venv (scripts/setup_fixtures.sh: torch >= 2, onnx,
sentencepiece):

    .venv-fixtures/bin/python examples/austen/train.py --max-steps 2500 \
        --tokenizer examples/austen/tokenizer.model --eval-every 500   # the shipped model
    .venv-fixtures/bin/python examples/austen/train.py --budget 60     # quick run on a time budget

Outputs (next to this file, or under --out): heldout.txt, tokenizer.model, model.onnx, model.json.
Also writes, outside the repo, /tmp/austen_ref_ids.npy and /tmp/austen_ref_logits.npy
(torch's float32 logits for a fixed prompt, used by verify_onnx.py).

Data split: for each novel (sorted by file name) the first 90% of its characters is
training text and the last 10% is held out; heldout.txt is the five held-out parts joined
by "\n\n". Text is tokenized as whole strings with sp.encode(text): SentencePiece's default
nmt_nfkc normalization turns newlines into spaces and collapses runs of whitespace, so each
text is one continuous token stream (no BOS/EOS are inserted anywhere).
"""
import argparse
import glob
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_DIR = os.path.join(HERE, "..", "..", "data", "austen")


# ----------------------------------------------------------------------------- model
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.n_embd = n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer(
            "bias",
            torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)).view(1, 1, block_size, block_size),
        )

    def forward(self, x):
        B, T, C = x.size()
        H = self.n_head
        D = C // H
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        mask = self.bias[:, :, :T, :T]
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd, n_hidden):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, n_hidden)
        self.c_proj = nn.Linear(n_hidden, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, n_embd, n_head, n_hidden, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLP(n_embd, n_hidden)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, n_layer=4, n_embd=256, n_head=4, n_hidden=1024, block_size=256):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, n_hidden, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, input_ids):
        B, T = input_ids.size()
        pos = torch.arange(T, dtype=torch.long, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return F.linear(x, self.wte.weight)  # tied lm head, no bias


# ----------------------------------------------------------------------------- data
def load_split():
    files = sorted(glob.glob(os.path.join(DATA_DIR, "*.txt")))
    assert len(files) == 5, files
    train_texts, held_texts = [], []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        cut = int(len(text) * 0.9)
        train_texts.append(text[:cut])
        held_texts.append(text[cut:])
    return files, train_texts, held_texts


def train_tokenizer(train_texts, vocab_size, out_prefix):
    import sentencepiece as spm

    lines = [ln for t in train_texts for ln in t.split("\n") if ln.strip()]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_prefix=out_prefix,
        model_type="bpe",
        vocab_size=vocab_size,
        character_coverage=1.0,
        byte_fallback=True,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        normalization_rule_name="nmt_nfkc",
        num_threads=2,
        minloglevel=2,
    )
    if os.path.exists(out_prefix + ".vocab"):
        os.remove(out_prefix + ".vocab")
    return spm.SentencePieceProcessor(model_file=out_prefix + ".model")


# ----------------------------------------------------------------------------- eval
@torch.no_grad()
def nll_windows(model, ids, starts, ctx, batch=32):
    """Sum of cross-entropy (nats) and number of scored tokens over windows of `ctx` tokens.

    Same protocol as `qrun --perplexity FILE --context ctx`: the window starting at s is
    w = ids[s : s+ctx] (shorter at the end of the stream); inside it each token after the
    first is predicted from the tokens before it in the window, so w[j] (j = 1..ctx-1) is
    predicted from w[0..j-1] (1 to ctx-1 tokens of context) and w[0] is not scored."""
    model.eval()
    total, count = 0.0, 0
    n = ids.numel()
    full = [s for s in starts if s + ctx <= n]
    tail = [s for s in starts if s + ctx > n and s + 1 < n]
    for i in range(0, len(full), batch):
        w = torch.stack([ids[s : s + ctx] for s in full[i : i + batch]])
        logits = model(w[:, :-1])
        y = w[:, 1:]
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    for s in tail:
        w = ids[s:n].unsqueeze(0)
        logits = model(w[:, :-1])
        y = w[:, 1:]
        total += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum").item()
        count += y.numel()
    return total, count


@torch.no_grad()
def greedy(model, sp, prompt, n_new=40, ctx=256):
    model.eval()
    ids = sp.encode(prompt)
    for _ in range(n_new):
        x = torch.tensor([ids[-ctx:]], dtype=torch.long)
        ids.append(int(model(x)[0, -1].argmax()))
    return sp.decode(ids)


# ----------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=540.0, help="training wall-clock seconds (default 540)")
    ap.add_argument("--max-steps", type=int, default=0, help="if > 0, stop after this many steps instead")
    ap.add_argument("--vocab", type=int, default=3000,
                    help="3000 keeps model.onnx + tokenizer.model under 20 MB (constant folding stores the tied "
                         "embedding twice: Gather table and transposed lm-head MatMul weight)")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step")
    ap.add_argument("--seq", type=int, default=128, help="training sequence length")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=50, help="warmup steps")
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--tokenizer", default="",
                    help="use this existing tokenizer.model (copied to --out) instead of training one; the draft "
                         "model (train_draft.py) shares examples/austen/tokenizer.model, so a retrained main model "
                         "must keep it byte-identical")
    ap.add_argument("--eval-every", type=int, default=0,
                    help="if > 0, also report held-out perplexity every this many steps (no effect on the weights: "
                         "evaluation draws no random numbers)")
    args = ap.parse_args()

    t_start = time.time()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    # --- split + tokenizer
    files, train_texts, held_texts = load_split()
    heldout_path = os.path.join(args.out, "heldout.txt")
    with open(heldout_path, "w", encoding="utf-8") as fh:
        fh.write("\n\n".join(held_texts))
    print(f"split: {len(files)} novels, train {sum(map(len, train_texts))} chars, "
          f"held-out {sum(map(len, held_texts))} chars -> {heldout_path}", flush=True)
    tok_out = os.path.join(args.out, "tokenizer.model")
    if args.tokenizer:
        import shutil

        import sentencepiece as spm

        if os.path.abspath(args.tokenizer) != os.path.abspath(tok_out):
            shutil.copyfile(args.tokenizer, tok_out)
        sp = spm.SentencePieceProcessor(model_file=tok_out)
        if sp.get_piece_size() != args.vocab:
            sys.exit(f"train.py: --tokenizer {args.tokenizer}: vocab {sp.get_piece_size()}, expected --vocab {args.vocab}")
    else:
        sp = train_tokenizer(train_texts, args.vocab, os.path.join(args.out, "tokenizer"))
    V = sp.get_piece_size()
    train_ids = torch.tensor([i for t in train_texts for i in sp.encode(t)], dtype=torch.long)
    with open(heldout_path, encoding="utf-8") as fh:
        held_ids = torch.tensor(sp.encode(fh.read()), dtype=torch.long)
    print(f"tokenizer: vocab {V}, train tokens {train_ids.numel()}, held-out tokens {held_ids.numel()} "
          f"({time.time() - t_start:.1f}s)", flush=True)

    # --- model + optimizer
    cfg = dict(vocab_size=V, n_layer=4, n_embd=256, n_head=4, n_hidden=1024, block_size=256)
    model = GPT(**cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters ({n_params * 4 / 1e6:.2f} MB fp32)", flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
    )

    def lr_at(step, frac):
        # linear warmup over `warmup` steps, then cosine from lr to min_lr over the budget
        # (frac = fraction of the budget used: elapsed/budget, or step/max_steps).
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1.0 + math.cos(math.pi * min(frac, 1.0)))

    # --- train
    gen = torch.Generator().manual_seed(args.seed)
    n_starts = train_ids.numel() - args.seq - 1
    step, tokens_seen = 0, 0
    t0 = time.time()
    t_log, tok_log = t0, 0
    held_curve = {}  # step -> held-out perplexity, when --eval-every is set
    model.train()
    while True:
        elapsed = time.time() - t0
        if args.max_steps > 0:
            if step >= args.max_steps:
                break
            frac = step / args.max_steps
        else:
            if elapsed >= args.budget:
                break
            frac = elapsed / args.budget
        lr = lr_at(step, frac)
        for g in opt.param_groups:
            g["lr"] = lr
        starts = torch.randint(0, n_starts, (args.batch,), generator=gen)
        x = torch.stack([train_ids[s : s + args.seq] for s in starts.tolist()])
        y = torch.stack([train_ids[s + 1 : s + args.seq + 1] for s in starts.tolist()])
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x.numel()
        tok_log += x.numel()
        if step % args.log_every == 0 or step == 1:
            now = time.time()
            print(f"step {step:5d} | loss {loss.item():.4f} | lr {lr:.2e} | "
                  f"{tok_log / max(now - t_log, 1e-9):7.0f} tok/s | elapsed {now - t0:6.1f}s", flush=True)
            t_log, tok_log = now, 0
        if args.eval_every > 0 and step % args.eval_every == 0 and step != args.max_steps:  # the last: below
            t_eval = time.time()
            e_nll, e_n = nll_windows(model, held_ids, list(range(0, held_ids.numel() - 1, args.seq)), args.seq)
            held_curve[step] = round(math.exp(e_nll / e_n), 3)
            model.train()
            t0 += time.time() - t_eval  # evaluation time is not training time
            t_log = time.time()
            print(f"step {step:5d} | held-out perplexity {held_curve[step]:.3f} "
                  f"({time.time() - t_eval:.1f}s eval, not counted)", flush=True)
    train_seconds = time.time() - t0
    print(f"training done: {step} steps, {tokens_seen} tokens, {train_seconds:.1f}s "
          f"(last loss {loss.item():.4f})", flush=True)

    # --- evaluation
    ctx = args.seq
    model.eval()
    held_nll, held_n = nll_windows(model, held_ids, list(range(0, held_ids.numel() - 1, ctx)), ctx)  # all tokens
    held_ppl = math.exp(held_nll / held_n)
    n_train_windows = 400
    train_starts = np.linspace(0, train_ids.numel() - ctx, n_train_windows).astype(np.int64).tolist()
    tr_nll, tr_n = nll_windows(model, train_ids, train_starts, ctx)
    train_ppl = math.exp(tr_nll / tr_n)
    print(f"held-out perplexity {held_ppl:.3f} over {held_n} predicted tokens "
          f"(mean CE {held_nll / held_n:.4f} nats)", flush=True)
    print(f"train-sample perplexity {train_ppl:.3f} over {tr_n} predicted tokens "
          f"({n_train_windows} evenly spaced windows)", flush=True)

    # --- reference logits for the ONNX check (outside the repo)
    prompt = "It is a truth universally acknowledged, that a single man in possession of a good fortune"
    ref_ids = np.array([sp.encode(prompt)], dtype=np.int64)
    with torch.no_grad():
        ref_logits = model(torch.from_numpy(ref_ids)).numpy().astype(np.float32)
    np.save("/tmp/austen_ref_ids.npy", ref_ids)
    np.save("/tmp/austen_ref_logits.npy", ref_logits)

    # --- export
    import onnx

    onnx_path = os.path.join(args.out, "model.onnx")
    model.eval()
    model.float()
    dummy = torch.from_numpy(ref_ids)
    torch.onnx.export(
        model, (dummy,), onnx_path,
        input_names=["input_ids"], output_names=["logits"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}},
        opset_version=17, do_constant_folding=True, dynamo=False,  # the TorchScript exporter (torch >= 2.9 defaults to dynamo)
    )
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m)
    op_counts = {}
    for node in m.graph.node:
        op_counts[node.op_type] = op_counts.get(node.op_type, 0) + 1
    assert "Dropout" not in op_counts, op_counts
    print("onnx ops:", json.dumps(dict(sorted(op_counts.items()))), flush=True)
    sizes = {p: os.path.getsize(os.path.join(args.out, p)) for p in ("model.onnx", "tokenizer.model")}
    total = sum(sizes.values())
    print(f"sizes: {sizes}, total {total / 1e6:.2f} MB", flush=True)
    if total > 20 * 1000 * 1000:
        print("WARNING: model.onnx + tokenizer.model exceed 20 MB; lower --vocab", flush=True)

    # --- facts
    facts = {
        "architecture": "GPT-2-style decoder, pre-LN, learned positions, tied embeddings, exact GELU, no dropout",
        "vocab_size": V,
        "n_layer": cfg["n_layer"],
        "n_embd": cfg["n_embd"],
        "n_head": cfg["n_head"],
        "head_dim": cfg["n_embd"] // cfg["n_head"],
        "mlp_hidden": cfg["n_hidden"],
        "max_positions": cfg["block_size"],
        "layernorm_eps": 1e-5,
        "parameters": n_params,
        "tokenizer": {
            "file": "tokenizer.model", "type": "sentencepiece bpe", "vocab_size": V,
            "character_coverage": 1.0, "byte_fallback": True, "normalization": "nmt_nfkc",
            "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1,
            "trained_on": "train split only (non-empty lines)"
                          + ("; passed in with --tokenizer, not retrained" if args.tokenizer else ""),
            "encoding": "sp.encode(whole text); no BOS/EOS added; newlines normalize to spaces",
        },
        "data": {
            "source": DATA_DIR,
            "novels": [os.path.basename(f) for f in files],
            "split": "per novel: first 90% of characters = train, last 10% = held out "
                     "(int(len(text)*0.9) cut); heldout.txt = held-out parts joined by a blank line, "
                     "novels in file-name order",
            "train_tokens": int(train_ids.numel()),
            "heldout_tokens": int(held_ids.numel()),
        },
        "training": {
            "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
            "budget_seconds": args.budget if args.max_steps <= 0 else None,
            "max_steps": args.max_steps if args.max_steps > 0 else None,
            "training_seconds": round(train_seconds, 1),
            "steps": step,
            "tokens_seen": tokens_seen,
            "batch_sequences": args.batch,
            "seq_len": args.seq,
            "optimizer": f"AdamW betas (0.9, 0.95), weight decay {args.wd} on >=2-D params, grad clip 1.0",
            "lr_schedule": f"linear warmup {args.warmup} steps to {args.lr}, then cosine to {args.min_lr} "
                           + ("over --max-steps (fraction of steps done)" if args.max_steps > 0
                              else "over the time budget (fraction of elapsed seconds)"),
            "threads": args.threads,
            "seed": args.seed,
            "seeds": {"torch.manual_seed": args.seed, "numpy.random.seed": args.seed,
                      "batch sampler torch.Generator": args.seed},
            "final_train_loss": round(loss.item(), 4),
        },
        "heldout_perplexity": round(held_ppl, 3),
        "heldout_perplexity_during_training": {str(k): v for k, v in held_curve.items()} or None,
        "heldout_mean_ce_nats": round(held_nll / held_n, 5),
        "heldout_predicted_tokens": held_n,
        "heldout_protocol": (
            "ids = sp.encode(open('heldout.txt').read()) (N tokens, no BOS). Non-overlapping windows of 128 "
            "tokens: window k is w = ids[128k : 128k+128] (the last one shorter). Each window is evaluated "
            "independently from an empty context: w[j] for j = 1..127 is predicted from w[0..j-1] "
            "(1 to 127 tokens of context) and w[0], the first token of every window, is not scored. "
            "perplexity = exp(sum of natural-log cross-entropy / number of scored tokens), fp32 torch. "
            "This is the protocol of `qrun MODEL.qpkg --perplexity heldout.txt --context 128`."
        ),
        "train_sample_perplexity": round(train_ppl, 3),
        "train_sample_protocol": f"same per-window scoring on {n_train_windows} windows of 128 tokens at evenly "
                                 "spaced offsets (np.linspace) over the concatenated train-split token stream",
        "onnx": {
            "file": "model.onnx", "opset": 17, "dtype": "float32", "do_constant_folding": True,
            "input": "input_ids int64 [batch, seq]", "output": "logits float32 [batch, seq, vocab]",
            "op_counts": dict(sorted(op_counts.items())),
        },
        "sizes_bytes": sizes,
        "torch_version": torch.__version__,
        "onnx_version": onnx.__version__,
    }
    with open(os.path.join(args.out, "model.json"), "w") as fh:
        json.dump(facts, fh, indent=2)
        fh.write("\n")

    # --- a few greedy continuations (stdout only)
    for p in ["It is a truth universally acknowledged",
              "Mr. Darcy",
              "Emma Woodhouse, handsome, clever, and rich,"]:
        print("greedy:", repr(greedy(model, sp, p)), flush=True)
    print(f"all done in {time.time() - t_start:.1f}s", flush=True)


if __name__ == "__main__":
    main()
