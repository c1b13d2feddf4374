// RUN: qcc-opt %s --raise-layer-norm --split-input-file | FileCheck %s

// The LayerNormalization expansion with gamma and beta:
// d = x - mean(x); y = d / sqrt(mean(d^2) + eps) * gamma + beta.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK-DAG: %[[G:.*]] = qcc.constant dense<1.500000e+00> : tensor<64xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<2.500000e-01> : tensor<64xf32>
// CHECK: %[[Y:.*]] = qcc.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.reduce_mean
// CHECK-NOT: qcc.sqrt
// CHECK-NOT: qcc.div
// CHECK-NOT: qcc.mul
// CHECK-NOT: qcc.add
// CHECK: return %[[Y]]
func.func @layer_norm(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999974E-6> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %beta = qcc.constant dense<2.500000e-01> : tensor<64xf32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %n = qcc.div %d, %std : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %g = qcc.mul %n, %gamma : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = qcc.add %g, %beta : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// No gamma and no beta: the pass builds a ones gamma.
// CHECK-LABEL: func.func @layer_norm_no_affine(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK: %[[ONES:.*]] = qcc.constant dense<1.000000e+00> : tensor<64xf32>
// CHECK: %[[Y:.*]] = qcc.layer_norm %[[X]], %[[ONES]] {epsilon = 9.99999996E-13 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.div
// CHECK: return %[[Y]]
func.func @layer_norm_no_affine(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999996E-13> : tensor<f32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %n = qcc.div %d, %std : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  return %n : tensor<?x?x64xf32>
}

// -----

// Variants: axes [-1], d * d for the square, eps of shape [1] first in its
// Add, gamma (not a splat) first in its Mul, and no beta.
// CHECK-LABEL: func.func @layer_norm_variants(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x8xf32>
// CHECK: %[[G:.*]] = qcc.constant dense<[5.000000e-01, 1.000000e+00, 1.500000e+00, 2.000000e+00, 2.500000e+00, 3.000000e+00, 3.500000e+00, 4.000000e+00]> : tensor<8xf32>
// CHECK: %[[Y:.*]] = qcc.layer_norm %[[X]], %[[G]] {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x8xf32>, tensor<8xf32>) -> tensor<?x?x8xf32>
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @layer_norm_variants(%x: tensor<?x?x8xf32>) -> tensor<?x?x8xf32> {
  %eps = qcc.constant dense<9.99999974E-6> : tensor<1xf32>
  %gamma = qcc.constant dense<[0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]> : tensor<8xf32>
  %mean = qcc.reduce_mean %x {axes = array<i64: -1>, keepdims = true} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %sq = qcc.mul %d, %d : (tensor<?x?x8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: -1>, keepdims = true} : (tensor<?x?x8xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %eps, %var : (tensor<1xf32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %n = qcc.div %d, %std : (tensor<?x?x8xf32>, tensor<?x?x1xf32>) -> tensor<?x?x8xf32>
  %y = qcc.mul %gamma, %n : (tensor<8xf32>, tensor<?x?x8xf32>) -> tensor<?x?x8xf32>
  return %y : tensor<?x?x8xf32>
}

// -----

// d * Reciprocal(sqrt(var + eps)) instead of the Div, beta first in its Add.
// CHECK-LABEL: func.func @layer_norm_reciprocal(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK-DAG: %[[G:.*]] = qcc.constant dense<1.500000e+00> : tensor<64xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<2.500000e-01> : tensor<64xf32>
// CHECK: %[[Y:.*]] = qcc.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 9.99999974E-6 : f32}
// CHECK-NOT: qcc.reciprocal
// CHECK: return %[[Y]]
func.func @layer_norm_reciprocal(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999974E-6> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %beta = qcc.constant dense<2.500000e-01> : tensor<64xf32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %r = qcc.reciprocal %std : tensor<?x?x1xf32>
  %n = qcc.mul %r, %d : (tensor<?x?x1xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %g = qcc.mul %n, %gamma : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = qcc.add %beta, %g : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Near miss: eps added after the Sqrt, d / (sqrt(var) + eps), a different
// epsilon placement.
// CHECK-LABEL: func.func @eps_after_sqrt(
// CHECK-NOT: qcc.layer_norm
// CHECK: qcc.sqrt
// CHECK: qcc.add
// CHECK: qcc.div
func.func @eps_after_sqrt(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999974E-6> : tensor<f32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %var : tensor<?x?x1xf32>
  %se = qcc.add %std, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %n = qcc.div %d, %se : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  return %n : tensor<?x?x64xf32>
}

// -----

// Near miss: both means reduce axis 1 (the sequence), not the last axis.
// CHECK-LABEL: func.func @non_last_axis(
// CHECK-NOT: qcc.layer_norm
// CHECK: qcc.reduce_mean
// CHECK: qcc.reduce_mean
// CHECK: qcc.div
func.func @non_last_axis(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999974E-6> : tensor<f32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 1>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x1x64xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x1x64xf32>
  %ve = qcc.add %var, %eps : (tensor<?x1x64xf32>, tensor<f32>) -> tensor<?x1x64xf32>
  %std = qcc.sqrt %ve : tensor<?x1x64xf32>
  %n = qcc.div %d, %std : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  return %n : tensor<?x?x64xf32>
}

// -----

// Near miss: the first ReduceMean reads z, not the x it is subtracted from.
// CHECK-LABEL: func.func @mean_of_other_tensor(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>, %[[Z:.*]]: tensor<?x?x64xf32>
// CHECK-NOT: qcc.layer_norm
// CHECK: %[[M:.*]] = qcc.reduce_mean %[[Z]]
// CHECK: qcc.sub %[[X]], %[[M]]
// CHECK: qcc.div
func.func @mean_of_other_tensor(%x: tensor<?x?x64xf32>, %z: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999974E-6> : tensor<f32>
  %mean = qcc.reduce_mean %z {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %n = qcc.div %d, %std : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  return %n : tensor<?x?x64xf32>
}

// -----

// A gamma that is not a constant: the normalization is raised with a ones
// gamma, and the Mul by %gamma stays; so does the Add of the constant beta,
// since it no longer follows the layer_norm directly.
// CHECK-LABEL: func.func @non_constant_gamma(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>, %[[G:.*]]: tensor<64xf32>
// CHECK-DAG: %[[ONES:.*]] = qcc.constant dense<1.000000e+00> : tensor<64xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<2.500000e-01> : tensor<64xf32>
// CHECK: %[[N:.*]] = qcc.layer_norm %[[X]], %[[ONES]] {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[M:.*]] = qcc.mul %[[N]], %[[G]]
// CHECK: %[[Y:.*]] = qcc.add %[[M]], %[[B]]
// CHECK: return %[[Y]]
func.func @non_constant_gamma(%x: tensor<?x?x64xf32>, %gamma: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999974E-6> : tensor<f32>
  %beta = qcc.constant dense<2.500000e-01> : tensor<64xf32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %n = qcc.div %d, %std : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %g = qcc.mul %n, %gamma : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %y = qcc.add %g, %beta : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}
