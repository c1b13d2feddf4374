//===- broadcast.h - the element a broadcast operand gives ----------------===//
//
// ONNX (NumPy) broadcasting for elementwise chains: output element i reads
// the operand element at its coordinates, with every dimension the operand
// broadcasts along (size 1, or missing on the left) contributing nothing.
// Plain C++17 like numerics.h: elementwise.cuh includes it as
// "qcc/broadcast.h" (NVRTC, embedded), the host tests as
// "codegen/kernels/broadcast.h", so both index with this one formula.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_BROADCAST_H
#define QCC_KERNELS_BROADCAST_H

#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#endif

namespace qcc {

/// The operand element that output element `i` reads: the output's
/// row-major coordinates over `dims` (each >= 1) dotted with the operand's
/// element `strides`, aligned with the output's dimensions (0 where it
/// broadcasts). The loop runs over a constant Rank, so it unrolls.
template <int Rank>
QCC_HOST_DEVICE inline long long broadcastIndex(long long i,
                                                const long long (&dims)[Rank],
                                                const long long (&strides)[Rank]) {
  long long index = 0;
  for (int d = Rank - 1; d >= 0; --d) {
    index += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return index;
}

} // namespace qcc

#endif // QCC_KERNELS_BROADCAST_H
