//===- TextStream.h - a generated sequence's text, with stop strings -*- C++ -*-===//
//
// The text of one sequence as its tokens come, for streaming and for stop
// strings (OpenAI's `stop`): the text ends before the first stop string,
// which is left out, and a piece is handed out only once no stop string can
// still begin in it, so a stream never shows text that is later cut.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_TEXTSTREAM_H
#define QCC_RUNTIME_TEXTSTREAM_H

#include "runtime/text/Tokenizer.h"

#include <string>
#include <vector>

namespace qcc::rt {

class TextStream {
public:
  /// `prompt` is the context the pieces are decoded after (Tokenizer::
  /// decodePiece); empty strings among `stops` are ignored.
  TextStream(const Tokenizer &tokenizer, std::vector<int64_t> prompt,
             std::vector<std::string> stops = {});
  /// Takes the next token: the text that became final (may be empty).
  /// Nothing once stopped().
  std::string push(int64_t id);
  /// The sequence ended (EOS, the token limit): the text held back.
  std::string finish();
  /// Whether a stop string appeared (the sequence should end there).
  bool stopped() const { return stopped_; }
  /// The final text so far: the pieces push and finish returned.
  const std::string &text() const { return text_; }

private:
  const Tokenizer &tokenizer;
  std::vector<int64_t> ids;
  std::vector<std::string> stops;
  std::string held; ///< decoded, not yet final
  std::string text_;
  bool stopped_ = false;
};

} // namespace qcc::rt

#endif // QCC_RUNTIME_TEXTSTREAM_H
