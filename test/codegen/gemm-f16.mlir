// A float linear (qcc.linear) runs as an f16 tensor-core GEMM with f32
// accumulation and epilogue. Over f32 tensors a first step converts x into
// the workspace x16 (256 threads), the weight is uploaded as f16
// ("operand_f16"). Tiles as for gemm_i8 with 2-byte elements (64x64x64:
// 73,728 B of shared memory; N >= 1024: 128x128x64, 147,456 B).

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_bias_k0 (regions: bias/k0) kind gemm_f16
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_bias_k0_cast","grid":{"x":{"ceil_div":["xn",256]},"y":1,"z":1},"name":"cast","params":[{"name":"x","operand":0},{"name":"x16","workspace":"x16"},{"int64":"xn","name":"n"}],"waits_for_prior_grids":true}
// CHECK-SAME: {"block":{"x":128,"y":1,"z":1},"dynamic_smem":73728,"entry":"qcc_bias_k0","grid":{"x":8,"y":{"ceil_div":["M",64]},"z":1},"params":[{"name":"x","workspace":"x16"},{"name":"w","operand_f16":1},{"name":"bias","operand":2},{"name":"y","result":0},{"int":"M","name":"M"},{"int":512,"name":"N"},{"int":256,"name":"K"}],"waits_for_prior_grids":true}]
// CHECK-SAME: "workspace":{"x16":{"mul":["xn",2]}}
// CHECK: #include "qcc/gemm_f16.cuh"
// CHECK: GemmF16Config
// CHECK: qcc_bias_k0(
// CHECK: qcc::Chain<qcc::AddBias<>, qcc::StoreF32>
// CHECK: qcc::gemm_f16<Cfg>(p, epi);
// CHECK: qcc_bias_k0_cast(
// CHECK: qcc::cast_f32_to_f16<qcc::CastF32ToF16Config>(p);
func.func @bias(%x: tensor<?x?x256xf32>, %w: tensor<512x256xf32>, %b: tensor<512xf32>) -> tensor<?x?x512xf32> {
  %0 = qcc.kernel gemm_f16 "k0"(%x, %w, %b) : (tensor<?x?x256xf32>, tensor<512x256xf32>, tensor<512xf32>) -> tensor<?x?x512xf32> {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<512x256xf32>, %a3: tensor<512xf32>):
    %1 = qcc.linear %a1, %a2, %a3 : (tensor<?x?x256xf32>, tensor<512x256xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
    qcc.yield %1 : tensor<?x?x512xf32>
  }
  return %0 : tensor<?x?x512xf32>
}

// N = 1024: the large tile; no bias; GELU (tanh).
// CHECK-LABEL: ===== unit qcc_gelu_k0 (regions: gelu/k0) kind gemm_f16
// CHECK-NEXT: // launch: {{.*}}"entry":"qcc_gelu_k0_cast"
// CHECK-SAME: {"block":{"x":128,"y":1,"z":1},"dynamic_smem":147456,"entry":"qcc_gelu_k0","grid":{"x":8,"y":{"ceil_div":["M",128]},"z":1},"params":[{"name":"x","workspace":"x16"},{"name":"w","operand_f16":1},{"name":"y","result":0},
// CHECK: qcc::Chain<qcc::GeluTanh, qcc::StoreF32>
func.func @gelu(%x: tensor<?x?x256xf32>, %w: tensor<1024x256xf32>) -> tensor<?x?x1024xf32> {
  %0 = qcc.kernel gemm_f16 "k0"(%x, %w) : (tensor<?x?x256xf32>, tensor<1024x256xf32>) -> tensor<?x?x1024xf32> {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<1024x256xf32>):
    %1 = qcc.linear %a1, %a2 : (tensor<?x?x256xf32>, tensor<1024x256xf32>) -> tensor<?x?x1024xf32>
    %2 = qcc.gelu %1 {approximate = "tanh"} : tensor<?x?x1024xf32>
    qcc.yield %2 : tensor<?x?x1024xf32>
  }
  return %0 : tensor<?x?x1024xf32>
}

// + residual.
// CHECK-LABEL: ===== unit qcc_residual_k0 (regions: residual/k0) kind gemm_f16
// CHECK-NEXT: // launch: {{.*}}{"name":"x","workspace":"x16"},{"name":"w","operand_f16":1},{"name":"res","operand":2},{"name":"y","result":0},{"int":"M","name":"M"},{"int":256,"name":"N"},{"int":512,"name":"K"}]
// CHECK: qcc::Chain<qcc::AddResidual<>, qcc::StoreF32>
func.func @residual(%x: tensor<?x?x512xf32>, %w: tensor<256x512xf32>, %r: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %0 = qcc.kernel gemm_f16 "k0"(%x, %w, %r) : (tensor<?x?x512xf32>, tensor<256x512xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  ^bb0(%a1: tensor<?x?x512xf32>, %a2: tensor<256x512xf32>, %a3: tensor<?x?x256xf32>):
    %1 = qcc.linear %a1, %a2 : (tensor<?x?x512xf32>, tensor<256x512xf32>) -> tensor<?x?x256xf32>
    %2 = qcc.add %1, %a3 : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    qcc.yield %2 : tensor<?x?x256xf32>
  }
  return %0 : tensor<?x?x256xf32>
}

// Decode (one token per row): the f32 activations are rounded to f16 as the
// GEMV loads them (no _cast step, x is the operand itself); the block's
// weight rows are prefetched into L2 before the wait; SwiGLU's product with
// the up projection is an epilogue stage.
// CHECK-LABEL: ===== unit qcc_swiglu_k0 (regions: swiglu/k0) kind gemm_f16
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_swiglu_k0","grid":{"x":256,"y":{"ceil_div":["M",8]},"z":1},"params":[{"name":"x","operand":0},{"name":"w","operand_f16":1},{"name":"factor","operand":2},{"name":"y","result":0},
// CHECK-NOT: _cast
// CHECK: qcc_swiglu_k0(const float *x, const __half *w, const float *factor, float *y, int M, int N, int K) {
// CHECK-NEXT: qcc::gemv_prefetch_weights<Cfg>(w, N, K);
// CHECK-NEXT: qcc::wait_for_prior_grids();
// CHECK: factor += (long long)m0 * N;
// CHECK: qcc::GemmParams<__half, float> p = {x, w, rows, N, K};
// CHECK: qcc::Chain<qcc::Silu, qcc::MulOperand<>, qcc::StoreF32>
// CHECK: qcc::gemv_f16<Cfg>(p, epi);
// CHECK: qcc_swiglu_k0_rows(
// CHECK-NEXT: qcc::gemv_prefetch_weights<CfgRows>(w, N, K);
func.func @swiglu(%x: tensor<?x?x256xf32>, %w: tensor<1024x256xf32>, %up: tensor<?x?x1024xf32>) -> tensor<?x?x1024xf32> attributes {qcc.tokens_per_row = 1 : i64} {
  %0 = qcc.kernel gemm_f16 "k0"(%x, %w, %up) : (tensor<?x?x256xf32>, tensor<1024x256xf32>, tensor<?x?x1024xf32>) -> tensor<?x?x1024xf32> {
  ^bb0(%a1: tensor<?x?x256xf32>, %a2: tensor<1024x256xf32>, %a3: tensor<?x?x1024xf32>):
    %1 = qcc.linear %a1, %a2 : (tensor<?x?x256xf32>, tensor<1024x256xf32>) -> tensor<?x?x1024xf32>
    %2 = qcc.silu %1 : tensor<?x?x1024xf32>
    %3 = qcc.mul %2, %a3 : (tensor<?x?x1024xf32>, tensor<?x?x1024xf32>) -> tensor<?x?x1024xf32>
    qcc.yield %3 : tensor<?x?x1024xf32>
  }
  return %0 : tensor<?x?x1024xf32>
}

// CHECK-NOT: ===== no kernel
