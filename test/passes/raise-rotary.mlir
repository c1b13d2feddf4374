// RUN: qcc-opt %s --raise-rotary --split-input-file | FileCheck %s

// LLaMA's apply_rotary_pos_emb as torch.onnx exports it: q = x * cos +
// rotate_half(x) * sin on the head split of the projection, the half size
// computed as 16 / 2 and the upper half sliced to INT64_MAX.
// CHECK-LABEL: func.func @rotary(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x?x64xf32>, %[[COS:[^:]*]]: tensor<?x16xf32>, %[[SIN:[^:]*]]: tensor<?x16xf32>
// CHECK: %[[SHAPE:.*]] = qcc.concat
// CHECK: %[[R:.*]] = qcc.rotary %[[P]], %[[COS]], %[[SIN]] {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x16xf32>, tensor<?x16xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[S:.*]] = qcc.reshape %[[R]], %[[SHAPE]] : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK: %[[T:.*]] = qcc.transpose %[[S]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NOT: qcc.neg
// CHECK: return %[[T]]
func.func @rotary(%p: tensor<?x?x64xf32>, %cos: tensor<?x16xf32>, %sin: tensor<?x16xf32>) -> tensor<?x4x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %c0 = qcc.unsqueeze %cos {axes = array<i64: 0>} : (tensor<?x16xf32>) -> tensor<1x?x16xf32>
  %c = qcc.unsqueeze %c0 {axes = array<i64: 1>} : (tensor<1x?x16xf32>) -> tensor<1x1x?x16xf32>
  %s0 = qcc.unsqueeze %sin {axes = array<i64: 0>} : (tensor<?x16xf32>) -> tensor<1x?x16xf32>
  %s = qcc.unsqueeze %s0 {axes = array<i64: 1>} : (tensor<1x?x16xf32>) -> tensor<1x1x?x16xf32>
  %xc = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %d = qcc.constant dense<16> : tensor<i64>
  %two = qcc.constant dense<2> : tensor<i64>
  %halfs = qcc.div %d, %two : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %half = qcc.unsqueeze %halfs {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %x1 = qcc.slice %x, %zero, %half {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %x2 = qcc.slice %x, %half, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %n = qcc.neg %x2 : tensor<?x4x?x?xf32>
  %rot = qcc.concat %n, %x1 {axis = 3 : i64} : (tensor<?x4x?x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %rs = qcc.mul %rot, %s : (tensor<?x4x?x?xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %xc, %rs : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}

// -----

// Per-batch [B, S, D] tables (position ids per sequence) broadcast over the
// heads, constant slice bounds, the Add and Mul operands in the other order.
// CHECK-LABEL: func.func @rotary_batched_tables(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x?x32xf32>, %[[COS:[^:]*]]: tensor<?x?x16xf32>, %[[SIN:[^:]*]]: tensor<?x?x16xf32>
// CHECK: %[[R:.*]] = qcc.rotary %[[P]], %[[COS]], %[[SIN]] {head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
// CHECK: %[[S:.*]] = qcc.reshape %[[R]]
// CHECK: %[[T:.*]] = qcc.transpose %[[S]]
// CHECK: return %[[T]]
func.func @rotary_batched_tables(%p: tensor<?x?x32xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>) -> tensor<?x2x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x32xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x2x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x16xf32>) -> tensor<?x2x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %xc = qcc.mul %c, %x : (tensor<?x1x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %half = qcc.constant dense<8> : tensor<1xi64>
  %end = qcc.constant dense<16> : tensor<1xi64>
  %x1 = qcc.slice %x, %zero, %half {axes = array<i64: -1>, steps = array<i64: 1>} : (tensor<?x2x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x8xf32>
  %x2 = qcc.slice %x, %half, %end {axes = array<i64: -1>, steps = array<i64: 1>} : (tensor<?x2x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x8xf32>
  %n = qcc.neg %x2 : tensor<?x2x?x8xf32>
  %rot = qcc.concat %n, %x1 {axis = -1 : i64} : (tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x2x?x16xf32>
  %rs = qcc.mul %s, %rot : (tensor<?x1x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  %y = qcc.add %rs, %xc : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32>
  return %y : tensor<?x2x?x16xf32>
}

// -----

// Near miss: Concat(x2, -x1) rotates the other way.
// CHECK-LABEL: func.func @wrong_sign(
// CHECK-NOT: qcc.rotary
// CHECK: qcc.neg
func.func @wrong_sign(%p: tensor<?x?x64xf32>, %cos: tensor<?x16xf32>, %sin: tensor<?x16xf32>) -> tensor<?x4x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 0, 1>} : (tensor<?x16xf32>) -> tensor<1x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 0, 1>} : (tensor<?x16xf32>) -> tensor<1x1x?x16xf32>
  %xc = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %half = qcc.constant dense<8> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %x1 = qcc.slice %x, %zero, %half {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %x2 = qcc.slice %x, %half, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %n = qcc.neg %x1 : tensor<?x4x?x8xf32>
  %rot = qcc.concat %x2, %n {axis = 3 : i64} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x16xf32>
  %rs = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %xc, %rs : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}

// -----

// Near miss: rotating halves of the head axis, not of the head dimension.
// CHECK-LABEL: func.func @slice_non_last_axis(
// CHECK-NOT: qcc.rotary
// CHECK: qcc.neg
func.func @slice_non_last_axis(%p: tensor<?x?x64xf32>, %cos: tensor<?x16xf32>, %sin: tensor<?x16xf32>) -> tensor<?x4x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 0, 1>} : (tensor<?x16xf32>) -> tensor<1x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 0, 1>} : (tensor<?x16xf32>) -> tensor<1x1x?x16xf32>
  %xc = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %half = qcc.constant dense<2> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %x1 = qcc.slice %x, %zero, %half {axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x16xf32>
  %x2 = qcc.slice %x, %half, %big {axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x16xf32>
  %n = qcc.neg %x2 : tensor<?x2x?x16xf32>
  %rot = qcc.concat %n, %x1 {axis = 1 : i64} : (tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) -> tensor<?x4x?x16xf32>
  %rs = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %xc, %rs : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}

// -----

// Near miss: x is not the head split of a packed projection.
// CHECK-LABEL: func.func @not_head_split(
// CHECK-NOT: qcc.rotary
// CHECK: qcc.neg
func.func @not_head_split(%x: tensor<?x4x?x16xf32>, %cos: tensor<?x16xf32>, %sin: tensor<?x16xf32>) -> tensor<?x4x?x16xf32> {
  %c = qcc.unsqueeze %cos {axes = array<i64: 0, 1>} : (tensor<?x16xf32>) -> tensor<1x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 0, 1>} : (tensor<?x16xf32>) -> tensor<1x1x?x16xf32>
  %xc = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %half = qcc.constant dense<8> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %x1 = qcc.slice %x, %zero, %half {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %x2 = qcc.slice %x, %half, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %n = qcc.neg %x2 : tensor<?x4x?x8xf32>
  %rot = qcc.concat %n, %x1 {axis = 3 : i64} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x16xf32>
  %rs = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<1x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %xc, %rs : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}

// -----

// Heads computed per head before the rotation (Qwen3's q_norm): the heads
// are packed for qcc.rotary and split again after it.
// CHECK-LABEL: func @rotary_after_per_head_norm
// CHECK: %[[HEADS:.*]] = qcc.rms_norm
// CHECK: %[[PACKED:.*]] = qcc.reshape %[[HEADS]], %{{.*}} : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
// CHECK: %[[ROT:.*]] = qcc.rotary %[[PACKED]], %{{.*}}, %{{.*}} {head_dim = 16 : i64}
// CHECK: %[[SPLIT:.*]] = qcc.reshape %[[ROT]], %{{.*}} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK: qcc.transpose %[[SPLIT]] {perm = array<i64: 0, 2, 1, 3>}
func.func @rotary_after_per_head_norm(%h: tensor<?x?x4x16xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %g = qcc.constant dense<1.0> : tensor<16xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-6 : f32} : (tensor<?x?x4x16xf32>, tensor<16xf32>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %n {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %lo = qcc.constant dense<0> : tensor<1xi64>
  %mid = qcc.constant dense<8> : tensor<1xi64>
  %hi = qcc.constant dense<16> : tensor<1xi64>
  %x1 = qcc.slice %x, %lo, %mid {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %x2 = qcc.slice %x, %mid, %hi {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %nx2 = qcc.neg %x2 : tensor<?x4x?x8xf32>
  %rot = qcc.concat %nx2, %x1 {axis = 3 : i64} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x16xf32>
  %a = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %b = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %r = qcc.add %a, %b : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %r : tensor<?x4x?x16xf32>
}

// -----

// GPT-NeoX's partial rotary (rotary_pct = 0.25): only x[..., :4] of each
// 16-wide head rotates with [B, S, 4] tables, x[..., 4:] passes through. The
// slices are typed ? and the half is computed from the rotated slice's shape.
// CHECK-LABEL: func.func @partial_rotary(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x?x64xf32>, %[[COS:[^:]*]]: tensor<?x?x4xf32>, %[[SIN:[^:]*]]: tensor<?x?x4xf32>
// CHECK: %[[SHAPE:.*]] = qcc.concat
// CHECK: %[[R:.*]] = qcc.rotary %[[P]], %[[COS]], %[[SIN]] {head_dim = 16 : i64, rotary_dim = 4 : i64} : (tensor<?x?x64xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[S:.*]] = qcc.reshape %[[R]], %[[SHAPE]] : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK: %[[T:.*]] = qcc.transpose %[[S]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x?xf32>
// CHECK-NOT: qcc.neg
// CHECK: return %[[T]]
func.func @partial_rotary(%p: tensor<?x?x64xf32>, %cos: tensor<?x?x4xf32>, %sin: tensor<?x?x4xf32>) -> tensor<?x4x?x?xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %four = qcc.constant dense<4> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %xr = qcc.slice %x, %zero, %four {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %xp = qcc.slice %x, %four, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x4xf32>) -> tensor<?x1x?x4xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x4xf32>) -> tensor<?x1x?x4xf32>
  %xc = qcc.mul %xr, %c : (tensor<?x4x?x?xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %sh = qcc.shape %xr : (tensor<?x4x?x?xf32>) -> tensor<4xi64>
  %three = qcc.constant dense<3> : tensor<i64>
  %dim = qcc.gather %sh, %three {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %two = qcc.constant dense<2> : tensor<i64>
  %halfs = qcc.div %dim, %two : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %half = qcc.unsqueeze %halfs {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %x1 = qcc.slice %xr, %zero, %half {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x?xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %x2 = qcc.slice %xr, %half, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x?xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x?xf32>
  %n = qcc.neg %x2 : tensor<?x4x?x?xf32>
  %rot = qcc.concat %n, %x1 {axis = 3 : i64} : (tensor<?x4x?x?xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %rs = qcc.mul %rot, %s : (tensor<?x4x?x?xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %y = qcc.add %xc, %rs : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  %out = qcc.concat %y, %xp {axis = 3 : i64} : (tensor<?x4x?x4xf32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  return %out : tensor<?x4x?x?xf32>
}

// -----

// Near miss: the passed part starts past the rotated one (x[..., 8:] after
// rotating x[..., :4]): the values 4..8 would be lost.
// CHECK-LABEL: func.func @partial_rotary_gap(
// CHECK-NOT: qcc.rotary
// CHECK: qcc.neg
func.func @partial_rotary_gap(%p: tensor<?x?x64xf32>, %cos: tensor<?x?x4xf32>, %sin: tensor<?x?x4xf32>) -> tensor<?x4x?x12xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %two = qcc.constant dense<2> : tensor<1xi64>
  %four = qcc.constant dense<4> : tensor<1xi64>
  %eight = qcc.constant dense<8> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %xr = qcc.slice %x, %zero, %four {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x4xf32>
  %xp = qcc.slice %x, %eight, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x4xf32>) -> tensor<?x1x?x4xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x4xf32>) -> tensor<?x1x?x4xf32>
  %xc = qcc.mul %xr, %c : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %x1 = qcc.slice %xr, %zero, %two {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x2xf32>
  %x2 = qcc.slice %xr, %two, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x2xf32>
  %n = qcc.neg %x2 : tensor<?x4x?x2xf32>
  %rot = qcc.concat %n, %x1 {axis = 3 : i64} : (tensor<?x4x?x2xf32>, tensor<?x4x?x2xf32>) -> tensor<?x4x?x4xf32>
  %rs = qcc.mul %rot, %s : (tensor<?x4x?x4xf32>, tensor<?x1x?x4xf32>) -> tensor<?x4x?x4xf32>
  %y = qcc.add %xc, %rs : (tensor<?x4x?x4xf32>, tensor<?x4x?x4xf32>) -> tensor<?x4x?x4xf32>
  %out = qcc.concat %y, %xp {axis = 3 : i64} : (tensor<?x4x?x4xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x12xf32>
  return %out : tensor<?x4x?x12xf32>
}

// -----

// Gemma3 normalizes q and k after the head transpose: the norm moves before
// the transpose, and the rotation is raised on heads computed per head.
// CHECK-LABEL: func @rotary_after_transposed_norm
// CHECK: %[[SPLIT:.*]] = qcc.reshape %{{.*}}, %{{.*}} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK: %[[HEADS:.*]] = qcc.rms_norm %[[SPLIT]], %{{.*}} {epsilon = {{.*}}} : (tensor<?x?x4x16xf32>, tensor<16xf32>) -> tensor<?x?x4x16xf32>
// CHECK: %[[PACKED:.*]] = qcc.reshape %[[HEADS]], %{{.*}} : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
// CHECK: qcc.rotary %[[PACKED]], %{{.*}}, %{{.*}} {head_dim = 16 : i64}
func.func @rotary_after_transposed_norm(%p: tensor<?x?x64xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %g = qcc.constant dense<1.0> : tensor<16xf32>
  %x = qcc.rms_norm %t, %g {epsilon = 1.0e-6 : f32} : (tensor<?x4x?x16xf32>, tensor<16xf32>) -> tensor<?x4x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %lo = qcc.constant dense<0> : tensor<1xi64>
  %mid = qcc.constant dense<8> : tensor<1xi64>
  %hi = qcc.constant dense<16> : tensor<1xi64>
  %x1 = qcc.slice %x, %lo, %mid {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %x2 = qcc.slice %x, %mid, %hi {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %nx2 = qcc.neg %x2 : tensor<?x4x?x8xf32>
  %rot = qcc.concat %nx2, %x1 {axis = 3 : i64} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x16xf32>
  %a = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %b = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %a, %b : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}

// -----

// Interleaved rotary as Cohere exports it on [B, H, S, D] heads:
// x * cos + rotate_every_two(x) * sin, rotate_every_two(x) =
// stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2), with the tables
// repeat_interleave'd (pair i's angle at 2i and 2i + 1). qcc.rotary rotates
// between gathers that put each head's evens before its odds and back; the
// tables are gathered into the same order.
// CHECK-LABEL: func.func @interleaved_rotary(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x?x64xf32>, %[[COS:[^:]*]]: tensor<?x?x16xf32>, %[[SIN:[^:]*]]: tensor<?x?x16xf32>
// CHECK-DAG: %[[HALF:.*]] = qcc.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15]> : tensor<16xi64>
// CHECK-DAG: %[[APART:.*]] = qcc.constant dense<[0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 16, 18, {{.*}}, 63]> : tensor<64xi64>
// CHECK-DAG: %[[BACK:.*]] = qcc.constant dense<[0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 16, 24, {{.*}}, 63]> : tensor<64xi64>
// CHECK: %[[C:.*]] = qcc.gather %[[COS]], %[[HALF]] {axis = 2 : i64} : (tensor<?x?x16xf32>, tensor<16xi64>) -> tensor<?x?x16xf32>
// CHECK: %[[S:.*]] = qcc.gather %[[SIN]], %[[HALF]] {axis = 2 : i64}
// CHECK: %[[G:.*]] = qcc.gather %[[P]], %[[APART]] {axis = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
// CHECK: %[[R:.*]] = qcc.rotary %[[G]], %[[C]], %[[S]] {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[Y:.*]] = qcc.gather %[[R]], %[[BACK]] {axis = 2 : i64}
// CHECK: %[[SPLIT:.*]] = qcc.reshape %[[Y]], %{{.*}} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK: %[[T:.*]] = qcc.transpose %[[SPLIT]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NOT: qcc.neg
// CHECK: return %[[T]]
func.func @interleaved_rotary(%p: tensor<?x?x64xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %even = qcc.slice %x, %zero, %big {axes = array<i64: 3>, steps = array<i64: 2>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %odd = qcc.slice %x, %one, %big {axes = array<i64: 3>, steps = array<i64: 2>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %nodd = qcc.neg %odd : tensor<?x4x?x8xf32>
  %u0 = qcc.unsqueeze %nodd {axes = array<i64: 4>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x?x8x1xf32>
  %u1 = qcc.unsqueeze %even {axes = array<i64: 4>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x?x8x1xf32>
  %st = qcc.concat %u0, %u1 {axis = 4 : i64} : (tensor<?x4x?x8x1xf32>, tensor<?x4x?x8x1xf32>) -> tensor<?x4x?x8x2xf32>
  %lead = qcc.shape %st {end = 3 : i64} : (tensor<?x4x?x8x2xf32>) -> tensor<3xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %flat = qcc.concat %lead, %m1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<4xi64>
  %rot = qcc.reshape %st, %flat : (tensor<?x4x?x8x2xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %a = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %b = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %a, %b : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}

// -----

// GPT-J's partial interleaved rotary (rotary_dim 8 of a 16-wide head) on the
// head split [B, S, H, D] itself, before the head transpose: the tables are
// repeat_interleave(half, 2) with a size-1 head axis, [B, S, 1, R], which is
// squeezed for qcc.rotary. The head split is re-applied after it; the
// passed values 8..16 of each head stay in place in both gathers.
// CHECK-LABEL: func.func @interleaved_partial_rotary_on_head_split(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x?x64xf32>
// CHECK-DAG: %[[HALF:.*]] = qcc.constant dense<[0, 2, 4, 6, 1, 3, 5, 7]> : tensor<8xi64>
// CHECK-DAG: %[[APART:.*]] = qcc.constant dense<[0, 2, 4, 6, 1, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, {{.*}}, 63]> : tensor<64xi64>
// CHECK: %[[SHAPE:.*]] = qcc.concat
// CHECK: %[[CS:.*]] = qcc.squeeze %{{.*}} {axes = array<i64: 2>} : (tensor<?x?x1x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[C:.*]] = qcc.gather %[[CS]], %[[HALF]] {axis = 2 : i64}
// CHECK: %[[SS:.*]] = qcc.squeeze %{{.*}} {axes = array<i64: 2>} : (tensor<?x?x1x8xf32>) -> tensor<?x?x8xf32>
// CHECK: %[[S:.*]] = qcc.gather %[[SS]], %[[HALF]] {axis = 2 : i64}
// CHECK: %[[G:.*]] = qcc.gather %[[P]], %[[APART]] {axis = 2 : i64}
// CHECK: %[[R:.*]] = qcc.rotary %[[G]], %[[C]], %[[S]] {head_dim = 16 : i64, rotary_dim = 8 : i64}
// CHECK: %[[Y:.*]] = qcc.gather %[[R]], %{{.*}} {axis = 2 : i64}
// CHECK: %[[SPLIT:.*]] = qcc.reshape %[[Y]], %[[SHAPE]] : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK-NOT: qcc.neg
// CHECK: return %[[SPLIT]]
func.func @interleaved_partial_rotary_on_head_split(%p: tensor<?x?x64xf32>, %cosh: tensor<?x?x4xf32>, %sinh: tensor<?x?x4xf32>) -> tensor<?x?x4x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %h = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %eight = qcc.constant dense<8> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %x = qcc.slice %h, %zero, %eight {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x4x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x4x8xf32>
  %pass = qcc.slice %h, %eight, %big {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x4x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x4x8xf32>
  %reps = qcc.constant dense<[1, 1, 1, 1, 2]> : tensor<5xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %c1 = qcc.unsqueeze %cosh {axes = array<i64: 2>} : (tensor<?x?x4xf32>) -> tensor<?x?x1x4xf32>
  %c2 = qcc.unsqueeze %c1 {axes = array<i64: 4>} : (tensor<?x?x1x4xf32>) -> tensor<?x?x1x4x1xf32>
  %c3 = qcc.expand %c2, %reps : (tensor<?x?x1x4x1xf32>, tensor<5xi64>) -> tensor<?x?x1x4x2xf32>
  %cl = qcc.shape %c1 {end = 3 : i64} : (tensor<?x?x1x4xf32>) -> tensor<3xi64>
  %ct = qcc.concat %cl, %m1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<4xi64>
  %c = qcc.reshape %c3, %ct : (tensor<?x?x1x4x2xf32>, tensor<4xi64>) -> tensor<?x?x1x8xf32>
  %s1 = qcc.unsqueeze %sinh {axes = array<i64: 2>} : (tensor<?x?x4xf32>) -> tensor<?x?x1x4xf32>
  %s2 = qcc.unsqueeze %s1 {axes = array<i64: 4>} : (tensor<?x?x1x4xf32>) -> tensor<?x?x1x4x1xf32>
  %s3 = qcc.expand %s2, %reps : (tensor<?x?x1x4x1xf32>, tensor<5xi64>) -> tensor<?x?x1x4x2xf32>
  %sl = qcc.shape %s1 {end = 3 : i64} : (tensor<?x?x1x4xf32>) -> tensor<3xi64>
  %stt = qcc.concat %sl, %m1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<4xi64>
  %s = qcc.reshape %s3, %stt : (tensor<?x?x1x4x2xf32>, tensor<4xi64>) -> tensor<?x?x1x8xf32>
  %even = qcc.slice %x, %zero, %big {axes = array<i64: 3>, steps = array<i64: 2>} : (tensor<?x?x4x8xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x4x4xf32>
  %odd = qcc.slice %x, %one, %big {axes = array<i64: 3>, steps = array<i64: 2>} : (tensor<?x?x4x8xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x4x4xf32>
  %nodd = qcc.neg %odd : tensor<?x?x4x4xf32>
  %u0 = qcc.unsqueeze %nodd {axes = array<i64: 4>} : (tensor<?x?x4x4xf32>) -> tensor<?x?x4x4x1xf32>
  %u1 = qcc.unsqueeze %even {axes = array<i64: 4>} : (tensor<?x?x4x4xf32>) -> tensor<?x?x4x4x1xf32>
  %st = qcc.concat %u0, %u1 {axis = 4 : i64} : (tensor<?x?x4x4x1xf32>, tensor<?x?x4x4x1xf32>) -> tensor<?x?x4x4x2xf32>
  %lead = qcc.shape %st {end = 3 : i64} : (tensor<?x?x4x4x2xf32>) -> tensor<3xi64>
  %flat = qcc.concat %lead, %m1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<4xi64>
  %rot = qcc.reshape %st, %flat : (tensor<?x?x4x4x2xf32>, tensor<4xi64>) -> tensor<?x?x4x8xf32>
  %a = qcc.mul %x, %c : (tensor<?x?x4x8xf32>, tensor<?x?x1x8xf32>) -> tensor<?x?x4x8xf32>
  %b = qcc.mul %rot, %s : (tensor<?x?x4x8xf32>, tensor<?x?x1x8xf32>) -> tensor<?x?x4x8xf32>
  %y = qcc.add %a, %b : (tensor<?x?x4x8xf32>, tensor<?x?x4x8xf32>) -> tensor<?x?x4x8xf32>
  %out = qcc.concat %y, %pass {axis = 3 : i64} : (tensor<?x?x4x8xf32>, tensor<?x?x4x8xf32>) -> tensor<?x?x4x16xf32>
  return %out : tensor<?x?x4x16xf32>
}

// -----

// Near miss: stack((x[..., 1::2], -x[..., ::2]), -1) rotates the other way
// (out[2i] = x[2i] cos + x[2i+1] sin); it is not rotate_every_two.
// CHECK-LABEL: func.func @interleaved_other_direction(
// CHECK-NOT: qcc.rotary
// CHECK: qcc.neg
func.func @interleaved_other_direction(%p: tensor<?x?x64xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %x = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %c = qcc.unsqueeze %cos {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %s = qcc.unsqueeze %sin {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %zero = qcc.constant dense<0> : tensor<1xi64>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %big = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %even = qcc.slice %x, %zero, %big {axes = array<i64: 3>, steps = array<i64: 2>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %odd = qcc.slice %x, %one, %big {axes = array<i64: 3>, steps = array<i64: 2>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  %neven = qcc.neg %even : tensor<?x4x?x8xf32>
  %u0 = qcc.unsqueeze %odd {axes = array<i64: 4>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x?x8x1xf32>
  %u1 = qcc.unsqueeze %neven {axes = array<i64: 4>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x?x8x1xf32>
  %st = qcc.concat %u0, %u1 {axis = 4 : i64} : (tensor<?x4x?x8x1xf32>, tensor<?x4x?x8x1xf32>) -> tensor<?x4x?x8x2xf32>
  %lead = qcc.shape %st {end = 3 : i64} : (tensor<?x4x?x8x2xf32>) -> tensor<3xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %flat = qcc.concat %lead, %m1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<4xi64>
  %rot = qcc.reshape %st, %flat : (tensor<?x4x?x8x2xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %a = qcc.mul %x, %c : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %b = qcc.mul %rot, %s : (tensor<?x4x?x16xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %y = qcc.add %a, %b : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  return %y : tensor<?x4x?x16xf32>
}
