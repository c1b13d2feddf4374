//===- KernelListing.h - an artifact's GPU kernels as text -----*- C++ -*-===//
#ifndef QCC_RUNTIME_KERNELLISTING_H
#define QCC_RUNTIME_KERNELLISTING_H

#include "runtime/core/Artifact.h"

#include <ostream>

namespace qcc::rt {

/// qrun --list-kernels: per entry point of the GPU plan (by name), its
/// launches in order: region, kind, entry, the sm_80 / sm_90 / PTX binary
/// sizes and the largest dynamic shared memory of its steps (or why the
/// region has no kernel). One line saying so when there are no kernels.
void listKernels(const Artifact &artifact, std::ostream &os);

} // namespace qcc::rt

#endif // QCC_RUNTIME_KERNELLISTING_H
