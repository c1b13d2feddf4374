//===- Tokenizer.cpp - the artifact's tokenizer ---------------------------===//
#include "runtime/text/Tokenizer.h"
#include "runtime/core/Artifact.h"
#include "runtime/text/HfTokenizer.h"

#include <sentencepiece_processor.h>

#include <stdexcept>

using namespace qcc::rt;

namespace {

bool looksLikeJson(std::string_view blob) {
  size_t i = blob.find_first_not_of(" \t\r\n");
  return i != std::string_view::npos && blob[i] == '{';
}

bool endsWithReplacementChar(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  return text.size() >= kReplacement.size() &&
         text.substr(text.size() - kReplacement.size()) == kReplacement;
}

} // namespace

Tokenizer::Tokenizer(std::string_view model) {
  if (looksLikeJson(model)) {
    hf = std::make_unique<HfTokenizer>(model);
    return;
  }
  sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status =
      sp->LoadFromSerializedProto(std::string_view(model.data(), model.size()));
  if (!status.ok())
    throw std::runtime_error("cannot load the tokenizer (neither a "
                             "tokenizer.json nor a SentencePiece model): " +
                             status.ToString());
}

Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer &&) noexcept = default;
Tokenizer &Tokenizer::operator=(Tokenizer &&) noexcept = default;

std::vector<int64_t> Tokenizer::encode(const std::string &text,
                                       bool addSpecialTokens) const {
  if (hf)
    return hf->encode(text, addSpecialTokens);
  std::vector<int> ids;
  auto status = sp->Encode(text, &ids);
  if (!status.ok())
    throw std::runtime_error("tokenizer: " + status.ToString());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string Tokenizer::decode(const std::vector<int64_t> &ids) const {
  if (hf)
    return hf->decode(ids);
  std::vector<int> v(ids.begin(), ids.end());
  std::string text;
  auto status = sp->Decode(v, &text);
  if (!status.ok())
    throw std::runtime_error("tokenizer: " + status.ToString());
  return text;
}

std::string Tokenizer::decodePiece(const std::vector<int64_t> &prefix,
                                   int64_t id) const {
  // Decoding whole sequences handles byte fallback, byte-level pieces and the
  // leading-space marker correctly. A stream shows decode(ids[0, k)) for the
  // last k at which that text did not end in U+FFFD (where decoders put bytes
  // that do not form a character yet; ByteFallback even turns a whole run of
  // byte tokens into U+FFFDs while its last character is incomplete), as
  // the tokenizers library's DecodeStream does.
  std::vector<int64_t> ids = prefix;
  ids.push_back(id);
  std::string after = decode(ids);
  if (endsWithReplacementChar(after))
    return "";
  std::string before;
  for (size_t k = prefix.size(); k > 0; --k) {
    before = decode({prefix.begin(), prefix.begin() + k});
    if (!endsWithReplacementChar(before))
      break;
    before.clear();
  }
  if (after.compare(0, before.size(), before) == 0)
    return after.substr(before.size());
  // A decoder rule changed earlier text (rare): what follows the common
  // prefix, from a character boundary.
  size_t n = 0;
  while (n < before.size() && n < after.size() && before[n] == after[n])
    ++n;
  while (n > 0 && n < after.size() && (after[n] & 0xC0) == 0x80)
    --n;
  return after.substr(n);
}

int64_t Tokenizer::bosId() const { return hf ? hf->bosId() : sp->bos_id(); }
int64_t Tokenizer::eosId() const { return hf ? hf->eosId() : sp->eos_id(); }
int64_t Tokenizer::vocabSize() const {
  return hf ? hf->vocabSize() : sp->GetPieceSize();
}

int64_t Tokenizer::tokenId(std::string_view token) const {
  if (hf)
    return hf->tokenId(token);
  int id = sp->PieceToId(token);
  // PieceToId answers the unknown piece's id for text it does not know.
  return id >= 0 && sp->IdToPiece(id) == token ? id : -1;
}

Tokenizer qcc::rt::artifactTokenizer(const Artifact &a) {
  auto blob = a.section("tokenizer");
  if (!blob)
    throw std::runtime_error(a.path() + ": the artifact has no tokenizer "
                             "(compile with --tokenizer, or put "
                             "tokenizer.json or tokenizer.model beside the "
                             ".onnx)");
  try {
    return Tokenizer(*blob);
  } catch (const std::exception &e) { // the library's words: say whose
    throw std::runtime_error(a.path() + ": the embedded tokenizer: " +
                             e.what());
  }
}
