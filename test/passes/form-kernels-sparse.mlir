// RUN: qcc-opt %s --form-kernels --split-input-file | FileCheck %s
// RUN: qcc-opt %s --form-kernels --split-input-file --verify-diagnostics -o /dev/null

// A qlinear of a 2:4 weight groups like its dense counterpart (GELU and the
// residual add join it) into gemm_i8_sp; the qcc.sparse_2_4 joins the region,
// so the compressed values and metadata are its operands.
// CHECK-LABEL: func.func @qlinear_sparse(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x64xi8>, %[[XS:[^:]*]]: tensor<?x?x1xf32>, %[[XZ:[^:]*]]: tensor<?x?x1xi32>, %[[V:[^:]*]]: tensor<128x32xi8>, %[[M:[^:]*]]: tensor<128x2xi32>
// CHECK-NOT: qcc.sparse_2_4
// CHECK: %[[K:.*]] = qcc.kernel gemm_i8_sp "k0"(%[[V]], %[[M]], %[[X]], %[[XS]], %[[XZ]],
// CHECK-NEXT: ^bb0(%[[AV:[^:]*]]: tensor<128x32xi8>, %[[AM:[^:]*]]: tensor<128x2xi32>,
// CHECK-NEXT: %[[W:.*]] = qcc.sparse_2_4 %[[AV]], %[[AM]]
// CHECK-NEXT: qcc.qlinear %{{.*}}, %{{.*}}, %{{.*}}, %[[W]],
// CHECK-NEXT: qcc.gelu
// CHECK-NEXT: qcc.add
// CHECK-NEXT: qcc.yield
// CHECK: return %[[K]]
func.func @qlinear_sparse(%x: tensor<?x?x64xi8>, %xs: tensor<?x?x1xf32>, %xz: tensor<?x?x1xi32>, %v: tensor<128x32xi8>, %m: tensor<128x2xi32>, %ws: tensor<128xf32>, %wsum: tensor<128xi32>, %b: tensor<128xf32>, %r: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> {
  %w = qcc.sparse_2_4 %v, %m : (tensor<128x32xi8>, tensor<128x2xi32>) -> tensor<128x64xi8>
  %y = qcc.qlinear %x, %xs, %xz, %w, %ws, %wsum, %b : (tensor<?x?x64xi8>, tensor<?x?x1xf32>, tensor<?x?x1xi32>, tensor<128x64xi8>, tensor<128xf32>, tensor<128xi32>, tensor<128xf32>) -> tensor<?x?x128xf32>
  %g = qcc.gelu %y : tensor<?x?x128xf32>
  %o = qcc.add %g, %r : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %o : tensor<?x?x128xf32>
}

// -----

// A float linear of a 2:4 weight (constants, as sparsify-2-4 writes them):
// gemm_f16_sp with the SiLU; the constants enter as operands.
// CHECK-LABEL: func.func @linear_sparse(
// CHECK-DAG: %[[V:.*]] = qcc.constant {{.*}} : tensor<64x16xf16>
// CHECK-DAG: %[[M:.*]] = qcc.constant {{.*}} : tensor<64x1xi32>
// CHECK: qcc.kernel gemm_f16_sp "k0"(%[[V]], %[[M]], %{{.*}}) : (tensor<64x16xf16>, tensor<64x1xi32>, tensor<?x32xf16>) -> tensor<?x64xf16>
// CHECK-NEXT: ^bb0(
// CHECK-NEXT: qcc.sparse_2_4
// CHECK-NEXT: qcc.linear
// CHECK-NEXT: qcc.silu
// CHECK-NEXT: qcc.yield
func.func @linear_sparse(%x: tensor<?x32xf16>) -> tensor<?x64xf16> {
  %v = qcc.constant dense<1.0> : tensor<64x16xf16>
  %m = qcc.constant dense<1145324612> : tensor<64x1xi32>
  %w = qcc.sparse_2_4 %v, %m : (tensor<64x16xf16>, tensor<64x1xi32>) -> tensor<64x32xf16>
  %y = qcc.linear %x, %w : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16>
  %s = qcc.silu %y : tensor<?x64xf16>
  return %s : tensor<?x64xf16>
}

// -----

// A 2:4 weight read by two GEMMs stays outside (its dense result is shared):
// both GEMMs are dense, and a remark says why.
// CHECK-LABEL: func.func @shared_weight(
// CHECK: qcc.sparse_2_4
// CHECK: qcc.kernel gemm_f16 "k0"
// CHECK: qcc.kernel gemm_f16 "k1"
// CHECK-NOT: gemm_f16_sp
func.func @shared_weight(%x: tensor<?x32xf16>, %v: tensor<64x16xf16>, %m: tensor<64x1xi32>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  // expected-remark @+1 {{form-kernels: qcc.sparse_2_4 not fused: its dense weight has other users}}
  %w = qcc.sparse_2_4 %v, %m : (tensor<64x16xf16>, tensor<64x1xi32>) -> tensor<64x32xf16>
  %a = qcc.linear %x, %w : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16>
  %b = qcc.linear %x, %w : (tensor<?x32xf16>, tensor<64x32xf16>) -> tensor<?x64xf16>
  return %a, %b : tensor<?x64xf16>, tensor<?x64xf16>
}
