// RUN: qcc-opt %s --raise-rms-norm --split-input-file | FileCheck %s

// HF LlamaRMSNorm as torch.onnx exports it from a float32 model:
// Cast, Pow(2), ReduceMean(-1), Add(eps), Sqrt, Div(1, .), Mul, Cast,
// Mul(weight, .). The casts are float32 -> float32 and fold away; the residual
// Add keeps reading the norm's input.
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK: %[[G:.*]] = qcc.constant dense<1.500000e+00> : tensor<64xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[X]], %[[G]] {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.cast
// CHECK-NOT: qcc.reduce_mean
// CHECK-NOT: qcc.mul
// CHECK: %[[R:.*]] = qcc.add %[[X]], %[[N]]
// CHECK: return %[[R]]
func.func @rms_norm(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %h = qcc.cast %x : tensor<?x?x64xf32> to tensor<?x?x64xf32>
  %sq = qcc.pow %h, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %r = qcc.div %one, %std : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = qcc.mul %h, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %nc = qcc.cast %n : tensor<?x?x64xf32> to tensor<?x?x64xf32>
  %y = qcc.mul %gamma, %nc : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %res = qcc.add %h, %y : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %res : tensor<?x?x64xf32>
}

// -----

// A real upcast: the norm reads h = Cast(x to f32), which the residual Add
// also reads; only the final Mul is replaced and the Cast stays.
// CHECK-LABEL: func.func @rms_norm_upcast(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf16>
// CHECK-DAG: %[[G:.*]] = qcc.constant dense<1.500000e+00> : tensor<64xf32>
// CHECK-DAG: %[[H:.*]] = qcc.cast %[[X]] : tensor<?x?x64xf16> to tensor<?x?x64xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[H]], %[[G]] {epsilon = 9.99999997E-7 : f32} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.mul
// CHECK: %[[R:.*]] = qcc.add %[[H]], %[[N]]
// CHECK: return %[[R]]
func.func @rms_norm_upcast(%x: tensor<?x?x64xf16>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %h = qcc.cast %x : tensor<?x?x64xf16> to tensor<?x?x64xf32>
  %sq = qcc.pow %h, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: -1>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %r = qcc.div %one, %std : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = qcc.mul %h, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = qcc.mul %gamma, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  %res = qcc.add %h, %y : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %res : tensor<?x?x64xf32>
}

// -----

// Variants: Reciprocal(Sqrt) instead of Div(1, Sqrt), h * h for the square,
// axes [-1], eps of shape [1] first in its Add, the reciprocal first in its
// Mul, and gamma (not a splat) second in its Mul.
// CHECK-LABEL: func.func @rms_norm_variants(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x4xf32>
// CHECK: %[[G:.*]] = qcc.constant dense<[5.000000e-01, 1.000000e+00, 1.500000e+00, 2.000000e+00]> : tensor<4xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[X]], %[[G]] {epsilon = 9.99999974E-6 : f32} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
// CHECK-NOT: qcc.reciprocal
// CHECK-NOT: qcc.mul
// CHECK: return %[[N]]
func.func @rms_norm_variants(%x: tensor<?x?x4xf32>) -> tensor<?x?x4xf32> {
  %eps = qcc.constant dense<9.99999974E-6> : tensor<1xf32>
  %gamma = qcc.constant dense<[0.5, 1.0, 1.5, 2.0]> : tensor<4xf32>
  %sq = qcc.mul %x, %x : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: -1>, keepdims = true} : (tensor<?x?x4xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %eps, %var : (tensor<1xf32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %r = qcc.reciprocal %std : tensor<?x?x1xf32>
  %n = qcc.mul %r, %x : (tensor<?x?x1xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %y = qcc.mul %n, %gamma : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  return %y : tensor<?x?x4xf32>
}

// -----

// No gamma, and h / Sqrt(...) as a Div: the pass builds a ones gamma.
// CHECK-LABEL: func.func @rms_norm_no_gamma(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK: %[[ONES:.*]] = qcc.constant dense<1.000000e+00> : tensor<64xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[X]], %[[ONES]] {epsilon = 9.99999997E-7 : f32}
// CHECK-NOT: qcc.div
// CHECK: return %[[N]]
func.func @rms_norm_no_gamma(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %sq = qcc.pow %x, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %n = qcc.div %x, %std : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  return %n : tensor<?x?x64xf32>
}

// -----

// Near miss: eps added outside the Sqrt, 1 / (sqrt(ms) + eps).
// CHECK-LABEL: func.func @eps_outside_sqrt(
// CHECK-NOT: qcc.rms_norm
// CHECK: qcc.sqrt
// CHECK: qcc.add
// CHECK: qcc.div
// CHECK: qcc.mul
// CHECK: qcc.mul
func.func @eps_outside_sqrt(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %sq = qcc.pow %x, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %var : tensor<?x?x1xf32>
  %se = qcc.add %std, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %r = qcc.div %one, %se : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = qcc.mul %x, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = qcc.mul %gamma, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Near miss: the mean square is over axis 1 (the sequence), not the last axis.
// CHECK-LABEL: func.func @non_last_axis(
// CHECK-NOT: qcc.rms_norm
// CHECK: qcc.reduce_mean %{{.*}} {axes = array<i64: 1>}
// CHECK: qcc.mul
// CHECK: qcc.mul
func.func @non_last_axis(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %sq = qcc.pow %x, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 1>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x1x64xf32>
  %ve = qcc.add %var, %eps : (tensor<?x1x64xf32>, tensor<f32>) -> tensor<?x1x64xf32>
  %std = qcc.sqrt %ve : tensor<?x1x64xf32>
  %r = qcc.div %one, %std : (tensor<f32>, tensor<?x1x64xf32>) -> tensor<?x1x64xf32>
  %n = qcc.mul %x, %r : (tensor<?x?x64xf32>, tensor<?x1x64xf32>) -> tensor<?x?x64xf32>
  %y = qcc.mul %gamma, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Near miss: the mean is subtracted first (d = x - mean(x)), which makes this
// a layer norm (raise-layer-norm's business), not an RMS norm.
// CHECK-LABEL: func.func @mean_subtracted(
// CHECK-NOT: qcc.rms_norm
// CHECK: qcc.sub
// CHECK: qcc.mul
// CHECK: qcc.mul
func.func @mean_subtracted(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %gamma = qcc.constant dense<1.500000e+00> : tensor<64xf32>
  %mean = qcc.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %d = qcc.sub %x, %mean : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %sq = qcc.pow %d, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %r = qcc.div %one, %std : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = qcc.mul %d, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = qcc.mul %gamma, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// A gamma that is not a constant: the normalization is raised with a ones
// gamma and the Mul by %gamma stays.
// CHECK-LABEL: func.func @non_constant_gamma(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>, %[[G:.*]]: tensor<64xf32>
// CHECK: %[[ONES:.*]] = qcc.constant dense<1.000000e+00> : tensor<64xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[X]], %[[ONES]] {epsilon = 9.99999997E-7 : f32}
// CHECK: %[[Y:.*]] = qcc.mul %[[G]], %[[N]]
// CHECK: return %[[Y]]
func.func @non_constant_gamma(%x: tensor<?x?x64xf32>, %gamma: tensor<64xf32>) -> tensor<?x?x64xf32> {
  %two = qcc.constant dense<2.000000e+00> : tensor<f32>
  %eps = qcc.constant dense<9.99999997E-7> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %sq = qcc.pow %x, %two : (tensor<?x?x64xf32>, tensor<f32>) -> tensor<?x?x64xf32>
  %var = qcc.reduce_mean %sq {axes = array<i64: 2>, keepdims = true} : (tensor<?x?x64xf32>) -> tensor<?x?x1xf32>
  %ve = qcc.add %var, %eps : (tensor<?x?x1xf32>, tensor<f32>) -> tensor<?x?x1xf32>
  %std = qcc.sqrt %ve : tensor<?x?x1xf32>
  %r = qcc.div %one, %std : (tensor<f32>, tensor<?x?x1xf32>) -> tensor<?x?x1xf32>
  %n = qcc.mul %x, %r : (tensor<?x?x64xf32>, tensor<?x?x1xf32>) -> tensor<?x?x64xf32>
  %y = qcc.mul %gamma, %n : (tensor<64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}
