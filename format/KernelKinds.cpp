//===- KernelKinds.cpp - kernel kind spellings ----------------------------===//
#include "format/KernelKinds.h"

namespace qcc::format {

const char *spelling(KernelKind k) {
  switch (k) {
#define QCC_KERNEL_KIND(Name, Spelling, IsGemm)                                \
  case KernelKind::Name:                                                       \
    return Spelling;
#include "format/KernelKinds.def"
  }
  return "?";
}

std::optional<KernelKind> parseKernelKind(std::string_view s) {
#define QCC_KERNEL_KIND(Name, Spelling, IsGemm)                                \
  if (s == Spelling)                                                           \
    return KernelKind::Name;
#include "format/KernelKinds.def"
  return std::nullopt;
}

bool isGemm(KernelKind k) {
  switch (k) {
#define QCC_KERNEL_KIND(Name, Spelling, IsGemm)                                \
  case KernelKind::Name:                                                       \
    return IsGemm;
#include "format/KernelKinds.def"
  }
  return false;
}

} // namespace qcc::format
