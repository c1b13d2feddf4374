// RUN: qcc-opt %s --group-fused-heads --split-input-file | FileCheck %s

// GPT-NeoX's query_key_value: 2 heads of [q | k | v], 2 values each (C = 6).
// Weight row r and bias element r hold r, so the new order is visible in the
// bias: q rows of heads 0 and 1 (0 1 6 7), then k (2 3 8 9), then v. The
// Shape of the projection's B and S reads the grouped projection.
// CHECK-LABEL: func.func @neox_qkv(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x4xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[0.000000e+00, 1.000000e+00, 6.000000e+00, 7.000000e+00, 2.000000e+00, 3.000000e+00, 8.000000e+00, 9.000000e+00, 4.000000e+00, 5.000000e+00, 1.000000e+01, 1.100000e+01]> : tensor<12xf32>
// CHECK-DAG: %[[W:.*]] = qcc.constant dense<{{\[\[}}0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], {{\[}}1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00], {{\[}}6.000000e+00,
// CHECK: %[[G:.*]] = qcc.linear %[[X]], %[[W]], %[[B]] : (tensor<?x?x4xf32>, tensor<12x4xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
// CHECK-NOT: qcc.linear
// CHECK: %[[QP:.*]] = qcc.slice %[[G]], %{{.*}}, %{{.*}} {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x12xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x4xf32>
// CHECK: %[[QS:.*]] = qcc.reshape %[[QP]], %{{.*}} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x2x2xf32>
// CHECK: %[[Q:.*]] = qcc.transpose %[[QS]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x2xf32>) -> tensor<?x2x?x?xf32>
// CHECK: %[[KP:.*]] = qcc.slice %[[G]]
// CHECK: %[[VP:.*]] = qcc.slice %[[G]]
// CHECK: return %[[Q]],
// CHECK-NOT: dense<[0.000000e+00, 1.000000e+00, 2.000000e+00
func.func @neox_qkv(%x: tensor<?x?x4xf32>) -> (tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>) {
  %w = qcc.constant dense<[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0], [5.0, 5.0, 5.0, 5.0], [6.0, 6.0, 6.0, 6.0], [7.0, 7.0, 7.0, 7.0], [8.0, 8.0, 8.0, 8.0], [9.0, 9.0, 9.0, 9.0], [10.0, 10.0, 10.0, 10.0], [11.0, 11.0, 11.0, 11.0]]> : tensor<12x4xf32>
  %b = qcc.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]> : tensor<12xf32>
  %p = qcc.linear %x, %w, %b : (tensor<?x?x4xf32>, tensor<12x4xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x12xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[-1, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x6xf32>) -> tensor<?x2x?x6xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %c4 = qcc.constant dense<4> : tensor<1xi64>
  %c6 = qcc.constant dense<6> : tensor<1xi64>
  %q = qcc.slice %t, %c0, %c2 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x2x?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x?xf32>
  %k = qcc.slice %t, %c2, %c4 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x2x?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x?xf32>
  %v = qcc.slice %t, %c4, %c6 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x2x?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x?xf32>
  return %q, %k, %v : tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>
}

// -----

// Near miss: the head split has a user other than a slice (the whole heads
// are read too), so the projection keeps its layout.
// CHECK-LABEL: func.func @other_user(
// CHECK: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
// CHECK: qcc.slice %{{.*}}, %{{.*}}, %{{.*}} {axes = array<i64: 3>
func.func @other_user(%x: tensor<?x?x4xf32>) -> (tensor<?x2x?x?xf32>, tensor<?x2x?x6xf32>) {
  %w = qcc.constant dense<1.0> : tensor<12x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x4xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x6xf32>) -> tensor<?x2x?x6xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %q = qcc.slice %t, %c0, %c2 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x2x?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x?xf32>
  return %q, %t : tensor<?x2x?x?xf32>, tensor<?x2x?x6xf32>
}

// -----

// Near miss: overlapping parts [0, 4) and [2, 6) cannot both be blocks.
// CHECK-LABEL: func.func @overlapping_parts(
// CHECK: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
// CHECK-COUNT-2: qcc.slice %{{.*}}, %{{.*}}, %{{.*}} {axes = array<i64: 3>
func.func @overlapping_parts(%x: tensor<?x?x4xf32>) -> (tensor<?x?x2x?xf32>, tensor<?x?x2x?xf32>) {
  %w = qcc.constant dense<1.0> : tensor<12x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x4xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %c4 = qcc.constant dense<4> : tensor<1xi64>
  %c6 = qcc.constant dense<6> : tensor<1xi64>
  %a = qcc.slice %r, %c0, %c4 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x?xf32>
  %b = qcc.slice %r, %c2, %c6 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x?xf32>
  return %a, %b : tensor<?x?x2x?xf32>, tensor<?x?x2x?xf32>
}

// -----

// The dynamo exporter splits the heads with qcc.split: each result is a part.
// CHECK-LABEL: func.func @neox_qkv_split(
// CHECK: %[[G:.*]] = qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
// CHECK-COUNT-3: qcc.slice %[[G]]
// CHECK-NOT: qcc.split
func.func @neox_qkv_split(%x: tensor<?x?x4xf32>) -> (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) {
  %w = qcc.constant dense<1.0> : tensor<12x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x4xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x6xf32>) -> tensor<?x2x?x6xf32>
  %q, %k, %v = qcc.split %t {axis = 3 : i64, sizes = array<i64: 2, 2, 2>} : (tensor<?x2x?x6xf32>) -> (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>)
  return %q, %k, %v : tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>
}

// -----

// Near miss: StableLM's partial rotary slices one head into a rotated and a
// passed part and joins them again; they stay one head for raise-rotary.
// CHECK-LABEL: func.func @rejoined_parts(
// CHECK: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
// CHECK-COUNT-2: qcc.slice %{{.*}}, %{{.*}}, %{{.*}} {axes = array<i64: 3>
func.func @rejoined_parts(%x: tensor<?x?x4xf32>) -> tensor<?x2x?x6xf32> {
  %w = qcc.constant dense<1.0> : tensor<12x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x4xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %t = qcc.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x6xf32>) -> tensor<?x2x?x6xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %c6 = qcc.constant dense<6> : tensor<1xi64>
  %rot = qcc.slice %t, %c0, %c2 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x2x?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x2xf32>
  %pass = qcc.slice %t, %c2, %c6 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x2x?x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x2x?x4xf32>
  %n = qcc.neg %rot : tensor<?x2x?x2xf32>
  %y = qcc.concat %n, %pass {axis = 3 : i64} : (tensor<?x2x?x2xf32>, tensor<?x2x?x4xf32>) -> tensor<?x2x?x6xf32>
  return %y : tensor<?x2x?x6xf32>
}

// -----

// CodeGen's legacy export reads the fused projection's whole shape (its
// head split target is built from it): every row is kept, so the grouped
// projection has that shape too.
// CHECK-LABEL: func.func @whole_shape_read(
// CHECK: %[[G:.*]] = qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
// CHECK-COUNT-3: qcc.slice %[[G]]
// CHECK-NOT: qcc.split
// CHECK: %[[S:.*]] = qcc.shape %[[G]] : (tensor<?x?x12xf32>) -> tensor<3xi64>
// CHECK: return {{.*}}, %[[S]]
func.func @whole_shape_read(%x: tensor<?x?x4xf32>) -> (tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>, tensor<3xi64>) {
  %w = qcc.constant dense<1.0> : tensor<12x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
  %s = qcc.shape %p : (tensor<?x?x12xf32>) -> tensor<3xi64>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %bs = qcc.slice %s, %c0, %c2 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %q, %k, %v = qcc.split %r {axis = 3 : i64, sizes = array<i64: 2, 2, 2>} : (tensor<?x?x2x6xf32>) -> (tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>)
  return %q, %k, %v, %s : tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>, tensor<?x?x2x2xf32>, tensor<3xi64>
}

// -----

// Near miss: the whole shape is read, but the rows of values 4..6 of each
// head are read by no part: the grouped projection would be narrower.
// CHECK-LABEL: func.func @whole_shape_read_rows_dropped(
// CHECK: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
// CHECK: qcc.slice %{{.*}}, %{{.*}}, %{{.*}} {axes = array<i64: 3>
func.func @whole_shape_read_rows_dropped(%x: tensor<?x?x4xf32>) -> (tensor<?x?x2x?xf32>, tensor<?x?x2x?xf32>, tensor<3xi64>) {
  %w = qcc.constant dense<1.0> : tensor<12x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<12x4xf32>) -> tensor<?x?x12xf32>
  %s = qcc.shape %p : (tensor<?x?x12xf32>) -> tensor<3xi64>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x4xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[2, 6]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<4xi64>) -> tensor<?x?x2x6xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %c4 = qcc.constant dense<4> : tensor<1xi64>
  %q = qcc.slice %r, %c0, %c2 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x?xf32>
  %k = qcc.slice %r, %c2, %c4 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x6xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x?xf32>
  return %q, %k, %s : tensor<?x?x2x?xf32>, tensor<?x?x2x?xf32>, tensor<3xi64>
}
