//===- SyntheticWeights.cpp - seeded stand-ins for large weights ----------===//
#include "runtime/core/SyntheticWeights.h"
#include "runtime/core/HalfFloat.h"

#include "format/device/numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

namespace qcc::rt::synthetic {

namespace {

/// Elements per independently seeded chunk (the unit of parallel work).
constexpr uint64_t kChunk = 1 << 16;

/// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state, one add and three
/// multiply-xorshift steps per output; plenty for stand-in weights.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

SplitMix64 chunkGenerator(uint64_t seed, uint64_t chunk) {
  SplitMix64 g{seed ^ (0xD1B54A32D192ED03ull * (chunk + 1))};
  g.next(); // decorrelate neighbouring chunks' first outputs
  return g;
}

/// A zero-mean, unit-variance draw: four 16-bit uniforms summed (variance
/// 4/12 of the unit interval, hence the sqrt(3)).
float unitNormal(SplitMix64 &g) {
  uint64_t r = g.next();
  float s = float(r & 0xFFFF) + float((r >> 16) & 0xFFFF) +
            float((r >> 32) & 0xFFFF) + float(r >> 48);
  return (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

/// The six valid 2:4 nibbles: first | second << 2, first < second.
constexpr uint32_t kValidNibbles[6] = {0x4, 0x8, 0xC, 0x9, 0xD, 0xE};

void fillChunk(Dist d, float stddev, DType t, void *out, uint64_t begin,
               uint64_t end, SplitMix64 g) {
  switch (d) {
  case Dist::Normal:
    for (uint64_t i = begin; i < end; ++i) {
      float v = stddev * unitNormal(g);
      switch (t) {
      case DType::F32:
        static_cast<float *>(out)[i] = v;
        break;
      case DType::F16:
        static_cast<uint16_t *>(out)[i] = floatToHalf(v);
        break;
      case DType::BF16:
        static_cast<uint16_t *>(out)[i] = floatToBF16(v);
        break;
      case DType::I8:
        static_cast<int8_t *>(out)[i] =
            (int8_t)std::clamp(std::nearbyint(v), -127.0f, 127.0f);
        break;
      case DType::F8E4M3:
        static_cast<uint8_t *>(out)[i] = numerics::floatToE4M3(v);
        break;
      case DType::I64:
      case DType::I32:
      case DType::Bool:
        return; // fills() refuses these
      }
    }
    return;
  case Dist::Sparse24Meta:
    for (uint64_t i = begin; i < end; ++i) {
      uint64_t r = g.next();
      uint32_t w = 0;
      for (int n = 0; n < 8; ++n)
        w |= kValidNibbles[(((r >> (8 * n)) & 0xFF) * 6) >> 8] << (4 * n);
      static_cast<uint32_t *>(out)[i] = w;
    }
    return;
  }
}

} // namespace

std::optional<Dist> parseDist(std::string_view name) {
  if (name == "normal")
    return Dist::Normal;
  if (name == "sparse24_meta")
    return Dist::Sparse24Meta;
  return std::nullopt;
}

const char *distName(Dist d) {
  switch (d) {
  case Dist::Normal:
    return "normal";
  case Dist::Sparse24Meta:
    return "sparse24_meta";
  }
  return "?";
}

bool fills(Dist d, DType t) {
  switch (d) {
  case Dist::Normal:
    return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
           t == DType::I8 || t == DType::F8E4M3;
  case Dist::Sparse24Meta:
    return t == DType::I32;
  }
  return false;
}

void generate(Dist d, double stddev, uint64_t seed, DType t, void *out,
              uint64_t elements) {
  const uint64_t chunks = (elements + kChunk - 1) / kChunk;
  auto work = [&](uint64_t first, uint64_t step) {
    for (uint64_t c = first; c < chunks; c += step)
      fillChunk(d, (float)stddev, t, out, c * kChunk,
                std::min(elements, (c + 1) * kChunk), chunkGenerator(seed, c));
  };
  uint64_t threads = std::min<uint64_t>(
      chunks, std::max(1u, std::thread::hardware_concurrency()));
  if (threads <= 1)
    return work(0, 1);
  std::vector<std::thread> pool;
  for (uint64_t i = 1; i < threads; ++i)
    pool.emplace_back(work, i, threads);
  work(0, threads);
  for (std::thread &th : pool)
    th.join();
}

double rms(DType t, const void *data, uint64_t elements) {
  if (elements == 0)
    return 0.0;
  double sum = 0.0;
  for (uint64_t i = 0; i < elements; ++i) {
    double v = 0.0;
    switch (t) {
    case DType::F32:
      v = static_cast<const float *>(data)[i];
      break;
    case DType::F16:
      v = halfToFloat(static_cast<const uint16_t *>(data)[i]);
      break;
    case DType::BF16:
      v = bf16ToFloat(static_cast<const uint16_t *>(data)[i]);
      break;
    case DType::I8:
      v = static_cast<const int8_t *>(data)[i];
      break;
    case DType::F8E4M3:
      v = numerics::e4m3ToFloat(static_cast<const uint8_t *>(data)[i]);
      break;
    case DType::I64:
    case DType::I32:
    case DType::Bool:
      return 0.0;
    }
    if (std::isfinite(v))
      sum += v * v;
  }
  return std::sqrt(sum / (double)elements);
}

} // namespace qcc::rt::synthetic
