//===- TextStream.cpp - a generated sequence's text, with stop strings ----===//
#include "runtime/text/TextStream.h"

#include <algorithm>

using namespace qcc::rt;

TextStream::TextStream(const Tokenizer &tokenizer, std::vector<int64_t> prompt,
                       std::vector<std::string> stopStrings)
    : tokenizer(tokenizer), ids(std::move(prompt)) {
  for (std::string &s : stopStrings)
    if (!s.empty())
      stops.push_back(std::move(s));
}

std::string TextStream::push(int64_t id) {
  if (stopped_)
    return "";
  held += tokenizer.decodePiece(ids, id);
  ids.push_back(id);
  // The first stop string in the held text ends it (no stop string begins
  // in text already handed out: see below).
  size_t cut = std::string::npos;
  for (const std::string &s : stops)
    cut = std::min(cut, held.find(s));
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string piece = held.substr(0, cut);
    held.clear();
    text_ += piece;
    return piece;
  }
  // Hold back the longest tail of the text that a stop string starts with.
  size_t keep = 0;
  for (const std::string &s : stops)
    for (size_t n = std::min(s.size() - 1, held.size()); n > keep; --n)
      if (held.compare(held.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
  std::string piece = held.substr(0, held.size() - keep);
  held.erase(0, held.size() - keep);
  text_ += piece;
  return piece;
}

std::string TextStream::finish() {
  std::string piece = stopped_ ? "" : held;
  held.clear();
  text_ += piece;
  return piece;
}
