// RUN: qcc-opt %s --raise-linear --split-input-file | FileCheck %s

// MatMul by a constant [K, N] weight: the weight is transposed at compile
// time into a new [N, K] constant.
// CHECK-LABEL: func.func @matmul_const_weight(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x3xf32>
// CHECK: %[[WT:.*]] = qcc.constant dense<{{\[}}[1.000000e+00, 3.000000e+00, 5.000000e+00], [2.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[X]], %[[WT]] : (tensor<?x?x3xf32>, tensor<2x3xf32>) -> tensor<?x?x2xf32>
// CHECK-NOT: qcc.matmul
// CHECK: return %[[Y]]
func.func @matmul_const_weight(%x: tensor<?x?x3xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %y = qcc.matmul %x, %w : (tensor<?x?x3xf32>, tensor<3x2xf32>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// The exporter puts the bias first: Add(bias, MatMul) -> linear with bias.
// CHECK-LABEL: func.func @matmul_bias_first(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x3xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>
// CHECK-DAG: %[[WT:.*]] = qcc.constant dense<{{.*}}> : tensor<2x3xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[X]], %[[WT]], %[[B]] : (tensor<?x?x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
// CHECK-NOT: qcc.add
// CHECK: return %[[Y]]
func.func @matmul_bias_first(%x: tensor<?x?x3xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = qcc.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %m = qcc.matmul %x, %w : (tensor<?x?x3xf32>, tensor<3x2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.add %b, %m : (tensor<2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// Add(MatMul, bias): the other operand order.
// CHECK-LABEL: func.func @matmul_bias_second(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x3xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[X]], %{{.*}}, %{{.*}} : (tensor<?x?x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
// CHECK-NOT: qcc.add
// CHECK: return %[[Y]]
func.func @matmul_bias_second(%x: tensor<?x?x3xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = qcc.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %m = qcc.matmul %x, %w : (tensor<?x?x3xf32>, tensor<3x2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.add %m, %b : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// A large weight stays a dense_resource blob, named after the original.
// CHECK-LABEL: func.func @matmul_resource_weight(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x8xf32>
// CHECK: %[[WT:.*]] = qcc.constant dense_resource<fc.weight_t> : tensor<16x8xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[X]], %[[WT]] : (tensor<?x?x8xf32>, tensor<16x8xf32>) -> tensor<?x?x16xf32>
// CHECK: return %[[Y]]
// The blob holds the transpose: row 0 of W^T is column 0 of W (0, 16, 32, ...).
// CHECK: fc.weight_t: "0x{{[0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F]}}000000000000804100000042
func.func @matmul_resource_weight(%x: tensor<?x?x8xf32>) -> tensor<?x?x16xf32> {
  %w = qcc.constant dense_resource<fc.weight> : tensor<8x16xf32>
  %y = qcc.matmul %x, %w : (tensor<?x?x8xf32>, tensor<8x16xf32>) -> tensor<?x?x16xf32>
  return %y : tensor<?x?x16xf32>
}

{-#
  dialect_resources: {
    builtin: {
      fc.weight: "0x04000000000000000000803F0000004000004040000080400000A0400000C0400000E0400000004100001041000020410000304100004041000050410000604100007041000080410000884100009041000098410000A0410000A8410000B0410000B8410000C0410000C8410000D0410000D8410000E0410000E8410000F0410000F84100000042000004420000084200000C4200001042000014420000184200001C4200002042000024420000284200002C4200003042000034420000384200003C4200004042000044420000484200004C4200005042000054420000584200005C4200006042000064420000684200006C4200007042000074420000784200007C42000080420000824200008442000086420000884200008A4200008C4200008E42000090420000924200009442000096420000984200009A4200009C4200009E420000A0420000A2420000A4420000A6420000A8420000AA420000AC420000AE420000B0420000B2420000B4420000B6420000B8420000BA420000BC420000BE420000C0420000C2420000C4420000C6420000C8420000CA420000CC420000CE420000D0420000D2420000D4420000D6420000D8420000DA420000DC420000DE420000E0420000E2420000E4420000E6420000E8420000EA420000EC420000EE420000F0420000F2420000F4420000F6420000F8420000FA420000FC420000FE42"
    }
  }
#-}

// -----

// GPT-2's Conv1D: Reshape(x, [-1, K]); Gemm(., W [K, N], b [N]);
// Reshape(., [B, T, N]) -> one linear on the 3-D x.
// CHECK-LABEL: func.func @gpt2_conv1d(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x3xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[5.000000e-01, -5.000000e-01]> : tensor<2xf32>
// CHECK-DAG: %[[WT:.*]] = qcc.constant dense<{{\[}}[1.000000e+00, 3.000000e+00, 5.000000e+00], [2.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[X]], %[[WT]], %[[B]] : (tensor<?x?x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
// CHECK-NOT: qcc.gemm
// CHECK-NOT: qcc.reshape
// CHECK: return %[[Y]]
func.func @gpt2_conv1d(%x: tensor<?x?x3xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = qcc.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %max = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %n = qcc.constant dense<2> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x3xf32>) -> tensor<3xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %k = qcc.slice %s, %m1, %max {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %flat = qcc.concat %m1, %k {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %x2 = qcc.reshape %x, %flat : (tensor<?x?x3xf32>, tensor<2xi64>) -> tensor<?x3xf32>
  %g = qcc.gemm %x2, %w, %b : (tensor<?x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u1 = qcc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %back = qcc.concat %u0, %u1, %n {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %y = qcc.reshape %g, %back : (tensor<?x2xf32>, tensor<3xi64>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// Near miss: the outer reshape swaps B and T; the Gemm is still raised (it is
// a linear on the 2-D view) but the reshapes stay.
// CHECK-LABEL: func.func @gpt2_conv1d_swapped(
// CHECK: %[[X2:.*]] = qcc.reshape
// CHECK: %[[L:.*]] = qcc.linear %[[X2]], %{{.*}}, %{{.*}} : (tensor<?x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<?x2xf32>
// CHECK: %[[Y:.*]] = qcc.reshape %[[L]]
// CHECK: return %[[Y]]
func.func @gpt2_conv1d_swapped(%x: tensor<?x?x3xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = qcc.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %flat = qcc.constant dense<[-1, 3]> : tensor<2xi64>
  %n = qcc.constant dense<2> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x3xf32>) -> tensor<3xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %x2 = qcc.reshape %x, %flat : (tensor<?x?x3xf32>, tensor<2xi64>) -> tensor<?x3xf32>
  %g = qcc.gemm %x2, %w, %b : (tensor<?x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u1 = qcc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %back = qcc.concat %u1, %u0, %n {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %y = qcc.reshape %g, %back : (tensor<?x2xf32>, tensor<3xi64>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// Gemm with transB = 1: the weight is [N, K] already and is used as is.
// CHECK-LABEL: func.func @gemm_trans_b(
// CHECK-SAME: %[[A:.*]]: tensor<?x3xf32>
// CHECK: %[[W:.*]] = qcc.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[A]], %[[W]] : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x2xf32>
// CHECK: return %[[Y]]
func.func @gemm_trans_b(%a: tensor<?x3xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = qcc.gemm %a, %w {transB = true} : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Near miss: x @ y of two activations (attention scores) stays a matmul.
// CHECK-LABEL: func.func @matmul_activations(
// CHECK-NOT: qcc.linear
// CHECK: %[[Y:.*]] = qcc.matmul
// CHECK: return %[[Y]]
func.func @matmul_activations(%q: tensor<?x4x?x16xf32>, %k: tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32> {
  %y = qcc.matmul %q, %k : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  return %y : tensor<?x4x?x?xf32>
}

// -----

// Near miss: alpha != 1 scales the product; the Gemm stays.
// CHECK-LABEL: func.func @gemm_alpha(
// CHECK-NOT: qcc.linear
// CHECK: %[[Y:.*]] = qcc.gemm
// CHECK: return %[[Y]]
func.func @gemm_alpha(%a: tensor<?x3xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = qcc.gemm %a, %w {alpha = 5.000000e-01 : f32, transB = true} : (tensor<?x3xf32>, tensor<2x3xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Near miss: a [1, 1, N] addend is not a [N] bias; the matmul becomes a
// linear without bias and the Add stays.
// CHECK-LABEL: func.func @bias_wrong_shape(
// CHECK: %[[L:.*]] = qcc.linear %{{[^,]*}}, %{{[^,]*}} : (tensor<?x?x3xf32>, tensor<2x3xf32>) -> tensor<?x?x2xf32>
// CHECK: %[[Y:.*]] = qcc.add {{.*}}%[[L]]
// CHECK: return %[[Y]]
func.func @bias_wrong_shape(%x: tensor<?x?x3xf32>) -> tensor<?x?x2xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = qcc.constant dense<[[[0.5, -0.5]]]> : tensor<1x1x2xf32>
  %m = qcc.matmul %x, %w : (tensor<?x?x3xf32>, tensor<3x2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.add %b, %m : (tensor<1x1x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// Near miss: a 3-D constant right operand is a batched matmul, not a linear.
// CHECK-LABEL: func.func @matmul_3d_constant(
// CHECK-NOT: qcc.linear
// CHECK: %[[Y:.*]] = qcc.matmul
// CHECK: return %[[Y]]
func.func @matmul_3d_constant(%x: tensor<2x?x3xf32>) -> tensor<2x?x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<2x3x2xf32>
  %y = qcc.matmul %x, %w : (tensor<2x?x3xf32>, tensor<2x3x2xf32>) -> tensor<2x?x2xf32>
  return %y : tensor<2x?x2xf32>
}

// -----

// An LM head tied to the embedding table: MatMul by the transposed table is a
// linear over the table itself (no transposed copy).
// CHECK-LABEL: func.func @tied_head(
// CHECK: %[[W:.*]] = qcc.constant dense<{{.*}}> : tensor<3x2xf32>
// CHECK-NOT: qcc.transpose
// CHECK: qcc.linear %{{.*}}, %[[W]] : (tensor<?x?x2xf32>, tensor<3x2xf32>) -> tensor<?x?x3xf32>
func.func @tied_head(%x: tensor<?x?x2xf32>) -> tensor<?x?x3xf32> {
  %e = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %t = qcc.transpose %e {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %y = qcc.matmul %x, %t : (tensor<?x?x2xf32>, tensor<2x3xf32>) -> tensor<?x?x3xf32>
  return %y : tensor<?x?x3xf32>
}
