//===- Tokenizer.cpp - the artifact's SentencePiece tokenizer -------------===//
#include "runtime/Tokenizer.h"

#include <sentencepiece_processor.h>

#include <stdexcept>

using namespace qcc::rt;

Tokenizer::Tokenizer(std::string_view model)
    : sp(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  auto status = sp->LoadFromSerializedProto(
      std::string_view(model.data(), model.size()));
  if (!status.ok())
    throw std::runtime_error("cannot load the tokenizer: " +
                             status.ToString());
}

Tokenizer::~Tokenizer() = default;

std::vector<int64_t> Tokenizer::encode(const std::string &text) const {
  std::vector<int> ids;
  auto status = sp->Encode(text, &ids);
  if (!status.ok())
    throw std::runtime_error("tokenizer: " + status.ToString());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int64_t> &ids) const {
  std::vector<int> v(ids.begin(), ids.end());
  std::string text;
  auto status = sp->Decode(v, &text);
  if (!status.ok())
    throw std::runtime_error("tokenizer: " + status.ToString());
  return text;
}

std::string Tokenizer::decodePiece(const std::vector<int64_t> &prefix,
                                   int64_t id) const {
  // Decoding whole sequences handles byte fallback and the leading-space
  // marker correctly; the new text is the difference.
  std::vector<int64_t> with = prefix;
  with.push_back(id);
  std::string before = decode(prefix), after = decode(with);
  return after.compare(0, before.size(), before) == 0
             ? after.substr(before.size())
             : after;
}

int64_t Tokenizer::bosId() const { return sp->bos_id(); }
int64_t Tokenizer::eosId() const { return sp->eos_id(); }
int64_t Tokenizer::vocabSize() const { return sp->GetPieceSize(); }
