//===- ReferenceKernels.h - every op's reference semantics ------*- C++ -*-===//
//
// One kernel per op kind (format/OpKinds.def), written to be obviously right:
// each reads its operands and attributes, computes the result shapes from the
// operands' actual shapes (types in the IR may be dynamic) and returns the
// results. Single-threaded, no BLAS, no instruction-set dispatch, nothing read
// from the environment: the same inputs give the same bits on every machine.
// This is what the compiler's constant folding runs (passes/ConstEval.h links
// this library, not a runtime backend), and what the CPU backend's fast
// kernels (runtime/cpu) are tested against and fall back to (its
// `reference` path runs exactly these). Errors throw std::runtime_error with
// the reason (the caller adds the node name).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_REFERENCE_REFERENCEKERNELS_H
#define QCC_RUNTIME_REFERENCE_REFERENCEKERNELS_H

#include "format/OpKind.h"
#include "format/device/numerics.h" // formulas shared with the CUDA kernels
#include "runtime/core/Tensor.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace qcc::rt {

/// Read access to a node's attributes, with errors that name the attribute.
class Attrs {
public:
  explicit Attrs(const nlohmann::json &j) : j(j) {}
  bool has(const char *name) const { return j.contains(name); }
  int64_t i(const char *name) const;
  int64_t i(const char *name, int64_t dflt) const;
  double f(const char *name) const;
  double f(const char *name, double dflt) const;
  bool b(const char *name) const;
  std::string s(const char *name, const std::string &dflt) const;
  std::vector<int64_t> ints(const char *name) const;
  std::vector<float> floats(const char *name) const;
  const nlohmann::json &raw(const char *name) const { return j.at(name); }

private:
  const nlohmann::json &j;
};

using format::OpKind;

/// Operands in order; an omitted optional operand is nullptr.
using Operands = std::vector<const Tensor *>;

/// What a linear's output pass applies after the product and the bias: the
/// epilogue of the kernel plan's GEMM regions. The session fuses a linear
/// whose only reader is an exact gelu or a silu, or an add or a mul of the
/// linear and another tensor of its shape (SwiGLU's silu(gate) * up), into
/// it (runtime/cpu/Session.cpp); the reference linear applies it after the
/// whole product, as the separate ops would.
struct LinearEpilogue {
  enum class Activation { None, Gelu, Silu }; // gelu: approximate = "none"
  Activation activation = Activation::None;
  const Tensor *residual = nullptr; // then + residual (the output's shape)
  const Tensor *factor = nullptr;   // then * factor (the output's shape)
};

/// C[M,N] = alpha * op(A) op(B) + beta * C with row-major operands (op
/// transposes when asked); K == 0 gives C = beta * C. The signature of every
/// float GEMM the kernels can be handed (the reference loops, the CPU
/// backend's BLAS).
using Sgemm = void (*)(bool transA, bool transB, int64_t M, int64_t N,
                       int64_t K, float alpha, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C,
                       int64_t ldc);

/// Copies n bytes at p to dst: a memcpy, or a reader that does not map a
/// file's pages (Artifact::read).
using ReadBytes = std::function<void(const void *p, size_t n, void *dst)>;
/// qcc.embedding (table, ids) with each row of the table copied by `read`:
/// the session reads a mapped table's rows without making it resident.
std::vector<Tensor> embeddingKernel(const Operands &ops, const ReadBytes &read);

/// qcc.lora (input [..., K], a [J, R, K], b [J, N, R]) for a call whose
/// sequences run with `adapters` (one per sequence, 0: none, j: a[j - 1]
/// and b[j - 1]; empty: every row none): each row's x A^T, then B, summed
/// in double per product. Throws naming a row count the sequences do not
/// divide or an adapter out of [0, J].
std::vector<Tensor> loraKernel(const Operands &ops,
                               const std::vector<int64_t> &adapters);

/// The input and bias of a linear whose weight [N, K] runs from a compressed
/// form (2:4, int4): `ops` are the linear's operands (ops[1], the weight, is
/// not read); x f32 [..., K], bias f32 [N] or absent. Throws
/// std::runtime_error naming the mismatch; returns x and the bias (or null).
std::pair<const Tensor *, const Tensor *>
compressedLinearOperands(const Operands &ops, int64_t N, int64_t K);

/// Checks i8 packed [N, K/2], scales [N, K/G] and offsets (null, or the
/// shape and element type of scales; any float type: the reference kernel
/// sees them widened to f32), the group size and the perm (i32 [K], a
/// permutation) or null; throws std::runtime_error with the reason.
/// Returns K.
int64_t checkInt4Operands(const Tensor &packed, const Tensor &scales,
                          const Tensor *perm, const Tensor *offsets,
                          int64_t groupSize);

/// f16 and bf16 are storage types (runtime/core/HalfFloat.h): the kernels
/// compute in f32. Calls `kernel` (the kernel of `op`) with every f16/bf16
/// operand widened to f32, then narrows each f32 result whose declared type
/// in `resultTypes` is f16/bf16 (round to nearest even), so that values keep
/// the IR's storage type between nodes. Ops that only move elements (the
/// MovesElements trait of OpKinds.def), and cast, take f16/bf16 operands as
/// they are. Everything that runs a node (the session, compile-time
/// evaluation) goes through this.
std::vector<Tensor>
computeInF32(OpKind op, const Operands &operands,
             const std::vector<DType> &resultTypes,
             const std::function<std::vector<Tensor>(const Operands &)> &kernel);

namespace reference {

/// The kernel of `op`: a switch over every OpKind without a default, so that
/// an op without a case is a compiler error (-Werror=switch). kv_attention
/// (the session runs it against its KV cache), lora (with the call's
/// adapters) and kernel (a region, run op by op) have none: they throw.
std::vector<Tensor> runKernel(OpKind op, const Attrs &attrs,
                              const Operands &operands);

/// The reference GEMM (Sgemm): each C element's products summed in float in
/// ascending k, then alpha * sum + beta * C.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc);

/// linear (operands input, weight, optional bias), then `epilogue`.
std::vector<Tensor> linear(const Operands &ops, const LinearEpilogue &epilogue);

/// In-place softmax of n values `stride` apart. Convention (both for
/// `softmax` and inside `attention`): a row whose every value is -inf (fully
/// masked) becomes all zeros rather than NaN, so that padding rows do not
/// poison later ops. Sums in double.
void softmaxRow(float *v, int64_t n, int64_t stride = 1);

} // namespace reference

} // namespace qcc::rt

#endif // QCC_RUNTIME_REFERENCE_REFERENCEKERNELS_H
