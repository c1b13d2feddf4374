//===- SyntheticWeights.h - seeded stand-ins for large weights --*- C++ -*-===//
//
// `qcc --synthetic-weights` writes benchmark artifacts that carry no weight
// data: every large weight (a linear's, an embedding table, 2:4 values and
// metadata, packed int4) becomes a record (distribution, its parameter, a
// seed) that the loader expands into the tensor, already in its final form
// (f32 / int8 / 2:4 / int4), so a 1B-parameter model travels in a few MB
// (docs/CUDA_BACKEND.md, "Benchmark artifacts"). The compiler measures each
// weight's RMS and records it, so the values have the real tensor's scale
// and the quantization scales stay the real ones. The outputs of such an
// artifact are meaningless; its speed is the real artifact's.
//
// The compiler (compiler/ArtifactWriter) and the loader (runtime/core/Artifact)
// share this one definition of the records and their expansion.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_SYNTHETICWEIGHTS_H
#define QCC_RUNTIME_SYNTHETICWEIGHTS_H

#include "runtime/core/Tensor.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace qcc::rt::synthetic {

enum class Dist : uint8_t {
  /// Zero-mean, standard deviation `stddev` (Irwin-Hall of four uniforms:
  /// bounded at 3.46 sigma, as quantized weights are); integers round and
  /// saturate to [-127, 127].
  Normal,
  /// 2:4 metadata words (format/Sparse24.h): each nibble one of the six
  /// valid (first < second) position pairs, uniformly.
  Sparse24Meta,
};

std::optional<Dist> parseDist(std::string_view name);
const char *distName(Dist d);

/// Weights smaller than this stay real (norms, scales, biases: small, and
/// what makes the values realistic).
constexpr uint64_t kMinBytes = 64 * 1024;

/// Whether `d` can fill tensors of element type `t`.
bool fills(Dist d, DType t);

/// Fills `elements` elements of type `t` at `out` (fills(d, t) holds). The
/// result depends on (d, stddev, seed) alone, not on the thread count: each
/// chunk of elements has its own generator seeded from (seed, chunk).
void generate(Dist d, double stddev, uint64_t seed, DType t, void *out,
              uint64_t elements);

/// The root mean square of `elements` values of type `t` (f32, f16, bf16,
/// i8): the stddev the compiler records for Normal.
double rms(DType t, const void *data, uint64_t elements);

} // namespace qcc::rt::synthetic

#endif // QCC_RUNTIME_SYNTHETICWEIGHTS_H
