//===- KernelCompileTest.cpp - the GEMM device templates compile (NVRTC) --===//
//
// docs/ARCHITECTURE.md (house style): each template has a unit test that
// compiles it with NVRTC.
// For every GEMM template of codegen/kernels: an extern "C" __global__ wrapper
// as the emitter would write it, instantiated with two tile configurations
// and two epilogue chains, compiled to CUBIN for sm_80 and sm_90 and to PTX
// for compute_90. The headers are passed to NVRTC in memory under their
// include names "qcc/<file>". Numerics are tested on a GPU elsewhere.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#ifdef QCC_HAVE_NVRTC

#include <nvrtc.h>

#include "codegen/NvrtcCompiler.h"

#include <algorithm>
#include <string>
#include <vector>

namespace {

struct Compiled {
  bool ok = false;
  std::string log;
  std::vector<char> binary; // CUBIN or PTX
};

/// The headers the NVRTC driver embeds (codegen/kernels and format/device)
/// as (include name "qcc/<file>", contents): the very set qcc compiles with.
std::vector<std::pair<std::string, std::string>> kernelHeaders() {
  std::vector<std::pair<std::string, std::string>> headers;
  for (const qcc::codegen::EmbeddedHeader &h : qcc::codegen::embeddedHeaders())
    if (!h.includeName.empty())
      headers.emplace_back(std::string(h.includeName), std::string(h.contents));
  return headers;
}

/// Compiles `source` for `arch` ("sm_80": CUBIN, "compute_90": PTX).
Compiled compile(const std::string &source, const std::string &arch) {
  Compiled r;
  auto headers = kernelHeaders();
  std::vector<const char *> contents, names;
  for (auto &h : headers) {
    names.push_back(h.first.c_str());
    contents.push_back(h.second.c_str());
  }
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), "kernel.cu",
                         (int)headers.size(), contents.data(),
                         names.data()) != NVRTC_SUCCESS) {
    r.log = "nvrtcCreateProgram failed";
    return r;
  }
  std::string archOpt = "-arch=" + arch;
  std::string incOpt = std::string("-I") + QCC_CUDA_INCLUDE_DIR;
  const char *opts[] = {archOpt.c_str(), "--std=c++17", incOpt.c_str()};
  nvrtcResult res = nvrtcCompileProgram(prog, 3, opts);
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  r.log.resize(logSize);
  if (logSize)
    nvrtcGetProgramLog(prog, r.log.data());
  if (res == NVRTC_SUCCESS) {
    bool cubin = arch.rfind("sm_", 0) == 0;
    size_t size = 0;
    res = cubin ? nvrtcGetCUBINSize(prog, &size) : nvrtcGetPTXSize(prog, &size);
    if (res == NVRTC_SUCCESS) {
      r.binary.resize(size);
      res = cubin ? nvrtcGetCUBIN(prog, r.binary.data())
                  : nvrtcGetPTX(prog, r.binary.data());
    }
  }
  r.ok = res == NVRTC_SUCCESS;
  if (!r.ok)
    r.log += std::string("\n") + nvrtcGetErrorString(res);
  nvrtcDestroyProgram(&prog);
  return r;
}

void expectCompiles(const std::string &source,
                    const std::vector<std::string> &kernels) {
  for (const char *arch : {"sm_80", "sm_90", "compute_90"}) {
    SCOPED_TRACE(arch);
    Compiled c = compile(source, arch);
    ASSERT_TRUE(c.ok) << "NVRTC log:\n" << c.log;
    ASSERT_FALSE(c.binary.empty());
    if (std::string(arch) == "compute_90") {
      std::string ptx(c.binary.begin(), c.binary.end());
      for (const std::string &k : kernels)
        EXPECT_NE(ptx.find(".entry " + k), std::string::npos) << k;
    }
  }
}

/// The int8 GEMM: two tile configurations x two epilogue chains, plus the
/// raw-accumulator and static-requantization stores.
const char *kGemmI8 = R"(
#include "qcc/gemm_i8.cuh"

typedef qcc::GemmI8Config<128, 128, 64, 64, 64, 4> Big;
typedef qcc::GemmI8Config<64, 64, 64, 32, 32, 3> Small;
static_assert(Big::kThreads == 128 && Small::kThreads == 128, "");
static_assert(Big::kSmemBytes == 4 * (128 + 128) * (64 + 16), "");
static_assert(Small::kSmemBytes == 3 * (64 + 64) * (64 + 16), "");
static_assert(Big::kKMultiple == 16, "");

typedef qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>,
                   qcc::GeluErf, qcc::AddResidual<>, qcc::StoreF32> EpiF32;
typedef qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::Silu, qcc::StoreF16>
    EpiF16;

#define QCC_GEMM_I8(NAME, CFG, EPI, MAKE)                                      \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const qcc::int8_t *x, const qcc::int8_t *w, const float *xs,            \
       const qcc::int32_t *xz, const float *ws, const qcc::int32_t *wsum,      \
       const float *bias, const float *res, void *y, int M, int N, int K) {    \
    EPI epi MAKE;                                                              \
    qcc::gemm_i8_mainloop<CFG::kBlockM, CFG::kBlockN, CFG::kBlockK,            \
                          CFG::kWarpM, CFG::kWarpN, CFG::kStages>(x, w, M, N,  \
                                                                  K, epi);     \
  }

#define MAKE_F32                                                               \
  (qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},                     \
   qcc::AddBias<>{bias}, qcc::GeluErf{}, qcc::AddResidual<>{res, N},           \
   qcc::StoreF32{(float *)y, N})
#define MAKE_F16                                                               \
  (qcc::DequantPerTokenPerChannel{xs, 0, nullptr, 0, ws, wsum}, qcc::Silu{},   \
   qcc::StoreF16{(__half *)y, N})

QCC_GEMM_I8(gemm_i8_big_f32, Big, EpiF32, MAKE_F32)
QCC_GEMM_I8(gemm_i8_big_f16, Big, EpiF16, MAKE_F16)
QCC_GEMM_I8(gemm_i8_small_f32, Small, EpiF32, MAKE_F32)
QCC_GEMM_I8(gemm_i8_small_f16, Small, EpiF16, MAKE_F16)

typedef qcc::Chain<qcc::StoreI32> EpiI32;
QCC_GEMM_I8(gemm_i8_small_i32, Small, EpiI32,
            (qcc::StoreI32{(qcc::int32_t *)y, N}))
typedef qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::GeluTanh,
                   qcc::RequantizeStatic> EpiQ;
QCC_GEMM_I8(gemm_i8_small_q, Small, EpiQ,
            (qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},
             qcc::GeluTanh{}, qcc::RequantizeStatic{(qcc::int8_t *)y, N, 0.05f}))
)";

/// The int8 skinny-M GEMM (decode).
const char *kGemvI8 = R"(
#include "qcc/gemv_i8.cuh"

typedef qcc::GemvI8Config<8, 4, 2> Wide;
typedef qcc::GemvI8Config<1, 8, 1> One;
typedef qcc::GemvI8Config<8, 4, 1, 4> Deep; // the decode entry up to 8 rows
static_assert(Wide::kThreads == 128 && Wide::kBlockN == 8, "");
static_assert(Wide::kKSteps == 1 && Deep::kKSteps == 4, "");
static_assert(One::kThreads == 256 && One::kSmemBytes == 0, "");

#define QCC_GEMV_I8(NAME, CFG, EPI, MAKE)                                      \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const qcc::int8_t *x, const qcc::int8_t *w, const float *xs,            \
       const qcc::int32_t *xz, const float *ws, const qcc::int32_t *wsum,      \
       const __half *bias, const float *res, void *y, int M, int N, int K) {   \
    qcc::EPI epi MAKE;                                                         \
    qcc::gemv_i8<CFG::kMaxM, CFG::kWarps, CFG::kColsPerWarp, CFG::kKSteps>(    \
        x, w, M, N, K, epi);                                                   \
  }

#define EPI_A Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<__half>,      \
                    qcc::AddResidual<>, qcc::StoreF32>
#define MAKE_A                                                                 \
  (qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},                     \
   qcc::AddBias<__half>{bias}, qcc::AddResidual<>{res, N},                     \
   qcc::StoreF32{(float *)y, N})
#define EPI_B Chain<qcc::DequantPerTokenPerChannel, qcc::GeluTanh,             \
                    qcc::StoreBF16>
#define MAKE_B                                                                 \
  (qcc::DequantPerTokenPerChannel{xs, 0, xz, 0, ws, wsum}, qcc::GeluTanh{},    \
   qcc::StoreBF16{(__nv_bfloat16 *)y, N})

QCC_GEMV_I8(gemv_i8_wide_a, Wide, EPI_A, MAKE_A)
QCC_GEMV_I8(gemv_i8_wide_b, Wide, EPI_B, MAKE_B)
QCC_GEMV_I8(gemv_i8_one_a, One, EPI_A, MAKE_A)
QCC_GEMV_I8(gemv_i8_one_b, One, EPI_B, MAKE_B)
QCC_GEMV_I8(gemv_i8_deep_a, Deep, EPI_A, MAKE_A)
QCC_GEMV_I8(gemv_i8_deep_b, Deep, EPI_B, MAKE_B)
)";

/// W4A16 (gemv_w4.cuh): the decode shape (one row of blocks) and a prefill
/// tiling (M over gridDim.y), two epilogue chains each; the `o` (offsets)
/// pointer null or not is a run-time choice of the same code.
const char *kGemvW4 = R"(
#include "qcc/gemv_w4.cuh"

typedef qcc::GemvW4Config<4, 4, 2> Decode;
typedef qcc::GemvW4Config<16, 8, 1> Prefill;
static_assert(Decode::kThreads == 128 && Decode::kBlockN == 8, "");
static_assert(Prefill::kBlockM == 16 && Prefill::kKMultiple == 32, "");

#define QCC_GEMV_W4(NAME, CFG, EPI, MAKE)                                      \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const __half *x, const qcc::int8_t *w, const __half *s,                 \
       const __half *o, const float *bias, const float *res, void *y, int M,   \
       int N, int K, int G) {                                                  \
    qcc::EPI epi MAKE;                                                         \
    qcc::gemv_w4<CFG>(x, w, s, o, M, N, K, G, epi);                            \
  }

#define EPI_A Chain<qcc::AddBias<>, qcc::AddResidual<>, qcc::StoreF32>
#define MAKE_A                                                                 \
  (qcc::AddBias<>{bias}, qcc::AddResidual<>{res, N},                           \
   qcc::StoreF32{(float *)y, N})
#define EPI_B Chain<qcc::GeluErf, qcc::StoreF16>
#define MAKE_B (qcc::GeluErf{}, qcc::StoreF16{(__half *)y, N})

QCC_GEMV_W4(gemv_w4_decode_a, Decode, EPI_A, MAKE_A)
QCC_GEMV_W4(gemv_w4_decode_b, Decode, EPI_B, MAKE_B)
QCC_GEMV_W4(gemv_w4_prefill_a, Prefill, EPI_A, MAKE_A)
QCC_GEMV_W4(gemv_w4_prefill_b, Prefill, EPI_B, MAKE_B)
)";

/// The f16 / bf16 GEMMs and their skinny-M variants.
const char *kGemmF16 = R"(
#include "qcc/gemm_f16.cuh"

typedef qcc::GemmF16Config<128, 128, 32, 64, 64, 4> Big;
typedef qcc::GemmF16Config<64, 128, 64, 32, 64, 3> Wide;
static_assert(Big::kThreads == 128 && Wide::kThreads == 128, "");
static_assert(Big::kSmemBytes == 4 * (128 + 128) * (2 * 32 + 16), "");
static_assert(Wide::kSmemBytes == 3 * (64 + 128) * (2 * 64 + 16), "");
static_assert(Big::kKMultiple == 8, "");

typedef qcc::Chain<qcc::AddBias<__half>, qcc::GeluErf, qcc::StoreF16> EpiA;
typedef qcc::Chain<qcc::Silu, qcc::AddResidual<__half>, qcc::StoreF32> EpiB;
#define MAKE_A (qcc::AddBias<__half>{bias}, qcc::GeluErf{}, \
                qcc::StoreF16{(__half *)y, N})
#define MAKE_B (qcc::Silu{}, qcc::AddResidual<__half>{res, N}, \
                qcc::StoreF32{(float *)y, N})

#define QCC_GEMM_F16(NAME, ENTRY, T, CFG, EPI, MAKE)                           \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const T *x, const T *w, const __half *bias, const __half *res,          \
       void *y, int M, int N, int K) {                                         \
    EPI epi MAKE;                                                              \
    qcc::ENTRY<CFG::kBlockM, CFG::kBlockN, CFG::kBlockK, CFG::kWarpM,          \
               CFG::kWarpN, CFG::kStages>(x, w, M, N, K, epi);                 \
  }

QCC_GEMM_F16(gemm_f16_big_a, gemm_f16_mainloop, __half, Big, EpiA, MAKE_A)
QCC_GEMM_F16(gemm_f16_big_b, gemm_f16_mainloop, __half, Big, EpiB, MAKE_B)
QCC_GEMM_F16(gemm_f16_wide_a, gemm_f16_mainloop, __half, Wide, EpiA, MAKE_A)
QCC_GEMM_F16(gemm_f16_wide_b, gemm_f16_mainloop, __half, Wide, EpiB, MAKE_B)
QCC_GEMM_F16(gemm_bf16_big_a, gemm_bf16_mainloop, __nv_bfloat16, Big, EpiA,
             MAKE_A)

typedef qcc::GemvF16Config<8, 4, 2> V8;
typedef qcc::GemvF16Config<2, 8, 1> V2;
typedef qcc::GemvF16Config<8, 4, 1, 4> V8Deep; // the decode entry up to 8 rows
#define QCC_GEMV_F16(NAME, ENTRY, T, CFG, EPI, MAKE)                           \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const T *x, const T *w, const __half *bias, const __half *res,          \
       void *y, int M, int N, int K) {                                         \
    EPI epi MAKE;                                                              \
    qcc::ENTRY<CFG::kMaxM, CFG::kWarps, CFG::kColsPerWarp, CFG::kKSteps>(      \
        x, w, M, N, K, epi);                                                   \
  }
QCC_GEMV_F16(gemv_f16_8_a, gemv_f16, __half, V8, EpiA, MAKE_A)
QCC_GEMV_F16(gemv_f16_8_b, gemv_f16, __half, V8, EpiB, MAKE_B)
QCC_GEMV_F16(gemv_f16_2_a, gemv_f16, __half, V2, EpiA, MAKE_A)
QCC_GEMV_F16(gemv_f16_2_b, gemv_f16, __half, V2, EpiB, MAKE_B)
QCC_GEMV_F16(gemv_f16_8deep_a, gemv_f16, __half, V8Deep, EpiA, MAKE_A)
QCC_GEMV_F16(gemv_bf16_8_a, gemv_bf16, __nv_bfloat16, V8, EpiA, MAKE_A)
)";

/// The 2:4 sparse GEMMs (mma.sp) and GEMVs, int8 and f16, with the tiles the
/// emitter picks and a ragged one, each with two epilogue chains.
const char *kGemmSp = R"(
#include "qcc/gemm_sp.cuh"

typedef qcc::GemmSpI8Config<128, 128, 128, 64, 64, 3> I8Wide;
typedef qcc::GemmSpI8Config<64, 64, 128, 32, 32, 4> I8Narrow;
typedef qcc::GemmSpF16Config<128, 128, 128, 64, 64, 3> F16Wide;
typedef qcc::GemmSpF16Config<32, 64, 256, 16, 32, 2> F16Odd;
static_assert(I8Wide::kThreads == 128 && F16Odd::kThreads == 128, "");
static_assert(I8Wide::kSmemBytes ==
                  3 * (128 * (128 + 16) + 128 * (64 + 16) + 128 * 16), "");
static_assert(F16Wide::kSmemBytes ==
                  3 * (128 * (256 + 16) + 128 * (128 + 16) + 128 * 16), "");
static_assert(I8Wide::kMmaK == 64 && F16Wide::kMmaK == 32, "");
static_assert(I8Wide::kMetaWordsPerMma == 2 && F16Wide::kMetaWordsPerMma == 1,
              "");

typedef qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>,
                   qcc::GeluErf, qcc::AddResidual<>, qcc::StoreF32> EpiI8A;
typedef qcc::Chain<qcc::StoreI32> EpiI8B;
#define MAKE_I8A                                                               \
  (qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},                     \
   qcc::AddBias<>{bias}, qcc::GeluErf{}, qcc::AddResidual<>{res, N},           \
   qcc::StoreF32{(float *)y, N})
#define MAKE_I8B (qcc::StoreI32{(qcc::int32_t *)y, N})
#define QCC_SP_I8(NAME, ENTRY, CFG, EPI, MAKE)                                 \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const qcc::int8_t *x, const qcc::int8_t *wv, const qcc::int32_t *wmeta, \
       const float *xs, const qcc::int32_t *xz, const float *ws,               \
       const qcc::int32_t *wsum, const float *bias, const float *res, void *y, \
       int M, int N, int K) {                                                  \
    qcc::GemmSpParams<qcc::int8_t> p = {x, wv, wmeta, M, N, K};                \
    EPI epi MAKE;                                                              \
    qcc::ENTRY<CFG>(p, epi);                                                   \
  }
QCC_SP_I8(gemm_i8_sp_wide_a, gemm_i8_sp, I8Wide, EpiI8A, MAKE_I8A)
QCC_SP_I8(gemm_i8_sp_narrow_a, gemm_i8_sp, I8Narrow, EpiI8A, MAKE_I8A)
QCC_SP_I8(gemm_i8_sp_narrow_b, gemm_i8_sp, I8Narrow, EpiI8B, MAKE_I8B)
typedef qcc::GemvSpI8Config<8, 4, 2> V8;
typedef qcc::GemvSpI8Config<1, 8, 1> V1;
QCC_SP_I8(gemv_i8_sp_8_a, gemv_i8_sp, V8, EpiI8A, MAKE_I8A)
QCC_SP_I8(gemv_i8_sp_1_b, gemv_i8_sp, V1, EpiI8B, MAKE_I8B)

typedef qcc::Chain<qcc::AddBias<__half>, qcc::Silu, qcc::StoreF16> EpiF16A;
typedef qcc::Chain<qcc::AddResidual<__half>, qcc::StoreF32> EpiF16B;
#define MAKE_F16A (qcc::AddBias<__half>{bias}, qcc::Silu{}, \
                   qcc::StoreF16{(__half *)y, N})
#define MAKE_F16B (qcc::AddResidual<__half>{res, N}, qcc::StoreF32{(float *)y, N})
#define QCC_SP_F16(NAME, ENTRY, CFG, EPI, MAKE)                                \
  extern "C" __global__ void __launch_bounds__(CFG::kThreads)                  \
  NAME(const __half *x, const __half *wv, const qcc::int32_t *wmeta,           \
       const __half *bias, const __half *res, void *y, int M, int N, int K) {  \
    qcc::GemmSpParams<__half> p = {x, wv, wmeta, M, N, K};                     \
    EPI epi MAKE;                                                              \
    qcc::ENTRY<CFG>(p, epi);                                                   \
  }
QCC_SP_F16(gemm_f16_sp_wide_a, gemm_f16_sp, F16Wide, EpiF16A, MAKE_F16A)
QCC_SP_F16(gemm_f16_sp_odd_b, gemm_f16_sp, F16Odd, EpiF16B, MAKE_F16B)
typedef qcc::GemvSpF16Config<8, 4, 2> H8;
QCC_SP_F16(gemv_f16_sp_8_a, gemv_f16_sp, H8, EpiF16A, MAKE_F16A)
QCC_SP_F16(gemv_f16_sp_8_b, gemv_f16_sp, H8, EpiF16B, MAKE_F16B)
)";

/// gemm_i8_mixed: the int8 GEMM and GEMV with float outlier columns added
/// in the epilogue (AddOutliers), as the emitter writes them; one column and
/// several, the first and the last of K.
const char *kGemmI8Mixed = R"(
#include "qcc/gemm_i8.cuh"
#include "qcc/gemv_i8.cuh"

typedef qcc::GemmI8Config<64, 64, 64, 32, 32, 4> Cfg;
typedef qcc::GemvI8Config<8, 4, 2> Gemv;
typedef qcc::OutlierColumns<0, 17, 200, 575> Four;
typedef qcc::OutlierColumns<3> One;
static_assert(Four::kCount == 4 && One::kCount == 1, "");

#define QCC_MIXED(NAME, COLS, CALL)                                            \
  extern "C" __global__ void __launch_bounds__(128)                            \
  NAME(const qcc::int8_t *x, const qcc::int8_t *w, const float *xs,            \
       const qcc::int32_t *xz, const float *ws, const qcc::int32_t *wsum,      \
       const float *xf, const float *wo, const float *bias, float *y, int M,   \
       int N, int K) {                                                         \
    qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddOutliers<COLS>,         \
               qcc::AddBias<>, qcc::StoreF32>                                  \
        epi(qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws, wsum},            \
            qcc::AddOutliers<COLS>{xf, K, wo}, qcc::AddBias<>{bias},           \
            qcc::StoreF32{y, N});                                              \
    CALL;                                                                      \
  }

QCC_MIXED(gemm_i8_mixed_four, Four,
          (qcc::gemm_i8_mainloop<Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK,
                                 Cfg::kWarpM, Cfg::kWarpN, Cfg::kStages>(
              x, w, M, N, K, epi)))
QCC_MIXED(gemm_i8_mixed_one, One,
          (qcc::gemm_i8_mainloop<Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK,
                                 Cfg::kWarpM, Cfg::kWarpN, Cfg::kStages>(
              x, w, M, N, K, epi)))
QCC_MIXED(gemv_i8_mixed_four, Four,
          (qcc::gemv_i8<Gemv::kMaxM, Gemv::kWarps, Gemv::kColsPerWarp>(
              x, w, M, N, K, epi)))

// The quantize that feeds it reads the outlier columns as 0.
#include "qcc/quantize.cuh"
extern "C" __global__ void __launch_bounds__(256)
quantize_outliers(const float *x, qcc::int8_t *q, float *s, qcc::int32_t *z,
                  int M, int K) {
  qcc::quantize_rows<256, false, Four>(x, q, s, z, M, K);
}
extern "C" __global__ void __launch_bounds__(256)
quantize_outliers_asym(const float *x, qcc::int8_t *q, float *s,
                       qcc::int32_t *z, int M, int K) {
  qcc::quantize_rows<256, true, One>(x, q, s, z, M, K);
}
)";

/// Per-row dynamic quantization (the requantize half of a GEMM epilogue).
const char *kQuantize = R"(
#include "qcc/quantize.cuh"

extern "C" __global__ void __launch_bounds__(256)
quantize_sym(const float *x, qcc::int8_t *q, float *s, qcc::int32_t *z, int M,
             int K) {
  qcc::quantize_rows<256, false>(x, q, s, z, M, K);
}
extern "C" __global__ void __launch_bounds__(128)
quantize_asym_f16(const __half *x, qcc::int8_t *q, float *s, qcc::int32_t *z,
                  int M, int K) {
  qcc::quantize_rows<128, true>(x, q, s, z, M, K);
}
)";

TEST(KernelCompileTest, GemmI8) {
  expectCompiles(kGemmI8, {"gemm_i8_big_f32", "gemm_i8_big_f16",
                           "gemm_i8_small_f32", "gemm_i8_small_f16",
                           "gemm_i8_small_i32", "gemm_i8_small_q"});
}

TEST(KernelCompileTest, GemmI8Mixed) {
  expectCompiles(kGemmI8Mixed,
                 {"gemm_i8_mixed_four", "gemm_i8_mixed_one",
                  "gemv_i8_mixed_four", "quantize_outliers",
                  "quantize_outliers_asym"});
}

TEST(KernelCompileTest, GemvI8) {
  expectCompiles(kGemvI8, {"gemv_i8_wide_a", "gemv_i8_wide_b", "gemv_i8_one_a",
                           "gemv_i8_one_b", "gemv_i8_deep_a", "gemv_i8_deep_b"});
}

TEST(KernelCompileTest, GemvW4) {
  expectCompiles(kGemvW4, {"gemv_w4_decode_a", "gemv_w4_decode_b",
                           "gemv_w4_prefill_a", "gemv_w4_prefill_b"});
}

TEST(KernelCompileTest, GemmF16) {
  expectCompiles(kGemmF16,
                 {"gemm_f16_big_a", "gemm_f16_big_b", "gemm_f16_wide_a",
                  "gemm_f16_wide_b", "gemm_bf16_big_a", "gemv_f16_8_a",
                  "gemv_f16_8_b", "gemv_f16_2_a", "gemv_f16_2_b",
                  "gemv_f16_8deep_a", "gemv_bf16_8_a"});
}

TEST(KernelCompileTest, GemmSp) {
  expectCompiles(kGemmSp,
                 {"gemm_i8_sp_wide_a", "gemm_i8_sp_narrow_a",
                  "gemm_i8_sp_narrow_b", "gemv_i8_sp_8_a", "gemv_i8_sp_1_b",
                  "gemm_f16_sp_wide_a", "gemm_f16_sp_odd_b", "gemv_f16_sp_8_a",
                  "gemv_f16_sp_8_b"});
}

/// The compiled int8 sparse GEMM really issues mma.sp with ordered metadata.
TEST(KernelCompileTest, GemmSpUsesMmaSp) {
  Compiled c = compile(kGemmSp, "compute_90");
  ASSERT_TRUE(c.ok) << c.log;
  std::string ptx(c.binary.begin(), c.binary.end());
  EXPECT_NE(ptx.find("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col."
                     "s32.s8.s8.s32"),
            std::string::npos);
  EXPECT_NE(ptx.find("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col."
                     "f32.f16.f16.f32"),
            std::string::npos);
}

TEST(KernelCompileTest, Quantize) {
  expectCompiles(kQuantize, {"quantize_sym", "quantize_asym_f16"});
}

/// numerics.h alone (no CUDA header, no standard library under NVRTC):
/// every formula the CPU kernels share, in one kernel.
TEST(KernelCompileTest, NumericsHeaderAlone) {
  expectCompiles(R"(
#include "qcc/numerics.h"
using namespace qcc::numerics;
extern "C" __global__ void numerics_all(const float *x, float *y,
                                        signed char *q, const int *acc) {
  float v = x[threadIdx.x];
  y[0] = geluErf(v) + geluTanh(v) + silu(v) + sigmoid(v) + relu(v) +
         softcap(v, 30.0f) + roundHalfEven(v) + (float)roundClamp(v, -8, 7);
  float s = symmetricScale(v), a = asymmetricScale(-v, v);
  q[0] = quantizeSymmetric(v, s);
  q[1] = quantizeAsymmetric(v, a, asymmetricZeroPoint(-v, a));
  y[1] = dequantize(acc[0], acc[1], acc[2], x[1], x[2]) +
         dequantizeSymmetric(q[0], s);
}
)",
                 {"numerics_all"});
}

/// The compile-time checks of the epilogue chain reject an int32 accumulator
/// fed to a float stage (gemm_i8 without a dequant stage).
TEST(KernelCompileTest, RejectsFloatEpilogueOnIntGemm) {
  const char *src = R"(
#include "qcc/gemm_i8.cuh"
extern "C" __global__ void bad(const qcc::int8_t *x, const qcc::int8_t *w,
                               float *y, int M, int N, int K) {
  qcc::Chain<qcc::Silu, qcc::StoreF32> epi(qcc::Silu{}, qcc::StoreF32{y, N});
  qcc::gemm_i8_mainloop<64, 64, 64, 32, 32, 3>(x, w, M, N, K, epi);
}
)";
  Compiled c = compile(src, "sm_80");
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.log.find("int32 stage"), std::string::npos) << c.log;
}

} // namespace

#else // !QCC_HAVE_NVRTC

TEST(KernelCompileTest, Skipped) {
  GTEST_SKIP() << "CUDA toolkit (NVRTC) not found at configure time: the "
                  "kernel templates were not compiled";
}

#endif
