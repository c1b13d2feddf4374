//===- norm_config.h - norm launch configuration -------------------------===//
//
// The launch configuration of norm.cuh and the block size qcc picks for a
// row width. Plain C++17 like numerics.h: norm.cuh includes it as
// "qcc/norm_config.h" (NVRTC, embedded), the emitter as
// "codegen/kernels/norm_config.h".
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_NORM_CONFIG_H
#define QCC_KERNELS_NORM_CONFIG_H

#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#endif

namespace qcc {

template <int BlockThreads> struct NormLaunch {
  static constexpr int kBlockThreads = BlockThreads;
  static constexpr int kDynamicSmemBytes = 0;
  static constexpr int kStaticSmemBytes = (BlockThreads / 32) * 4;
  QCC_HOST_DEVICE static constexpr int gridX(int rows) { return rows; }
};

/// The block size the emitter launches a row of `dim` elements with (one
/// CTA per row; wider rows get more threads).
QCC_HOST_DEVICE constexpr int normBlockThreads(long long dim) {
  return dim <= 1024 ? 128 : dim <= 4096 ? 256 : 512;
}

/// NormParams (norm.cuh), declared once: FIELD(type, name, default) in
/// order, LINE() between groups. norm.cuh declares the struct from it and the
/// emitter's wrapper fills it from it (EmitNorm.cpp), a group per line, so a
/// field added here is one the wrapper must fill.
#define QCC_NORM_PARAMS(FIELD, LINE)                                          \
  FIELD(const InT *, in, )        /* [rows, D] */                             \
  FIELD(const ParamT *, gamma, )  /* [D] */                                   \
  FIELD(const ParamT *, beta, )   /* [D] or null (layer_norm only) */         \
  FIELD(OutT *, out, )            /* [rows, D] (may be null when quantizing) */ \
  LINE()                                                                      \
  FIELD(signed char *, q, )       /* [rows, D] int8 (Quantize only) */        \
  FIELD(float *, q_scale, )       /* [rows] */                                \
  FIELD(int *, q_zero_point, )    /* [rows] (written 0), may be null */       \
  LINE()                                                                      \
  FIELD(int, rows, )                                                          \
  FIELD(int, dim, )                                                           \
  FIELD(float, epsilon, )

} // namespace qcc

#endif // QCC_KERNELS_NORM_CONFIG_H
