"""Small tokenizer.json fixtures with the pipelines of real decoders, and the ids the
Hugging Face `tokenizers` library gives for a multilingual test text (test/unit/HfTokenizerTest.cpp).

Nothing can be downloaded from a model hub here, so each tokenizer is trained (BPE, vocab
300-1500) on Jane Austen (data/austen of the repository, or --data) with the `tokenizers` library,
with the normalizer / pre-tokenizer / post-processor / decoder / added tokens that the named
model's published tokenizer.json has:

  gpt2      ByteLevel pre-tokenizer (GPT-2 regex), ByteLevel decoder, <|endoftext|>;
            merges written as "a b" strings (the legacy format of GPT-2's file)
  llama3    Split(Llama-3 regex, Isolated) + ByteLevel(use_regex=false), ignore_merges,
            post-processor ByteLevel + TemplateProcessing "<|begin_of_text|> $A" (BOS)
  qwen2     NFC, Split(Qwen2 regex) + ByteLevel(use_regex=false), <|endoftext|> <|im_start|>
            <|im_end|> (special) and <tool_call> (added, not special)
  smollm    Digits(individual) + ByteLevel (SmolLM / SmolLM2), ChatML special tokens
  llama2    Llama-2 / Mistral legacy: Prepend + Replace normalizer, no pre-tokenizer, BPE with
            byte_fallback and fuse_unk, <0xXX> byte tokens in the vocab, TemplateProcessing
            "<s> $A", decoder Replace / ByteFallback / Fuse / Strip; "a b" merges
  mistral   the non-legacy form: Metaspace(prepend_scheme=first, split=false) pre-tokenizer,
            byte_fallback, decoder ByteFallback + Metaspace + Fuse
  misc_a    the rest of the pipeline vocabulary: NFKC, Lowercase, Strip, Replace(regex),
            Split with String / Regex patterns and every behavior (and invert), Punctuation,
            BPE with continuing_subword_prefix / end_of_word_suffix and unk, BPEDecoder,
            Bert post-processor, added tokens with lstrip / rstrip / single_word / normalized
  misc_b    NFD + StripAccents, Metaspace(always, split=true), Digits(contiguous),
            WhitespaceSplit, Roberta post-processor, decoders Replace / Strip / Metaspace
  misc_c    Nmt + NFKD + Lowercase, CharDelimiterSplit, Whitespace, BertPreTokenizer, no decoder,
            a TemplateProcessing special token of two ids
  misc_d    ByteLevel normalizer (no pre-tokenizer), added tokens with normalized=true

Run (any Python with `tokenizers`; the C++ test needs no Python):

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
    /tmp/tokvenv/bin/python test/models/tokenizers/gen_tokenizers.py

Output is byte-identical when run again (checked with tokenizers 0.23.3). Writes <name>.json
(each < 200 KB) and expected.json ({"tokenizers_version", "texts",
"tokenizers": {name: {"file", "cases": [{"ids", "ids_plain", "decoded", "decoded_all"}]}}})
next to this script: ids = encode(text).ids (special tokens added by the post-processor),
ids_plain = encode(text, add_special_tokens=False).ids, decoded = decode(ids) (special tokens
skipped), decoded_all = decode(ids, skip_special_tokens=False). Each tokenizer is saved,
re-read with Tokenizer.from_str and the expectations come from the re-read file.
"""
import argparse
import glob
import json
import os

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers import AddedToken

HERE = os.path.dirname(os.path.abspath(__file__))

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
              r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_PAT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
             r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]

TEXTS = [
    "",
    "Hello, world! It's a truth universally acknowledged, that a single man in possession "
    "of a good fortune, must be in want of a wife. I'LL say we'd they're you've I'M SHE'S",
    "  leading spaces\tand\ttabs\n\nnew lines\r\n  trailing  ",
    "a  b   c    d\t\t e \n \n f\n\n\n\ng \t\n h",
    "Numbers: 1234567890 3.14159 -42 1,000,000 2024-06-01 ١٢٣ ４２ ½ Ⅻ",
    "Accents: café naïve résumé Ångström façade Zoë cafe\u0301 A\u030a ﬁne ﬀ ŉ",
    "CJK: 日本語のテキスト、中文文本。한국어 텍스트 ｶﾀｶﾅ",
    "Emoji: 😀👍🏽 👨\u200d👩\u200d👧\u200d👦 🇫🇷 ❤️ 🤖!",
    "Σίσυφος ΣΑΣ Привет, мир! İstanbul ǅ straße STRASSE ẞ",
    "Spaces:\u00a0nbsp\u2009thin\u3000ideographic\u000bvt\u0085nel\u2028ls\u200bzw",
    "def f(x):\n    return x**2  # comment\n\tif x != 0: print(f\"{x!r}\")\n",
    "©®™ € £ ¥ «quotes» “smart” ‘single’ — dash – ... ¿¡ § ¶ † •",
    "<|endoftext|>Mixed <|endoftext|> special<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|> <s>[INST] hi [/INST] </s>",
    " <|im_end|>  <|im_end|>x <tool_call>{\"a\": 1}</tool_call> [MASK] x[MASK]y  [MASK]  hello helloworld",
    "a|b||c <tool> call<tool> callünï ÜNÏ [X] [BOS]\u0001\u200b\ufeff",
    "<0x41> <unk> ▁already▁metaspace▁ ▁",
    "Mr. Darcy's-well-known  re-entry; well—no: (quite) [sure] {yes}? Yes!!! 12abc34 a1b2c3",
    " ",
    "\n",
    "x",
]


def austen_paragraphs(data, limit_chars):
    out = []
    for path in sorted(glob.glob(os.path.join(data, "*.txt"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # The last 10% of each novel is held out elsewhere: train on the first 90%.
        text = text[: int(len(text) * 0.9)]
        out.extend(p for p in text.split("\n\n") if p.strip())
    total, res = 0, []
    for p in out:
        res.append(p)
        total += len(p)
        if total > limit_chars:
            break
    return res


def train(tok, corpus, vocab, special, alphabet=None, **kw):
    tr = trainers.BpeTrainer(vocab_size=vocab, special_tokens=special, show_progress=False,
                             initial_alphabet=alphabet or [], **kw)
    tok.train_from_iterator(corpus, tr)
    return tok


def make_gpt2(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True)
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    train(tok, corpus, 1200, ["<|endoftext|>"], pre_tokenizers.ByteLevel.alphabet())
    return string_merges(json.loads(tok.to_str()))


def make_llama3(corpus):
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    special = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    train(tok, corpus, 1500, [], pre_tokenizers.ByteLevel.alphabet())
    tok.add_special_tokens(special)  # after the model's vocabulary, as in Llama 3
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return json.loads(tok.to_str())


def make_qwen2(corpus):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    train(tok, corpus, 1000, [], pre_tokenizers.ByteLevel.alphabet())
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                    AddedToken("</tool_call>", special=False, normalized=False)])
    return json.loads(tok.to_str())


def make_smollm(corpus):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True)
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    train(tok, corpus, 1000, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], pre_tokenizers.ByteLevel.alphabet())
    return json.loads(tok.to_str())


def sp_like(corpus, vocab, normalizer, pre_tokenizer):
    """A SentencePiece-style BPE (byte_fallback, <0xXX> tokens in the model's vocabulary only)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    # Train with a Metaspace pre-tokenizer (merges stay inside words, as SentencePiece's do).
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    train(tok, corpus, vocab, ["<unk>", "<s>", "</s>"] + BYTE_TOKENS)
    d = json.loads(tok.to_str())
    d["added_tokens"] = [t for t in d["added_tokens"] if t["content"] not in BYTE_TOKENS]
    d["normalizer"] = normalizer
    d["pre_tokenizer"] = pre_tokenizer
    return d


def make_llama2(corpus):
    d = sp_like(corpus, 1200,
                {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
                None)
    d["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]).__getstate__())
    d["decoder"] = json.loads(decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]).__getstate__())
    return string_merges(d)


def make_mistral(corpus):
    d = sp_like(corpus, 1000, None,
                {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False})
    d["post_processor"] = None
    d["decoder"] = json.loads(decoders.Sequence([
        decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first", split=False),
        decoders.Fuse()]).__getstate__())
    return d


def make_misc_a(corpus):
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([
        normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip(left=True, right=True),
        normalizers.Replace(Regex(r"\s+"), " "), normalizers.Replace("``", "\"")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="removed"),
        pre_tokenizers.Split("-", behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[(\[{]"), behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
        pre_tokenizers.Split(Regex(r"[\p{L}\p{N}'#]+"), behavior="isolated", invert=True),
        pre_tokenizers.Punctuation(behavior="isolated")])
    special = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    train(tok, corpus[:400], 300, special, limit_alphabet=80)
    # The library's trainer is not deterministic with a continuing_subword_prefix or an
    # end_of_word_suffix (ties go by hash order), so that form of the model is derived by
    # hand: every token also as ##t, t</w> and ##t</w>, every merge in those four forms.
    d = json.loads(tok.to_str())
    m = d["model"]
    vocab = {}
    for t in special:
        vocab[t] = len(vocab)
    for t, _ in sorted(m["vocab"].items(), key=lambda kv: kv[1]):
        for v in (t, "##" + t, t + "</w>", "##" + t + "</w>"):
            vocab.setdefault(v, len(vocab))
    merges = []
    for a, b in m["merges"]:
        merges += [[a, "##" + b], ["##" + a, "##" + b], [a, "##" + b + "</w>"], ["##" + a, "##" + b + "</w>"]]
    m.update(vocab=vocab, merges=merges, continuing_subword_prefix="##", end_of_word_suffix="</w>")
    d["added_tokens"] = [dict(t, id=vocab[t["content"]]) for t in d["added_tokens"]]
    tok = Tokenizer.from_str(json.dumps(d))
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.post_processor = processors.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                   ("[CLS]", tok.token_to_id("[CLS]")))
    tok.add_special_tokens([AddedToken("[MASK]", lstrip=True, rstrip=True)])
    tok.add_tokens([AddedToken("hello", single_word=True, normalized=True),
                    AddedToken("<|im_end|>", lstrip=True, rstrip=False, normalized=False)])
    return json.loads(tok.to_str())


def make_misc_b(corpus):
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Strip(left=False, right=True)])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True),
                                     decoders.Replace(Regex("q+"), "Q"), decoders.Fuse(), decoders.Strip("x", 2, 0)])
    train(tok, corpus[:400], 400, ["<unk>", "<s>", "</s>"], limit_alphabet=70)
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 1), trim_offsets=True, add_prefix_space=True)
    return json.loads(tok.to_str())


def make_misc_c(corpus):
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.Nmt(), normalizers.NFKD(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.CharDelimiterSplit("|"), pre_tokenizers.Whitespace(), pre_tokenizers.BertPreTokenizer()])
    train(tok, corpus[:400], 300, ["[UNK]", "[CLS]", "[SEP]", "[BOS]", "[X]"], limit_alphabet=60)
    # No decoder: tokens joined with spaces. A special token of two ids.
    tok.post_processor = processors.TemplateProcessing(
        single="[BOS] $A [SEP]", pair="[BOS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[{"id": "[BOS]", "ids": [1, 3], "tokens": ["[CLS]", "[BOS]"]}, ("[SEP]", 2)])
    return json.loads(tok.to_str())


def make_misc_d(corpus):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.ByteLevel()
    tok.decoder = decoders.ByteLevel()
    train(tok, corpus[:400], 400, [], pre_tokenizers.ByteLevel.alphabet())
    # Normalized added tokens match (and decode from) their normalized form.
    tok.add_tokens([AddedToken("<tool> call", normalized=True), AddedToken("ünï", normalized=True, special=True)])
    tok.add_special_tokens(["<|endoftext|>"])
    return json.loads(tok.to_str())


def string_merges(d):
    d["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in d["model"]["merges"]]
    return d


MAKERS = {"gpt2": make_gpt2, "llama3": make_llama3, "qwen2": make_qwen2, "smollm": make_smollm,
          "llama2": make_llama2, "mistral": make_mistral, "misc_a": make_misc_a, "misc_b": make_misc_b,
          "misc_c": make_misc_c, "misc_d": make_misc_d}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "..", "data", "austen"))
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    corpus = austen_paragraphs(args.data, 1_500_000)
    # One longer real paragraph run through every tokenizer (held-out part of a novel).
    with open(os.path.join(args.data, "emma.txt"), encoding="utf-8") as f:
        emma = f.read()
    texts = TEXTS + [emma[-1500:]]
    expected = {"tokenizers_version": tokenizers.__version__, "texts": texts, "tokenizers": {}}
    for name, make in MAKERS.items():
        d = make(corpus)
        text = json.dumps(d, ensure_ascii=False, indent=None, separators=(",", ":"))
        path = os.path.join(args.out, name + ".json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        size = os.path.getsize(path)
        assert size < 200_000, f"{path}: {size} bytes"
        tok = Tokenizer.from_str(text)
        cases = []
        for t in texts:
            ids = tok.encode(t).ids
            cases.append({"ids": ids, "ids_plain": tok.encode(t, add_special_tokens=False).ids,
                          "decoded": tok.decode(ids), "decoded_all": tok.decode(ids, skip_special_tokens=False)})
        expected["tokenizers"][name] = {"file": name + ".json", "cases": cases}
        rt = sum(c["decoded"] == t for c, t in zip(cases, texts))
        print(f"{name}: {size} bytes, vocab {tok.get_vocab_size()}, round trips {rt}/{len(texts)}")
    # One line per text and per case: small, and a diff shows which case changed.
    dump = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    lines = ["{", f' "tokenizers_version": {dump(expected["tokenizers_version"])},', ' "texts": [']
    lines += [f"  {dump(t)}," for t in texts]
    lines[-1] = lines[-1][:-1]
    lines += [" ],", ' "tokenizers": {']
    for i, (name, entry) in enumerate(expected["tokenizers"].items()):
        lines += [f'  {dump(name)}: {{"file": {dump(entry["file"])}, "cases": [']
        lines += [f"   {dump(c)}," for c in entry["cases"]]
        lines[-1] = lines[-1][:-1]
        lines += ["  ]}" + ("," if i + 1 < len(expected["tokenizers"]) else "")]
    lines += [" }", "}"]
    with open(os.path.join(args.out, "expected.json"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "expected.json"), encoding="utf-8") as f:
        assert json.load(f) == expected


if __name__ == "__main__":
    main()
