//===- gemm_config.h - GEMM / GEMV tile configurations as types ----------===//
//
// The tile configurations of gemm_core.cuh's mainloops (and the f32 GEMM's
// cast step), as types whose constexpr members are every launch quantity.
// Plain C++17 like numerics.h: the device templates include it as
// "qcc/gemm_config.h" (NVRTC, embedded), the emitter as
// "codegen/kernels/gemm_config.h", so a launch's block size and dynamic
// shared memory come from the type the kernel is instantiated with
// (Cfg::kThreads, Cfg::kSmemBytes), never from a copied formula.
//
// Every configuration has kThreads (blockDim.x of a 1-D block), kSmemBytes
// (dynamic shared memory) and kBlockM x kBlockN, the [M, N] tile one CTA
// computes: gridDim = (ceil(N / kBlockN), ceil(M / kBlockM)).
//
//===----------------------------------------------------------------------===//
#ifndef QCC_KERNELS_GEMM_CONFIG_H
#define QCC_KERNELS_GEMM_CONFIG_H

namespace qcc {

/// Tile configuration of the tensor-core GEMM. BlockK counts elements.
template <int ElemBytes, int BlockM, int BlockN, int BlockK, int WarpM,
          int WarpN, int Stages>
struct GemmTcConfig {
  static constexpr int kBlockM = BlockM, kBlockN = BlockN, kBlockK = BlockK;
  static constexpr int kWarpM = WarpM, kWarpN = WarpN, kStages = Stages;
  static constexpr int kElemBytes = ElemBytes;
  static constexpr int kBlockKBytes = BlockK * ElemBytes;
  static constexpr int kWarpsM = BlockM / WarpM;
  static constexpr int kWarpsN = BlockN / WarpN;
  static constexpr int kWarps = kWarpsM * kWarpsN;
  /// blockDim.x (1-D block).
  static constexpr int kThreads = 32 * kWarps;
  /// Bytes of one padded smem row (BlockK elements + 16).
  static constexpr int kRowBytes = kBlockKBytes + 16;
  static constexpr int kStageBytes = (BlockM + BlockN) * kRowBytes;
  /// Dynamic shared memory: Stages * (BlockM + BlockN) * (BlockK * sizeof(T) + 16).
  static constexpr int kSmemBytes = Stages * kStageBytes;
  /// K must be a multiple of this.
  static constexpr int kKMultiple = 16 / ElemBytes;
  static constexpr int kMmaTilesM = WarpM / 16; // m16 tiles per warp
  static constexpr int kMmaTilesN = WarpN / 8;  // n8 tiles per warp
  static constexpr int kChunksPerRow = kBlockKBytes / 16;

  static_assert(BlockM % WarpM == 0 && BlockN % WarpN == 0,
                "block tile must be a whole number of warp tiles");
  static_assert(WarpM % 16 == 0, "WarpM must be a multiple of 16");
  static_assert(WarpN % 16 == 0, "WarpN must be a multiple of 16");
  static_assert(kBlockKBytes % 32 == 0,
                "BlockK must cover whole mma k steps (32 bytes)");
  static_assert(Stages >= 2, "the cp.async pipeline needs >= 2 stages");
  static_assert(kThreads <= 1024, "too many warps");
};

template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages>
struct GemmI8Config
    : GemmTcConfig<1, BlockM, BlockN, BlockK, WarpM, WarpN, Stages> {};
template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages>
struct GemmF16Config
    : GemmTcConfig<2, BlockM, BlockN, BlockK, WarpM, WarpN, Stages> {};

/// The skinny GEMV (M <= MaxM rows): each warp computes ColsPerWarp output
/// columns for all rows; each lane keeps KSteps * ColsPerWarp 16-byte weight
/// loads in flight (gemv_mainloop; the 2:4 and int4 GEMVs load one step).
template <int ElemBytes, int MaxM, int Warps, int ColsPerWarp, int KSteps = 1>
struct GemvConfig {
  static constexpr int kMaxM = MaxM, kWarps = Warps, kColsPerWarp = ColsPerWarp;
  static constexpr int kKSteps = KSteps;
  /// blockDim.x.
  static constexpr int kThreads = 32 * Warps;
  static constexpr int kColsPerBlock = Warps * ColsPerWarp;
  /// The tile one CTA covers.
  static constexpr int kBlockM = MaxM, kBlockN = kColsPerBlock;
  /// No dynamic shared memory.
  static constexpr int kSmemBytes = 0;
  /// K must be a multiple of this.
  static constexpr int kKMultiple = 16 / ElemBytes;
  static_assert(MaxM >= 1 && MaxM <= 32, "skinny path: 1 <= MaxM <= 32");
  static_assert(Warps >= 1 && Warps <= 32 && ColsPerWarp >= 1, "");
  static_assert(KSteps >= 1 && KSteps <= 8, "");
};

template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1>
struct GemvI8Config : GemvConfig<1, MaxM, Warps, ColsPerWarp, KSteps> {};
template <int MaxM, int Warps, int ColsPerWarp, int KSteps = 1>
struct GemvF16Config : GemvConfig<2, MaxM, Warps, ColsPerWarp, KSteps> {};
/// W4A16 (gemv_w4.cuh): f16 activations, packed int4 weights; prefill tiles
/// M over gridDim.y = ceil(M / MaxM). A lane reads 32 stored columns per
/// step, so K (and the group size) must be multiples of 32.
template <int MaxM, int Warps, int ColsPerWarp>
struct GemvW4Config : GemvConfig<2, MaxM, Warps, ColsPerWarp> {
  static constexpr int kKMultiple = 32;
};

/// Tile configuration of the 2:4 sparse tensor-core GEMM (gemm_sp.cuh).
/// Same roles as GemmTcConfig: BlockM rows of x (tokens), BlockN rows of the
/// weight, BlockK elements of the dense K per pipeline stage. The weight is
/// mma.sp's sparse operand A (16 weight rows per instruction), x the dense
/// operand B (8 tokens per instruction). One stage holds BlockM padded rows
/// of x (BlockK elements), BlockN padded rows of values (BlockK / 2) and
/// BlockN rows of metadata (BlockK / 32 words, unpadded).
template <int ElemBytes, int BlockM, int BlockN, int BlockK, int WarpM,
          int WarpN, int Stages>
struct GemmSpConfig {
  static constexpr int kBlockM = BlockM, kBlockN = BlockN, kBlockK = BlockK;
  static constexpr int kWarpM = WarpM, kWarpN = WarpN, kStages = Stages;
  static constexpr int kElemBytes = ElemBytes;
  static constexpr int kWarpsM = BlockM / WarpM;
  static constexpr int kWarpsN = BlockN / WarpN;
  static constexpr int kWarps = kWarpsM * kWarpsN;
  /// blockDim.x (1-D block).
  static constexpr int kThreads = 32 * kWarps;
  /// Dense K of one mma.sp: m16n8k64 (s8) or m16n8k32 (f16); both read 32
  /// bytes of values and 64 bytes of x per row.
  static constexpr int kMmaK = 64 / ElemBytes;
  /// Metadata words (32 k each) one mma.sp reads per weight row.
  static constexpr int kMetaWordsPerMma = kMmaK / 32;
  static constexpr int kXRowBytes = BlockK * ElemBytes + 16;
  static constexpr int kValuesRowBytes = BlockK / 2 * ElemBytes + 16;
  static constexpr int kMetaRowBytes = BlockK / 32 * 4;
  static constexpr int kStageBytes =
      BlockM * kXRowBytes + BlockN * (kValuesRowBytes + kMetaRowBytes);
  /// Dynamic shared memory.
  static constexpr int kSmemBytes = Stages * kStageBytes;
  /// K must be a multiple of this (the layout's, format/Sparse24.h).
  static constexpr int kKMultiple = 32;
  static constexpr int kMmaTilesN = WarpN / 16; // weight rows: m16 of mma.sp
  static constexpr int kMmaTilesM = WarpM / 8;  // tokens: n8 of mma.sp

  static_assert(BlockM % WarpM == 0 && BlockN % WarpN == 0,
                "block tile must be a whole number of warp tiles");
  static_assert(WarpM % 16 == 0 && WarpN % 16 == 0,
                "warp tiles must be multiples of 16");
  static_assert(BlockK % 128 == 0,
                "BlockK must be a multiple of 128 (one 16-byte metadata "
                "chunk per row)");
  static_assert(Stages >= 2, "the cp.async pipeline needs >= 2 stages");
  static_assert(kThreads <= 1024, "too many warps");
};

template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages>
struct GemmSpI8Config
    : GemmSpConfig<1, BlockM, BlockN, BlockK, WarpM, WarpN, Stages> {};
template <int BlockM, int BlockN, int BlockK, int WarpM, int WarpN, int Stages>
struct GemmSpF16Config
    : GemmSpConfig<2, BlockM, BlockN, BlockK, WarpM, WarpN, Stages> {};

/// The 2:4 sparse GEMV (M <= MaxM rows, decode): a lane reads one metadata
/// word and the 16 (s8) or 32 (f16) bytes of values of 32 k at a time.
template <int ElemBytes, int MaxM, int Warps, int ColsPerWarp>
struct GemvSpConfig : GemvConfig<ElemBytes, MaxM, Warps, ColsPerWarp> {
  /// K must be a multiple of this (the layout's).
  static constexpr int kKMultiple = 32;
};
template <int MaxM, int Warps, int ColsPerWarp>
struct GemvSpI8Config : GemvSpConfig<1, MaxM, Warps, ColsPerWarp> {};
template <int MaxM, int Warps, int ColsPerWarp>
struct GemvSpF16Config : GemvSpConfig<2, MaxM, Warps, ColsPerWarp> {};

/// The f32 GEMM's first step (gemm_f16.cuh's cast_f32_to_f16): one element
/// per thread.
struct CastF32ToF16Config {
  static constexpr int kThreads = 256;
  static constexpr int kSmemBytes = 0;
};

// The parameter structs of the GEMM family, declared once: FIELD(type, name,
// default) in order (LINE() is unused: the emitter's wrappers build these
// with one aggregate initializer). The device templates declare the structs
// from them and the emitter's wrappers fill them from them (EmitGemm.cpp),
// so a field added here is one the wrapper must fill.

/// GemmParams (gemm_core.cuh): the operands of C = A * B^T.
#define QCC_GEMM_PARAMS(FIELD, LINE)                                          \
  FIELD(const AElement *, A, ) /* [M, K] row-major */                         \
  FIELD(const Element *, B, ) /* [N, K] row-major */                          \
  FIELD(int, M, )                                                             \
  FIELD(int, N, )                                                             \
  FIELD(int, K, )

/// GemmSpParams (gemm_sp.cuh): the operands of C = x * sparse_2_4(values,
/// meta)^T.
#define QCC_GEMM_SP_PARAMS(FIELD, LINE)                                       \
  FIELD(const Element *, x, )      /* [M, K] row-major */                     \
  FIELD(const Element *, values, ) /* [N, K/2] row-major */                   \
  FIELD(const int32_t *, meta, )   /* [N, K/32] row-major */                  \
  FIELD(int, M, )                                                             \
  FIELD(int, N, )                                                             \
  FIELD(int, K, )

/// CastF32ToF16Params (gemm_f16.cuh): x (f32) -> x16 (f16), n elements.
#define QCC_CAST_F32_TO_F16_PARAMS(FIELD, LINE)                               \
  FIELD(const float *, x, )                                                   \
  FIELD(__half *, x16, )                                                      \
  FIELD(long long, n, )

} // namespace qcc

#endif // QCC_KERNELS_GEMM_CONFIG_H
