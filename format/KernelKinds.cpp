//===- KernelKinds.cpp - kernel kind spellings ----------------------------===//
#include "format/KernelKinds.h"

namespace qcc::format {

const char *spelling(KernelKind k) {
  switch (k) {
#define QCC_KERNEL_KIND(Name, Spelling)                                        \
  case KernelKind::Name:                                                       \
    return Spelling;
#include "format/KernelKinds.def"
  }
  return "?";
}

std::optional<KernelKind> parseKernelKind(std::string_view s) {
#define QCC_KERNEL_KIND(Name, Spelling)                                        \
  if (s == Spelling)                                                           \
    return KernelKind::Name;
#include "format/KernelKinds.def"
  return std::nullopt;
}

} // namespace qcc::format
