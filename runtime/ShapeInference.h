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

#include "runtime/Artifact.h"

namespace qcc::rt {

/// Result shapes of `node` given its operands' shapes (an omitted optional
/// operand has an empty shape). Throws std::runtime_error for an op without
/// a rule or operands that do not fit it.
std::vector<Shape> inferShapes(const Node &node,
                               const std::vector<Shape> &operands);

} // namespace qcc::rt

#endif // QCC_RUNTIME_SHAPEINFERENCE_H
