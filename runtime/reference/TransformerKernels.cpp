//===- TransformerKernels.cpp - the transformer ops, the reference --------===//
//
// linear, layer_norm, rms_norm, gelu, silu, softmax, attention, rotary,
// embedding, moe and the 2:4 / int4 weight decoders, as the dialect docs say
// them: one value after another, float GEMMs by reference::sgemm, sums of
// statistics in double. The CPU backend's fast kernels
// (runtime/cpu/CpuTransformerKernels.cpp) share the operand checks and the
// per-row formulas declared in ReferenceInternal.h.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/ReferenceInternal.h"

#include "format/Checked.h"
#include "format/Int4.h"
#include "format/Sparse24.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <stdexcept>

using namespace qcc::rt;
using namespace qcc::rt::cpukernels;

namespace qcc::rt::cpukernels {

LinearArgs checkLinear(const Operands &ops, const LinearEpilogue &epi) {
  const Tensor &x = need(ops, 0, "input"), &w = need(ops, 1, "weight");
  const Tensor *bias = opt(ops, 2);
  requireF32(x, "input");
  requireF32(w, "weight");
  if (x.rank() < 1 || w.rank() != 2 || w.dim(1) != x.dim(-1))
    fail("linear input " + str(x.shape()) + " and weight " + str(w.shape()) +
         " do not match (weight must be [N, K] with K the input's last dim)");
  int64_t K = w.dim(1), N = w.dim(0), M = x.numel() / std::max<int64_t>(K, 1);
  if (K == 0) {
    M = 1;
    for (int64_t d = 0; d + 1 < x.rank(); ++d)
      M *= x.dim(d);
  }
  Shape out = x.shape();
  out.back() = N;
  if (bias) {
    requireF32(*bias, "bias");
    if (bias->numel() != N || bias->rank() != 1)
      fail("linear bias " + str(bias->shape()) + " must be [" +
           std::to_string(N) + "]");
  }
  for (const auto &[t, what] : {std::pair{epi.residual, "residual"},
                                 std::pair{epi.factor, "factor"}})
    if (t) {
      requireF32(*t, what);
      if (t->shape() != out)
        fail(std::string("linear ") + what + " " + str(t->shape()) +
             " must be " + str(out));
    }
  return {x, w, bias, M, N, K,
          Tensor::uninitialized(DType::F32, out)}; // every element set
}

} // namespace qcc::rt::cpukernels

std::vector<Tensor> qcc::rt::reference::linear(const Operands &ops,
                                              const LinearEpilogue &epi) {
  LinearArgs a = checkLinear(ops, epi);
  const int64_t M = a.M, N = a.N, K = a.K;
  const Tensor *bias = a.bias;
  float *y = a.out.data<float>();
  float beta = 0.0f;
  if (bias) {
    for (int64_t m = 0; m < M; ++m)
      std::memcpy(y + m * N, bias->data<float>(), N * sizeof(float));
    beta = 1.0f;
  }
  reference::sgemm(false, true, M, N, K, 1.0f, a.x.data<float>(), K,
                   a.w.data<float>(), K, beta, y, N);
  using Act = LinearEpilogue::Activation;
  const float *res = epi.residual ? epi.residual->data<float>() : nullptr;
  const float *fac = epi.factor ? epi.factor->data<float>() : nullptr;
  for (int64_t i = 0; i < M * N; ++i) { // the epilogue, as separate ops do
    if (epi.activation == Act::Gelu)
      y[i] = qcc::numerics::geluErf(y[i]);
    else if (epi.activation == Act::Silu)
      y[i] = qcc::numerics::silu(y[i]);
    if (res)
      y[i] += res[i];
    if (fac)
      y[i] *= fac[i];
  }
  return {std::move(a.out)};
}

namespace qcc::rt::cpukernels {

void checkVec(const Tensor &t, int64_t D, const char *what,
              const Tensor &x) {
  requireF32(t, what);
  if (t.numel() != D)
    fail(std::string(what) + " " + str(t.shape()) + " must have " +
         std::to_string(D) + " elements (the last dim of input " +
         str(x.shape()) + ")");
}

NormArgs checkNorm(const Attrs &attrs, const Operands &ops, bool layer) {
  const char *name = layer ? "layer_norm" : "rms_norm";
  const Tensor &x = need(ops, 0, "input"), &g = need(ops, 1, "gamma");
  const Tensor *bt = layer ? opt(ops, 2) : nullptr;
  requireF32(x, "input");
  if (x.rank() < 1)
    fail(std::string(name) + " input must have rank >= 1");
  int64_t D = x.dim(-1);
  checkVec(g, D, "gamma", x);
  if (bt)
    checkVec(*bt, D, "beta", x);
  return {x.data<float>(), g.data<float>(), bt ? bt->data<float>() : nullptr,
          D ? x.numel() / D : 0, D, attrs.f("epsilon"),
          Tensor(DType::F32, x.shape())};
}

/// One value after another, sums in double (two-pass variance).
std::vector<Tensor> layerNormK(const Attrs &attrs, const Operands &ops) {
  NormArgs a = checkNorm(attrs, ops, true);
  for (int64_t row = 0; row < a.rows; ++row) {
    const float *v = a.in + row * a.D;
    double mean = 0, var = 0;
    for (int64_t d = 0; d < a.D; ++d)
      mean += v[d];
    mean /= (double)a.D;
    for (int64_t d = 0; d < a.D; ++d)
      var += (v[d] - mean) * (v[d] - mean);
    var /= (double)a.D;
    layerNormRow(a, row, mean, var);
  }
  return {std::move(a.out)};
}

std::vector<Tensor> rmsNormK(const Attrs &attrs, const Operands &ops) {
  NormArgs a = checkNorm(attrs, ops, false);
  for (int64_t row = 0; row < a.rows; ++row) {
    const float *v = a.in + row * a.D;
    double ss = 0;
    for (int64_t d = 0; d < a.D; ++d)
      ss += (double)v[d] * v[d];
    rmsNormRow(a, row, ss / (double)a.D);
  }
  return {std::move(a.out)};
}

HadamardArgs checkHadamard(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input");
  requireF32(x, "input");
  if (x.rank() < 1)
    fail("hadamard input must have rank >= 1");
  int64_t K = x.dim(-1);
  if (std::string why = format::Rotation::widthError(K); !why.empty())
    fail("hadamard input " + str(x.shape()) + ": " + why);
  return {x.data<float>(), x.numel() / K, K,
          format::Rotation(K, (uint64_t)attrs.i("seed")),
          Tensor(DType::F32, x.shape())};
}

std::vector<Tensor> hadamardK(const Attrs &attrs, const Operands &ops) {
  HadamardArgs a = checkHadamard(attrs, ops);
  std::vector<double> scratch;
  for (int64_t row = 0; row < a.rows; ++row)
    hadamardRow(a, row, scratch);
  return {std::move(a.out)};
}

/// qcc.moe: per expert, the rows routed to it gathered (in token order),
/// its GEMMs run over them with the linear kernel on views of the stacked
/// weights, the results scaled by their gates and added to their rows,
/// expert by expert in increasing order (the order the exporters' loops
/// add them). An expert no row is routed to is not read.
std::vector<Tensor> moeK(const Attrs &attrs, const Operands &ops,
                         const ExpertLinear &linear) {
  const Tensor &x = need(ops, 0, "input"), &ids = need(ops, 1, "expert_ids"),
               &gates = need(ops, 2, "gates"), &up = need(ops, 3, "up_weight"),
               &down = need(ops, 4, "down_weight");
  const Tensor *gate = opt(ops, 5);
  requireF32(x, "moe input");
  requireF32(gates, "moe gates");
  requireF32(up, "moe up_weight");
  requireF32(down, "moe down_weight");
  if (gate)
    requireF32(*gate, "moe gate_weight");
  if (x.rank() != 2 || ids.dtype() != DType::I64 || ids.rank() != 2 ||
      gates.shape() != ids.shape() || ids.dim(0) != x.dim(0) ||
      up.rank() != 3 || down.rank() != 3 || up.dim(2) != x.dim(1) ||
      down.dim(0) != up.dim(0) || down.dim(1) != x.dim(1) ||
      down.dim(2) != up.dim(1) || (gate && gate->shape() != up.shape()))
    fail("moe operands do not match: input " + str(x.shape()) +
         ", expert_ids " + str(ids.shape()) + ", gates " +
         str(gates.shape()) + ", up " + str(up.shape()) + ", down " +
         str(down.shape()) + " (need [T, H], [T, k] i64, [T, k], [E, I, H], "
         "[E, H, I])");
  const int64_t T = x.dim(0), H = x.dim(1), k = ids.dim(1), E = up.dim(0),
                I = up.dim(1);
  const std::string act = attrs.s("activation", "");
  float (*activation)(float) = nullptr;
  if (act == "silu")
    activation = qcc::numerics::silu;
  else if (act == "gelu")
    activation = qcc::numerics::geluErf;
  else if (act == "gelu_tanh")
    activation = qcc::numerics::geluTanh;
  else if (act == "relu")
    activation = qcc::numerics::relu;
  else
    fail("moe activation \"" + act + "\" is none of silu, gelu, gelu_tanh, relu");
  std::vector<std::vector<int64_t>> routes(E); // route t * k + j per expert
  const int64_t *id = ids.data<int64_t>();
  for (int64_t r = 0; r < T * k; ++r) {
    if (id[r] < 0 || id[r] >= E)
      fail("moe: expert id " + std::to_string(id[r]) + " of token " +
           std::to_string(r / k) + " is outside [0, " + std::to_string(E) +
           ")");
    routes[id[r]].push_back(r);
  }
  Tensor out(DType::F32, {T, H});
  float *y = out.data<float>();
  const float *in = x.data<float>(), *g = gates.data<float>();
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = (int64_t)routes[e].size();
    if (n == 0)
      continue;
    Tensor rows = Tensor::uninitialized(DType::F32, {n, H});
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(rows.data<float>() + i * H, in + routes[e][i] / k * H,
                  H * sizeof(float));
    auto expert = [&](const Tensor &w, int64_t outDim, int64_t inDim) {
      return Tensor::view(DType::F32, {outDim, inDim},
                          w.data<float>() + e * outDim * inDim);
    };
    Tensor upW = expert(up, I, H), downW = expert(down, H, I);
    Tensor h = linear(rows, upW);
    float *hv = h.data<float>();
    if (gate) {
      Tensor gateW = expert(*gate, I, H);
      Tensor a = linear(rows, gateW);
      const float *av = a.data<float>();
      for (int64_t i = 0; i < n * I; ++i)
        hv[i] = activation(av[i]) * hv[i];
    } else {
      for (int64_t i = 0; i < n * I; ++i)
        hv[i] = activation(hv[i]);
    }
    Tensor d = linear(h, downW);
    const float *dv = d.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t route = routes[e][i];
      float *row = y + route / k * H;
      for (int64_t c = 0; c < H; ++c)
        row[c] += dv[i * H + c] * g[route];
    }
  }
  return {std::move(out)};
}

std::vector<Tensor> geluK(const Attrs &attrs, const Operands &ops) {
  std::string approx = attrs.s("approximate", "none");
  // The formulas are the CUDA kernels' (format/device/numerics.h).
  if (approx == "none")
    return unaryF32(OpKind::Gelu, ops,
                    [](float x) { return qcc::numerics::geluErf(x); });
  if (approx == "tanh")
    return unaryF32(OpKind::Gelu, ops,
                    [](float x) { return qcc::numerics::geluTanh(x); });
  fail("gelu: unknown approximate '" + approx + "' (expected none or tanh)");
}

std::vector<Tensor> siluK(const Operands &ops) {
  return unaryF32(OpKind::Silu, ops,
                  [](float x) { return qcc::numerics::silu(x); });
}

} // namespace qcc::rt::cpukernels

void qcc::rt::reference::softmaxRow(float *v, int64_t n, int64_t stride) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    mx = std::max(mx, v[i * stride]);
  if (mx == -std::numeric_limits<float>::infinity()) {
    for (int64_t i = 0; i < n; ++i)
      v[i * stride] = 0.0f;
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    float e = std::exp(v[i * stride] - mx);
    v[i * stride] = e;
    sum += e;
  }
  for (int64_t i = 0; i < n; ++i)
    v[i * stride] = (float)(v[i * stride] / sum);
}

namespace qcc::rt::cpukernels {

std::vector<Tensor> softmaxK(const Attrs &attrs, const Operands &ops,
                             void (*row)(float *, int64_t, int64_t)) {
  const Tensor &x = need(ops, 0, "input");
  requireF32(x, "input");
  if (x.rank() == 0)
    fail("softmax input must have rank >= 1");
  int64_t axis = normAxis(attrs.i("axis", -1), x.rank());
  int64_t n = x.dim(axis), outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    inner *= x.dim(d);
  Tensor r(DType::F32, x.shape());
  std::memcpy(r.data<float>(), x.data<float>(), x.bytes());
  float *v = r.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      row(v + o * n * inner + i, n, inner);
  return {std::move(r)};
}

/// `attention` as the dialect docs say it, one (batch, head) at a time over
/// every key: the reference path (CpuKernelPath::Reference).
static void attentionReference(int64_t B, int64_t H, int64_t Hkv, int64_t Sq,
                        int64_t Skv, int64_t D, float scale, bool causal,
                        int64_t window, float softcap, const float *Q,
                        const float *K, const float *V, const float *M,
                        const std::vector<int64_t> &mst, float *O) {
  std::vector<float> S((size_t)(Sq * Skv));
  const float ninf = -std::numeric_limits<float>::infinity();
  int64_t group = H / Hkv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = h / group;
      const float *Qh = Q + b * Sq * H * D + h * D;
      const float *Kg = K + b * Skv * Hkv * D + g * D;
      const float *Vg = V + b * Skv * Hkv * D + g * D;
      // S = scale * Q_h K_g^T
      reference::sgemm(false, true, Sq, Skv, D, scale, Qh, H * D, Kg, Hkv * D, 0.0f,
            S.data(), Skv);
      for (int64_t i = 0; i < Sq; ++i) {
        float *row = S.data() + i * Skv;
        if (softcap > 0.0f)
          for (int64_t j = 0; j < Skv; ++j)
            row[j] = qcc::numerics::softcap(row[j], softcap);
        if (M) {
          const float *mrow = M + b * mst[0] + h * mst[1] + i * mst[2];
          for (int64_t j = 0; j < Skv; ++j)
            row[j] += mrow[j * mst[3]];
        }
        if (causal)
          for (int64_t j = std::max<int64_t>(i + (Skv - Sq) + 1, 0); j < Skv;
               ++j)
            row[j] = ninf;
        if (window > 0) // keys at or before position i + off - window
          for (int64_t j = 0; j < std::min(i + (Skv - Sq) - window + 1, Skv);
               ++j)
            row[j] = ninf;
        reference::softmaxRow(row, Skv); // fully masked rows become zeros (see above)
      }
      // O_h = P V_g
      reference::sgemm(false, false, Sq, D, Skv, 1.0f, S.data(), Skv, Vg, Hkv * D, 0.0f,
            O + b * Sq * H * D + h * D, H * D);
    }
}

AttentionArgs checkAttention(const Attrs &attrs, const Operands &ops) {
  const Tensor &q = need(ops, 0, "query"), &k = need(ops, 1, "key"),
               &v = need(ops, 2, "value");
  const Tensor *mask = opt(ops, 3);
  for (auto [t, n] : {std::pair{&q, "query"}, {&k, "key"}, {&v, "value"}}) {
    requireF32(*t, n);
    if (t->rank() != 3)
      fail(std::string(n) + " must be [B, S, heads * D], got " +
           str(t->shape()));
  }
  int64_t H = attrs.i("num_heads"), Hkv = attrs.i("num_kv_heads");
  float scale = (float)attrs.f("scale");
  bool causal = attrs.b("causal");
  int64_t window = attrs.i("window", 0);
  float softcap = (float)attrs.f("softcap", 0.0);
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0)
    fail("num_heads " + std::to_string(H) +
         " must be a positive multiple of num_kv_heads " + std::to_string(Hkv));
  int64_t B = q.dim(0), Sq = q.dim(1), Skv = k.dim(1);
  if (q.dim(2) % H != 0)
    fail("query " + str(q.shape()) + ": last dim is not a multiple of " +
         std::to_string(H) + " heads");
  int64_t D = q.dim(2) / H;
  if (k.dim(0) != B || v.dim(0) != B || v.dim(1) != Skv ||
      k.dim(2) != Hkv * D || v.dim(2) != Hkv * D)
    fail("attention shapes do not match: query " + str(q.shape()) + ", key " +
         str(k.shape()) + ", value " + str(v.shape()) + " with " +
         std::to_string(H) + " heads and " + std::to_string(Hkv) +
         " kv heads of size " + std::to_string(D));
  Shape full = {B, H, Sq, Skv};
  std::vector<int64_t> mst;
  const float *M = nullptr;
  if (mask) {
    requireF32(*mask, "mask");
    if (mask->rank() > 4 || broadcastShapes({&mask->shape(), &full}) != full)
      fail("mask " + str(mask->shape()) + " does not broadcast to " +
           str(full));
    mst = broadcastStrides(mask->shape(), full);
    M = mask->data<float>();
  }
  return {B,      H,      Hkv,    Sq, Skv,
          D,      scale,  causal, window, softcap,
          q.data<float>(), k.data<float>(), v.data<float>(), M, std::move(mst),
          Tensor(DType::F32, {B, Sq, H * D})};
}

std::vector<Tensor> attentionK(const Attrs &attrs, const Operands &ops) {
  AttentionArgs a = checkAttention(attrs, ops);
  attentionReference(a.B, a.H, a.Hkv, a.Sq, a.Skv, a.D, a.scale, a.causal,
                     a.window, a.softcap, a.Q, a.K, a.V, a.M, a.mst,
                     a.out.data<float>());
  return {std::move(a.out)};
}

std::vector<Tensor> rotaryK(const Attrs &attrs, const Operands &ops) {
  const Tensor &x = need(ops, 0, "input"), &c = need(ops, 1, "cos"),
               &s = need(ops, 2, "sin");
  requireF32(x, "input");
  requireF32(c, "cos");
  requireF32(s, "sin");
  int64_t D = attrs.i("head_dim");
  // R: the rotated leading part of each head; the rest passes through.
  int64_t R = attrs.i("rotary_dim", D);
  if (x.rank() != 3 || D <= 0 || x.dim(2) % D != 0 || R <= 0 || R % 2 != 0 ||
      R > D)
    fail("rotary input " + str(x.shape()) + " must be [B, S, H * " +
         std::to_string(D) + "] with an even rotary_dim " +
         std::to_string(R) + " <= head_dim");
  int64_t B = x.dim(0), S = x.dim(1), H = x.dim(2) / D;
  if (c.shape() != s.shape())
    fail("rotary cos " + str(c.shape()) + " and sin " + str(s.shape()) +
         " differ");
  bool batched = c.rank() == 3;
  if (!((c.rank() == 2 && c.dim(0) == S && c.dim(1) == R) ||
        (batched && (c.dim(0) == B || c.dim(0) == 1) && c.dim(1) == S &&
         c.dim(2) == R)))
    fail("rotary cos/sin " + str(c.shape()) + " must be [" +
         std::to_string(S) + ", " + std::to_string(R) + "] or [" +
         std::to_string(B) + ", " + std::to_string(S) + ", " +
         std::to_string(R) + "] for input " + str(x.shape()));
  int64_t cbStride = batched && c.dim(0) == B ? S * R : 0;
  Tensor r(DType::F32, x.shape());
  const float *in = x.data<float>(), *cs = c.data<float>(),
              *sn = s.data<float>();
  float *out = r.data<float>();
  int64_t half = R / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < S; ++p) {
      const float *cr = cs + b * cbStride + p * R;
      const float *sr = sn + b * cbStride + p * R;
      for (int64_t h = 0; h < H; ++h) {
        const float *xv = in + (b * S + p) * H * D + h * D;
        float *y = out + (b * S + p) * H * D + h * D;
        for (int64_t d = 0; d < R; ++d) {
          float rot = d < half ? -xv[d + half] : xv[d - half];
          y[d] = xv[d] * cr[d] + rot * sr[d];
        }
        std::copy(xv + R, xv + D, y + R);
      }
    }
  return {std::move(r)};
}

std::vector<Tensor> embeddingK(const Attrs &, const Operands &ops) {
  return embeddingKernel(ops, [](const void *p, size_t n, void *dst) {
    std::memcpy(dst, p, n);
  });
}

} // namespace qcc::rt::cpukernels

std::vector<Tensor> qcc::rt::embeddingKernel(const Operands &ops,
                                             const ReadBytes &read) {
  const Tensor &t = need(ops, 0, "table"), &idsT = need(ops, 1, "ids");
  if (t.rank() != 2)
    fail("embedding table must be [V, E], got " + str(t.shape()));
  int64_t V = t.dim(0), E = t.dim(1);
  std::vector<int64_t> ids = readInts(idsT, "ids");
  for (int64_t id : ids)
    if (id < 0 || id >= V)
      fail("token id " + std::to_string(id) + " is out of range [0, " +
           std::to_string(V) + ")");
  Shape out = idsT.shape();
  out.push_back(E);
  Tensor r(t.dtype(), out);
  size_t row = (size_t)E * dtypeSize(t.dtype());
  const std::byte *src = t.data<std::byte>();
  std::byte *dst = r.data<std::byte>();
  for (size_t i = 0; i < ids.size() && row; ++i)
    read(src + ids[i] * row, row, dst + i * row);
  return {std::move(r)};
}

namespace qcc::rt::cpukernels {

/// The dense weight of a 2:4 compressed one (format/Sparse24.h): the
/// reference semantics of qcc.sparse_2_4.
std::vector<Tensor> sparse24K(const Attrs &, const Operands &ops) {
  namespace sp = qcc::format::sparse24;
  const Tensor &values = need(ops, 0, "values"), &meta = need(ops, 1, "meta");
  if (values.rank() != 2 || meta.rank() != 2 || meta.dtype() != DType::I32)
    fail("sparse_2_4 needs values [N, K/2] and i32 meta [N, K/32], got " +
         str(values.shape()) + " and " + str(meta.shape()));
  int64_t n = values.dim(0), k = values.dim(1) * 2;
  if (k % sp::kKAlignment != 0 || meta.dim(0) != n ||
      meta.dim(1) != sp::metaCols(k))
    fail("sparse_2_4 values " + str(values.shape()) + " and meta " +
         str(meta.shape()) + " do not describe an [N, K] weight with K a "
         "multiple of " + std::to_string(sp::kKAlignment));
  if (auto why = sp::validateMeta(meta.data<int32_t>(), n, k))
    fail("sparse_2_4: " + *why);
  Tensor r(values.dtype(), {n, k});
  sp::decompress(values.raw(), meta.data<int32_t>(), n, k,
                 dtypeSize(values.dtype()), r.data<std::byte>());
  return {std::move(r)};
}

/// The float weight of a packed int4 one (format/Int4.h): the reference
/// semantics of qcc.weight_int4 (scales and offsets widened to f32 by
/// computeInF32). Operands packed, scales, [perm], [offsets]: `asymmetric`
/// says the last is offsets (format::int4::operandSlots).
std::vector<Tensor> weightInt4K(const Attrs &attrs, const Operands &ops) {
  namespace i4 = qcc::format::int4;
  i4::OperandSlots slots = i4::operandSlots(
      ops.size(), attrs.has("asymmetric") && attrs.b("asymmetric"));
  if (!slots.error.empty())
    fail("weight_int4 " + slots.error);
  const Tensor &packed = need(ops, 0, "packed"), &scales = need(ops, 1, "scales");
  const Tensor *perm =
      slots.perm >= 0 ? &need(ops, slots.perm, "perm") : nullptr;
  const Tensor *offsets =
      slots.offsets >= 0 ? &need(ops, slots.offsets, "offsets") : nullptr;
  int64_t g = attrs.i("group_size");
  if (scales.dtype() != DType::F32) // f16 in the artifact, widened here
    fail(std::string("weight_int4 scales must be f16, got ") +
         dtypeName(scales.dtype()));
  checkInt4Operands(packed, scales, perm, offsets, g);
  int64_t n = packed.dim(0), k = packed.dim(1) * 2;
  Tensor r(DType::F32, {n, k});
  i4::dequantize(packed.data<int8_t>(), scales.data<float>(),
                 offsets ? offsets->data<float>() : nullptr,
                 perm ? perm->data<int32_t>() : nullptr, n, k, g,
                 r.data<float>());
  return {std::move(r)};
}

} // namespace qcc::rt::cpukernels

int64_t qcc::rt::checkInt4Operands(const Tensor &packed, const Tensor &scales,
                                   const Tensor *perm, const Tensor *offsets,
                                   int64_t groupSize) {
  if (packed.rank() != 2 || packed.dtype() != DType::I8 || scales.rank() != 2)
    fail("weight_int4 needs i8 packed [N, K/2] and scales [N, K/G], got " +
         shapeString(packed.shape()) + " " + dtypeName(packed.dtype()) +
         " and " + shapeString(scales.shape()));
  int64_t n = packed.dim(0), k = packed.dim(1) * 2;
  if (std::string why = qcc::format::int4::groupSizeError(k, groupSize); !why.empty())
    fail("weight_int4: " + why);
  if (scales.dim(0) != n || scales.dim(1) != qcc::format::int4::scaleCols(k, groupSize))
    fail("weight_int4 packed " + shapeString(packed.shape()) + " and scales " +
         shapeString(scales.shape()) +
         " do not describe an [N, K] weight in "
         "groups of " +
         std::to_string(groupSize));
  if (offsets && (offsets->shape() != scales.shape() ||
                  offsets->dtype() != scales.dtype()))
    fail("weight_int4 offsets must be " + shapeString(scales.shape()) + " " +
         dtypeName(scales.dtype()) + " as the scales, got " +
         shapeString(offsets->shape()) + " " + dtypeName(offsets->dtype()));
  if (perm) {
    if (perm->dtype() != DType::I32 || perm->shape() != Shape{k})
      fail("weight_int4 perm must be i32 [" + std::to_string(k) + "], got " +
           shapeString(perm->shape()) + " " + dtypeName(perm->dtype()));
    if (std::string why = qcc::format::int4::permutationError(perm->data<int32_t>(), k);
        !why.empty())
      fail("weight_int4: " + why);
  }
  return k;
}

std::pair<const Tensor *, const Tensor *>
qcc::rt::compressedLinearOperands(const Operands &ops, int64_t N, int64_t K) {
  if (ops.empty() || !ops[0])
    fail("missing operand 'input'");
  const Tensor &x = *ops[0];
  const Tensor *bias = ops.size() > 2 ? ops[2] : nullptr;
  if (x.dtype() != DType::F32)
    fail(std::string("input must be f32, got ") + dtypeName(x.dtype()));
  if (x.rank() < 1 || x.dim(-1) != K)
    fail("linear input " + str(x.shape()) + " and weight [" +
         std::to_string(N) + ", " + std::to_string(K) +
         "] do not match (weight must be [N, K] with K the input's last dim)");
  if (bias &&
      (bias->dtype() != DType::F32 || bias->rank() != 1 || bias->dim(0) != N))
    fail("linear bias " + str(bias->shape()) + " " + dtypeName(bias->dtype()) +
         " must be f32 [" + std::to_string(N) + "]");
  return {&x, bias};
}

