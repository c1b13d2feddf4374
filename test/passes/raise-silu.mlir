// RUN: qcc-opt %s --raise-silu --split-input-file | FileCheck %s

// F.silu as torch.onnx exports it: x * Sigmoid(x).
// CHECK-LABEL: func.func @silu(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x172xf32>
// CHECK: %[[Y:.*]] = qcc.silu %[[X]] : tensor<?x?x172xf32>
// CHECK-NOT: qcc.sigmoid
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @silu(%x: tensor<?x?x172xf32>) -> tensor<?x?x172xf32> {
  %s = qcc.sigmoid %x : tensor<?x?x172xf32>
  %y = qcc.mul %x, %s : (tensor<?x?x172xf32>, tensor<?x?x172xf32>) -> tensor<?x?x172xf32>
  return %y : tensor<?x?x172xf32>
}

// -----

// The Sigmoid as the first operand.
// CHECK-LABEL: func.func @silu_swapped(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x172xf32>
// CHECK: %[[Y:.*]] = qcc.silu %[[X]] : tensor<?x?x172xf32>
// CHECK-NOT: qcc.mul
// CHECK: return %[[Y]]
func.func @silu_swapped(%x: tensor<?x?x172xf32>) -> tensor<?x?x172xf32> {
  %s = qcc.sigmoid %x : tensor<?x?x172xf32>
  %y = qcc.mul %s, %x : (tensor<?x?x172xf32>, tensor<?x?x172xf32>) -> tensor<?x?x172xf32>
  return %y : tensor<?x?x172xf32>
}

// -----

// SwiGLU: silu(gate) * up; only the gate's x * sigmoid(x) is raised, the
// product with up stays a Mul.
// CHECK-LABEL: func.func @swiglu(
// CHECK-SAME: %[[G:.*]]: tensor<?x?x172xf32>, %[[U:.*]]: tensor<?x?x172xf32>
// CHECK: %[[S:.*]] = qcc.silu %[[G]]
// CHECK: %[[Y:.*]] = qcc.mul %[[S]], %[[U]]
// CHECK: return %[[Y]]
func.func @swiglu(%g: tensor<?x?x172xf32>, %u: tensor<?x?x172xf32>) -> tensor<?x?x172xf32> {
  %s = qcc.sigmoid %g : tensor<?x?x172xf32>
  %a = qcc.mul %g, %s : (tensor<?x?x172xf32>, tensor<?x?x172xf32>) -> tensor<?x?x172xf32>
  %y = qcc.mul %a, %u : (tensor<?x?x172xf32>, tensor<?x?x172xf32>) -> tensor<?x?x172xf32>
  return %y : tensor<?x?x172xf32>
}

// -----

// Near miss: y * sigmoid(x) with y != x (a gated unit, not SiLU).
// CHECK-LABEL: func.func @gated_not_silu(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x172xf32>, %[[Y:.*]]: tensor<?x?x172xf32>
// CHECK-NOT: qcc.silu
// CHECK: %[[S:.*]] = qcc.sigmoid %[[X]]
// CHECK: qcc.mul %[[Y]], %[[S]]
func.func @gated_not_silu(%x: tensor<?x?x172xf32>, %y: tensor<?x?x172xf32>) -> tensor<?x?x172xf32> {
  %s = qcc.sigmoid %x : tensor<?x?x172xf32>
  %r = qcc.mul %y, %s : (tensor<?x?x172xf32>, tensor<?x?x172xf32>) -> tensor<?x?x172xf32>
  return %r : tensor<?x?x172xf32>
}
