//===- HalfFloat.h - converting tensors between f32, f16, bf16 ---*- C++ -*-===//
//
// The scalar conversions are format/HalfFloat.h (one definition for the
// compiler and the runtime); here they meet the runtime's tensors.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_HALFFLOAT_H
#define QCC_RUNTIME_HALFFLOAT_H

#include "format/HalfFloat.h"
#include "runtime/core/Tensor.h"

namespace qcc::rt {

using format::bf16ToFloat;
using format::floatToBF16;
using format::floatToHalf;
using format::halfToFloat;

/// True for the storage-only float types (f16, bf16).
inline bool isHalfFloat(DType t) { return t == DType::F16 || t == DType::BF16; }

/// `t` converted between f32, f16 and bf16 (a copy; `t` itself when it
/// already has dtype `to`). Throws std::runtime_error for other dtypes.
Tensor convertFloat(const Tensor &t, DType to);

} // namespace qcc::rt

#endif // QCC_RUNTIME_HALFFLOAT_H
