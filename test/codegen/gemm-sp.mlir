// The 2:4 sparse GEMMs (gemm_i8_sp, gemm_f16_sp: a qlinear / linear whose
// weight is a qcc.sparse_2_4 of the region's operands): codegen/kernels/
// gemm_sp.cuh's mma.sp GEMM for prefill and its GEMV for decode, with the
// dense GEMMs' epilogue chain and tile families (Emitter.h).

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// int8, N = 768: the narrow tile (BlockK 128: one 16-byte metadata chunk
// per row and stage; 4 stages, 61,440 B); x, then the compressed weight
// (values, metadata), then the dense GEMM's parameters.
// CHECK-LABEL: ===== unit qcc_i8_k0 (regions: i8/k0) kind gemm_i8_sp
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":61440,"entry":"qcc_i8_k0","grid":{"x":12,"y":{"ceil_div":["M",64]},"z":1},"params":[{"name":"x","operand":2},{"name":"wv","operand":0},{"name":"wmeta","operand":1},{"name":"xs","operand":3},{"name":"xz","operand":4},{"name":"ws","operand":5},{"name":"wsum","operand":6},{"name":"bias","operand":7},{"name":"y","result":0},{"int":"M","name":"M"},{"int":768,"name":"N"},{"int":256,"name":"K"}],"waits_for_prior_grids":true}]
// CHECK: #include "qcc/gemm_sp.cuh"
// CHECK: typedef qcc::GemmSpI8Config<64, 64, 128, 32, 32, 4> Cfg;
// CHECK: qcc_i8_k0(const qcc::int8_t *x, const qcc::int8_t *wv, const qcc::int32_t *wmeta, const float *xs,
// CHECK: qcc::GemmSpParams<qcc::int8_t> p = {x, wv, wmeta, M, N, K};
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::AddBias<>, qcc::StoreF32>
// CHECK: qcc::gemm_i8_sp<Cfg>(p, epi);
func.func @i8(%x: tensor<?x?x256xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %v: tensor<768x128xi8>, %m: tensor<768x8xi32>, %ws: tensor<768xf32>, %wsum: tensor<768xi32>, %b: tensor<768xf32>) -> tensor<?x?x768xf32> {
  %0 = qcc.kernel gemm_i8_sp "k0"(%v, %m, %x, %xs, %xz, %ws, %wsum, %b) : (tensor<768x128xi8>, tensor<768x8xi32>, tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>) -> tensor<?x?x768xf32> {
  ^bb0(%a1: tensor<768x128xi8>, %a2: tensor<768x8xi32>, %a3: tensor<?x?x256xi8>, %a4: tensor<?x?x1xf32>, %a5: tensor<?x?x1xi32>, %a6: tensor<768xf32>, %a7: tensor<768xi32>, %a8: tensor<768xf32>):
    %w = qcc.sparse_2_4 %a1, %a2 : (tensor<768x128xi8>, tensor<768x8xi32>) -> tensor<768x256xi8>
    %1 = qcc.qlinear %a3, %a4, %a5, %w, %a6, %a7, %a8 : (tensor<?x?x256xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>, tensor<768xf32>) -> tensor<?x?x768xf32>
    qcc.yield %1 : tensor<?x?x768xf32>
  }
  return %0 : tensor<?x?x768xf32>
}

// int8, N = 1024: the wide tile (3 stages, 92,160 B); SiLU and residual;
// K = 96, an odd multiple of 32 (the kernel zero-fills the last half step).
// CHECK-LABEL: ===== unit qcc_i8_wide_k0 (regions: i8_wide/k0) kind gemm_i8_sp
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":92160,"entry":"qcc_i8_wide_k0","grid":{"x":8,"y":{"ceil_div":["M",128]},"z":1}
// CHECK-SAME: {"name":"res","operand":7},{"name":"y","result":0},{"int":"M","name":"M"},{"int":1024,"name":"N"},{"int":96,"name":"K"}]
// CHECK: typedef qcc::GemmSpI8Config<128, 128, 128, 64, 64, 3> Cfg;
// CHECK: qcc::Chain<qcc::DequantPerTokenPerChannel, qcc::Silu, qcc::AddResidual<>, qcc::StoreF32>
// CHECK: qcc::gemm_i8_sp<Cfg>(p, epi);
func.func @i8_wide(%x: tensor<?x?x96xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %v: tensor<1024x48xi8>, %m: tensor<1024x3xi32>, %ws: tensor<1024xf32>, %wsum: tensor<1024xi32>, %r: tensor<?x?x1024xf32>) -> tensor<?x?x1024xf32> {
  %0 = qcc.kernel gemm_i8_sp "k0"(%v, %m, %x, %xs, %xz, %ws, %wsum, %r) : (tensor<1024x48xi8>, tensor<1024x3xi32>, tensor<?x?x96xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<1024xf32>, tensor<1024xi32>, tensor<?x?x1024xf32>) -> tensor<?x?x1024xf32> {
  ^bb0(%a1: tensor<1024x48xi8>, %a2: tensor<1024x3xi32>, %a3: tensor<?x?x96xi8>, %a4: tensor<?x?x1xf32>, %a5: tensor<?x?x1xi32>, %a6: tensor<1024xf32>, %a7: tensor<1024xi32>, %a8: tensor<?x?x1024xf32>):
    %w = qcc.sparse_2_4 %a1, %a2 : (tensor<1024x48xi8>, tensor<1024x3xi32>) -> tensor<1024x96xi8>
    %1 = qcc.qlinear %a3, %a4, %a5, %w, %a6, %a7 : (tensor<?x?x96xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<1024x96xi8>, tensor<1024xf32>, tensor<1024xi32>) -> tensor<?x?x1024xf32>
    %2 = qcc.silu %1 : tensor<?x?x1024xf32>
    %3 = qcc.add %a8, %2 : (tensor<?x?x1024xf32>, tensor<?x?x1024xf32>) -> tensor<?x?x1024xf32>
    qcc.yield %3 : tensor<?x?x1024xf32>
  }
  return %0 : tensor<?x?x1024xf32>
}

// int8 decode (qcc.tokens_per_row = 1): the sparse GEMV, 8 rows per y.
// CHECK-LABEL: ===== unit qcc_i8_decode_k0 (regions: i8_decode/k0) kind gemm_i8_sp
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":128,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_i8_decode_k0","grid":{"x":96,"y":{"ceil_div":["M",8]},"z":1}
// CHECK: typedef qcc::GemvSpI8Config<8, 4, 2> Cfg;
// CHECK: qcc::GemmSpParams<qcc::int8_t> p = {x, wv, wmeta, rows, N, K};
// CHECK: qcc::gemv_i8_sp<Cfg>(p, epi);
func.func @i8_decode(%x: tensor<?x1x256xi8>, %xs: tensor<?x1x1xf32>, %xz: tensor<?x1x1xi32>, %v: tensor<768x128xi8>, %m: tensor<768x8xi32>, %ws: tensor<768xf32>, %wsum: tensor<768xi32>) -> tensor<?x1x768xf32> attributes {qcc.tokens_per_row = 1 : i64} {
  %0 = qcc.kernel gemm_i8_sp "k0"(%v, %m, %x, %xs, %xz, %ws, %wsum) : (tensor<768x128xi8>, tensor<768x8xi32>, tensor<?x1x256xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<768xf32>, tensor<768xi32>) -> tensor<?x1x768xf32> {
  ^bb0(%a1: tensor<768x128xi8>, %a2: tensor<768x8xi32>, %a3: tensor<?x1x256xi8>, %a4: tensor<?x1x1xf32>, %a5: tensor<?x1x1xi32>, %a6: tensor<768xf32>, %a7: tensor<768xi32>):
    %w = qcc.sparse_2_4 %a1, %a2 : (tensor<768x128xi8>, tensor<768x8xi32>) -> tensor<768x256xi8>
    %1 = qcc.qlinear %a3, %a4, %a5, %w, %a6, %a7 : (tensor<?x1x256xi8>, tensor<?x1x1xf32>, tensor<?x1x1xi32>, tensor<768x256xi8>, tensor<768xf32>, tensor<768xi32>) -> tensor<?x1x768xf32>
    qcc.yield %1 : tensor<?x1x768xf32>
  }
  return %0 : tensor<?x1x768xf32>
}

// f32 linear of a 2:4 weight: an f16 sparse GEMM; the values are converted
// to f16 at upload (operand_f16), the metadata is read as it is, x goes
// through the cast step.
// CHECK-LABEL: ===== unit qcc_f32_k0 (regions: f32/k0) kind gemm_f16_sp
// CHECK-NEXT: // launch: {"steps":[{{.*}}"entry":"qcc_f32_k0_cast"
// CHECK-SAME: {"block":{"x":128,"y":1,"z":1},"dynamic_smem":82944,"entry":"qcc_f32_k0","grid":{"x":8,"y":{"ceil_div":["M",64]},"z":1},"params":[{"name":"x","workspace":"x16"},{"name":"wv","operand_f16":0},{"name":"wmeta","operand":1},{"name":"bias","operand":3},{"name":"y","result":0},
// CHECK: typedef qcc::GemmSpF16Config<64, 64, 128, 32, 32, 3> Cfg;
// CHECK: qcc::Chain<qcc::AddBias<>, qcc::GeluErf, qcc::StoreF32>
// CHECK: qcc::gemm_f16_sp<Cfg>(p, epi);
// CHECK: qcc::cast_f32_to_f16<qcc::CastF32ToF16Config>(p);
func.func @f32(%x: tensor<?x?x256xf32>, %v: tensor<512x128xf32>, %m: tensor<512x8xi32>, %b: tensor<512xf32>) -> tensor<?x?x512xf32> {
  %0 = qcc.kernel gemm_f16_sp "k0"(%v, %m, %x, %b) : (tensor<512x128xf32>, tensor<512x8xi32>, tensor<?x?x256xf32>, tensor<512xf32>) -> tensor<?x?x512xf32> {
  ^bb0(%a1: tensor<512x128xf32>, %a2: tensor<512x8xi32>, %a3: tensor<?x?x256xf32>, %a4: tensor<512xf32>):
    %w = qcc.sparse_2_4 %a1, %a2 : (tensor<512x128xf32>, tensor<512x8xi32>) -> tensor<512x256xf32>
    %1 = qcc.linear %a3, %w, %a4 : (tensor<?x?x256xf32>, tensor<512x256xf32>, tensor<512xf32>) -> tensor<?x?x512xf32>
    %2 = qcc.gelu %1 : tensor<?x?x512xf32>
    qcc.yield %2 : tensor<?x?x512xf32>
  }
  return %0 : tensor<?x?x512xf32>
}

// f16 decode: the f16 sparse GEMV, f16 result.
// CHECK-LABEL: ===== unit qcc_f16_decode_k0 (regions: f16_decode/k0) kind gemm_f16_sp
// CHECK: typedef qcc::GemvSpF16Config<8, 4, 2> Cfg;
// CHECK: qcc::Chain<qcc::StoreF16>
// CHECK: qcc::gemv_f16_sp<Cfg>(p, epi);
func.func @f16_decode(%x: tensor<?x1x256xf16>, %v: tensor<1024x128xf16>, %m: tensor<1024x8xi32>) -> tensor<?x1x1024xf16> attributes {qcc.tokens_per_row = 1 : i64} {
  %0 = qcc.kernel gemm_f16_sp "k0"(%v, %m, %x) : (tensor<1024x128xf16>, tensor<1024x8xi32>, tensor<?x1x256xf16>) -> tensor<?x1x1024xf16> {
  ^bb0(%a1: tensor<1024x128xf16>, %a2: tensor<1024x8xi32>, %a3: tensor<?x1x256xf16>):
    %w = qcc.sparse_2_4 %a1, %a2 : (tensor<1024x128xf16>, tensor<1024x8xi32>) -> tensor<1024x256xf16>
    %1 = qcc.linear %a3, %w : (tensor<?x1x256xf16>, tensor<1024x256xf16>) -> tensor<?x1x1024xf16>
    qcc.yield %1 : tensor<?x1x1024xf16>
  }
  return %0 : tensor<?x1x1024xf16>
}

// CHECK-NOT: ===== no kernel
