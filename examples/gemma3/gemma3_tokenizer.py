"""A correct Hugging Face fast tokenizer (tokenizer.json) for a Gemma 3 GGUF.

Why this exists: transformers 4.57's GGUF loader (`AutoTokenizer.from_pretrained(dir,
gguf_file=...)`, integrations/ggml.py) builds a *Unigram* model for Gemma 3 from
`tokenizer.ggml.scores`. In Gemma 3's GGUF those scores are BPE merge ranks (score = -rank), not
unigram log-probabilities, so the Unigram segmentation splits words into tiny pieces (wrong ids;
the model then produces nonsense). Gemma's real tokenizer is SentencePiece-*BPE*. Here, as
transformers' GemmaConverter does from the original tokenizer.model: BPE over the GGUF vocabulary,
merges generated from the normal tokens ordered by score (higher first), byte fallback, spaces
replaced by U+2581 with no other pre-tokenization, `<bos>` (id 2) prepended by the post-processor,
and the GGUF's control / user-defined tokens as added tokens.

Check: "The capital of France is" -> [2, 818, 5279, 529, 7001, 563]
(<bos> The ▁capital ▁of ▁France ▁is), the ids google/gemma-3-270m's own tokenizer gives.

Use: python gemma3_tokenizer.py MODEL.gguf tokenizer.json  (or build_tokenizer() from convert.py)
"""
import sys

EXPECTED = {"The capital of France is": [2, 818, 5279, 529, 7001, 563]}


def build_tokenizer(gguf_path):
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers.convert_slow_tokenizer import generate_merges

    r = GGUFReader(gguf_path)
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    scores = r.fields["tokenizer.ggml.scores"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    bos = int(r.fields["tokenizer.ggml.bos_token_id"].contents())
    vocab = {t: i for i, t in enumerate(toks)}
    if "\t" not in vocab and "<0x09>" in vocab:
        vocab["\t"] = vocab["<0x09>"]
    # merges only between normal tokens (GGUF token type 1), ordered by score (higher first)
    merges = generate_merges(vocab, [(t, s) for t, s, ty in zip(toks, scores, types) if ty == 1])
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                              byte_fallback=True, dropout=None))
    tk.normalizer = normalizers.Replace(" ", "\u2581")
    tk.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    # control tokens (GGUF type 3: <bos>, <eos>, <start_of_turn>, ...) are special (dropped by
    # decode(skip_special_tokens=True)); user-defined ones (type 4: "\n\n", runs of spaces, ...)
    # are matched whole like them but are text (add_special_tokens would mark them special too).
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(toks, types) if ty == 3])
    tk.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(toks, types) if ty == 4])
    bos_tok = toks[bos]
    tk.post_processor = processors.TemplateProcessing(
        single=f"{bos_tok} $A", pair=f"{bos_tok} $A {bos_tok} $B", special_tokens=[(bos_tok, bos)])
    for text, ids in EXPECTED.items():
        got = tk.encode(text).ids
        if got != ids:
            raise RuntimeError(f"gemma3 tokenizer: {text!r} -> {got}, expected {ids}")
    return tk


if __name__ == "__main__":
    tk = build_tokenizer(sys.argv[1])
    tk.save(sys.argv[2])
    for s in ["The capital of France is", "<start_of_turn>user\nHi  there\t1234<end_of_turn>"]:
        e = tk.encode(s)
        print(e.ids, e.tokens, repr(tk.decode(e.ids, skip_special_tokens=False)))
