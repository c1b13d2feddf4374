//===- Tokenizer.h - the artifact's SentencePiece tokenizer -----*- C++ -*-===//
#ifndef QCC_RUNTIME_TOKENIZER_H
#define QCC_RUNTIME_TOKENIZER_H

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qcc::rt {

class Tokenizer {
public:
  /// Loads a serialized SentencePiece model; throws std::runtime_error.
  explicit Tokenizer(std::string_view serializedModel);
  ~Tokenizer();

  std::vector<int64_t> encode(const std::string &text) const;
  std::string decode(const std::vector<int64_t> &ids) const;
  /// The text of one piece as it continues a decoded stream (for streaming).
  std::string decodePiece(const std::vector<int64_t> &prefix, int64_t id) const;
  int64_t bosId() const;
  int64_t eosId() const;
  int64_t vocabSize() const;

private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_TOKENIZER_H
