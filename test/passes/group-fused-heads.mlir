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

// The same projection with a runtime LoRA adapter's update on it (the
// importer's add(linear, lora), docs/LORA.md): B's rows [J, N, R] are
// regrouped as the weight's (B row n holds n), and the grouped projection is
// add(linear, lora) again, reading the same A.
// CHECK-LABEL: func.func @neox_qkv_lora(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x4xf32>
// CHECK-DAG: %[[A:.*]] = qcc.constant dense<1.000000e+00> : tensor<2x1x4xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<{{\[\[\[}}0.000000e+00], [1.000000e+00], [6.000000e+00], [7.000000e+00], [2.000000e+00], [3.000000e+00], [8.000000e+00], [9.000000e+00], [4.000000e+00], [5.000000e+00], [1.000000e+01], [1.100000e+01]], {{\[\[}}0.000000e+00], [1.000000e+00], [6.000000e+00]
// CHECK: %[[G:.*]] = qcc.linear %[[X]], %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<12x4xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
// CHECK: %[[D:.*]] = qcc.lora %[[X]], %[[A]], %[[B]] : (tensor<?x?x4xf32>, tensor<2x1x4xf32>, tensor<2x12x1xf32>) -> tensor<?x?x12xf32>
// CHECK: %[[S:.*]] = qcc.add %[[G]], %[[D]]
// CHECK: qcc.slice %[[S]]
// CHECK-NOT: qcc.lora
func.func @neox_qkv_lora(%x: tensor<?x?x4xf32>) -> (tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>, tensor<?x2x?x?xf32>) {
  %w = qcc.constant dense<[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0], [5.0, 5.0, 5.0, 5.0], [6.0, 6.0, 6.0, 6.0], [7.0, 7.0, 7.0, 7.0], [8.0, 8.0, 8.0, 8.0], [9.0, 9.0, 9.0, 9.0], [10.0, 10.0, 10.0, 10.0], [11.0, 11.0, 11.0, 11.0]]> : tensor<12x4xf32>
  %b = qcc.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]> : tensor<12xf32>
  %la = qcc.constant dense<1.0> : tensor<2x1x4xf32>
  %lb = qcc.constant dense<[[[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0], [8.0], [9.0], [10.0], [11.0]], [[0.0], [1.0], [2.0], [3.0], [4.0], [5.0], [6.0], [7.0], [8.0], [9.0], [10.0], [11.0]]]> : tensor<2x12x1xf32>
  %l = qcc.linear %x, %w, %b : (tensor<?x?x4xf32>, tensor<12x4xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
  %d = qcc.lora %x, %la, %lb : (tensor<?x?x4xf32>, tensor<2x1x4xf32>, tensor<2x12x1xf32>) -> tensor<?x?x12xf32>
  %p = qcc.add %l, %d : (tensor<?x?x12xf32>, tensor<?x?x12xf32>) -> tensor<?x?x12xf32>
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

// -----

// BLOOM's query_key_value: [B, S, H, 3, D] (H = 2, D = 2), q, k and v each
// a Gather of one index of the part axis. Weight row r and bias element r
// hold r: q rows of heads 0 and 1 (0 1 6 7) first, then k, then v, each a
// head split of a slice of the grouped linear.
// CHECK-LABEL: func.func @bloom_qkv(
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[0.000000e+00, 1.000000e+00, 6.000000e+00, 7.000000e+00, 2.000000e+00, 3.000000e+00, 8.000000e+00, 9.000000e+00, 4.000000e+00, 5.000000e+00, 1.000000e+01, 1.100000e+01]> : tensor<12xf32>
// CHECK: %[[G:.*]] = qcc.linear %{{.*}}, %{{.*}}, %[[B]] : (tensor<?x?x4xf32>, tensor<12x4xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
// CHECK: %[[QP:.*]] = qcc.slice %[[G]], %{{.*}}, %{{.*}} {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x12xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x4xf32>
// CHECK: %[[QS:.*]] = qcc.reshape %[[QP]], %{{.*}} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x2x2xf32>
// CHECK: %[[Q:.*]] = qcc.transpose %[[QS]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NOT: qcc.gather
// CHECK: return %[[Q]],
func.func @bloom_qkv(%x: tensor<?x?x4xf32>) -> (tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>) {
  %w = qcc.constant dense<[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0], [5.0, 5.0, 5.0, 5.0], [6.0, 6.0, 6.0, 6.0], [7.0, 7.0, 7.0, 7.0], [8.0, 8.0, 8.0, 8.0], [9.0, 9.0, 9.0, 9.0], [10.0, 10.0, 10.0, 10.0], [11.0, 11.0, 11.0, 11.0]]> : tensor<12x4xf32>
  %b = qcc.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0]> : tensor<12xf32>
  %p = qcc.linear %x, %w, %b : (tensor<?x?x4xf32>, tensor<12x4xf32>, tensor<12xf32>) -> tensor<?x?x12xf32>
  %s = qcc.shape %p : (tensor<?x?x12xf32>) -> tensor<3xi64>
  %c0v = qcc.constant dense<0> : tensor<1xi64>
  %c2v = qcc.constant dense<2> : tensor<1xi64>
  %bs = qcc.slice %s, %c0v, %c2v {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %hpd = qcc.constant dense<[2, 3, 2]> : tensor<3xi64>
  %shape = qcc.concat %bs, %hpd {axis = 0 : i64} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x12xf32>, tensor<5xi64>) -> tensor<?x?x2x3x2xf32>
  %i0 = qcc.constant dense<0> : tensor<i64>
  %i1 = qcc.constant dense<1> : tensor<i64>
  %i2 = qcc.constant dense<2> : tensor<i64>
  %q = qcc.gather %r, %i0 {axis = 3 : i64} : (tensor<?x?x2x3x2xf32>, tensor<i64>) -> tensor<?x?x2x2xf32>
  %k = qcc.gather %r, %i1 {axis = 3 : i64} : (tensor<?x?x2x3x2xf32>, tensor<i64>) -> tensor<?x?x2x2xf32>
  %v = qcc.gather %r, %i2 {axis = 3 : i64} : (tensor<?x?x2x3x2xf32>, tensor<i64>) -> tensor<?x?x2x2xf32>
  %qh = qcc.transpose %q {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x2xf32>) -> tensor<?x2x?x2xf32>
  %kh = qcc.transpose %k {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x2xf32>) -> tensor<?x2x?x2xf32>
  %vh = qcc.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x2xf32>) -> tensor<?x2x?x2xf32>
  return %qh, %kh, %vh : tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>, tensor<?x2x?x2xf32>
}

// -----

// Falcon's new decoder architecture: [B, S, G, n + 2, D] (G = 2 kv-head
// groups of n = 2 query heads, D = 2); q = parts [0, 2), k = [2, 3), v =
// [3, 4), k and v expanded over the group's query heads. Grouped rows: q of
// groups 0 and 1 (0-3, 8-11), k (4 5 12 13), v (6 7 14 15); q's view is a
// head split of its slice, k's and v's of their slices' kv heads repeated
// (head h reads kv head h / 2).
// CHECK-LABEL: func.func @falcon_gqa_qkv(
// CHECK-DAG: %[[IDX:.*]] = qcc.constant dense<[0, 1, 0, 1, 2, 3, 2, 3]> : tensor<8xi64>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00, 8.000000e+00, 9.000000e+00, 1.000000e+01, 1.100000e+01, 4.000000e+00, 5.000000e+00, 1.200000e+01, 1.300000e+01, 6.000000e+00, 7.000000e+00, 1.400000e+01, 1.500000e+01]> : tensor<16xf32>
// CHECK: %[[G:.*]] = qcc.linear %{{.*}}, %{{.*}}, %[[B]]
// CHECK: %[[QP:.*]] = qcc.slice %[[G]], {{.*}} -> tensor<?x?x8xf32>
// CHECK: %[[KP:.*]] = qcc.slice %[[G]], {{.*}} -> tensor<?x?x4xf32>
// CHECK: %[[VP:.*]] = qcc.slice %[[G]], {{.*}} -> tensor<?x?x4xf32>
// CHECK-DAG: %[[KR:.*]] = qcc.gather %[[KP]], %[[IDX]] {axis = 2 : i64} : (tensor<?x?x4xf32>, tensor<8xi64>) -> tensor<?x?x8xf32>
// CHECK-DAG: %[[VR:.*]] = qcc.gather %[[VP]], %[[IDX]] {axis = 2 : i64} : (tensor<?x?x4xf32>, tensor<8xi64>) -> tensor<?x?x8xf32>
// CHECK-DAG: %[[Q:.*]] = qcc.reshape %[[QP]], %{{.*}} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
// CHECK-DAG: %[[K:.*]] = qcc.reshape %[[KR]], %{{.*}} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
// CHECK-DAG: %[[V:.*]] = qcc.reshape %[[VR]], %{{.*}} : (tensor<?x?x8xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
// CHECK-NOT: qcc.expand
// CHECK: return %[[Q]], %[[K]], %[[V]]
func.func @falcon_gqa_qkv(%x: tensor<?x?x4xf32>) -> (tensor<?x?x4x2xf32>, tensor<?x?x4x2xf32>, tensor<?x?x4x2xf32>) {
  %w = qcc.constant dense<1.0> : tensor<16x4xf32>
  %b = qcc.constant dense<[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0]> : tensor<16xf32>
  %p = qcc.linear %x, %w, %b : (tensor<?x?x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<2xi64>
  %gpd = qcc.constant dense<[-1, 4, 2]> : tensor<3xi64>
  %shape = qcc.concat %bs, %gpd {axis = 0 : i64} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x16xf32>, tensor<5xi64>) -> tensor<?x?x2x4x2xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %cm2 = qcc.constant dense<-2> : tensor<1xi64>
  %cm1 = qcc.constant dense<-1> : tensor<1xi64>
  %end = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %q5 = qcc.slice %r, %c0, %cm2 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x4x2xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x2x2xf32>
  %k5 = qcc.slice %r, %cm2, %cm1 {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x4x2xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x1x2xf32>
  %v5 = qcc.slice %r, %cm1, %end {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x?x2x4x2xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2x1x2xf32>
  %es = qcc.constant dense<[2, 2, 2]> : tensor<3xi64>
  %et = qcc.concat %bs, %es {axis = 0 : i64} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  %ke = qcc.expand %k5, %et : (tensor<?x?x2x1x2xf32>, tensor<5xi64>) -> tensor<?x?x2x2x2xf32>
  %ve = qcc.expand %v5, %et : (tensor<?x?x2x1x2xf32>, tensor<5xi64>) -> tensor<?x?x2x2x2xf32>
  %hd = qcc.constant dense<[4, 2]> : tensor<2xi64>
  %vt = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q = qcc.reshape %q5, %vt : (tensor<?x?x2x2x2xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
  %k = qcc.reshape %ke, %vt : (tensor<?x?x2x2x2xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
  %v = qcc.reshape %ve, %vt : (tensor<?x?x2x2x2xf32>, tensor<4xi64>) -> tensor<?x?x4x2xf32>
  return %q, %k, %v : tensor<?x?x4x2xf32>, tensor<?x?x4x2xf32>, tensor<?x?x4x2xf32>
}

// -----

// Near miss: a [B, S, G, P, D] split read along its group axis: the
// projection keeps its layout.
// CHECK-LABEL: func.func @grouped_other_axis(
// CHECK: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
// CHECK: qcc.reshape %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<5xi64>) -> tensor<?x?x2x4x2xf32>
func.func @grouped_other_axis(%x: tensor<?x?x4xf32>) -> tensor<?x?x1x4x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<16x4xf32>
  %p = qcc.linear %x, %w : (tensor<?x?x4xf32>, tensor<16x4xf32>) -> tensor<?x?x16xf32>
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x16xf32>) -> tensor<2xi64>
  %gpd = qcc.constant dense<[2, 4, 2]> : tensor<3xi64>
  %shape = qcc.concat %bs, %gpd {axis = 0 : i64} : (tensor<2xi64>, tensor<3xi64>) -> tensor<5xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x16xf32>, tensor<5xi64>) -> tensor<?x?x2x4x2xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c1 = qcc.constant dense<1> : tensor<1xi64>
  %g = qcc.slice %r, %c0, %c1 {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x2x4x2xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x4x2xf32>
  return %g : tensor<?x?x1x4x2xf32>
}
