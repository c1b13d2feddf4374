//===- Tokenizer.h - the artifact's tokenizer -------------------*- C++ -*-===//
//
// The tokenizer qcc embeds in an artifact: a Hugging Face tokenizer.json
// (HfTokenizer) or a serialized SentencePiece model, told apart by content
// (a blob whose first non-whitespace byte is '{' is JSON).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_TOKENIZER_H
#define QCC_RUNTIME_TOKENIZER_H

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qcc::rt {

class Artifact;
class HfTokenizer;

class Tokenizer {
public:
  /// Loads a tokenizer.json or a serialized SentencePiece model; throws
  /// std::runtime_error.
  explicit Tokenizer(std::string_view serializedModel);
  ~Tokenizer();
  Tokenizer(Tokenizer &&) noexcept;
  Tokenizer &operator=(Tokenizer &&) noexcept;

  /// True for a tokenizer.json, false for SentencePiece.
  bool isHuggingFace() const { return hf != nullptr; }

  /// Text to ids. tokenizer.json: with the post-processor's special tokens
  /// (e.g. BOS from a TemplateProcessing) unless `addSpecialTokens` is false.
  /// SentencePiece: never adds BOS/EOS.
  std::vector<int64_t> encode(const std::string &text,
                              bool addSpecialTokens = true) const;
  /// Ids to text; special tokens (BOS, EOS, <|im_end|>...) are left out.
  std::string decode(const std::vector<int64_t> &ids) const;
  /// The text `id` adds to a stream that has decoded `prefix`. Text that may
  /// still change is held back: while the decoded text ends in an incomplete
  /// UTF-8 sequence (byte tokens still to come) the piece is empty, and the
  /// held text comes with the piece that completes it, so the pieces never
  /// contain broken characters and add up to decode() of the whole stream.
  std::string decodePiece(const std::vector<int64_t> &prefix, int64_t id) const;
  /// -1 where the tokenizer has none (HfTokenizer.h says how a
  /// tokenizer.json's are found).
  int64_t bosId() const;
  int64_t eosId() const;
  int64_t vocabSize() const;
  /// The id of a token given by its text ("<|im_start|>", "</s>"), or -1.
  int64_t tokenId(std::string_view token) const;

private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp;
  std::unique_ptr<HfTokenizer> hf;
};

/// The tokenizer embedded in `artifact`; throws one line naming the artifact
/// when it has none (and how to embed one) or when it does not load.
Tokenizer artifactTokenizer(const Artifact &artifact);

} // namespace qcc::rt

#endif // QCC_RUNTIME_TOKENIZER_H
