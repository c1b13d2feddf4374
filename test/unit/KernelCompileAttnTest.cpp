//===- KernelCompileAttnTest.cpp - NVRTC compile tests for the row/attention
//     kernel templates (codegen/kernels: norm, quantize, attention_prefill,
//     attention_decode, rotary, embedding, elementwise, sampling) ---------===//
//
// Each test instantiates its templates in extern "C" wrappers with at least
// two configurations and compiles them to CUBIN for sm_80 and sm_90, plus
// one compute_90 PTX compile. Numerics are tested on a GPU elsewhere.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#ifdef QCC_HAVE_NVRTC

#include <nvrtc.h>

#include "codegen/NvrtcCompiler.h"

#include <string>
#include <vector>

namespace {

// common.cuh (helpers) and numerics.h (formulas) are included by every
// template, host_device.h by numerics.h and the *_config.h launch
// configurations; quantize.cuh belongs to the GEMM library (quantize_rows is
// the dynamic per-token / per-tensor quantize) and is compiled here too.
const char *kHeaders[] = {"common.cuh", "numerics.h", "host_device.h",
                          "attention_config.h", "norm_config.h", "broadcast.h",
                          "quantize_static.cuh",     "kv_cache.cuh",          "rotary.cuh",
                          "norm.cuh",      "quantize.cuh",          "attention_prefill.cuh",
                          "attention_decode.cuh", "embedding.cuh",  "elementwise.cuh", "router.cuh",
                          "sampling.cuh"};

struct CompileResult {
  bool ok = false;
  std::string log;
  size_t size = 0;
};

// arch: "sm_80" / "sm_90" (CUBIN) or "compute_90" (PTX).
CompileResult compile(const std::string &src, const std::string &arch) {
  std::vector<std::string> names, bodies;
  for (const char *h : kHeaders) {
    names.push_back(std::string("qcc/") + h);
    const qcc::codegen::EmbeddedHeader *e =
        qcc::codegen::findEmbeddedHeader(names.back());
    bodies.push_back(e ? std::string(e->contents) : std::string());
  }
  std::vector<const char *> hn, hb;
  for (size_t i = 0; i < names.size(); ++i) {
    hn.push_back(names[i].c_str());
    hb.push_back(bodies[i].c_str());
  }
  CompileResult r;
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), "attn_test.cu", (int)hn.size(),
                         hb.data(), hn.data()) != NVRTC_SUCCESS) {
    r.log = "nvrtcCreateProgram failed";
    return r;
  }
  std::string archOpt = "-arch=" + arch;
  std::string inc = std::string("-I") + QCC_CUDA_INCLUDE_DIR;
  std::vector<const char *> opts = {archOpt.c_str(), "--std=c++17", inc.c_str()};
  nvrtcResult res = nvrtcCompileProgram(prog, (int)opts.size(), opts.data());
  size_t logSize = 0;
  nvrtcGetProgramLogSize(prog, &logSize);
  r.log.resize(logSize);
  if (logSize)
    nvrtcGetProgramLog(prog, &r.log[0]);
  if (res == NVRTC_SUCCESS) {
    bool ptx = arch.rfind("compute_", 0) == 0;
    if (ptx)
      nvrtcGetPTXSize(prog, &r.size);
    else
      nvrtcGetCUBINSize(prog, &r.size);
    r.ok = true;
  }
  nvrtcDestroyProgram(&prog);
  return r;
}

void expectCompiles(const std::string &src) {
  for (const char *arch : {"sm_80", "sm_90", "compute_90"}) {
    CompileResult r = compile(src, arch);
    EXPECT_TRUE(r.ok) << arch << ":\n" << r.log;
    EXPECT_GT(r.size, 0u) << arch;
  }
}

const char *kNormSrc = R"(
#include "qcc/norm.cuh"
using namespace qcc;
extern "C" __global__ void __launch_bounds__(256)
ln_f32_q(NormParams<float, float, float> p) {
  normRow<256, NormKind::LayerNorm, true, float, float, float>(p);
}
extern "C" __global__ void __launch_bounds__(128)
rms_f16(NormParams<__half, __half, __half> p) {
  normRow<128, NormKind::RmsNorm, false, __half, __half, __half>(p);
}
extern "C" __global__ void __launch_bounds__(512)
rms_f16_f32_q(NormParams<__half, float, float> p) {
  normRow<512, NormKind::RmsNorm, true, __half, float, float>(p);
}
template __global__ void qcc::normKernel<64, NormKind::LayerNorm, false, float, __half, float>(
    NormParams<float, __half, float>);
)";

const char *kQuantizeSrc = R"(
#include "qcc/quantize.cuh"
#include "qcc/quantize_static.cuh"
extern "C" __global__ void __launch_bounds__(256)
q_token_sym(const float *in, signed char *q, float *s, int *z, int rows, int dim) {
  qcc::quantize_rows<256, false>(in, q, s, z, rows, dim);
}
extern "C" __global__ void __launch_bounds__(256)
q_static_f32(const float *in, signed char *q, long long n, float scale, float *so, int *zo) {
  qcc::quantizePerTensorStaticBody<256, 4, float>(in, q, n, scale, so, zo);
}
template __global__ void qcc::quantizePerTensorStatic<128, 8, __half>(
    const __half *, signed char *, long long, float, float *, int *);
)";

const char *kPrefillSrc = R"(
#include "qcc/attention_prefill.cuh"
using namespace qcc;
#define PREFILL(NAME, D, BQ, BKV, W, CAUSAL, ROT, T, CACHE)                        \
  extern "C" __global__ void __launch_bounds__(W * 32)                           \
  NAME(AttnPrefillParams<T, float, CACHE> p) {                                   \
    extern __shared__ float smem[];                                              \
    attentionPrefillTile<D, BQ, BKV, W, CAUSAL, ROT>(p, smem);                   \
  }
PREFILL(prefill_d64_paged_f16, 64, 64, 64, 4, true, true, __half, PagedCache<__half>)
PREFILL(prefill_d128_contig_i8, 128, 64, 64, 8, true, false, __half, ContiguousCache<signed char>)
PREFILL(prefill_d128_paged_i8_rope, 128, 32, 64, 4, true, true, __half, PagedCache<signed char>)
PREFILL(prefill_d64_paged_fp8, 64, 64, 64, 4, true, true, __half, PagedCache<unsigned char>)
PREFILL(prefill_d64_contig_f32, 64, 32, 64, 4, true, false, float, ContiguousCache<float>)
PREFILL(prefill_d64_nocache_bidir, 64, 64, 64, 4, false, false, __half, NoCache)
static_assert(AttnPrefillLaunch<64, 64, 64, 4>::kDynamicSmemBytes == 49408, "");
static_assert(AttnPrefillLaunch<128, 64, 64, 8>::kDynamicSmemBytes == 98560, "");
static_assert(AttnPrefillLaunch<128, 32, 64, 4>::kDynamicSmemBytes == 82176, "");
static_assert(AttnPrefillLaunch<64, 32, 64, 4>::kDynamicSmemBytes == 41216, "");
)";

const char *kDecodeSrc = R"(
#include "qcc/attention_decode.cuh"
using namespace qcc;
#define DECODE(NAME, D, W, CHUNK, ROT, T, CACHE)                                \
  extern "C" __global__ void __launch_bounds__(W * 32)                          \
  NAME(AttnDecodeParams<T, float, CACHE> p) {                                   \
    attentionDecodeSplit<D, W, CHUNK, ROT>(p);                                  \
  }
DECODE(decode_d64_paged_f16, 64, 4, 256, false, __half, PagedCache<__half>)
DECODE(decode_d128_paged_i8, 128, 4, 512, true, __half, PagedCache<signed char>)
DECODE(decode_d128_contig_f16, 128, 8, 1024, false, __half, ContiguousCache<__half>)
DECODE(decode_d64_contig_i8_f32, 64, 4, 256, true, float, ContiguousCache<signed char>)
DECODE(decode_d64_paged_fp8, 64, 4, 256, false, __half, PagedCache<unsigned char>)
extern "C" __global__ void __launch_bounds__(128)
decode_combine_d128(const float *ml, const float *acc, __half *out, int h, int s) {
  attentionDecodeCombineRow<128, __half>(ml, acc, out, h, s);
}
template __global__ void qcc::attentionDecodeCombine<64, float>(const float *, const float *,
                                                           float *, int, int);
static_assert(AttnDecodeLaunch<128, 4, 512>::kStaticSmemBytes == 2080, "");
static_assert(AttnDecodeLaunch<128, 4, 512>::numSplits(1025) == 3, "");
)";

const char *kMiscSrc = R"(
#include "qcc/rotary.cuh"
#include "qcc/embedding.cuh"
#include "qcc/elementwise.cuh"
#include "qcc/router.cuh"
#include "qcc/sampling.cuh"
using namespace qcc;
template __global__ void qcc::rotaryKernel<128, __half, float>(const __half *, __half *,
                                                          RopeTables<float>, int, int, int);
template __global__ void qcc::rotaryKernel<256, float, float>(const float *, float *,
                                                         RopeTables<float>, int, int, int);
extern "C" __global__ void __launch_bounds__(128)
embed_f32(const float *t, const long long *ids, float *out, int *err, long long v, int d, int n) {
  embeddingRow<128>(t, ids, out, err, v, d, n);
}
extern "C" __global__ void __launch_bounds__(256)
embed_f16(const __half *t, const long long *ids, __half *out, int *err, long long v, int d, int n) {
  embeddingRow<256>(t, ids, out, err, v, d, n);
}
using SwiGlu = ew::Mul<ew::Silu<ew::Arg<0>>, ew::Arg<1>>;
using BiasGeluRes = ew::Add<ew::Gelu<ew::Add<ew::Arg<0>, ew::Arg<1>>>, ew::Arg<2>>;
template <typename Chain, typename InT, typename OutT, int N>
__device__ void chainAt(const InT *const *in, OutT *out, long long n) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x[N];
  for (int j = 0; j < N; ++j) x[j] = toFloat(in[j][i]);
  out[i] = fromFloat<OutT>(Chain::eval(x));
}
extern "C" __global__ void chain_swiglu(const __half *const *in, __half *o, long long n) {
  chainAt<SwiGlu, __half, __half, 2>(in, o, n);
}
extern "C" __global__ void chain_bias_gelu_res(const float *const *in, float *o, long long n) {
  chainAt<BiasGeluRes, float, float, 3>(in, o, n);
}
extern "C" __global__ void chain_gelu_tanh(const float *const *in, __half *o, long long n) {
  chainAt<ew::GeluTanh<ew::Arg<0>>, float, __half, 1>(in, o, n);
}
extern "C" __global__ void __launch_bounds__(128)
router_mixtral(const float *l, float *g, long long *ids, long long rows) {
  routerRow<4, 8, 2, 1, true>(l, g, ids, rows);
}
extern "C" __global__ void __launch_bounds__(128)
router_wide(const float *l, float *g, long long *ids, long long rows) {
  routerRow<4, 128, 8, 4, false>(l, g, ids, rows);
}
template __global__ void qcc::argmaxKernel<256, float>(const float *, long long *, float *, int, int);
template __global__ void qcc::argmaxKernel<1024, __half>(const __half *, long long *, float *, int, int);
template __global__ void qcc::topkKernel<64, 64, float>(const float *, float *, long long *, int, int, int);
template __global__ void qcc::topkKernel<128, 32, __half>(const __half *, float *, long long *, int, int, int);
)";

} // namespace

TEST(KernelCompileAttn, Norm) { expectCompiles(kNormSrc); }
TEST(KernelCompileAttn, Quantize) { expectCompiles(kQuantizeSrc); }
TEST(KernelCompileAttn, AttentionPrefill) { expectCompiles(kPrefillSrc); }
TEST(KernelCompileAttn, AttentionDecode) { expectCompiles(kDecodeSrc); }
TEST(KernelCompileAttn, RotaryEmbeddingElementwiseRouterSampling) {
  expectCompiles(kMiscSrc);
}

#else // no CUDA toolkit: nothing to compile with

TEST(KernelCompileAttn, SkippedWithoutCudaToolkit) {
  GTEST_SKIP() << "CUDA toolkit (NVRTC) not found at configure time";
}

#endif // QCC_HAVE_NVRTC
