//===- TextStreamTest.cpp - a generated sequence's text, stop strings -----===//
//
// runtime/text/TextStream.h on a real tokenizer (test/models/tokenizers: GPT-2's
// byte-level BPE pipeline): pieces add up to the decoded text, a stop string
// across token boundaries cuts the text before it, and no piece handed out
// ever holds text that a stop string later cuts.
//
//===----------------------------------------------------------------------===//
#include "runtime/text/TextStream.h"
#include "runtime/text/Tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace qcc::rt;

namespace {

Tokenizer gpt2() {
  std::ifstream in(QCC_SOURCE_DIR "/test/models/tokenizers/gpt2.json",
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return Tokenizer(ss.str());
}

const char *kPrompt = "Once upon a time";
const char *kText = " there was a princess, who lived in a castle by the sea.";

struct Streamed {
  std::string pieces; // everything push and finish handed out
  std::string pushed; // what push alone handed out
  bool stopped = false;
  std::string text;
};

Streamed stream(const Tokenizer &tok, std::vector<std::string> stops) {
  std::vector<int64_t> prompt = tok.encode(kPrompt);
  TextStream s(tok, prompt, std::move(stops));
  Streamed out;
  for (int64_t id : tok.encode(kText)) {
    out.pieces += s.push(id);
    if (s.stopped())
      break;
  }
  out.pushed = out.pieces;
  out.pieces += s.finish();
  out.stopped = s.stopped();
  out.text = s.text();
  return out;
}

TEST(TextStream, PiecesAddUpToTheText) {
  Tokenizer tok = gpt2();
  Streamed s = stream(tok, {});
  EXPECT_EQ(s.pieces, kText);
  EXPECT_EQ(s.text, kText);
  EXPECT_FALSE(s.stopped);
}

TEST(TextStream, StopStringAcrossTokensCutsBeforeIt) {
  Tokenizer tok = gpt2();
  // "ss, wh" spans the tokens of "princess", "," and " who".
  Streamed s = stream(tok, {"@@", "ss, wh"});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, " there was a prince");
  EXPECT_EQ(s.pieces, s.text); // nothing past the cut was handed out
}

TEST(TextStream, EarliestStopWinsAndEmptyOnesAreIgnored) {
  Tokenizer tok = gpt2();
  Streamed s = stream(tok, {"", " castle", " a "});
  EXPECT_EQ(s.text, " there was");
  EXPECT_EQ(s.pieces, s.text);
}

TEST(TextStream, HeldPrefixOfAStopStringComesAtFinish) {
  Tokenizer tok = gpt2();
  // The text ends in "sea." and "sea.x" never comes: "sea." is held back
  // until finish().
  Streamed s = stream(tok, {"sea.x"});
  EXPECT_FALSE(s.stopped);
  EXPECT_EQ(s.pushed + "sea.", kText);
  EXPECT_EQ(s.pieces, kText);
  EXPECT_EQ(s.text, kText);
}

} // namespace
