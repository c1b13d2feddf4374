//===- CpuPeaks.h - this CPU's roofline, measured ---------------*- C++ -*-===//
//
// The CPU's peaks are measured with the CPU backend's own kernels, so they
// live in its room; the cost model they are read against is
// runtime/core/Roofline.h.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPU_CPUPEAKS_H
#define QCC_RUNTIME_CPU_CPUPEAKS_H

#include "runtime/core/Roofline.h"

namespace qcc::rt {

/// This machine's CPU, measured by micro-benchmarks on first use (about half
/// a second) and kept for the rest of the process: STREAM-like copy and
/// triad (the better one is the bandwidth), OpenBLAS sgemm (f32; f16 runs as
/// f32 on the CPU backend) and the CPU qlinear's packed int8 GEMM
/// (runtime/cpu/CpuInt8Gemm.h) on a cache-resident weight (i8).
const Peaks &cpuPeaks();

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPU_CPUPEAKS_H
