//===- HfTokenizer.cpp - Hugging Face tokenizer.json ----------------------===//
//
// Follows the `tokenizers` library (Rust, v0.23) step by step; the comments
// name the library's function where the behaviour is subtle. Every string is
// UTF-8 bytes; see HfTokenizer.h for how ill-formed input is handled.
//
//===----------------------------------------------------------------------===//
#include "runtime/text/HfTokenizer.h"

#include <nlohmann/json.hpp>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <functional>
#include <mutex>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

using namespace qcc::rt;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string &message) {
  throw std::runtime_error("tokenizer.json: " + message);
}

//===----------------------------------------------------------------------===//
// JSON access with messages that name the field
//===----------------------------------------------------------------------===//

const json &member(const json &o, const char *key, const std::string &where) {
  auto it = o.find(key);
  if (it == o.end())
    fail(where + " has no '" + key + "'");
  return *it;
}

/// Calls `each(element, its path)` for every element of the array o[key]
/// (the components of a Sequence normalizer, pre-tokenizer, decoder, ...).
template <typename F>
void forEachListed(const json &o, const char *key, const std::string &where,
                   F &&each) {
  const json &list = member(o, key, where);
  if (!list.is_array())
    fail(where + "." + key + " must be an array");
  for (size_t i = 0; i < list.size(); ++i)
    each(list[i], where + "." + key + "[" + std::to_string(i) + "]");
}

void requireObject(const json &o, const std::string &where) {
  if (!o.is_object())
    fail(where + " must be an object, not " + o.type_name());
}

std::string getString(const json &o, const char *key,
                      const std::string &where) {
  const json &v = member(o, key, where);
  if (!v.is_string())
    fail(where + "." + key + " must be a string");
  return v.get<std::string>();
}

/// A string member that may be absent or null (then `def`).
std::string optString(const json &o, const char *key, const std::string &where,
                      const std::string &def = "") {
  auto it = o.find(key);
  if (it == o.end() || it->is_null())
    return def;
  if (!it->is_string())
    fail(where + "." + key + " must be a string");
  return it->get<std::string>();
}

bool optBool(const json &o, const char *key, const std::string &where,
             bool def) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null())
    return def;
  if (!it->is_boolean())
    fail(where + "." + key + " must be true or false");
  return it->get<bool>();
}

int64_t asId(const json &v, const std::string &where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<int64_t>() > INT32_MAX)
    fail(where + " must be a token id (a non-negative integer)");
  return v.get<int64_t>();
}

int64_t optInt(const json &o, const char *key, const std::string &where,
               int64_t def) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null())
    return def;
  return asId(*it, where + "." + key);
}

std::string typeOf(const json &o, const std::string &where) {
  requireObject(o, where);
  return getString(o, "type", where);
}

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

struct Char {
  char32_t cp;  ///< U+FFFD for an ill-formed sequence
  uint32_t len; ///< bytes
  bool valid;
};

/// The character at s[i]: a well-formed UTF-8 sequence, or else the maximal
/// ill-formed subpart there (one character, as from_utf8_lossy counts them).
Char charAt(std::string_view s, size_t i) {
  unsigned char b = s[i];
  if (b < 0x80)
    return {b, 1, true};
  uint32_t n;
  char32_t cp;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3, cp = b & 0x0F;
    if (b == 0xE0)
      lo = 0xA0;
    else if (b == 0xED)
      hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4, cp = b & 0x07;
    if (b == 0xF0)
      lo = 0x90;
    else if (b == 0xF4)
      hi = 0x8F;
  } else {
    return {0xFFFD, 1, false};
  }
  for (uint32_t k = 1; k < n; ++k) {
    if (i + k >= s.size())
      return {0xFFFD, k, false};
    unsigned char c = s[i + k];
    if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF))
      return {0xFFFD, k, false};
    cp = (cp << 6) | (c & 0x3F);
  }
  return {cp, n, true};
}

void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

const char kReplacement[] = "\xEF\xBF\xBD"; // U+FFFD

/// Rust's String::from_utf8_lossy: each maximal ill-formed subpart becomes
/// one U+FFFD.
std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Char c = charAt(s, i);
    if (c.valid)
      out.append(s.substr(i, c.len));
    else
      out += kReplacement;
    i += c.len;
  }
  return out;
}

bool isValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    Char c = charAt(s, i);
    if (!c.valid)
      return false;
    i += c.len;
  }
  return true;
}

/// The single code point `s` holds, or -1.
int64_t singleChar(std::string_view s) {
  if (s.empty())
    return -1;
  Char c = charAt(s, 0);
  return c.valid && c.len == s.size() ? int64_t(c.cp) : -1;
}

// Rust's char predicates (the library's), on ICU's character database.
bool isWhitespace(char32_t c) {
  return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE);
}
bool isNumeric(char32_t c) { return U_GET_GC_MASK(c) & U_GC_N_MASK; }
bool isMark(char32_t c) { return U_GET_GC_MASK(c) & U_GC_M_MASK; }
bool isPunctuation(char32_t c) {
  bool ascii = (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) ||
               (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
  return ascii || (U_GET_GC_MASK(c) & U_GC_P_MASK);
}
/// The regex crate's \w.
bool isWordChar(char32_t c) {
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

/// Byte-level BPE's byte <-> character table (GPT-2's bytes_to_unicode).
struct ByteTable {
  std::array<std::string, 256> toChar;
  std::array<int16_t, 0x144> toByte;
  ByteTable() {
    toByte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      char32_t c = printable ? char32_t(b) : char32_t(256 + n++);
      appendUtf8(toChar[b], c);
      toByte[c] = int16_t(b);
    }
  }
  int byteOf(char32_t c) const { return c < toByte.size() ? toByte[c] : -1; }
};
const ByteTable &byteTable() {
  static const ByteTable table;
  return table;
}

std::string byteLevelMap(std::string_view s) {
  const ByteTable &t = byteTable();
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char b : s)
    out += t.toChar[b];
  return out;
}

std::string replaceAll(std::string_view s, std::string_view from,
                       std::string_view to) {
  std::string out;
  size_t i = 0;
  for (size_t j; (j = s.find(from, i)) != std::string_view::npos;
       i = j + from.size())
    out.append(s.substr(i, j - i)).append(to);
  out.append(s.substr(i));
  return out;
}

//===----------------------------------------------------------------------===//
// Patterns: what matches, and how matches split a string
//===----------------------------------------------------------------------===//

/// A match or the text between two (the library's find_matches: the spans
/// cover the string in order).
struct Span {
  size_t begin, end;
  bool match;
};

/// Spans for the characters where `pred` holds (a `Fn(char) -> bool`
/// pattern).
template <class Pred>
void findChars(std::string_view s, Pred pred, std::vector<Span> &out) {
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < s.size();) {
    Char c = charAt(s, i);
    if (pred(c.cp)) {
      if (last < i)
        out.push_back({last, i, false});
      out.push_back({i, i + c.len, true});
      last = i + c.len;
    }
    i += c.len;
  }
  if (last < s.size())
    out.push_back({last, s.size(), false});
}

/// A `pattern` of the file: {"String": s} (literal) or {"Regex": r}.
/// Regexes are the library's Oniguruma syntax; ICU runs them, with \s and
/// \S rewritten to Oniguruma's meaning (Unicode White_Space: ICU's \s lacks
/// U+000B and U+0085).
class Regex {
public:
  Regex(const std::string &pattern, bool literal, const std::string &where)
      : literal(literal), text(pattern) {
    if (literal)
      return;
    std::string translated;
    for (size_t i = 0; i < pattern.size(); ++i) {
      if (pattern[i] == '\\' && i + 1 < pattern.size()) {
        char c = pattern[++i];
        if (c == 's')
          translated += "\\p{White_Space}";
        else if (c == 'S')
          translated += "\\P{White_Space}";
        else
          translated.append({'\\', c});
        continue;
      }
      translated += pattern[i];
    }
    UErrorCode status = U_ZERO_ERROR;
    UParseError pe;
    compiled.reset(icu::RegexPattern::compile(
        icu::UnicodeString::fromUTF8(translated), 0, pe, status));
    if (U_SUCCESS(status))
      matcher.reset(compiled->matcher(status));
    if (U_FAILURE(status))
      fail(where + ": cannot compile the regex '" + pattern + "' (" +
           u_errorName(status) + " at offset " + std::to_string(pe.offset) +
           ")");
  }

  static std::unique_ptr<Regex> fromJson(const json &p,
                                         const std::string &where) {
    requireObject(p, where);
    if (p.contains("Regex"))
      return std::make_unique<Regex>(getString(p, "Regex", where), false,
                                     where);
    if (p.contains("String"))
      return std::make_unique<Regex>(getString(p, "String", where), true,
                                     where);
    fail(where + " must be {\"String\": ...} or {\"Regex\": ...}");
  }

  void findMatches(std::string_view s, std::vector<Span> &out) const {
    if (s.empty()) {
      out.push_back({0, 0, false});
      return;
    }
    size_t prev = 0;
    auto add = [&](size_t b, size_t e) {
      if (prev != b)
        out.push_back({prev, b, false});
      out.push_back({b, e, true});
      prev = e;
    };
    if (literal) {
      // An empty literal matches nothing.
      for (size_t j = 0;
           !text.empty() && (j = s.find(text, prev)) != std::string_view::npos;)
        add(j, j + text.size());
    } else {
      std::lock_guard<std::mutex> lock(mu);
      // UTF-16 for ICU, with the byte offset of every code unit (an
      // ill-formed sequence is one U+FFFD).
      buffer.remove();
      offsets.clear();
      for (size_t i = 0; i < s.size();) {
        Char c = charAt(s, i);
        buffer.append(UChar32(c.cp));
        offsets.push_back(i);
        if (c.cp >= 0x10000)
          offsets.push_back(i);
        i += c.len;
      }
      offsets.push_back(s.size());
      matcher->reset(buffer);
      UErrorCode status = U_ZERO_ERROR;
      while (matcher->find(status) && U_SUCCESS(status)) {
        int32_t b = matcher->start(status), e = matcher->end(status);
        add(offsets[b], offsets[e]);
      }
      if (U_FAILURE(status))
        throw std::runtime_error(std::string("tokenizer: the regex '") + text +
                                 "' failed: " + u_errorName(status));
    }
    if (prev != s.size())
      out.push_back({prev, s.size(), false});
  }

private:
  bool literal;
  std::string text;
  std::unique_ptr<icu::RegexPattern> compiled;
  mutable std::mutex mu;
  mutable std::unique_ptr<icu::RegexMatcher> matcher;
  mutable icu::UnicodeString buffer;
  mutable std::vector<size_t> offsets;
};

enum class Behavior {
  Removed,
  Isolated,
  MergedWithPrevious,
  MergedWithNext,
  Contiguous
};

Behavior parseBehavior(const json &o, const std::string &where,
                       const char *def = nullptr) {
  std::string b = def ? optString(o, "behavior", where, def)
                      : getString(o, "behavior", where);
  if (b == "Removed")
    return Behavior::Removed;
  if (b == "Isolated")
    return Behavior::Isolated;
  if (b == "MergedWithPrevious")
    return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext")
    return Behavior::MergedWithNext;
  if (b == "Contiguous")
    return Behavior::Contiguous;
  fail(where + ".behavior '" + b + "' is not supported");
}

/// NormalizedString::split: the [begin, end) parts that remain once
/// `behavior` has combined the matches with the text around them.
std::vector<std::pair<size_t, size_t>>
applyBehavior(const std::vector<Span> &spans, Behavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previous = false;
  switch (behavior) {
  case Behavior::Isolated:
    for (const Span &s : spans)
      out.push_back({s.begin, s.end});
    break;
  case Behavior::Removed:
    for (const Span &s : spans)
      if (!s.match)
        out.push_back({s.begin, s.end});
    break;
  case Behavior::Contiguous:
    for (const Span &s : spans) {
      if (s.match == previous && !out.empty())
        out.back().second = s.end;
      else
        out.push_back({s.begin, s.end});
      previous = s.match;
    }
    break;
  case Behavior::MergedWithPrevious:
    for (const Span &s : spans) {
      if (s.match && !previous && !out.empty())
        out.back().second = s.end;
      else
        out.push_back({s.begin, s.end});
      previous = s.match;
    }
    break;
  case Behavior::MergedWithNext:
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->match && !previous && !out.empty())
        out.back().first = it->begin;
      else
        out.push_back({it->begin, it->end});
      previous = it->match;
    }
    std::reverse(out.begin(), out.end());
    break;
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Pieces of the text on their way to the model
//===----------------------------------------------------------------------===//

struct Piece {
  std::string text;
  int64_t token = -1;   ///< an added token's id: not processed further
  bool atStart = false; ///< begins at offset 0 of the input (Metaspace "first")
};

/// PreTokenizedString::split: `fn` splits each piece that is not an added
/// token; empty results are dropped.
template <class Fn> void splitEach(std::vector<Piece> &pieces, Fn fn) {
  std::vector<Piece> out;
  out.reserve(pieces.size());
  for (Piece &p : pieces) {
    if (p.token >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    size_t first = out.size();
    fn(p, out);
    out.erase(std::remove_if(out.begin() + first, out.end(),
                             [](const Piece &q) { return q.text.empty(); }),
              out.end());
  }
  pieces = std::move(out);
}

void emitParts(const Piece &p, const std::vector<Span> &spans,
               Behavior behavior, std::vector<Piece> &out) {
  for (auto [b, e] : applyBehavior(spans, behavior))
    if (e > b)
      out.push_back({p.text.substr(b, e - b), -1, p.atStart && b == 0});
}

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void normalize(std::string &s) const = 0;
};

/// Applies `fn` to each well-formed run of `s`; ill-formed bytes stay.
template <class Fn> void onWellFormedRuns(std::string &s, Fn fn) {
  if (isValidUtf8(s)) {
    fn(s);
    return;
  }
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    for (Char c; j < s.size() && (c = charAt(s, j)).valid; j += c.len)
      ;
    std::string run = s.substr(i, j - i);
    fn(run);
    out += run;
    if (j < s.size()) {
      Char c = charAt(s, j);
      out.append(s, j, c.len);
      j += c.len;
    }
    i = j;
  }
  s = std::move(out);
}

struct UnicodeNormalizer : Normalizer {
  const icu::Normalizer2 *form;
  explicit UnicodeNormalizer(const icu::Normalizer2 *form) : form(form) {}
  void normalize(std::string &s) const override {
    onWellFormedRuns(s, [&](std::string &run) {
      UErrorCode status = U_ZERO_ERROR;
      if (form->isNormalizedUTF8(run, status) && U_SUCCESS(status))
        return;
      std::string out;
      icu::StringByteSink<std::string> sink(&out, int32_t(run.size()));
      status = U_ZERO_ERROR;
      form->normalizeUTF8(0, run, sink, nullptr, status);
      if (U_FAILURE(status))
        throw std::runtime_error(std::string("tokenizer: normalization "
                                             "failed: ") +
                                 u_errorName(status));
      run = std::move(out);
    });
  }
};

/// Rust's char::to_lowercase, one character at a time (no final-sigma rule).
struct Lowercase : Normalizer {
  void normalize(std::string &s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      Char c = charAt(s, i);
      if (!c.valid)
        out.append(s, i, c.len);
      else if (c.cp == 0x130) // the one unconditional multi-character mapping
        out += "i\xCC\x87";
      else
        appendUtf8(out, char32_t(u_tolower(UChar32(c.cp))));
      i += c.len;
    }
    s = std::move(out);
  }
};

struct Strip : Normalizer {
  bool left, right;
  Strip(bool left, bool right) : left(left), right(right) {}
  void normalize(std::string &s) const override {
    size_t b = 0, e = s.size();
    if (left)
      for (Char c; b < e && (c = charAt(s, b)).valid && isWhitespace(c.cp);)
        b += c.len;
    if (right) {
      size_t lastEnd = b; // end of the last non-whitespace character
      for (size_t i = b; i < e;) {
        Char c = charAt(s, i);
        i += c.len;
        if (!c.valid || !isWhitespace(c.cp))
          lastEnd = i;
      }
      e = lastEnd;
    }
    s = s.substr(b, e - b);
  }
};

struct StripAccents : Normalizer {
  void normalize(std::string &s) const override {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      Char c = charAt(s, i);
      if (!c.valid || !isMark(c.cp))
        out.append(s, i, c.len);
      i += c.len;
    }
    s = std::move(out);
  }
};

struct ReplaceNormalizer : Normalizer {
  std::unique_ptr<Regex> pattern;
  std::string content;
  void normalize(std::string &s) const override {
    std::vector<Span> spans;
    pattern->findMatches(s, spans);
    std::string out;
    for (const Span &sp : spans)
      if (sp.match)
        out += content;
      else
        out.append(s, sp.begin, sp.end - sp.begin);
    s = std::move(out);
  }
};

struct Prepend : Normalizer {
  std::string prefix;
  void normalize(std::string &s) const override {
    if (!s.empty())
      s.insert(0, prefix);
  }
};

/// SentencePiece's nmt_nfkc control-character rules (without the NFKC).
struct Nmt : Normalizer {
  void normalize(std::string &s) const override {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      Char c = charAt(s, i);
      char32_t x = c.cp;
      i += c.len;
      if (!c.valid) {
        out.append(s, i - c.len, c.len);
        continue;
      }
      if ((x >= 0x1 && x <= 0x8) || x == 0xB || (x >= 0xE && x <= 0x1F) ||
          x == 0x7F || x == 0x8F || x == 0x9F)
        continue;
      if (x == 0x9 || x == 0xA || x == 0xC || x == 0xD || x == 0x1680 ||
          (x >= 0x200B && x <= 0x200F) || x == 0x2028 || x == 0x2029 ||
          x == 0x2581 || x == 0xFEFF || x == 0xFFFD)
        x = ' ';
      appendUtf8(out, x);
    }
    s = std::move(out);
  }
};

struct ByteLevelNormalizer : Normalizer {
  void normalize(std::string &s) const override { s = byteLevelMap(s); }
};

struct NormalizerSequence : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> steps;
  void normalize(std::string &s) const override {
    for (const auto &n : steps)
      n->normalize(s);
  }
};

const icu::Normalizer2 *icuForm(const std::string &type) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2 *n = nullptr;
  if (type == "NFC")
    n = icu::Normalizer2::getNFCInstance(status);
  else if (type == "NFD")
    n = icu::Normalizer2::getNFDInstance(status);
  else if (type == "NFKC")
    n = icu::Normalizer2::getNFKCInstance(status);
  else
    n = icu::Normalizer2::getNFKDInstance(status);
  if (U_FAILURE(status) || !n)
    fail(std::string("cannot load ICU's ") + type +
         " data: " + u_errorName(status));
  return n;
}

std::unique_ptr<Normalizer> parseNormalizer(const json &o,
                                            const std::string &where) {
  std::string type = typeOf(o, where);
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeNormalizer>(icuForm(type));
  if (type == "Lowercase")
    return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(optBool(o, "strip_left", where, true),
                                   optBool(o, "strip_right", where, true));
  if (type == "StripAccents")
    return std::make_unique<StripAccents>();
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceNormalizer>();
    r->pattern =
        Regex::fromJson(member(o, "pattern", where), where + ".pattern");
    r->content = getString(o, "content", where);
    return r;
  }
  if (type == "Prepend") {
    auto p = std::make_unique<Prepend>();
    p->prefix = getString(o, "prepend", where);
    return p;
  }
  if (type == "Nmt")
    return std::make_unique<Nmt>();
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelNormalizer>();
  if (type == "Sequence") {
    auto seq = std::make_unique<NormalizerSequence>();
    forEachListed(o, "normalizers", where, [&](const json &e, std::string w) {
      seq->steps.push_back(parseNormalizer(e, w));
    });
    return seq;
  }
  fail(where + " type '" + type + "' is not supported");
}

//===----------------------------------------------------------------------===//
// Pre-tokenizers
//===----------------------------------------------------------------------===//

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  virtual void preTokenize(std::vector<Piece> &pieces) const = 0;
};

const char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct ByteLevelPre : PreTokenizer {
  bool addPrefixSpace, useRegex;
  std::unique_ptr<Regex> regex;
  ByteLevelPre(bool addPrefixSpace, bool useRegex)
      : addPrefixSpace(addPrefixSpace), useRegex(useRegex) {
    if (useRegex)
      regex = std::make_unique<Regex>(kGpt2Pattern, false, "ByteLevel");
  }
  void preTokenize(std::vector<Piece> &pieces) const override {
    std::vector<Span> spans;
    splitEach(pieces, [&](Piece &p, std::vector<Piece> &out) {
      if (addPrefixSpace && p.text[0] != ' ')
        p.text = " " + p.text;
      if (!useRegex) {
        out.push_back(std::move(p));
        return;
      }
      spans.clear();
      regex->findMatches(p.text, spans);
      emitParts(p, spans, Behavior::Isolated, out);
    });
    for (Piece &p : pieces)
      if (p.token < 0)
        p.text = byteLevelMap(p.text);
  }
};

struct SplitPre : PreTokenizer {
  std::unique_ptr<Regex> pattern;
  Behavior behavior;
  bool invert;
  void preTokenize(std::vector<Piece> &pieces) const override {
    std::vector<Span> spans;
    splitEach(pieces, [&](Piece &p, std::vector<Piece> &out) {
      spans.clear();
      pattern->findMatches(p.text, spans);
      if (invert)
        for (Span &s : spans)
          s.match = !s.match;
      emitParts(p, spans, behavior, out);
    });
  }
};

enum class PrependScheme { Always, First, Never };

PrependScheme parsePrependScheme(const json &o, const std::string &where) {
  // Files before prepend_scheme have add_prefix_space (false: never).
  std::string def =
      optBool(o, "add_prefix_space", where, true) ? "always" : "never";
  std::string s = optString(o, "prepend_scheme", where, def);
  if (s == "always")
    return PrependScheme::Always;
  if (s == "first")
    return PrependScheme::First;
  if (s == "never")
    return PrependScheme::Never;
  fail(where + ".prepend_scheme '" + s + "' is not supported");
}

std::string parseReplacementChar(const json &o, const std::string &where,
                                 const char *key) {
  std::string r = getString(o, key, where);
  if (singleChar(r) < 0)
    fail(where + "." + key + " must be one character");
  return r;
}

struct MetaspacePre : PreTokenizer {
  std::string replacement;
  char32_t replacementChar;
  PrependScheme scheme;
  bool split;
  void preTokenize(std::vector<Piece> &pieces) const override {
    std::vector<Span> spans;
    splitEach(pieces, [&](Piece &p, std::vector<Piece> &out) {
      p.text = replaceAll(p.text, " ", replacement);
      bool starts = p.text.compare(0, replacement.size(), replacement) == 0;
      if (!starts && (scheme == PrependScheme::Always ||
                      (scheme == PrependScheme::First && p.atStart)))
        p.text.insert(0, replacement);
      if (!split) {
        out.push_back(std::move(p));
        return;
      }
      spans.clear();
      findChars(
          p.text, [&](char32_t c) { return c == replacementChar; }, spans);
      emitParts(p, spans, Behavior::MergedWithNext, out);
    });
  }
};

/// Pre-tokenizers that split on a character class.
struct CharSplitPre : PreTokenizer {
  std::function<bool(char32_t)> pred;
  Behavior behavior;
  CharSplitPre(std::function<bool(char32_t)> pred, Behavior behavior)
      : pred(std::move(pred)), behavior(behavior) {}
  void preTokenize(std::vector<Piece> &pieces) const override {
    std::vector<Span> spans;
    splitEach(pieces, [&](Piece &p, std::vector<Piece> &out) {
      spans.clear();
      findChars(p.text, pred, spans);
      emitParts(p, spans, behavior, out);
    });
  }
};

struct PreTokenizerSequence : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  void preTokenize(std::vector<Piece> &pieces) const override {
    for (const auto &s : steps)
      s->preTokenize(pieces);
  }
};

std::unique_ptr<PreTokenizer> parsePreTokenizer(const json &o,
                                                const std::string &where) {
  std::string type = typeOf(o, where);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(
        optBool(o, "add_prefix_space", where, true),
        optBool(o, "use_regex", where, true));
  if (type == "Split") {
    auto s = std::make_unique<SplitPre>();
    s->pattern =
        Regex::fromJson(member(o, "pattern", where), where + ".pattern");
    s->behavior = parseBehavior(o, where);
    s->invert = optBool(o, "invert", where, false);
    return s;
  }
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspacePre>();
    m->replacement = parseReplacementChar(o, where, "replacement");
    m->replacementChar = char32_t(singleChar(m->replacement));
    m->scheme = parsePrependScheme(o, where);
    m->split = optBool(o, "split", where, true);
    return m;
  }
  if (type == "Digits")
    return std::make_unique<CharSplitPre>(
        isNumeric, optBool(o, "individual_digits", where, false)
                       ? Behavior::Isolated
                       : Behavior::Contiguous);
  if (type == "Whitespace") {
    auto s = std::make_unique<SplitPre>();
    s->pattern = std::make_unique<Regex>(R"(\w+|[^\w\s]+)", false, where);
    s->behavior = Behavior::Removed;
    s->invert = true;
    return s;
  }
  if (type == "WhitespaceSplit")
    return std::make_unique<CharSplitPre>(isWhitespace, Behavior::Removed);
  if (type == "Punctuation")
    return std::make_unique<CharSplitPre>(isPunctuation,
                                          parseBehavior(o, where, "Isolated"));
  if (type == "BertPreTokenizer") {
    auto seq = std::make_unique<PreTokenizerSequence>();
    seq->steps.push_back(
        std::make_unique<CharSplitPre>(isWhitespace, Behavior::Removed));
    seq->steps.push_back(
        std::make_unique<CharSplitPre>(isPunctuation, Behavior::Isolated));
    return seq;
  }
  if (type == "CharDelimiterSplit") {
    int64_t d = singleChar(getString(o, "delimiter", where));
    if (d < 0)
      fail(where + ".delimiter must be one character");
    return std::make_unique<CharSplitPre>(
        [d](char32_t c) { return c == char32_t(d); }, Behavior::Removed);
  }
  if (type == "Sequence") {
    auto seq = std::make_unique<PreTokenizerSequence>();
    forEachListed(o, "pretokenizers", where,
                  [&](const json &e, std::string w) {
                    seq->steps.push_back(parsePreTokenizer(e, w));
                  });
    return seq;
  }
  fail(where + " type '" + type + "' is not supported");
}

//===----------------------------------------------------------------------===//
// The BPE model
//===----------------------------------------------------------------------===//

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const {
    return std::hash<std::string_view>()(s);
  }
};
template <class V>
using StringMap =
    std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class Bpe {
public:
  Bpe(const json &m, const std::string &where);

  /// The ids of one pre-token (BPE::tokenize_with_cache).
  void tokenize(std::string_view word, std::vector<int64_t> &out) const;

  int64_t tokenId(std::string_view s) const {
    auto it = vocab.find(s);
    return it == vocab.end() ? -1 : it->second;
  }
  const std::string *tokenText(int64_t id) const {
    return id >= 0 && size_t(id) < text.size() && present[id] ? &text[id]
                                                              : nullptr;
  }
  int64_t size() const { return int64_t(text.size()); }

private:
  std::vector<int32_t> mergeWord(std::string_view word) const;

  StringMap<int32_t> vocab;
  std::vector<std::string> text; // by id
  std::vector<bool> present;
  /// (left id, right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<uint32_t, int32_t>> merges;
  std::string unkToken, prefix, suffix;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  std::array<int32_t, 256> byteIds; // <0xXX> tokens, or -1

  static constexpr size_t kCacheCapacity = 10000, kCacheMaxWord = 256;
  mutable std::mutex cacheMutex;
  mutable StringMap<std::vector<int32_t>> cache;
};

Bpe::Bpe(const json &m, const std::string &where) {
  const json &v = member(m, "vocab", where);
  if (!v.is_object())
    fail(where + ".vocab must be an object");
  int64_t maxId = -1;
  for (auto it = v.begin(); it != v.end(); ++it) {
    int64_t id = asId(it.value(), where + ".vocab[\"" + it.key() + "\"]");
    vocab[it.key()] = int32_t(id);
    maxId = std::max(maxId, id);
  }
  text.resize(maxId + 1);
  present.resize(maxId + 1);
  for (const auto &[s, id] : vocab)
    text[id] = s, present[id] = true;

  unkToken = optString(m, "unk_token", where);
  prefix = optString(m, "continuing_subword_prefix", where);
  suffix = optString(m, "end_of_word_suffix", where);
  fuseUnk = optBool(m, "fuse_unk", where, false);
  byteFallback = optBool(m, "byte_fallback", where, false);
  ignoreMerges = optBool(m, "ignore_merges", where, false);
  if (auto d = m.find("dropout"); d != m.end() && !d->is_null() &&
                                  !(d->is_number() && d->get<double>() == 0.0))
    fail(where + ".dropout is not supported (null or 0 only)");
  if (!unkToken.empty() && !vocab.count(unkToken))
    fail(where + ".unk_token '" + unkToken + "' is not in the vocabulary");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byteIds[b] = int32_t(tokenId(name));
  }

  const json &ms = member(m, "merges", where);
  if (!ms.is_array())
    fail(where + ".merges must be an array");
  uint32_t rank = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    std::string at = where + ".merges[" + std::to_string(i) + "]";
    std::string a, b;
    if (ms[i].is_string()) {
      const std::string &line = ms[i].get_ref<const std::string &>();
      if (line.rfind("#version", 0) == 0)
        continue;
      size_t sp = line.find(' ');
      if (sp == std::string::npos ||
          line.find(' ', sp + 1) != std::string::npos)
        fail(at + " must be two tokens separated by one space");
      a = line.substr(0, sp), b = line.substr(sp + 1);
    } else if (ms[i].is_array() && ms[i].size() == 2 && ms[i][0].is_string() &&
               ms[i][1].is_string()) {
      a = ms[i][0].get<std::string>(), b = ms[i][1].get<std::string>();
    } else {
      fail(at + " must be \"a b\" or [\"a\", \"b\"]");
    }
    int64_t ia = tokenId(a), ib = tokenId(b);
    if (ia < 0 || ib < 0)
      fail(at + ": '" + (ia < 0 ? a : b) + "' is not in the vocabulary");
    if (b.size() < prefix.size() || b.compare(0, prefix.size(), prefix) != 0)
      fail(at + ": '" + b + "' lacks the continuing_subword_prefix");
    std::string merged = a + b.substr(prefix.size());
    int64_t im = tokenId(merged);
    if (im < 0)
      fail(at + ": the merged token '" + merged + "' is not in the vocabulary");
    merges[uint64_t(ia) << 32 | uint64_t(ib)] = {rank++, int32_t(im)};
  }
}

std::vector<int32_t> Bpe::mergeWord(std::string_view w) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t len; // bytes; 0: merged into the symbol before it
  };
  std::vector<Symbol> symbols;
  symbols.reserve(w.size());
  auto add = [&](int32_t id, uint32_t len) {
    int32_t n = int32_t(symbols.size());
    if (n > 0)
      symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, len});
  };
  int32_t unkId = -1; // a pending run of unknown characters
  uint32_t unkLen = 0;
  std::string s;
  for (size_t i = 0; i < w.size();) {
    Char c = charAt(w, i);
    bool first = i == 0, last = i + c.len == w.size();
    std::string_view piece = w.substr(i, c.len);
    i += c.len;
    std::string_view key = piece;
    if ((!first && !prefix.empty()) || (last && !suffix.empty())) {
      s.assign(first ? "" : prefix).append(piece).append(last ? suffix : "");
      key = s;
    }
    if (auto it = vocab.find(key); it != vocab.end()) {
      if (unkId >= 0)
        add(unkId, unkLen);
      unkId = -1;
      add(it->second, c.len);
      continue;
    }
    if (byteFallback) {
      bool all = true;
      for (unsigned char b : key)
        all &= byteIds[b] >= 0;
      if (all) {
        // As the library does: a pending unknown run is not flushed first.
        for (unsigned char b : key)
          add(byteIds[b], 1);
        continue;
      }
    }
    if (!unkToken.empty()) {
      if (unkId >= 0 && fuseUnk) {
        unkLen += c.len;
      } else {
        if (unkId >= 0)
          add(unkId, unkLen);
        unkId = vocab.find(unkToken)->second;
        unkLen = c.len;
      }
    }
  }
  if (unkId >= 0)
    add(unkId, unkLen);

  // Word::merge_all: the lowest-ranked pair first, leftmost among equals.
  struct Merge {
    uint32_t rank;
    int32_t pos, id;
    bool operator<(const Merge &o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  auto find = [&](int32_t a, int32_t b) {
    return merges.find(uint64_t(uint32_t(a)) << 32 | uint32_t(b));
  };
  std::priority_queue<Merge> queue;
  for (size_t k = 0; k + 1 < symbols.size(); ++k)
    if (auto it = find(symbols[k].id, symbols[k + 1].id); it != merges.end())
      queue.push({it->second.first, int32_t(k), it->second.second});
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol &cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1)
      continue;
    Symbol right = symbols[cur.next];
    auto it = find(cur.id, right.id);
    if (it == merges.end() || it->second.second != top.id)
      continue; // stale entry
    symbols[cur.next].len = 0;
    cur.id = top.id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0)
      symbols[right.next].prev = top.pos;
    if (cur.prev >= 0)
      if (auto p = find(symbols[cur.prev].id, cur.id); p != merges.end())
        queue.push({p->second.first, cur.prev, p->second.second});
    if (cur.next >= 0)
      if (auto n = find(cur.id, symbols[cur.next].id); n != merges.end())
        queue.push({n->second.first, top.pos, n->second.second});
  }
  std::vector<int32_t> ids;
  for (const Symbol &sym : symbols)
    if (sym.len != 0)
      ids.push_back(sym.id);
  return ids;
}

void Bpe::tokenize(std::string_view word, std::vector<int64_t> &out) const {
  if (word.empty())
    return;
  if (ignoreMerges)
    if (int64_t id = tokenId(word); id >= 0) {
      out.push_back(id);
      return;
    }
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = mergeWord(word);
  out.insert(out.end(), ids.begin(), ids.end());
  if (word.size() < kCacheMaxWord) {
    std::lock_guard<std::mutex> lock(cacheMutex);
    if (cache.size() < kCacheCapacity)
      cache.emplace(std::string(word), std::move(ids));
  }
}

//===----------------------------------------------------------------------===//
// Decoders
//===----------------------------------------------------------------------===//

struct Decoder {
  virtual ~Decoder() = default;
  /// Decoder::decode_chain.
  virtual void decodeChain(std::vector<std::string> &tokens) const = 0;
};

struct ByteLevelDecoder : Decoder {
  void decodeChain(std::vector<std::string> &tokens) const override {
    const ByteTable &t = byteTable();
    std::string bytes;
    for (const std::string &tok : tokens) {
      size_t start = bytes.size();
      bool mapped = true;
      for (size_t i = 0; i < tok.size() && mapped;) {
        Char c = charAt(tok, i);
        int b = c.valid ? t.byteOf(c.cp) : -1;
        mapped = b >= 0;
        bytes += char(b);
        i += c.len;
      }
      if (!mapped) { // a character outside the table: the token as it is
        bytes.resize(start);
        bytes += tok;
      }
    }
    tokens.assign(1, lossy(bytes));
  }
};

struct MetaspaceDecoder : Decoder {
  char32_t replacement;
  PrependScheme scheme;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      std::string out;
      const std::string &tok = tokens[k];
      for (size_t i = 0; i < tok.size();) {
        Char c = charAt(tok, i);
        if (c.valid && c.cp == replacement) {
          // Every replacement in the first token goes (not just a leading one).
          if (k != 0 || scheme == PrependScheme::Never)
            out += ' ';
        } else {
          out.append(tok, i, c.len);
        }
        i += c.len;
      }
      tokens[k] = std::move(out);
    }
  }
};

struct ByteFallbackDecoder : Decoder {
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (bytes.empty())
        return;
      if (isValidUtf8(bytes))
        out.push_back(bytes);
      else
        out.insert(out.end(), bytes.size(), kReplacement);
      bytes.clear();
    };
    for (std::string &tok : tokens) {
      if (tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>' &&
          std::isxdigit((unsigned char)tok[3]) &&
          std::isxdigit((unsigned char)tok[4])) {
        bytes += char(std::stoi(tok.substr(3, 2), nullptr, 16));
        continue;
      }
      flush();
      out.push_back(std::move(tok));
    }
    flush();
    tokens = std::move(out);
  }
};

struct FuseDecoder : Decoder {
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::string all;
    for (const std::string &t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
  }
};

struct StripDecoder : Decoder {
  char32_t content;
  size_t start, stop;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (std::string &tok : tokens) {
      std::vector<size_t> at; // character boundaries
      std::vector<char32_t> chars;
      for (size_t i = 0; i < tok.size();) {
        Char c = charAt(tok, i);
        at.push_back(i);
        chars.push_back(c.valid ? c.cp : char32_t(-1));
        i += c.len;
      }
      at.push_back(tok.size());
      size_t n = chars.size(), b = 0, e = n;
      for (size_t i = 0; i < std::min(start, n) && chars[i] == content; ++i)
        b = i + 1;
      for (size_t i = 0; i < std::min(stop, n) && chars[n - 1 - i] == content;
           ++i)
        e = n - 1 - i;
      tok = b < e ? tok.substr(at[b], at[e] - at[b]) : std::string();
    }
  }
};

struct ReplaceDecoder : Decoder {
  std::unique_ptr<Regex> pattern;
  std::string content;
  void decodeChain(std::vector<std::string> &tokens) const override {
    std::vector<Span> spans;
    for (std::string &tok : tokens) {
      spans.clear();
      pattern->findMatches(tok, spans);
      std::string out;
      for (const Span &s : spans)
        if (s.match)
          out += content;
        else
          out.append(tok, s.begin, s.end - s.begin);
      tok = std::move(out);
    }
  }
};

struct BpeDecoder : Decoder {
  std::string suffix;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = suffix.empty()
                      ? tokens[i]
                      : replaceAll(tokens[i], suffix,
                                   i + 1 == tokens.size() ? "" : " ");
  }
};

struct DecoderSequence : Decoder {
  std::vector<std::unique_ptr<Decoder>> steps;
  void decodeChain(std::vector<std::string> &tokens) const override {
    for (const auto &d : steps)
      d->decodeChain(tokens);
  }
};

std::unique_ptr<Decoder> parseDecoder(const json &o, const std::string &where) {
  std::string type = typeOf(o, where);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelDecoder>();
  if (type == "Metaspace") {
    auto m = std::make_unique<MetaspaceDecoder>();
    m->replacement =
        char32_t(singleChar(parseReplacementChar(o, where, "replacement")));
    m->scheme = parsePrependScheme(o, where);
    return m;
  }
  if (type == "ByteFallback")
    return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse")
    return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto s = std::make_unique<StripDecoder>();
    s->content =
        char32_t(singleChar(parseReplacementChar(o, where, "content")));
    s->start = size_t(optInt(o, "start", where, 0));
    s->stop = size_t(optInt(o, "stop", where, 0));
    return s;
  }
  if (type == "Replace") {
    auto r = std::make_unique<ReplaceDecoder>();
    r->pattern =
        Regex::fromJson(member(o, "pattern", where), where + ".pattern");
    r->content = getString(o, "content", where);
    return r;
  }
  if (type == "BPEDecoder") {
    auto b = std::make_unique<BpeDecoder>();
    b->suffix = optString(o, "suffix", where, "</w>");
    return b;
  }
  if (type == "Sequence") {
    auto seq = std::make_unique<DecoderSequence>();
    forEachListed(o, "decoders", where, [&](const json &e, std::string w) {
      seq->steps.push_back(parseDecoder(e, w));
    });
    return seq;
  }
  fail(where + " type '" + type + "' is not supported");
}

//===----------------------------------------------------------------------===//
// Added tokens
//===----------------------------------------------------------------------===//

struct AddedToken {
  int64_t id;
  std::string content;
  bool singleWord, lstrip, rstrip, normalized, special;
  /// What matches it (its normalized form when `normalized`) and what decode
  /// gives the decoder for it.
  std::string form;
};

/// Leftmost-longest matching of a set of added tokens (the library's
/// Aho-Corasick automaton with MatchKind::LeftmostLongest), on a byte trie.
class AddedMatcher {
public:
  void add(const AddedToken *t) {
    if (t->form.empty())
      return;
    int32_t n = 0;
    for (unsigned char c : t->form) {
      int32_t child = childOf(n, c);
      if (child < 0) {
        child = int32_t(nodes.size());
        nodes[n].children.push_back({c, child});
        nodes.emplace_back();
      }
      n = child;
    }
    nodes[n].token = t; // equal contents: the later token wins
    starts[(unsigned char)t->form[0]] = true;
  }

  /// AddedVocabulary::find_matches then split_with_indices: `p` as text and
  /// added-token pieces.
  void split(const Piece &p, std::vector<Piece> &out) const {
    std::string_view s = p.text;
    if (nodes.size() == 1 || s.empty()) {
      out.push_back(p);
      return;
    }
    size_t startOffset = 0;
    auto emitText = [&](size_t b, size_t e) {
      if (e > b)
        out.push_back(
            {std::string(s.substr(b, e - b)), -1, p.atStart && b == 0});
    };
    for (size_t i = 0; i < s.size();) {
      const AddedToken *hit = starts[(unsigned char)s[i]] ? longestAt(s, i)
                                                          : nullptr;
      if (!hit) {
        ++i;
        continue;
      }
      size_t start = i, stop = i + hit->form.size();
      i = stop;
      if (hit->singleWord) {
        bool startSpace = start == 0 || !endsWithWord(s.substr(0, start));
        bool stopSpace = stop == s.size() || !startsWithWord(s.substr(stop));
        if (!startSpace || !stopSpace)
          continue;
      }
      if (hit->lstrip)
        start = std::max(trailingSpaceStart(s.substr(0, start)), startOffset);
      if (hit->rstrip)
        stop += leadingSpaceLength(s.substr(stop));
      emitText(startOffset, start);
      out.push_back({std::string(s.substr(start, stop - start)), hit->id,
                     p.atStart && start == 0});
      startOffset = stop;
      i = std::max(i, stop);
    }
    emitText(startOffset, s.size());
  }

private:
  /// The regex crate's \w$ and ^\w.
  static bool endsWithWord(std::string_view s) {
    if (s.empty())
      return false;
    size_t i = s.size() - 1; // back to the last character's first byte
    for (int k = 0; k < 3 && i > 0 && (s[i] & 0xC0) == 0x80; ++k)
      --i;
    Char c = charAt(s, i);
    return c.valid && i + c.len == s.size() && isWordChar(c.cp);
  }
  static bool startsWithWord(std::string_view s) {
    Char c = charAt(s, 0);
    return c.valid && isWordChar(c.cp);
  }
  static size_t trailingSpaceStart(std::string_view s) {
    size_t start = s.size();
    for (size_t i = 0; i < s.size();) {
      Char c = charAt(s, i);
      if (!c.valid || !isWhitespace(c.cp))
        start = i + c.len;
      i += c.len;
    }
    return start;
  }
  static size_t leadingSpaceLength(std::string_view s) {
    size_t i = 0;
    for (Char c;
         i < s.size() && (c = charAt(s, i)).valid && isWhitespace(c.cp);)
      i += c.len;
    return i;
  }

  int32_t childOf(int32_t n, unsigned char c) const {
    for (auto [byte, child] : nodes[n].children)
      if (byte == c)
        return child;
    return -1;
  }
  const AddedToken *longestAt(std::string_view s, size_t i) const {
    const AddedToken *best = nullptr;
    for (int32_t n = 0; i < s.size() && (n = childOf(n, s[i])) >= 0; ++i)
      if (nodes[n].token)
        best = nodes[n].token;
    return best;
  }

  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    const AddedToken *token = nullptr;
  };
  std::vector<Node> nodes = std::vector<Node>(1);
  std::array<bool, 256> starts{};
};

//===----------------------------------------------------------------------===//
// Post-processors
//===----------------------------------------------------------------------===//

/// Special tokens around the sequence (single-sequence templates only).
struct PostStep {
  std::vector<int64_t> before, after;
};

void parsePostProcessor(const json &o, const std::string &where,
                        std::vector<PostStep> &steps) {
  std::string type = typeOf(o, where);
  if (type == "ByteLevel")
    return;
  if (type == "Sequence") {
    forEachListed(o, "processors", where, [&](const json &e, std::string w) {
      parsePostProcessor(e, w, steps);
    });
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto idOf = [&](const char *key) {
      const json &pair = member(o, key, where);
      if (!pair.is_array() || pair.size() != 2)
        fail(where + "." + key + " must be [token, id]");
      return asId(pair[1], where + "." + key + "[1]");
    };
    steps.push_back({{idOf("cls")}, {idOf("sep")}});
    return;
  }
  if (type == "TemplateProcessing") {
    const json &single = member(o, "single", where);
    const json &specials = member(o, "special_tokens", where);
    if (!single.is_array())
      fail(where + ".single must be an array");
    PostStep step;
    int sequences = 0;
    for (size_t i = 0; i < single.size(); ++i) {
      std::string at = where + ".single[" + std::to_string(i) + "]";
      requireObject(single[i], at);
      if (single[i].contains("Sequence")) {
        ++sequences;
        continue;
      }
      const json &sp = member(single[i], "SpecialToken", at);
      requireObject(sp, at + ".SpecialToken");
      std::string name = getString(sp, "id", at + ".SpecialToken");
      if (!specials.is_object() || !specials.contains(name))
        fail(where + ".special_tokens has no '" + name + "'");
      const json &ids = member(specials[name], "ids",
                               where + ".special_tokens[\"" + name + "\"]");
      if (!ids.is_array())
        fail(where + ".special_tokens[\"" + name + "\"].ids must be an array");
      auto &dst = sequences ? step.after : step.before;
      for (const json &id : ids)
        dst.push_back(
            asId(id, where + ".special_tokens[\"" + name + "\"].ids"));
    }
    if (sequences != 1)
      fail(where + ".single must contain the sequence ($A) exactly once");
    steps.push_back(std::move(step));
    return;
  }
  fail(where + " type '" + type + "' is not supported");
}

} // namespace

//===----------------------------------------------------------------------===//
// The tokenizer
//===----------------------------------------------------------------------===//

struct HfTokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<Bpe> model;
  std::vector<PostStep> post;
  std::unique_ptr<Decoder> decoder;
  std::vector<std::unique_ptr<AddedToken>> added;
  std::unordered_map<int64_t, const AddedToken *> addedById;
  StringMap<int64_t> addedByContent;
  std::unordered_set<std::string> specialForms;
  AddedMatcher rawMatcher, normalizedMatcher;
  int64_t bos = -1, eos = -1, size = 0;

  explicit Impl(std::string_view text);
  void load(const json &j);
};

HfTokenizer::Impl::Impl(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    std::string what = e.what(); // "[json.exception.parse_error.101] parse..."
    if (auto k = what.find("] "); k != std::string::npos)
      what = what.substr(k + 2);
    fail("malformed JSON: " + what);
  }
  if (!j.is_object())
    fail("the top level must be an object");
  try {
    load(j);
  } catch (const json::exception &e) {
    fail(e.what());
  }
}

void HfTokenizer::Impl::load(const json &j) {
  if (!j.contains("model"))
    fail("no 'model'");
  const json &m = j["model"];
  requireObject(m, "model");
  std::string type = m.contains("type") ? typeOf(m, "model") : "BPE";
  if (type != "BPE")
    fail("model type '" + type + "' is not supported (only BPE)");
  model = std::make_unique<Bpe>(m, "model");

  if (auto it = j.find("normalizer"); it != j.end() && !it->is_null())
    normalizer = parseNormalizer(*it, "normalizer");
  if (auto it = j.find("pre_tokenizer"); it != j.end() && !it->is_null())
    preTokenizer = parsePreTokenizer(*it, "pre_tokenizer");
  if (auto it = j.find("post_processor"); it != j.end() && !it->is_null())
    parsePostProcessor(*it, "post_processor", post);
  if (auto it = j.find("decoder"); it != j.end() && !it->is_null())
    decoder = parseDecoder(*it, "decoder");

  size = model->size();
  if (auto it = j.find("added_tokens"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      fail("added_tokens must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      std::string at = "added_tokens[" + std::to_string(i) + "]";
      const json &t = (*it)[i];
      requireObject(t, at);
      auto tok = std::make_unique<AddedToken>();
      tok->id = asId(member(t, "id", at), at + ".id");
      tok->content = getString(t, "content", at);
      tok->special = optBool(t, "special", at, false);
      tok->singleWord = optBool(t, "single_word", at, false);
      tok->lstrip = optBool(t, "lstrip", at, false);
      tok->rstrip = optBool(t, "rstrip", at, false);
      tok->normalized = optBool(t, "normalized", at, !tok->special);
      if (tok->content.empty())
        continue;
      tok->form = tok->content;
      if (tok->normalized && normalizer)
        normalizer->normalize(tok->form);
      size = std::max(size, tok->id + 1);
      addedByContent[tok->content] = tok->id;
      addedById[tok->id] = tok.get();
      if (tok->special)
        specialForms.insert(tok->content);
      (tok->normalized ? normalizedMatcher : rawMatcher).add(tok.get());
      added.push_back(std::move(tok));
    }
  }

  auto lookup = [&](std::string_view s) -> int64_t {
    if (auto it = addedByContent.find(s); it != addedByContent.end())
      return it->second;
    return model->tokenId(s);
  };
  for (const PostStep &s : post) {
    if (bos < 0 && !s.before.empty())
      bos = s.before.front();
    if (!s.after.empty())
      eos = s.after.back();
  }
  for (const char *name :
       {"<s>", "<|begin_of_text|>", "<bos>", "<|startoftext|>"})
    if (bos < 0)
      bos = lookup(name);
  for (const char *name :
       {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "</s>",
        "<|endoftext|>", "<|end_of_text|>", "<eos>"})
    if (eos < 0)
      eos = lookup(name);
}

HfTokenizer::HfTokenizer(std::string_view json)
    : impl(std::make_unique<Impl>(json)) {}
HfTokenizer::~HfTokenizer() = default;
HfTokenizer::HfTokenizer(HfTokenizer &&) noexcept = default;
HfTokenizer &HfTokenizer::operator=(HfTokenizer &&) noexcept = default;

std::vector<int64_t> HfTokenizer::encode(std::string_view text,
                                         bool addSpecialTokens) const {
  const Impl &t = *impl;
  std::vector<int64_t> ids;
  if (!text.empty()) {
    // AddedVocabulary::extract_and_normalize: raw added tokens, then each
    // other piece normalized and split on the normalized added tokens.
    std::vector<Piece> pieces;
    t.rawMatcher.split(Piece{std::string(text), -1, true}, pieces);
    splitEach(pieces, [&](Piece &p, std::vector<Piece> &out) {
      if (t.normalizer)
        t.normalizer->normalize(p.text);
      t.normalizedMatcher.split(p, out);
    });
    if (t.preTokenizer)
      t.preTokenizer->preTokenize(pieces);
    ids.reserve(text.size() / 3);
    for (const Piece &p : pieces)
      if (p.token >= 0)
        ids.push_back(p.token);
      else
        t.model->tokenize(p.text, ids);
  }
  if (addSpecialTokens)
    for (const PostStep &s : t.post) {
      ids.insert(ids.begin(), s.before.begin(), s.before.end());
      ids.insert(ids.end(), s.after.begin(), s.after.end());
    }
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int64_t> &ids,
                                bool skipSpecialTokens) const {
  const Impl &t = *impl;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string *s = nullptr;
    if (auto it = t.addedById.find(id); it != t.addedById.end())
      s = &it->second->form;
    else
      s = t.model->tokenText(id);
    if (!s || (skipSpecialTokens && t.specialForms.count(*s)))
      continue;
    tokens.push_back(*s);
  }
  std::string out;
  if (t.decoder) {
    t.decoder->decodeChain(tokens);
    for (const std::string &s : tokens)
      out += s;
  } else {
    for (size_t i = 0; i < tokens.size(); ++i)
      out += (i ? " " : "") + tokens[i];
  }
  return out;
}

int64_t HfTokenizer::tokenId(std::string_view token) const {
  if (auto it = impl->addedByContent.find(token);
      it != impl->addedByContent.end())
    return it->second;
  return impl->model->tokenId(token);
}

std::string HfTokenizer::tokenText(int64_t id) const {
  if (auto it = impl->addedById.find(id); it != impl->addedById.end())
    return it->second->content;
  const std::string *s = impl->model->tokenText(id);
  return s ? *s : std::string();
}

bool HfTokenizer::isSpecial(int64_t id) const {
  auto it = impl->addedById.find(id);
  return it != impl->addedById.end() && it->second->special;
}

int64_t HfTokenizer::bosId() const { return impl->bos; }
int64_t HfTokenizer::eosId() const { return impl->eos; }
int64_t HfTokenizer::vocabSize() const { return impl->size; }
