// RUN: qcc-opt %s --raise-gelu --split-input-file | FileCheck %s

// F.gelu as torch.onnx exports it (BERT):
// Div(x, sqrt 2) -> Erf -> Add(., 1) -> Mul(x, .) -> Mul(., 0.5).
// approximate = "none" is the default and is not printed.
// CHECK-LABEL: func.func @gelu_erf(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x128xf32>
// CHECK: %[[Y:.*]] = qcc.gelu %[[X]] : tensor<?x?x128xf32>
// CHECK-NOT: qcc.erf
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @gelu_erf(%x: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> {
  %sqrt2 = qcc.constant dense<1.41421354> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %half = qcc.constant dense<5.000000e-01> : tensor<f32>
  %0 = qcc.div %x, %sqrt2 : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  %1 = qcc.erf %0 : tensor<?x?x128xf32>
  %2 = qcc.add %1, %one : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  %3 = qcc.mul %x, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %4 = qcc.mul %3, %half : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  return %4 : tensor<?x?x128xf32>
}

// -----

// The 0.5 applied first, x * (1 / sqrt 2) instead of x / sqrt 2, constants of
// shape [1] and every commutative operand order swapped.
// CHECK-LABEL: func.func @gelu_erf_half_first(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x128xf32>
// CHECK: %[[Y:.*]] = qcc.gelu %[[X]] : tensor<?x?x128xf32>
// CHECK-NOT: qcc.erf
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @gelu_erf_half_first(%x: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> {
  %rsqrt2 = qcc.constant dense<0.707106769> : tensor<1xf32>
  %one = qcc.constant dense<1.000000e+00> : tensor<1xf32>
  %half = qcc.constant dense<5.000000e-01> : tensor<1xf32>
  %a = qcc.mul %half, %x : (tensor<1xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %0 = qcc.mul %rsqrt2, %x : (tensor<1xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %1 = qcc.erf %0 : tensor<?x?x128xf32>
  %2 = qcc.add %one, %1 : (tensor<1xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %3 = qcc.mul %2, %a : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  return %3 : tensor<?x?x128xf32>
}

// -----

// gelu_new as GPT-2 exports it: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// CHECK-LABEL: func.func @gelu_tanh(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x256xf32>
// CHECK: %[[Y:.*]] = qcc.gelu %[[X]] {approximate = "tanh"} : tensor<?x?x256xf32>
// CHECK-NOT: qcc.tanh
// CHECK-NOT: qcc.pow
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @gelu_tanh(%x: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %half = qcc.constant dense<5.000000e-01> : tensor<f32>
  %three = qcc.constant dense<3.000000e+00> : tensor<f32>
  %coeff = qcc.constant dense<4.471500e-02> : tensor<f32>
  %k = qcc.constant dense<0.797884583> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %a = qcc.mul %x, %half : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %p = qcc.pow %x, %three : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %t = qcc.mul %p, %coeff : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %s = qcc.add %x, %t : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %u = qcc.mul %s, %k : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %th = qcc.tanh %u : tensor<?x?x256xf32>
  %o = qcc.add %th, %one : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %y = qcc.mul %a, %o : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  return %y : tensor<?x?x256xf32>
}

// -----

// The tanh form with every commutative operand order swapped, the 0.5 grouped
// with the (1 + tanh) factor, x^3 as x * (x * x), and splat constants that
// broadcast without changing the shape ([1, 1, 256] and [1]).
// CHECK-LABEL: func.func @gelu_tanh_swapped(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x256xf32>
// CHECK: %[[Y:.*]] = qcc.gelu %[[X]] {approximate = "tanh"} : tensor<?x?x256xf32>
// CHECK-NOT: qcc.tanh
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @gelu_tanh_swapped(%x: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %half = qcc.constant dense<5.000000e-01> : tensor<1x1x256xf32>
  %coeff = qcc.constant dense<4.471500e-02> : tensor<1xf32>
  %k = qcc.constant dense<0.797884583> : tensor<1xf32>
  %one = qcc.constant dense<1.000000e+00> : tensor<1xf32>
  %sq = qcc.mul %x, %x : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %p = qcc.mul %sq, %x : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %t = qcc.mul %coeff, %p : (tensor<1xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %s = qcc.add %t, %x : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %u = qcc.mul %k, %s : (tensor<1xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %th = qcc.tanh %u : tensor<?x?x256xf32>
  %o = qcc.add %one, %th : (tensor<1xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %b = qcc.mul %o, %half : (tensor<?x?x256xf32>, tensor<1x1x256xf32>) -> tensor<?x?x256xf32>
  %y = qcc.mul %x, %b : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  return %y : tensor<?x?x256xf32>
}

// -----

// BLOOM's bloom_gelu_forward: x * 0.5 * (1 + tanh(0.79788456 * x * (1 +
// 0.044715 * x * x))), as its legacy export writes it.
// CHECK-LABEL: func.func @gelu_tanh_bloom(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x256xf32>
// CHECK: %[[Y:.*]] = qcc.gelu %[[X]] {approximate = "tanh"} : tensor<?x?x256xf32>
// CHECK-NOT: qcc.tanh
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @gelu_tanh_bloom(%x: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %half = qcc.constant dense<5.000000e-01> : tensor<f32>
  %k = qcc.constant dense<0.797884583> : tensor<f32>
  %coeff = qcc.constant dense<4.471500e-02> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %a = qcc.mul %x, %half : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %kx = qcc.mul %x, %k : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %cx = qcc.mul %x, %coeff : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %cxx = qcc.mul %cx, %x : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %q = qcc.add %cxx, %one : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %u = qcc.mul %kx, %q : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %th = qcc.tanh %u : tensor<?x?x256xf32>
  %o = qcc.add %th, %one : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %y = qcc.mul %a, %o : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  return %y : tensor<?x?x256xf32>
}

// -----

// Near miss: BLOOM's form with x^3 where it has x^2 (not GELU).
// CHECK-LABEL: func.func @gelu_tanh_bloom_cubed(
// CHECK-NOT: qcc.gelu
// CHECK: qcc.tanh
func.func @gelu_tanh_bloom_cubed(%x: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %half = qcc.constant dense<5.000000e-01> : tensor<f32>
  %k = qcc.constant dense<0.797884583> : tensor<f32>
  %coeff = qcc.constant dense<4.471500e-02> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %a = qcc.mul %x, %half : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %kx = qcc.mul %x, %k : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %cx = qcc.mul %x, %coeff : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %cxx = qcc.mul %cx, %x : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %cxxx = qcc.mul %cxx, %x : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %q = qcc.add %cxxx, %one : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %u = qcc.mul %kx, %q : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %th = qcc.tanh %u : tensor<?x?x256xf32>
  %o = qcc.add %th, %one : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %y = qcc.mul %a, %o : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  return %y : tensor<?x?x256xf32>
}

// -----

// Near miss: 0.25 where the erf form has 0.5.
// CHECK-LABEL: func.func @gelu_erf_wrong_half(
// CHECK-NOT: qcc.gelu
// CHECK: qcc.erf
// CHECK: qcc.mul
// CHECK: qcc.mul
func.func @gelu_erf_wrong_half(%x: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> {
  %sqrt2 = qcc.constant dense<1.41421354> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %quarter = qcc.constant dense<2.500000e-01> : tensor<f32>
  %0 = qcc.div %x, %sqrt2 : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  %1 = qcc.erf %0 : tensor<?x?x128xf32>
  %2 = qcc.add %1, %one : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  %3 = qcc.mul %x, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %4 = qcc.mul %3, %quarter : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  return %4 : tensor<?x?x128xf32>
}

// -----

// Near miss: the Erf reads a different tensor (y) than the one multiplied (x).
// CHECK-LABEL: func.func @gelu_erf_other_tensor(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x128xf32>, %[[Y:.*]]: tensor<?x?x128xf32>
// CHECK-NOT: qcc.gelu
// CHECK: qcc.div %[[Y]]
// CHECK: qcc.erf
// CHECK: qcc.mul %[[X]]
// CHECK: qcc.mul
func.func @gelu_erf_other_tensor(%x: tensor<?x?x128xf32>, %y: tensor<?x?x128xf32>) -> tensor<?x?x128xf32> {
  %sqrt2 = qcc.constant dense<1.41421354> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %half = qcc.constant dense<5.000000e-01> : tensor<f32>
  %0 = qcc.div %y, %sqrt2 : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  %1 = qcc.erf %0 : tensor<?x?x128xf32>
  %2 = qcc.add %1, %one : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  %3 = qcc.mul %x, %2 : (tensor<?x?x128xf32>, tensor<?x?x128xf32>) -> tensor<?x?x128xf32>
  %4 = qcc.mul %3, %half : (tensor<?x?x128xf32>, tensor<f32>) -> tensor<?x?x128xf32>
  return %4 : tensor<?x?x128xf32>
}

// -----

// Near miss: 0.05 where the tanh form has 0.044715.
// CHECK-LABEL: func.func @gelu_tanh_wrong_coeff(
// CHECK-NOT: qcc.gelu
// CHECK: qcc.pow
// CHECK: qcc.tanh
// CHECK: qcc.mul
func.func @gelu_tanh_wrong_coeff(%x: tensor<?x?x256xf32>) -> tensor<?x?x256xf32> {
  %half = qcc.constant dense<5.000000e-01> : tensor<f32>
  %three = qcc.constant dense<3.000000e+00> : tensor<f32>
  %coeff = qcc.constant dense<5.000000e-02> : tensor<f32>
  %k = qcc.constant dense<0.797884583> : tensor<f32>
  %one = qcc.constant dense<1.000000e+00> : tensor<f32>
  %a = qcc.mul %x, %half : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %p = qcc.pow %x, %three : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %t = qcc.mul %p, %coeff : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %s = qcc.add %x, %t : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  %u = qcc.mul %s, %k : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %th = qcc.tanh %u : tensor<?x?x256xf32>
  %o = qcc.add %th, %one : (tensor<?x?x256xf32>, tensor<f32>) -> tensor<?x?x256xf32>
  %y = qcc.mul %a, %o : (tensor<?x?x256xf32>, tensor<?x?x256xf32>) -> tensor<?x?x256xf32>
  return %y : tensor<?x?x256xf32>
}
