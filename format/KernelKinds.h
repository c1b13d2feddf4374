//===- KernelKinds.h - the kernel kinds, without MLIR ------------*- C++ -*-===//
//
// The enum of format/KernelKinds.def, for code that links no MLIR (the
// runtime, the artifact format). The dialect's ODS enum (qcc::KernelKind)
// has the same enumerators in the same order.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_FORMAT_KERNELKINDS_H
#define QCC_FORMAT_KERNELKINDS_H

#include <optional>
#include <string_view>

namespace qcc::format {

/// The kinds the emitter instantiates with one emit function
/// (codegen/Emit<Family>.cpp), which tells its kinds apart.
enum class KernelFamily { Gemm, Norm, Elementwise, Attention, Moe };

enum class KernelKind {
#define QCC_KERNEL_KIND(Name, Spelling, Family) Name,
#include "format/KernelKinds.def"
};

inline constexpr int kNumKernelKinds = 0
#define QCC_KERNEL_KIND(Name, Spelling, Family) +1
#include "format/KernelKinds.def"
    ;

/// "gemm_i8", ...
const char *spelling(KernelKind k);
/// The kind of a spelling, if it is one.
std::optional<KernelKind> parseKernelKind(std::string_view s);
/// The family column of KernelKinds.def.
KernelFamily family(KernelKind k);
/// A GEMM with its epilogue chain (the GEMM family).
inline bool isGemm(KernelKind k) { return family(k) == KernelFamily::Gemm; }

} // namespace qcc::format

#endif // QCC_FORMAT_KERNELKINDS_H
