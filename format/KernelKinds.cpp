//===- KernelKinds.cpp - kernel kind spellings ----------------------------===//
#include "format/KernelKinds.h"

namespace qcc::format {

const char *spelling(KernelKind k) {
  switch (k) {
#define QCC_KERNEL_KIND(Name, Spelling, Family)                                \
  case KernelKind::Name:                                                       \
    return Spelling;
#include "format/KernelKinds.def"
  }
  return "?";
}

std::optional<KernelKind> parseKernelKind(std::string_view s) {
#define QCC_KERNEL_KIND(Name, Spelling, Family)                                \
  if (s == Spelling)                                                           \
    return KernelKind::Name;
#include "format/KernelKinds.def"
  return std::nullopt;
}

KernelFamily family(KernelKind k) {
  switch (k) {
#define QCC_KERNEL_KIND(Name, Spelling, Family)                                \
  case KernelKind::Name:                                                       \
    return KernelFamily::Family;
#include "format/KernelKinds.def"
  }
  return KernelFamily::Elementwise;
}

} // namespace qcc::format
