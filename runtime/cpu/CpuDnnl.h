//===- CpuDnnl.h - oneDNN's sgemm for the float GEMMs ----------*- C++ -*-===//
//
// Where the build found oneDNN (Debian's libdnnl-dev: QCC_HAVE_DNNL), the
// fast path's float GEMMs of more than one row call oneDNN's sgemm instead
// of OpenBLAS's: those that do not run from weights packed at load
// (CpuF32Gemm.h: linears on AVX-512F CPUs), such as matmul ops. Chosen by measurement on this project's shapes
// (docs/CPU_BACKEND.md, "GEMM libraries"): single-threaded, on the demo's
// and SmolLM2's prefill blocks, 1.07-1.33x OpenBLAS 0.3.21. oneDNN's matmul
// primitive with AMX was faster still on int8 in isolation, but lost its
// gain to per-call overheads inside qrun (measured there; see the doc).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUDNNL_H
#define QCC_RUNTIME_CPUDNNL_H

#include <cstdint>

namespace qcc::rt {

/// C[M,N] = alpha * op(A) op(B) + beta * C, row-major, on the calling
/// thread, by oneDNN's sgemm when it is built in and the kernel path is
/// Fast. False (C untouched) otherwise or when oneDNN refuses the call: the
/// caller uses OpenBLAS.
bool dnnlSgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
               float alpha, const float *A, int64_t lda, const float *B,
               int64_t ldb, float beta, float *C, int64_t ldc);

} // namespace qcc::rt

#endif
