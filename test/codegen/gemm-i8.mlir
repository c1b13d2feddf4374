// The W8A8 GEMM (qcc.qlinear: int8 x int8 -> int32, dequantized per token
// and per channel) and its float epilogue: bias, activation, residual, in
// region order. The tile comes from N (N >= 1024: 128x128x64, 81,920 B of
// shared memory; else 64x64x64, 40,960 B); 4 warps either way.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// N = 768: the small tile; dequant + bias.
// CHECK-LABEL: ===== unit qcc_bias_k0 (regions: bias/k0) kind gemm_i8
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":40960,"entry":"qcc_bias_k0","grid":{"x":12,"y":{"ceil_div":["M",64]},"z":1}
// CHECK-SAME: "params":[{"name":"x","operand":0},{"name":"w","operand":3},{"name":"xs","operand":1},{"name":"xz","operand":2},{"name":"ws","operand":4},{"name":"wsum","operand":5},{"name":"bias","operand":6},{"name":"y","result":0},{"int":"M","name":"M"},{"int":768,"name":"N"},{"int":256,"name":"K"}]
// CHECK: #include "qcc/gemm_i8.cuh"
// CHECK: GemmI8Config
// CHECK: extern "C" __global__
// CHECK: qcc_bias_k0(
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::StoreF32>
// CHECK: qcc::gemm_i8<Cfg>(p, epi);
func.func @bias(%x: tensor<?x?x256xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %w: tensor<768x256xi8>, %ws: tensor<768xf32>, %wsum: tensor<768xi32>, %b: tensor<768xf32>) -> tensor<?x?x768xf32> {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum, %b) : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>) -> tensor<?x?x768xf32> {
  ^bb0(%a1: tensor<?x?x256xi8>, %a2: tensor<?x?x1xf32>, %a3: tensor<?x?x1xi32>, %a4: tensor<768x256xi8>, %a5: tensor<768xf32>, %a6: tensor<768xi32>, %a7: tensor<768xf32>):
    %1 = qcc.qlinear %a1, %a2, %a3, %a4, %a5, %a6, %a7 : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>) -> tensor<?x?x768xf32>
    qcc.yield %1 : tensor<?x?x768xf32>
  }
  return %0 : tensor<?x?x768xf32>
}

// N = 1024: the large tile; + GELU (erf).
// CHECK-LABEL: ===== unit qcc_gelu_k0 (regions: gelu/k0) kind gemm_i8
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":81920,"entry":"qcc_gelu_k0","grid":{"x":8,"y":{"ceil_div":["M",128]},"z":1}
// CHECK: GemmI8Config
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::GeluErf, qcc::StoreF32>
func.func @gelu(%x: tensor<?x?x256xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %w: tensor<1024x256xi8>, %ws: tensor<1024xf32>, %wsum: tensor<1024xi32>, %b: tensor<1024xf32>) -> tensor<?x?x1024xf32> {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum, %b) : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<1024x256xi8>, tensor<1024xf32>, tensor<1024xi32>, tensor<1024xf32>) -> tensor<?x?x1024xf32> {
  ^bb0(%a1: tensor<?x?x256xi8>, %a2: tensor<?x?x1xf32>, %a3: tensor<?x?x1xi32>, %a4: tensor<1024x256xi8>, %a5: tensor<1024xf32>, %a6: tensor<1024xi32>, %a7: tensor<1024xf32>):
    %1 = qcc.qlinear %a1, %a2, %a3, %a4, %a5, %a6, %a7 : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<1024x256xi8>, tensor<1024xf32>, tensor<1024xi32>, tensor<1024xf32>) -> tensor<?x?x1024xf32>
    %2 = qcc.gelu %1 : tensor<?x?x1024xf32>
    qcc.yield %2 : tensor<?x?x1024xf32>
  }
  return %0 : tensor<?x?x1024xf32>
}

// No bias; SiLU.
// CHECK-LABEL: ===== unit qcc_silu_k0 (regions: silu/k0) kind gemm_i8
// CHECK-NEXT: // launch: {{.*}}"dynamic_smem":40960
// CHECK-SAME: "params":[{"name":"x","operand":0},{"name":"w","operand":3},{"name":"xs","operand":1},{"name":"xz","operand":2},{"name":"ws","operand":4},{"name":"wsum","operand":5},{"name":"y","result":0},{"int":"M","name":"M"},{"int":512,"name":"N"},{"int":256,"name":"K"}]
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::Silu, qcc::StoreF32>
func.func @silu(%x: tensor<?x?x256xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %w: tensor<512x256xi8>, %ws: tensor<512xf32>, %wsum: tensor<512xi32>) -> tensor<?x?x512xf32> {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum) : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<512x256xi8>, tensor<512xf32>, tensor<512xi32>) -> tensor<?x?x512xf32> {
  ^bb0(%a1: tensor<?x?x256xi8>, %a2: tensor<?x?x1xf32>, %a3: tensor<?x?x1xi32>, %a4: tensor<512x256xi8>, %a5: tensor<512xf32>, %a6: tensor<512xi32>):
    %1 = qcc.qlinear %a1, %a2, %a3, %a4, %a5, %a6 : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<512x256xi8>, tensor<512xf32>, tensor<512xi32>) -> tensor<?x?x512xf32>
    %2 = qcc.silu %1 : tensor<?x?x512xf32>
    qcc.yield %2 : tensor<?x?x512xf32>
  }
  return %0 : tensor<?x?x512xf32>
}

// Bias + residual (the residual is a region operand of the result's type).
// CHECK-LABEL: ===== unit qcc_residual_k0 (regions: residual/k0) kind gemm_i8
// CHECK-NEXT: // launch: {{.*}}"dynamic_smem":40960
// CHECK-SAME: {"name":"bias","operand":6},{"name":"res","operand":7},{"name":"y","result":0},{"int":"M","name":"M"},{"int":256,"name":"N"},{"int":1024,"name":"K"}]
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::AddResidual<>, qcc::StoreF32>
func.func @residual(%x: tensor<?x?x1024xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %w: tensor<256x1024xi8>, %ws: tensor<256xf32>, %wsum: tensor<256xi32>, %b: tensor<256xf32>, %r: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum, %b, %r) : (tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<256x1024xi8>, tensor<256xf32>, tensor<256xi32>, tensor<256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  ^bb0(%a1: tensor<?x?x1024xi8>, %a2: tensor<?x?x1xf32>, %a3: tensor<?x?x1xi32>, %a4: tensor<256x1024xi8>, %a5: tensor<256xf32>, %a6: tensor<256xi32>, %a7: tensor<256xf32>, %a8: tensor<?x?x256xf32>):
    %1 = qcc.qlinear %a1, %a2, %a3, %a4, %a5, %a6, %a7 : (tensor<?x?x1024xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<256x1024xi8>, tensor<256xf32>, tensor<256xi32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    %2 = qcc.add %a8, %1 : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
    qcc.yield %2 : tensor<?x?x256xf32>
  }
  return %0 : tensor<?x?x256xf32>
}

// CHECK-NOT: ===== no kernel

// A grouped decode GEMV (form-kernels' q, k, v over one quantized row): one
// launch, member g over its own range of column blocks (q: 64 / 4 = 16
// blocks, k: 8; the _rows entry's blocks are 8 wide: 8 + 4), each its own
// weight, dequantization and result.
// CHECK-LABEL: ===== unit qcc_group_k0 (regions: group/k0) kind gemm_i8
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_group_k0","grid":{"x":24,"y":{"ceil_div":["M",8]},"z":1},"params":[{"name":"x","operand":0},{"name":"xs","operand":1},{"name":"xz","operand":2},{"name":"w0","operand":3},{"name":"ws0","operand":4},{"name":"wsum0","operand":5},{"name":"y0","result":0},{"name":"w1","operand":6},{"name":"ws1","operand":7},{"name":"wsum1","operand":8},{"name":"bias1","operand":9},{"name":"y1","result":1},{"int":"M","name":"M"},{"int":64,"name":"K"}],"waits_for_prior_grids":true,"when":{"gt":[9,"M"]}},{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_group_k0_rows","grid":{"x":12,
// CHECK: qcc_group_k0(const qcc::int8_t *x, const float *xs, const qcc::int32_t *xz, const qcc::int8_t *w0, const float *ws0, const qcc::int32_t *wsum0, float *y0, const qcc::int8_t *w1, const float *ws1, const qcc::int32_t *wsum1, const float *bias1, float *y1, int M, int K) {
// CHECK-NEXT: const int b = blockIdx.x;
// CHECK-NEXT: if (b < 16) qcc::gemv_prefetch_weights<Cfg>(w0, 64, K, b - 0);
// CHECK-NEXT: else qcc::gemv_prefetch_weights<Cfg>(w1, 32, K, b - 16);
// CHECK-NEXT: qcc::wait_for_prior_grids();
// CHECK: xs += m0;
// CHECK: if (b < 16) {
// CHECK-NEXT: qcc::GemmParams<qcc::int8_t> p = {x, w0, rows, 64, K};
// CHECK-NEXT: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::StoreF32> epi(qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws0, wsum0}, qcc::StoreF32{y0 + (long long)m0 * 64, 64});
// CHECK-NEXT: qcc::gemv_i8<Cfg>(p, epi, b - 0);
// CHECK: else {
// CHECK-NEXT: qcc::GemmParams<qcc::int8_t> p = {x, w1, rows, 32, K};
// CHECK-NEXT: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::StoreF32> epi(qcc::DequantPerTokenPerChannel{xs, 1, xz, 1, ws1, wsum1}, qcc::AddBias<>{bias1}, qcc::StoreF32{y1 + (long long)m0 * 32, 32});
// CHECK-NEXT: qcc::gemv_i8<Cfg>(p, epi, b - 16);
// CHECK: qcc_group_k0_rows(
// CHECK-NEXT: const int b = blockIdx.x;
// CHECK-NEXT: if (b < 8) qcc::gemv_prefetch_weights<CfgRows>(w0, 64, K, b - 0);
func.func @group(%x: tensor<?x1x64xi8>, %xs: tensor<?x1x1xf32>, %xz: tensor<?x1x1xi32>, %wq: tensor<64x64xi8>, %sq: tensor<64xf32>, %nq: tensor<64xi32>, %wk: tensor<32x64xi8>, %sk: tensor<32xf32>, %nk: tensor<32xi32>, %bk: tensor<32xf32>) -> (tensor<?x1x64xf32>, tensor<?x1x32xf32>) attributes {qcc.tokens_per_row = 1 : i64} {
  %0:2 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %wq, %sq, %nq, %wk, %sk, %nk, %bk) : (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<64x64xi8>, tensor<64xf32>, tensor<64xi32>, tensor<32x64xi8>, tensor<32xf32>, tensor<32xi32>, tensor<32xf32>) -> (tensor<?x1x64xf32>, tensor<?x1x32xf32>) {
  ^bb0(%a0: tensor<?x1x64xi8>, %a1: tensor<?x1x1xf32>, %a2: tensor<?x1x1xi32>, %a3: tensor<64x64xi8>, %a4: tensor<64xf32>, %a5: tensor<64xi32>, %a6: tensor<32x64xi8>, %a7: tensor<32xf32>, %a8: tensor<32xi32>, %a9: tensor<32xf32>):
    %1 = qcc.qlinear %a0, %a1, %a2, %a3, %a4, %a5 : (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<64x64xi8>, tensor<64xf32>, tensor<64xi32>) -> tensor<?x1x64xf32>
    %2 = qcc.qlinear %a0, %a1, %a2, %a6, %a7, %a8, %a9 : (tensor<?x1x64xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<32x64xi8>, tensor<32xf32>, tensor<32xi32>, tensor<32xf32>) -> tensor<?x1x32xf32>
    qcc.yield %1, %2 : tensor<?x1x64xf32>, tensor<?x1x32xf32>
  }
  return %0#0, %0#1 : tensor<?x1x64xf32>, tensor<?x1x32xf32>
}

// A decode GEMV over a weight shape the tuning table measured
// (codegen/tuning/gemv_sm90.inc: [5632, 2048], a 1B LLaMA's gate): up to 8
// rows the table's <8, 4, 2, 1>, more rows the default <8, 4, 2, 1>;
// grid.x = 5632 / 8 column blocks.
// CHECK-LABEL: ===== unit qcc_tuned_k0 (regions: tuned/k0) kind gemm_i8
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_tuned_k0","grid":{"x":704,
// CHECK: typedef qcc::GemvI8Config<8, 4, 2, 1> Cfg;
func.func @tuned(%x: tensor<?x1x2048xi8>, %xs: tensor<?x1x1xf32>, %xz: tensor<?x1x1xi32>, %w: tensor<5632x2048xi8>, %ws: tensor<5632xf32>, %wsum: tensor<5632xi32>) -> tensor<?x1x5632xf32> attributes {qcc.tokens_per_row = 1 : i64} {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum) : (tensor<?x1x2048xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<5632x2048xi8>, tensor<5632xf32>, tensor<5632xi32>) -> tensor<?x1x5632xf32> {
  ^bb0(%a0: tensor<?x1x2048xi8>, %a1: tensor<?x1x1xf32>, %a2: tensor<?x1x1xi32>, %a3: tensor<5632x2048xi8>, %a4: tensor<5632xf32>, %a5: tensor<5632xi32>):
    %1 = qcc.qlinear %a0, %a1, %a2, %a3, %a4, %a5 : (tensor<?x1x2048xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<5632x2048xi8>, tensor<5632xf32>, tensor<5632xi32>) -> tensor<?x1x5632xf32>
    qcc.yield %1 : tensor<?x1x5632xf32>
  }
  return %0 : tensor<?x1x5632xf32>
}

// The same at [2048, 2048] (not in the table): the default <8, 4, 1, 4>.
// CHECK-LABEL: ===== unit qcc_untuned_k0 (regions: untuned/k0) kind gemm_i8
// CHECK: typedef qcc::GemvI8Config<8, 4, 1, 4> Cfg;
func.func @untuned(%x: tensor<?x1x2048xi8>, %xs: tensor<?x1x1xf32>, %xz: tensor<?x1x1xi32>, %w: tensor<2048x2048xi8>, %ws: tensor<2048xf32>, %wsum: tensor<2048xi32>) -> tensor<?x1x2048xf32> attributes {qcc.tokens_per_row = 1 : i64} {
  %0 = qcc.kernel gemm_i8 "k0"(%x, %xs, %xz, %w, %ws, %wsum) : (tensor<?x1x2048xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<2048x2048xi8>, tensor<2048xf32>, tensor<2048xi32>) -> tensor<?x1x2048xf32> {
  ^bb0(%a0: tensor<?x1x2048xi8>, %a1: tensor<?x1x1xf32>, %a2: tensor<?x1x1xi32>, %a3: tensor<2048x2048xi8>, %a4: tensor<2048xf32>, %a5: tensor<2048xi32>):
    %1 = qcc.qlinear %a0, %a1, %a2, %a3, %a4, %a5 : (tensor<?x1x2048xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<2048x2048xi8>, tensor<2048xf32>, tensor<2048xi32>) -> tensor<?x1x2048xf32>
    qcc.yield %1 : tensor<?x1x2048xf32>
  }
  return %0 : tensor<?x1x2048xf32>
}
