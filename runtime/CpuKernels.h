//===- CpuKernels.h - the CPU reference backend's op kernels ----*- C++ -*-===//
//
// One kernel per qcc op (the op name without "qcc."). A kernel reads its
// operands and attributes, computes the result shapes from the operands'
// actual shapes (types in the IR may be dynamic) and returns the results.
// Kernels are the reference semantics of the dialect docs: simple and
// obviously right; float GEMMs go through BLAS. Errors throw
// std::runtime_error with the reason (the session adds the node name).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_CPUKERNELS_H
#define QCC_RUNTIME_CPUKERNELS_H

#include "runtime/Tensor.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <unordered_map>
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
  const nlohmann::json &raw(const char *name) const { return j.at(name); }

private:
  const nlohmann::json &j;
};

/// An attention score after Gemma-2's logit softcapping (`attention` and
/// `kv_attention` with softcap > 0): cap * tanh(x / cap).
inline float softcapScore(float x, float cap) {
  return cap * std::tanh(x / cap);
}

/// Operands in order; an omitted optional operand is nullptr.
using Operands = std::vector<const Tensor *>;
using CpuKernel = std::function<std::vector<Tensor>(const Attrs &,
                                                    const Operands &)>;

/// The kernel table, keyed by op name ("add", "linear", "attention", ...).
const std::unordered_map<std::string, CpuKernel> &cpuKernels();

/// f16 and bf16 are storage types (runtime/HalfFloat.h): the kernels compute
/// in f32. Calls `kernel` (the kernel of `op`) with every f16/bf16 operand
/// widened to f32, then narrows each f32 result whose declared type in
/// `resultTypes` is f16/bf16 (round to nearest even), so that values keep the
/// IR's storage type between nodes. Ops that only move elements, and cast,
/// take f16/bf16 operands as they are. Everything that runs a node (the
/// session, compile-time evaluation) goes through this.
std::vector<Tensor>
computeInF32(const std::string &op, const Operands &operands,
             const std::vector<DType> &resultTypes,
             const std::function<std::vector<Tensor>(const Operands &)> &kernel);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUKERNELS_H
