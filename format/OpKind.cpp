//===- OpKind.cpp - the op vocabulary of artifacts ------------------------===//
#include "format/OpKind.h"

using namespace qcc::format;

std::optional<OpKind> qcc::format::parseOpKind(std::string_view name) {
  // Once per node at load: a scan of some 70 short names is cheap enough.
  for (OpKind kind : kAllOpKinds)
    if (name == opKindName(kind))
      return kind;
  return std::nullopt;
}
