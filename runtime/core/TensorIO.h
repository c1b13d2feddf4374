//===- TensorIO.h - reading and writing tensor files ------------*- C++ -*-===//
#ifndef QCC_RUNTIME_TENSORIO_H
#define QCC_RUNTIME_TENSORIO_H

#include "runtime/core/Tensor.h"

#include <string>

namespace qcc::rt {

/// Reads a tensor from a NumPy .npy file (little-endian, C order; float32,
/// float16, int64, int32, int8, bool) or from an ONNX TensorProto .pb file
/// (as in the ONNX backend tests), chosen by the extension. Throws
/// std::runtime_error naming the file and the problem.
Tensor readTensorFile(const std::string &path);
/// The same, for the bytes of a .npy file; `what` names it in errors.
Tensor parseNpy(const std::string &bytes, const std::string &what);
/// The same, for an in-memory serialized TensorProto.
Tensor parseTensorProto(const std::string &bytes, const std::string &what);

/// Writes a tensor as a .npy file; bf16, which numpy has no dtype for, is
/// written as float32 (exact: every bf16 value is one).
void writeNpy(const std::string &path, const Tensor &t);

} // namespace qcc::rt

#endif // QCC_RUNTIME_TENSORIO_H
