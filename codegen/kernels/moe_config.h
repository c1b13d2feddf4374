//===- moe_config.h - mixture-of-experts launch configuration ------------===//
//
// The launch configuration of moe.cuh as a type: every launch quantity of
// its four steps. Plain C++17 like numerics.h: moe.cuh includes it as
// "qcc/moe_config.h" (NVRTC, embedded), the emitter as
// "codegen/kernels/moe_config.h".
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_MOE_CONFIG_H
#define QCC_KERNELS_MOE_CONFIG_H

#if defined(__CUDACC_RTC__)
#include "qcc/host_device.h"
#else
#include "format/device/host_device.h"
#endif

namespace qcc {

/// The grouped GEMMs compute a TileN x TileR tile (output features x routes
/// of one expert) per CTA, over K in steps of TileK staged in shared memory.
template <int TileN, int TileR, int TileK, int BlockThreads> struct MoeLaunch {
  static_assert(BlockThreads % TileR == 0, "BlockThreads must be a multiple of TileR");
  static_assert(TileN % (BlockThreads / TileR) == 0,
                "TileN must be a multiple of BlockThreads / TileR");
  static constexpr int kTileN = TileN, kTileR = TileR, kTileK = TileK;
  static constexpr int kBlockThreads = BlockThreads;
  /// Outputs per thread: thread t owns route t % TileR and features
  /// t / TileR + i * (BlockThreads / TileR).
  static constexpr int kRowStride = BlockThreads / TileR;
  static constexpr int kRowsPerThread = TileN / kRowStride;
  static constexpr int kStride = TileK + 1; // padded rows: distinct banks
  /// Static shared memory: the routes' activations and up to two weight tiles.
  static constexpr int kStaticSmemBytes = 4 * kStride * (TileR + 2 * TileN);
  static_assert(kStaticSmemBytes <= 48 * 1024, "static shared memory over 48 KiB");
  static constexpr int kDynamicSmemBytes = 0;
  /// Step 1 (routes by expert): one CTA.
  static constexpr int kRouteThreads = 256;
  /// Step 4 (gate-weighted sum of each token's routes): one thread per output.
  static constexpr int kCombineThreads = 256;
  QCC_HOST_DEVICE static constexpr long long gridFeatures(long long n) {
    return (n + TileN - 1) / TileN;
  }
  QCC_HOST_DEVICE static constexpr long long gridRoutes(long long routes) {
    return (routes + TileR - 1) / TileR;
  }
};

/// The configuration the emitter instantiates.
using MoeDefault = MoeLaunch<64, 16, 32, 256>;

} // namespace qcc

#endif // QCC_KERNELS_MOE_CONFIG_H
