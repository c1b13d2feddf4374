// RUN: qcc-opt %s --raise-embedding --split-input-file | FileCheck %s

// Token embedding: rows of a constant [V, E] table by id.
// CHECK-LABEL: func.func @token_embedding(
// CHECK-SAME: %[[IDS:.*]]: tensor<?x?xi64>
// CHECK: %[[T:.*]] = qcc.constant
// CHECK: %[[Y:.*]] = qcc.embedding %[[T]], %[[IDS]] : (tensor<4x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
// CHECK-NOT: qcc.gather
// CHECK: return %[[Y]]
func.func @token_embedding(%ids: tensor<?x?xi64>) -> tensor<?x?x2xf32> {
  %t = qcc.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]> : tensor<4x2xf32>
  %y = qcc.gather %t, %ids {axis = 0 : i64} : (tensor<4x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  return %y : tensor<?x?x2xf32>
}

// -----

// Position embedding with int32 ids of shape [1, S].
// CHECK-LABEL: func.func @position_embedding(
// CHECK-SAME: %[[POS:.*]]: tensor<1x?xi32>
// CHECK: %[[Y:.*]] = qcc.embedding %{{.*}}, %[[POS]] : (tensor<4x2xf32>, tensor<1x?xi32>) -> tensor<1x?x2xf32>
// CHECK: return %[[Y]]
func.func @position_embedding(%pos: tensor<1x?xi32>) -> tensor<1x?x2xf32> {
  %t = qcc.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]> : tensor<4x2xf32>
  %y = qcc.gather %t, %pos {axis = 0 : i64} : (tensor<4x2xf32>, tensor<1x?xi32>) -> tensor<1x?x2xf32>
  return %y : tensor<1x?x2xf32>
}

// -----

// Near miss: axis 1 gathers columns, not rows.
// CHECK-LABEL: func.func @gather_columns(
// CHECK-NOT: qcc.embedding
// CHECK: %[[Y:.*]] = qcc.gather
// CHECK: return %[[Y]]
func.func @gather_columns(%ids: tensor<?xi64>) -> tensor<4x?xf32> {
  %t = qcc.constant dense<[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]> : tensor<4x2xf32>
  %y = qcc.gather %t, %ids {axis = 1 : i64} : (tensor<4x2xf32>, tensor<?xi64>) -> tensor<4x?xf32>
  return %y : tensor<4x?xf32>
}

// -----

// Near miss: the table is an activation, not a constant.
// CHECK-LABEL: func.func @gather_activation(
// CHECK-NOT: qcc.embedding
// CHECK: %[[Y:.*]] = qcc.gather
// CHECK: return %[[Y]]
func.func @gather_activation(%x: tensor<?x2xf32>, %ids: tensor<?xi64>) -> tensor<?x2xf32> {
  %y = qcc.gather %x, %ids {axis = 0 : i64} : (tensor<?x2xf32>, tensor<?xi64>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Near miss: Gather on a 1-D shape vector is shape arithmetic.
// CHECK-LABEL: func.func @gather_shape_vector(
// CHECK-NOT: qcc.embedding
// CHECK: %[[Y:.*]] = qcc.gather
// CHECK: return %[[Y]]
func.func @gather_shape_vector(%x: tensor<?x?x64xf32>) -> tensor<i64> {
  %c1 = qcc.constant dense<1> : tensor<i64>
  %s = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %y = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  return %y : tensor<i64>
}

// -----

// Near miss: a 1-D constant table (a gather of constant values).
// CHECK-LABEL: func.func @gather_constant_vector(
// CHECK-NOT: qcc.embedding
// CHECK: %[[Y:.*]] = qcc.gather
// CHECK: return %[[Y]]
func.func @gather_constant_vector(%ids: tensor<?xi64>) -> tensor<?xf32> {
  %t = qcc.constant dense<[0.0, 1.0, 2.0]> : tensor<3xf32>
  %y = qcc.gather %t, %ids {axis = 0 : i64} : (tensor<3xf32>, tensor<?xi64>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
