//===- ShapeInference.h - result shapes without running an op --*- C++ -*-===//
//
// The CUDA backend allocates a kernel's results before launching it, so it
// needs their shapes from the operands' shapes alone. The rules cover the ops
// that form-kernels puts into kernel regions (and kernel nodes, through their
// bodies); the CPU session checks them against the shapes its kernels
// actually produce whenever it runs a GPU plan (Session::Plan::Kernels).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_SHAPEINFERENCE_H
#define QCC_RUNTIME_SHAPEINFERENCE_H

#include "runtime/core/Artifact.h"

#include <map>

namespace qcc::rt {

/// Result shapes of `node` given its operands' shapes (an omitted optional
/// operand has an empty shape). Throws std::runtime_error for an op without
/// a rule or operands that do not fit it.
std::vector<Shape> inferShapes(const Node &node,
                               const std::vector<Shape> &operands);

/// Operand `i` of `n`'s shapes, which must exist with rank >= `minRank`
/// (else std::runtime_error naming the node).
const Shape &operandShape(const Node &n, const std::vector<Shape> &operands,
                          size_t i, size_t minRank);

/// The shapes of every value of kernel node `kernel`'s body (its block
/// arguments and its nodes' results) given the node's operands' shapes.
std::map<int64_t, Shape> inferBodyShapes(const Node &kernel,
                                         const std::vector<Shape> &operands);

} // namespace qcc::rt

#endif // QCC_RUNTIME_SHAPEINFERENCE_H
