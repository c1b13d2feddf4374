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
  bool b(const char *name) const;
  std::string s(const char *name, const std::string &dflt) const;
  std::vector<int64_t> ints(const char *name) const;
  const nlohmann::json &raw(const char *name) const { return j.at(name); }

private:
  const nlohmann::json &j;
};

/// Operands in order; an omitted optional operand is nullptr.
using Operands = std::vector<const Tensor *>;
using CpuKernel = std::function<std::vector<Tensor>(const Attrs &,
                                                    const Operands &)>;

/// The kernel table, keyed by op name ("add", "linear", "attention", ...).
const std::unordered_map<std::string, CpuKernel> &cpuKernels();

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPUKERNELS_H
