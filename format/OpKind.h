//===- OpKind.h - the op vocabulary of artifacts ----------------*- C++ -*-===//
//
// The kinds of op an artifact node can hold, from format/OpKinds.def: the
// compiler writes their names (compiler/ArtifactWriter), the runtime parses
// each node's name once at load (runtime/core/Artifact) and dispatches with a
// `switch` over OpKind, so that an op without a case is a compiler warning,
// not a run-time lookup failure.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_OPKIND_H
#define QCC_FORMAT_OPKIND_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace qcc::format {

enum class OpKind : uint8_t {
#define QCC_OP(Kind, Name, Traits) Kind,
#include "format/OpKinds.def"
};

/// The per-op facts of OpKinds.def (its header says what each means).
namespace op_traits {
enum : unsigned { None = 0, MovesElements = 1u << 0, ElementwiseChain = 1u << 1 };
} // namespace op_traits

/// Every op kind, in OpKinds.def order.
inline constexpr OpKind kAllOpKinds[] = {
#define QCC_OP(Kind, Name, Traits) OpKind::Kind,
#include "format/OpKinds.def"
};

/// The op's name: its qcc dialect mnemonic and the "op" of an artifact node.
constexpr const char *opKindName(OpKind kind) {
  switch (kind) {
#define QCC_OP(Kind, Name, Traits)                                             \
  case OpKind::Kind:                                                           \
    return Name;
#include "format/OpKinds.def"
  }
  return "?"; // not an enumerator
}

/// The kind named `name`, if any.
std::optional<OpKind> parseOpKind(std::string_view name);

constexpr unsigned opTraits(OpKind kind) {
  using namespace op_traits;
  switch (kind) {
#define QCC_OP(Kind, Name, Traits)                                             \
  case OpKind::Kind:                                                           \
    return Traits;
#include "format/OpKinds.def"
  }
  return None;
}

/// Its CPU kernel moves elements by their byte size: f16/bf16 operands need
/// no widening to f32.
constexpr bool movesElements(OpKind kind) {
  return opTraits(kind) & op_traits::MovesElements;
}

/// form-kernels may put it into an elementwise chain region.
constexpr bool joinsElementwiseChain(OpKind kind) {
  return opTraits(kind) & op_traits::ElementwiseChain;
}

} // namespace qcc::format

#endif // QCC_FORMAT_OPKIND_H
