//===- HfTokenizer.h - Hugging Face tokenizer.json --------------*- C++ -*-===//
//
// A tokenizer read from a Hugging Face `tokenizer.json` (the format of the
// `tokenizers` library), with that library's semantics (checked against it by
// test/unit/HfTokenizerTest.cpp):
//
//   encode: added tokens are split out of the raw text first (those with
//   normalized=false), each remaining piece is normalized, split on the
//   normalized added tokens, pre-tokenized, and the model (BPE) turns each
//   pre-token into ids; the post-processor then adds its special tokens.
//   decode: ids -> token strings (special tokens skipped by default) -> the
//   decoder chain -> text.
//
// Supported (anything else is a one-line std::runtime_error naming the field,
// e.g. "tokenizer.json: pre_tokenizer type 'UnicodeScripts' is not
// supported"):
//   model          BPE: merges as "a b" strings or [a, b] pairs, byte_fallback,
//                  ignore_merges, unk_token, fuse_unk,
//                  continuing_subword_prefix, end_of_word_suffix
//   normalizer     NFC NFD NFKC NFKD Lowercase Strip StripAccents Replace
//                  Prepend Nmt ByteLevel Sequence
//   pre_tokenizer  ByteLevel Split Metaspace Digits Whitespace
//                  WhitespaceSplit Punctuation BertPreTokenizer
//                  CharDelimiterSplit Sequence
//   post_processor TemplateProcessing (single) ByteLevel BertProcessing
//                  RobertaProcessing Sequence
//   decoder        ByteLevel Metaspace ByteFallback Fuse Strip Replace BPE
//                  Sequence
//   added_tokens   special, normalized, lstrip, rstrip, single_word
// Regexes (Split, Replace) run on ICU with Oniguruma's meaning of \s and \S
// (Unicode White_Space); truncation and padding are ignored, BPE dropout
// refused. Character properties and normalization are ICU's (Unicode 15 with
// Debian 12's ICU 72); the library's tables differ for characters assigned
// recently (its NFC/NFD/StripAccents tables predate Unicode 10, its regexes
// know Unicode 16), so text with such characters can tokenize differently.
//
// Text may be any bytes: an ill-formed UTF-8 sequence is one character that
// normalizers keep as it is, regexes see as U+FFFD, and byte-level models and
// byte_fallback encode byte for byte; decode returns valid UTF-8 (ill-formed
// bytes become U+FFFD, as the library's from_utf8_lossy does).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_HFTOKENIZER_H
#define QCC_RUNTIME_HFTOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace qcc::rt {

class HfTokenizer {
public:
  /// Parses the JSON text of a tokenizer.json; throws std::runtime_error.
  explicit HfTokenizer(std::string_view json);
  ~HfTokenizer();
  HfTokenizer(HfTokenizer &&) noexcept;
  HfTokenizer &operator=(HfTokenizer &&) noexcept;

  /// Text to ids; `addSpecialTokens` applies the post-processor (e.g. a BOS
  /// from TemplateProcessing), as the library's encode does by default.
  std::vector<int64_t> encode(std::string_view text,
                              bool addSpecialTokens = true) const;
  /// Ids to text; unknown ids are skipped, as the library does.
  std::string decode(const std::vector<int64_t> &ids,
                     bool skipSpecialTokens = true) const;

  /// The id of a token given by its text (an added token such as
  /// "<|im_start|>", or a vocabulary entry), or -1.
  int64_t tokenId(std::string_view token) const;
  /// The text of a token (as stored: byte-level tokens in their mapped
  /// form), or "" for an unknown id.
  std::string tokenText(int64_t id) const;
  bool isSpecial(int64_t id) const;
  /// The first special token the post-processor puts before the text, else
  /// the first present of <s>, <|begin_of_text|>, <bos>, <|startoftext|>;
  /// -1 if none.
  int64_t bosId() const;
  /// The special token the post-processor puts last, else the first present
  /// of <|im_end|>, <|eot_id|>, <|end|>, <end_of_turn>, </s>,
  /// <|endoftext|>, <|end_of_text|>, <eos>; -1 if none.
  int64_t eosId() const;
  /// One more than the largest id (model vocabulary and added tokens).
  int64_t vocabSize() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_HFTOKENIZER_H
