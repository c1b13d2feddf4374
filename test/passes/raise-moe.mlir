// RUN: qcc-opt %s --raise-moe --split-input-file | FileCheck %s
// Written by test/passes/gen-raise-moe.py (python3 test/passes/gen-raise-moe.py
// > test/passes/raise-moe.mlir).

// Qwen3-MoE as optimum exports it (3 experts, top-2, H = 4, I = 6): per
// expert, its routes from the one-hot mask, its rows, a SwiGLU MLP, the
// routes' gates, a scatter into zeros, added up. One qcc.moe over the
// experts' weights stacked in id order.
// CHECK-LABEL: func @optimum_swiglu
// CHECK-DAG: %[[G:.*]] = qcc.div
// CHECK-DAG: %{{.*}}, %[[IDS:.*]] = qcc.top_k
// CHECK: %[[Y:.*]] = qcc.moe %arg0, %[[IDS]], %[[G]], %{{.*}}, %{{.*}}, %{{.*}} {activation = "silu"} : (tensor<?x4xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<3x6x4xf32>, tensor<3x4x6xf32>, tensor<3x6x4xf32>) -> tensor<?x4xf32>
// CHECK-NOT: qcc.non_zero
// CHECK-NOT: qcc.scatter_elements
// CHECK: return %[[Y]]
func.func @optimum_swiglu(%x: tensor<?x4xf32>, %scores: tensor<?x3xf32>) -> tensor<?x4xf32> {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %depth = qcc.constant dense<3> : tensor<i64>
  %onoff = qcc.constant dense<[0, 1]> : tensor<2xi64>
  %shape = qcc.shape %x : (tensor<?x4xf32>) -> tensor<2xi64>
  %gates0, %ids = qcc.top_k %scores, %k {axis = 1 : i64} : (tensor<?x3xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %sum = qcc.reduce_sum %gates0 {axes = array<i64: 1>} : (tensor<?x2xf32>) -> tensor<?x1xf32>
  %gates = qcc.div %gates0, %sum : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %oh = qcc.one_hot %ids, %depth, %onoff {axis = 2 : i64} : (tensor<?x2xi64>, tensor<i64>, tensor<2xi64>) -> tensor<?x2x3xi64>
  %ohT = qcc.transpose %oh {perm = array<i64: 2, 1, 0>} : (tensor<?x2x3xi64>) -> tensor<3x2x?xi64>
  %gu = qcc.unsqueeze %gates {axes = array<i64: 2>} : (tensor<?x2xf32>) -> tensor<?x2x1xf32>
  %gf = qcc.flatten %gu {axis = 2 : i64} : (tensor<?x2x1xf32>) -> tensor<?x1xf32>
  %xu = qcc.unsqueeze %x {axes = array<i64: 0>} : (tensor<?x4xf32>) -> tensor<1x?x4xf32>
  %rowshape = qcc.constant dense<[-1, 4]> : tensor<2xi64>
  %acc0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %e0 = qcc.constant dense<0> : tensor<i64>
  %m0 = qcc.gather %ohT, %e0 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b0 = qcc.cast %m0 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz0 = qcc.non_zero %b0 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT0 = qcc.transpose %nz0 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p0:2 = qcc.split %nzT0 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot0 = qcc.squeeze %p0#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok0 = qcc.squeeze %p0#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g30 = qcc.gather %xu, %tok0 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r0 = qcc.reshape %g30, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu0 = qcc.constant dense<[[0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625]]> : tensor<6x4xf32>
  %wd0 = qcc.constant dense<[[-0.25, 0.125, 0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625, -0.25, 0.125]]> : tensor<4x6xf32>
  %u0 = qcc.linear %r0, %wu0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg0 = qcc.constant dense<[[0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625], [-0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375]]> : tensor<6x4xf32>
  %gl0 = qcc.linear %r0, %wg0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s0 = qcc.silu %gl0 : tensor<?x6xf32>
  %h0 = qcc.mul %s0, %u0 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y0 = qcc.linear %h0, %wd0 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk0 = qcc.mul %tok0, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi0 = qcc.add %slot0, %tk0 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw0 = qcc.gather %gf, %gi0 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw0 = qcc.mul %y0, %gw0 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu0 = qcc.unsqueeze %tok0 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh0 = qcc.shape %yw0 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti0 = qcc.expand %tu0, %ysh0 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc0 = qcc.scatter_elements %z0, %ti0, %yw0 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc1 = qcc.add %acc0, %sc0 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e1 = qcc.constant dense<1> : tensor<i64>
  %m1 = qcc.gather %ohT, %e1 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b1 = qcc.cast %m1 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz1 = qcc.non_zero %b1 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT1 = qcc.transpose %nz1 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p1:2 = qcc.split %nzT1 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot1 = qcc.squeeze %p1#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok1 = qcc.squeeze %p1#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g31 = qcc.gather %xu, %tok1 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r1 = qcc.reshape %g31, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu1 = qcc.constant dense<[[0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5]]> : tensor<6x4xf32>
  %wd1 = qcc.constant dense<[[-0.375, 0.0, 0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25, 0.625, -0.375], [0.0, 0.375, -0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625, -0.375, 0.0]]> : tensor<4x6xf32>
  %u1 = qcc.linear %r1, %wu1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg1 = qcc.constant dense<[[0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625], [-0.25, 0.125, 0.5, -0.5]]> : tensor<6x4xf32>
  %gl1 = qcc.linear %r1, %wg1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s1 = qcc.silu %gl1 : tensor<?x6xf32>
  %h1 = qcc.mul %s1, %u1 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y1 = qcc.linear %h1, %wd1 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk1 = qcc.mul %tok1, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi1 = qcc.add %slot1, %tk1 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw1 = qcc.gather %gf, %gi1 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw1 = qcc.mul %y1, %gw1 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu1 = qcc.unsqueeze %tok1 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh1 = qcc.shape %yw1 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti1 = qcc.expand %tu1, %ysh1 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z1 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc1 = qcc.scatter_elements %z1, %ti1, %yw1 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc2 = qcc.add %acc1, %sc1 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e2 = qcc.constant dense<2> : tensor<i64>
  %m2 = qcc.gather %ohT, %e2 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b2 = qcc.cast %m2 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz2 = qcc.non_zero %b2 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT2 = qcc.transpose %nz2 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p2:2 = qcc.split %nzT2 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot2 = qcc.squeeze %p2#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok2 = qcc.squeeze %p2#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g32 = qcc.gather %xu, %tok2 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r2 = qcc.reshape %g32, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu2 = qcc.constant dense<[[0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375]]> : tensor<6x4xf32>
  %wd2 = qcc.constant dense<[[-0.5, -0.125, 0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5, -0.5, -0.125]]> : tensor<4x6xf32>
  %u2 = qcc.linear %r2, %wu2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg2 = qcc.constant dense<[[0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625]]> : tensor<6x4xf32>
  %gl2 = qcc.linear %r2, %wg2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s2 = qcc.silu %gl2 : tensor<?x6xf32>
  %h2 = qcc.mul %s2, %u2 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y2 = qcc.linear %h2, %wd2 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk2 = qcc.mul %tok2, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi2 = qcc.add %slot2, %tk2 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw2 = qcc.gather %gf, %gi2 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw2 = qcc.mul %y2, %gw2 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu2 = qcc.unsqueeze %tok2 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh2 = qcc.shape %yw2 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti2 = qcc.expand %tu2, %ysh2 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z2 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc2 = qcc.scatter_elements %z2, %ti2, %yw2 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc3 = qcc.add %acc2, %sc2 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}

// -----

// Experts without a gate (act(up x)) and GELU.
// CHECK-LABEL: func @ungated_gelu
// CHECK: qcc.moe %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = "gelu"} : (tensor<?x4xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<3x6x4xf32>, tensor<3x4x6xf32>) -> tensor<?x4xf32>
func.func @ungated_gelu(%x: tensor<?x4xf32>, %scores: tensor<?x3xf32>) -> tensor<?x4xf32> {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %depth = qcc.constant dense<3> : tensor<i64>
  %onoff = qcc.constant dense<[0, 1]> : tensor<2xi64>
  %shape = qcc.shape %x : (tensor<?x4xf32>) -> tensor<2xi64>
  %gates0, %ids = qcc.top_k %scores, %k {axis = 1 : i64} : (tensor<?x3xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %sum = qcc.reduce_sum %gates0 {axes = array<i64: 1>} : (tensor<?x2xf32>) -> tensor<?x1xf32>
  %gates = qcc.div %gates0, %sum : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %oh = qcc.one_hot %ids, %depth, %onoff {axis = 2 : i64} : (tensor<?x2xi64>, tensor<i64>, tensor<2xi64>) -> tensor<?x2x3xi64>
  %ohT = qcc.transpose %oh {perm = array<i64: 2, 1, 0>} : (tensor<?x2x3xi64>) -> tensor<3x2x?xi64>
  %gu = qcc.unsqueeze %gates {axes = array<i64: 2>} : (tensor<?x2xf32>) -> tensor<?x2x1xf32>
  %gf = qcc.flatten %gu {axis = 2 : i64} : (tensor<?x2x1xf32>) -> tensor<?x1xf32>
  %xu = qcc.unsqueeze %x {axes = array<i64: 0>} : (tensor<?x4xf32>) -> tensor<1x?x4xf32>
  %rowshape = qcc.constant dense<[-1, 4]> : tensor<2xi64>
  %acc0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %e0 = qcc.constant dense<0> : tensor<i64>
  %m0 = qcc.gather %ohT, %e0 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b0 = qcc.cast %m0 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz0 = qcc.non_zero %b0 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT0 = qcc.transpose %nz0 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p0:2 = qcc.split %nzT0 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot0 = qcc.squeeze %p0#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok0 = qcc.squeeze %p0#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g30 = qcc.gather %xu, %tok0 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r0 = qcc.reshape %g30, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu0 = qcc.constant dense<[[0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625]]> : tensor<6x4xf32>
  %wd0 = qcc.constant dense<[[-0.25, 0.125, 0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625, -0.25, 0.125]]> : tensor<4x6xf32>
  %u0 = qcc.linear %r0, %wu0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %h0 = qcc.gelu %u0 : tensor<?x6xf32>
  %y0 = qcc.linear %h0, %wd0 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk0 = qcc.mul %tok0, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi0 = qcc.add %slot0, %tk0 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw0 = qcc.gather %gf, %gi0 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw0 = qcc.mul %y0, %gw0 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu0 = qcc.unsqueeze %tok0 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh0 = qcc.shape %yw0 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti0 = qcc.expand %tu0, %ysh0 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc0 = qcc.scatter_elements %z0, %ti0, %yw0 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc1 = qcc.add %acc0, %sc0 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e1 = qcc.constant dense<1> : tensor<i64>
  %m1 = qcc.gather %ohT, %e1 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b1 = qcc.cast %m1 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz1 = qcc.non_zero %b1 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT1 = qcc.transpose %nz1 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p1:2 = qcc.split %nzT1 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot1 = qcc.squeeze %p1#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok1 = qcc.squeeze %p1#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g31 = qcc.gather %xu, %tok1 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r1 = qcc.reshape %g31, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu1 = qcc.constant dense<[[0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5]]> : tensor<6x4xf32>
  %wd1 = qcc.constant dense<[[-0.375, 0.0, 0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25, 0.625, -0.375], [0.0, 0.375, -0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625, -0.375, 0.0]]> : tensor<4x6xf32>
  %u1 = qcc.linear %r1, %wu1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %h1 = qcc.gelu %u1 : tensor<?x6xf32>
  %y1 = qcc.linear %h1, %wd1 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk1 = qcc.mul %tok1, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi1 = qcc.add %slot1, %tk1 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw1 = qcc.gather %gf, %gi1 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw1 = qcc.mul %y1, %gw1 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu1 = qcc.unsqueeze %tok1 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh1 = qcc.shape %yw1 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti1 = qcc.expand %tu1, %ysh1 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z1 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc1 = qcc.scatter_elements %z1, %ti1, %yw1 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc2 = qcc.add %acc1, %sc1 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e2 = qcc.constant dense<2> : tensor<i64>
  %m2 = qcc.gather %ohT, %e2 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b2 = qcc.cast %m2 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz2 = qcc.non_zero %b2 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT2 = qcc.transpose %nz2 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p2:2 = qcc.split %nzT2 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot2 = qcc.squeeze %p2#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok2 = qcc.squeeze %p2#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g32 = qcc.gather %xu, %tok2 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r2 = qcc.reshape %g32, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu2 = qcc.constant dense<[[0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375]]> : tensor<6x4xf32>
  %wd2 = qcc.constant dense<[[-0.5, -0.125, 0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5, -0.5, -0.125]]> : tensor<4x6xf32>
  %u2 = qcc.linear %r2, %wu2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %h2 = qcc.gelu %u2 : tensor<?x6xf32>
  %y2 = qcc.linear %h2, %wd2 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk2 = qcc.mul %tok2, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi2 = qcc.add %slot2, %tk2 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw2 = qcc.gather %gf, %gi2 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw2 = qcc.mul %y2, %gw2 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu2 = qcc.unsqueeze %tok2 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh2 = qcc.shape %yw2 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti2 = qcc.expand %tu2, %ysh2 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z2 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc2 = qcc.scatter_elements %z2, %ti2, %yw2 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc3 = qcc.add %acc2, %sc2 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}

// -----

// Experts 0 and 1 read each other's mask: the loop is still over every
// expert, and the stacking follows the ids the masks select (expert 0's
// weights are the second term's).
// CHECK-LABEL: func @masks_in_other_order
// CHECK: qcc.moe
func.func @masks_in_other_order(%x: tensor<?x4xf32>, %scores: tensor<?x3xf32>) -> tensor<?x4xf32> {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %depth = qcc.constant dense<3> : tensor<i64>
  %onoff = qcc.constant dense<[0, 1]> : tensor<2xi64>
  %shape = qcc.shape %x : (tensor<?x4xf32>) -> tensor<2xi64>
  %gates0, %ids = qcc.top_k %scores, %k {axis = 1 : i64} : (tensor<?x3xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %sum = qcc.reduce_sum %gates0 {axes = array<i64: 1>} : (tensor<?x2xf32>) -> tensor<?x1xf32>
  %gates = qcc.div %gates0, %sum : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %oh = qcc.one_hot %ids, %depth, %onoff {axis = 2 : i64} : (tensor<?x2xi64>, tensor<i64>, tensor<2xi64>) -> tensor<?x2x3xi64>
  %ohT = qcc.transpose %oh {perm = array<i64: 2, 1, 0>} : (tensor<?x2x3xi64>) -> tensor<3x2x?xi64>
  %gu = qcc.unsqueeze %gates {axes = array<i64: 2>} : (tensor<?x2xf32>) -> tensor<?x2x1xf32>
  %gf = qcc.flatten %gu {axis = 2 : i64} : (tensor<?x2x1xf32>) -> tensor<?x1xf32>
  %xu = qcc.unsqueeze %x {axes = array<i64: 0>} : (tensor<?x4xf32>) -> tensor<1x?x4xf32>
  %rowshape = qcc.constant dense<[-1, 4]> : tensor<2xi64>
  %acc0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %e0 = qcc.constant dense<1> : tensor<i64>
  %m0 = qcc.gather %ohT, %e0 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b0 = qcc.cast %m0 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz0 = qcc.non_zero %b0 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT0 = qcc.transpose %nz0 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p0:2 = qcc.split %nzT0 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot0 = qcc.squeeze %p0#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok0 = qcc.squeeze %p0#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g30 = qcc.gather %xu, %tok0 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r0 = qcc.reshape %g30, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu0 = qcc.constant dense<[[0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625]]> : tensor<6x4xf32>
  %wd0 = qcc.constant dense<[[-0.25, 0.125, 0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625, -0.25, 0.125]]> : tensor<4x6xf32>
  %u0 = qcc.linear %r0, %wu0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg0 = qcc.constant dense<[[0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625], [-0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375]]> : tensor<6x4xf32>
  %gl0 = qcc.linear %r0, %wg0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s0 = qcc.silu %gl0 : tensor<?x6xf32>
  %h0 = qcc.mul %s0, %u0 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y0 = qcc.linear %h0, %wd0 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk0 = qcc.mul %tok0, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi0 = qcc.add %slot0, %tk0 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw0 = qcc.gather %gf, %gi0 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw0 = qcc.mul %y0, %gw0 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu0 = qcc.unsqueeze %tok0 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh0 = qcc.shape %yw0 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti0 = qcc.expand %tu0, %ysh0 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc0 = qcc.scatter_elements %z0, %ti0, %yw0 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc1 = qcc.add %acc0, %sc0 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e1 = qcc.constant dense<0> : tensor<i64>
  %m1 = qcc.gather %ohT, %e1 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b1 = qcc.cast %m1 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz1 = qcc.non_zero %b1 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT1 = qcc.transpose %nz1 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p1:2 = qcc.split %nzT1 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot1 = qcc.squeeze %p1#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok1 = qcc.squeeze %p1#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g31 = qcc.gather %xu, %tok1 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r1 = qcc.reshape %g31, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu1 = qcc.constant dense<[[0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5]]> : tensor<6x4xf32>
  %wd1 = qcc.constant dense<[[-0.375, 0.0, 0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25, 0.625, -0.375], [0.0, 0.375, -0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625, -0.375, 0.0]]> : tensor<4x6xf32>
  %u1 = qcc.linear %r1, %wu1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg1 = qcc.constant dense<[[0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625], [-0.25, 0.125, 0.5, -0.5]]> : tensor<6x4xf32>
  %gl1 = qcc.linear %r1, %wg1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s1 = qcc.silu %gl1 : tensor<?x6xf32>
  %h1 = qcc.mul %s1, %u1 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y1 = qcc.linear %h1, %wd1 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk1 = qcc.mul %tok1, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi1 = qcc.add %slot1, %tk1 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw1 = qcc.gather %gf, %gi1 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw1 = qcc.mul %y1, %gw1 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu1 = qcc.unsqueeze %tok1 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh1 = qcc.shape %yw1 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti1 = qcc.expand %tu1, %ysh1 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z1 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc1 = qcc.scatter_elements %z1, %ti1, %yw1 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc2 = qcc.add %acc1, %sc1 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e2 = qcc.constant dense<2> : tensor<i64>
  %m2 = qcc.gather %ohT, %e2 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b2 = qcc.cast %m2 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz2 = qcc.non_zero %b2 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT2 = qcc.transpose %nz2 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p2:2 = qcc.split %nzT2 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot2 = qcc.squeeze %p2#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok2 = qcc.squeeze %p2#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g32 = qcc.gather %xu, %tok2 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r2 = qcc.reshape %g32, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu2 = qcc.constant dense<[[0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375]]> : tensor<6x4xf32>
  %wd2 = qcc.constant dense<[[-0.5, -0.125, 0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5, -0.5, -0.125]]> : tensor<4x6xf32>
  %u2 = qcc.linear %r2, %wu2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg2 = qcc.constant dense<[[0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625]]> : tensor<6x4xf32>
  %gl2 = qcc.linear %r2, %wg2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s2 = qcc.silu %gl2 : tensor<?x6xf32>
  %h2 = qcc.mul %s2, %u2 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y2 = qcc.linear %h2, %wd2 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk2 = qcc.mul %tok2, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi2 = qcc.add %slot2, %tk2 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw2 = qcc.gather %gf, %gi2 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw2 = qcc.mul %y2, %gw2 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu2 = qcc.unsqueeze %tok2 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh2 = qcc.shape %yw2 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti2 = qcc.expand %tu2, %ysh2 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z2 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc2 = qcc.scatter_elements %z2, %ti2, %yw2 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc3 = qcc.add %acc2, %sc2 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}

// -----

// Near miss: the gate lookup reads token * k + token, not + slot: another
// route's gate, so nothing is raised.
// CHECK-LABEL: func @wrong_gate_stays
// CHECK-NOT: qcc.moe
// CHECK: qcc.scatter_elements
func.func @wrong_gate_stays(%x: tensor<?x4xf32>, %scores: tensor<?x3xf32>) -> tensor<?x4xf32> {
  %k = qcc.constant dense<2> : tensor<1xi64>
  %depth = qcc.constant dense<3> : tensor<i64>
  %onoff = qcc.constant dense<[0, 1]> : tensor<2xi64>
  %shape = qcc.shape %x : (tensor<?x4xf32>) -> tensor<2xi64>
  %gates0, %ids = qcc.top_k %scores, %k {axis = 1 : i64} : (tensor<?x3xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %sum = qcc.reduce_sum %gates0 {axes = array<i64: 1>} : (tensor<?x2xf32>) -> tensor<?x1xf32>
  %gates = qcc.div %gates0, %sum : (tensor<?x2xf32>, tensor<?x1xf32>) -> tensor<?x2xf32>
  %oh = qcc.one_hot %ids, %depth, %onoff {axis = 2 : i64} : (tensor<?x2xi64>, tensor<i64>, tensor<2xi64>) -> tensor<?x2x3xi64>
  %ohT = qcc.transpose %oh {perm = array<i64: 2, 1, 0>} : (tensor<?x2x3xi64>) -> tensor<3x2x?xi64>
  %gu = qcc.unsqueeze %gates {axes = array<i64: 2>} : (tensor<?x2xf32>) -> tensor<?x2x1xf32>
  %gf = qcc.flatten %gu {axis = 2 : i64} : (tensor<?x2x1xf32>) -> tensor<?x1xf32>
  %xu = qcc.unsqueeze %x {axes = array<i64: 0>} : (tensor<?x4xf32>) -> tensor<1x?x4xf32>
  %rowshape = qcc.constant dense<[-1, 4]> : tensor<2xi64>
  %acc0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %e0 = qcc.constant dense<0> : tensor<i64>
  %m0 = qcc.gather %ohT, %e0 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b0 = qcc.cast %m0 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz0 = qcc.non_zero %b0 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT0 = qcc.transpose %nz0 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p0:2 = qcc.split %nzT0 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot0 = qcc.squeeze %p0#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok0 = qcc.squeeze %p0#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g30 = qcc.gather %xu, %tok0 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r0 = qcc.reshape %g30, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu0 = qcc.constant dense<[[0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625]]> : tensor<6x4xf32>
  %wd0 = qcc.constant dense<[[-0.25, 0.125, 0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625, -0.25, 0.125]]> : tensor<4x6xf32>
  %u0 = qcc.linear %r0, %wu0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg0 = qcc.constant dense<[[0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625], [-0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375]]> : tensor<6x4xf32>
  %gl0 = qcc.linear %r0, %wg0 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s0 = qcc.silu %gl0 : tensor<?x6xf32>
  %h0 = qcc.mul %s0, %u0 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y0 = qcc.linear %h0, %wd0 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk0 = qcc.mul %tok0, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi0 = qcc.add %tok0, %tk0 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw0 = qcc.gather %gf, %gi0 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw0 = qcc.mul %y0, %gw0 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu0 = qcc.unsqueeze %tok0 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh0 = qcc.shape %yw0 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti0 = qcc.expand %tu0, %ysh0 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z0 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc0 = qcc.scatter_elements %z0, %ti0, %yw0 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc1 = qcc.add %acc0, %sc0 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e1 = qcc.constant dense<1> : tensor<i64>
  %m1 = qcc.gather %ohT, %e1 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b1 = qcc.cast %m1 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz1 = qcc.non_zero %b1 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT1 = qcc.transpose %nz1 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p1:2 = qcc.split %nzT1 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot1 = qcc.squeeze %p1#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok1 = qcc.squeeze %p1#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g31 = qcc.gather %xu, %tok1 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r1 = qcc.reshape %g31, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu1 = qcc.constant dense<[[0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5]]> : tensor<6x4xf32>
  %wd1 = qcc.constant dense<[[-0.375, 0.0, 0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25, 0.625, -0.375], [0.0, 0.375, -0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625, -0.375, 0.0]]> : tensor<4x6xf32>
  %u1 = qcc.linear %r1, %wu1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg1 = qcc.constant dense<[[0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625], [-0.25, 0.125, 0.5, -0.5]]> : tensor<6x4xf32>
  %gl1 = qcc.linear %r1, %wg1 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s1 = qcc.silu %gl1 : tensor<?x6xf32>
  %h1 = qcc.mul %s1, %u1 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y1 = qcc.linear %h1, %wd1 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk1 = qcc.mul %tok1, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi1 = qcc.add %tok1, %tk1 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw1 = qcc.gather %gf, %gi1 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw1 = qcc.mul %y1, %gw1 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu1 = qcc.unsqueeze %tok1 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh1 = qcc.shape %yw1 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti1 = qcc.expand %tu1, %ysh1 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z1 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc1 = qcc.scatter_elements %z1, %ti1, %yw1 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc2 = qcc.add %acc1, %sc1 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %e2 = qcc.constant dense<2> : tensor<i64>
  %m2 = qcc.gather %ohT, %e2 {axis = 0 : i64} : (tensor<3x2x?xi64>, tensor<i64>) -> tensor<2x?xi64>
  %b2 = qcc.cast %m2 : tensor<2x?xi64> to tensor<2x?xi1>
  %nz2 = qcc.non_zero %b2 : (tensor<2x?xi1>) -> tensor<2x?xi64>
  %nzT2 = qcc.transpose %nz2 {perm = array<i64: 1, 0>} : (tensor<2x?xi64>) -> tensor<?x2xi64>
  %p2:2 = qcc.split %nzT2 {axis = 1 : i64, sizes = array<i64: 1, 1>} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)
  %slot2 = qcc.squeeze %p2#0 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %tok2 = qcc.squeeze %p2#1 {axes = array<i64: 1>} : (tensor<?x1xi64>) -> tensor<?xi64>
  %g32 = qcc.gather %xu, %tok2 {axis = 1 : i64} : (tensor<1x?x4xf32>, tensor<?xi64>) -> tensor<1x?x4xf32>
  %r2 = qcc.reshape %g32, %rowshape : (tensor<1x?x4xf32>, tensor<2xi64>) -> tensor<?x4xf32>
  %wu2 = qcc.constant dense<[[0.0, 0.375, -0.625, -0.25], [0.125, 0.5, -0.5, -0.125], [0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375]]> : tensor<6x4xf32>
  %wd2 = qcc.constant dense<[[-0.5, -0.125, 0.25, 0.625, -0.375, 0.0], [0.375, -0.625, -0.25, 0.125, 0.5, -0.5], [-0.125, 0.25, 0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5, -0.5, -0.125]]> : tensor<4x6xf32>
  %u2 = qcc.linear %r2, %wu2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %wg2 = qcc.constant dense<[[0.375, -0.625, -0.25, 0.125], [0.5, -0.5, -0.125, 0.25], [0.625, -0.375, 0.0, 0.375], [-0.625, -0.25, 0.125, 0.5], [-0.5, -0.125, 0.25, 0.625], [-0.375, 0.0, 0.375, -0.625]]> : tensor<6x4xf32>
  %gl2 = qcc.linear %r2, %wg2 : (tensor<?x4xf32>, tensor<6x4xf32>) -> tensor<?x6xf32>
  %s2 = qcc.silu %gl2 : tensor<?x6xf32>
  %h2 = qcc.mul %s2, %u2 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %y2 = qcc.linear %h2, %wd2 : (tensor<?x6xf32>, tensor<4x6xf32>) -> tensor<?x4xf32>
  %tk2 = qcc.mul %tok2, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  %gi2 = qcc.add %tok2, %tk2 : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>
  %gw2 = qcc.gather %gf, %gi2 {axis = 0 : i64} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>
  %yw2 = qcc.mul %y2, %gw2 : (tensor<?x4xf32>, tensor<?x1xf32>) -> tensor<?x4xf32>
  %tu2 = qcc.unsqueeze %tok2 {axes = array<i64: 1>} : (tensor<?xi64>) -> tensor<?x1xi64>
  %ysh2 = qcc.shape %yw2 : (tensor<?x4xf32>) -> tensor<2xi64>
  %ti2 = qcc.expand %tu2, %ysh2 : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x4xi64>
  %z2 = qcc.constant_of_shape %shape {value = dense<0.000000e+00> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x4xf32>
  %sc2 = qcc.scatter_elements %z2, %ti2, %yw2 {axis = 0 : i64} : (tensor<?x4xf32>, tensor<?x4xi64>, tensor<?x4xf32>) -> tensor<?x4xf32>
  %acc3 = qcc.add %acc2, %sc2 : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
  return %acc3 : tensor<?x4xf32>
}
