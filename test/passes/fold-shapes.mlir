// RUN: qcc-opt %s --fold-shapes --split-input-file | FileCheck %s

// A cast to the same type is dropped (CastOp folder).
// CHECK-LABEL: func.func @cast_same_type(
// CHECK-SAME: %[[X:.*]]: tensor<?xf32>
// CHECK-NOT: qcc.cast
// CHECK: return %[[X]]
func.func @cast_same_type(%x: tensor<?xf32>) -> tensor<?xf32> {
  %y = qcc.cast %x : tensor<?xf32> to tensor<?xf32>
  return %y : tensor<?xf32>
}

// -----

// f16 -> f32 -> f16: the widening is exact, so the round trip is x.
// CHECK-LABEL: func.func @cast_round_trip(
// CHECK-SAME: %[[X:.*]]: tensor<?xf16>
// CHECK-NOT: qcc.cast
// CHECK: return %[[X]]
func.func @cast_round_trip(%x: tensor<?xf16>) -> tensor<?xf16> {
  %a = qcc.cast %x : tensor<?xf16> to tensor<?xf32>
  %b = qcc.cast %a : tensor<?xf32> to tensor<?xf16>
  return %b : tensor<?xf16>
}

// -----

// bf16 -> f32 -> f16: one cast bf16 -> f16.
// CHECK-LABEL: func.func @cast_widening_chain(
// CHECK-SAME: %[[X:.*]]: tensor<?xbf16>
// CHECK: %[[Y:.*]] = qcc.cast %[[X]] : tensor<?xbf16> to tensor<?xf16>
// CHECK-NOT: qcc.cast
// CHECK: return %[[Y]]
func.func @cast_widening_chain(%x: tensor<?xbf16>) -> tensor<?xf16> {
  %a = qcc.cast %x : tensor<?xbf16> to tensor<?xf32>
  %b = qcc.cast %a : tensor<?xf32> to tensor<?xf16>
  return %b : tensor<?xf16>
}

// -----

// Near miss: f32 -> f16 -> f32 rounds; both casts stay.
// CHECK-LABEL: func.func @cast_lossy_round_trip(
// CHECK: qcc.cast %{{.*}} : tensor<?xf32> to tensor<?xf16>
// CHECK: qcc.cast %{{.*}} : tensor<?xf16> to tensor<?xf32>
func.func @cast_lossy_round_trip(%x: tensor<?xf32>) -> tensor<?xf32> {
  %a = qcc.cast %x : tensor<?xf32> to tensor<?xf16>
  %b = qcc.cast %a : tensor<?xf16> to tensor<?xf32>
  return %b : tensor<?xf32>
}

// -----

// Reshape to the input's own (dynamic) dims, read back through Shape/Gather.
// CHECK-LABEL: func.func @reshape_identity_dynamic(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK-NOT: qcc.reshape
// CHECK: return %[[X]]
func.func @reshape_identity_dynamic(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %c64 = qcc.constant dense<64> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u1 = qcc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %t = qcc.concat %u0, %u1, %c64 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %y = qcc.reshape %x, %t : (tensor<?x?x64xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// GPT-2's input_ids: Reshape(x, [-1, seq]); the -1 can only be the batch.
// CHECK-LABEL: func.func @reshape_identity_minus_one(
// CHECK-SAME: %[[X:.*]]: tensor<?x?xi64>
// CHECK-NOT: qcc.reshape
// CHECK: return %[[X]]
func.func @reshape_identity_minus_one(%x: tensor<?x?xi64>) -> tensor<?x?xi64> {
  %c1 = qcc.constant dense<1> : tensor<i64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?xi64>) -> tensor<2xi64>
  %d1 = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %u1 = qcc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %t = qcc.concat %m1, %u1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %y = qcc.reshape %x, %t : (tensor<?x?xi64>, tensor<2xi64>) -> tensor<?x?xi64>
  return %y : tensor<?x?xi64>
}

// -----

// LLaMA's repeat_kv: Reshape(shapeVector, [-1]) of a 1-D vector.
// CHECK-LABEL: func.func @reshape_vector_minus_one(
// CHECK-SAME: %[[V:.*]]: tensor<?xi64>
// CHECK-NOT: qcc.reshape
// CHECK: return %[[V]]
func.func @reshape_vector_minus_one(%v: tensor<?xi64>) -> tensor<?xi64> {
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %y = qcc.reshape %v, %m1 : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>
  return %y : tensor<?xi64>
}

// -----

// Near miss: the target swaps the two dynamic dims.
// CHECK-LABEL: func.func @reshape_swapped_dims(
// CHECK: %[[Y:.*]] = qcc.reshape
// CHECK: return %[[Y]]
func.func @reshape_swapped_dims(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %c64 = qcc.constant dense<64> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %d1 = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u1 = qcc.unsqueeze %d1 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %t = qcc.concat %u1, %u0, %c64 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %y = qcc.reshape %x, %t : (tensor<?x?x64xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Reshape of a reshape becomes one reshape of the original input.
// CHECK-LABEL: func.func @reshape_chain(
// CHECK-SAME: %[[X:.*]]: tensor<?x64xf32>
// CHECK: %[[T:.*]] = qcc.constant dense<[-1, 4, 16]>
// CHECK: %[[Y:.*]] = qcc.reshape %[[X]], %[[T]] : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x4x16xf32>
// CHECK-NOT: qcc.reshape
// CHECK: return %[[Y]]
func.func @reshape_chain(%x: tensor<?x64xf32>) -> tensor<?x4x16xf32> {
  %s1 = qcc.constant dense<[-1, 2, 32]> : tensor<3xi64>
  %s2 = qcc.constant dense<[-1, 4, 16]> : tensor<3xi64>
  %a = qcc.reshape %x, %s1 : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x2x32xf32>
  %b = qcc.reshape %a, %s2 : (tensor<?x2x32xf32>, tensor<3xi64>) -> tensor<?x4x16xf32>
  return %b : tensor<?x4x16xf32>
}

// -----

// Near miss: the outer target has a 0, which copies a dimension of the
// intermediate (2), not of the input: both reshapes stay.
// CHECK-LABEL: func.func @reshape_chain_with_zero(
// CHECK: qcc.reshape
// CHECK: qcc.reshape
func.func @reshape_chain_with_zero(%x: tensor<?x64xf32>) -> tensor<?x2x4x8xf32> {
  %s1 = qcc.constant dense<[-1, 2, 32]> : tensor<3xi64>
  %s2 = qcc.constant dense<[-1, 0, 4, 8]> : tensor<4xi64>
  %a = qcc.reshape %x, %s1 : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x2x32xf32>
  %b = qcc.reshape %a, %s2 : (tensor<?x2x32xf32>, tensor<4xi64>) -> tensor<?x2x4x8xf32>
  return %b : tensor<?x2x4x8xf32>
}

// -----

// torch's -1 replacement before LLaMA's repeat_kv Expand:
// Where(Equal(v, ConstantOfShape(Shape(v), 1) * -1), ones, v) is v, since
// every element of v is a dimension or a positive constant. The Expand itself
// really broadcasts (1 -> 2) and stays.
// CHECK-LABEL: func.func @minus_one_replacement(
// CHECK-SAME: %[[X:.*]]: tensor<?x2x1x?x16xf32>
// CHECK-NOT: qcc.where
// CHECK-NOT: qcc.equal
// CHECK: %[[V:.*]] = qcc.concat
// CHECK: %[[E:.*]] = qcc.expand %[[X]], %[[V]]
// CHECK: return %[[E]]
func.func @minus_one_replacement(%x: tensor<?x2x1x?x16xf32>) -> tensor<?x2x?x?x16xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c3 = qcc.constant dense<3> : tensor<i64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %c16 = qcc.constant dense<16> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<i64>
  %s = qcc.shape %x : (tensor<?x2x1x?x16xf32>) -> tensor<5xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<5xi64>, tensor<i64>) -> tensor<i64>
  %d3 = qcc.gather %s, %c3 {axis = 0 : i64} : (tensor<5xi64>, tensor<i64>) -> tensor<i64>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %u3 = qcc.unsqueeze %d3 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %v = qcc.concat %u0, %c2, %c2, %u3, %c16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %vs = qcc.shape %v : (tensor<5xi64>) -> tensor<1xi64>
  %ones = qcc.constant_of_shape %vs {value = dense<1> : tensor<1xi64>} : (tensor<1xi64>) -> tensor<5xi64>
  %neg = qcc.mul %ones, %m1 : (tensor<5xi64>, tensor<i64>) -> tensor<5xi64>
  %eq = qcc.equal %v, %neg : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi1>
  %w = qcc.where %eq, %ones, %v : (tensor<5xi1>, tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  %e = qcc.expand %x, %w : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x?x?x16xf32>
  return %e : tensor<?x2x?x?x16xf32>
}

// -----

// Near miss: v comes from an argument, so an element may be -1.
// CHECK-LABEL: func.func @minus_one_replacement_unknown(
// CHECK: %[[W:.*]] = qcc.where
// CHECK: return %[[W]]
func.func @minus_one_replacement_unknown(%v: tensor<3xi64>) -> tensor<3xi64> {
  %m1 = qcc.constant dense<-1> : tensor<i64>
  %ones = qcc.constant dense<1> : tensor<3xi64>
  %neg = qcc.mul %ones, %m1 : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %eq = qcc.equal %v, %neg : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi1>
  %w = qcc.where %eq, %ones, %v : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %w : tensor<3xi64>
}

// -----

// Expand to the input's own shape (dims read back, a 1 keeps the dim).
// CHECK-LABEL: func.func @expand_identity(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK-NOT: qcc.expand
// CHECK: return %[[X]]
func.func @expand_identity(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<1xi64>
  %c64 = qcc.constant dense<64> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %t = qcc.concat %u0, %c1, %c64 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %y = qcc.expand %x, %t : (tensor<?x?x64xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Near miss: the target is another tensor's dim, which may broadcast x's.
// CHECK-LABEL: func.func @expand_other_dim(
// CHECK: %[[Y:.*]] = qcc.expand
// CHECK: return %[[Y]]
func.func @expand_other_dim(%x: tensor<?x64xf32>, %z: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c64 = qcc.constant dense<64> : tensor<1xi64>
  %c0 = qcc.constant dense<0> : tensor<i64>
  %s = qcc.shape %z : (tensor<?x64xf32>) -> tensor<2xi64>
  %d0 = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<2xi64>, tensor<i64>) -> tensor<i64>
  %u0 = qcc.unsqueeze %d0 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %t = qcc.concat %u0, %c64 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %y = qcc.expand %x, %t : (tensor<?x64xf32>, tensor<2xi64>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Slice [0 : INT64_MAX] of a dynamic dimension keeps everything.
// CHECK-LABEL: func.func @slice_identity_dynamic(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x64xf32>
// CHECK-NOT: qcc.slice
// CHECK: return %[[X]]
func.func @slice_identity_dynamic(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %start = qcc.constant dense<0> : tensor<1xi64>
  %end = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %y = qcc.slice %x, %start, %end {axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<?x?x64xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Near miss: start 1 drops the first row.
// CHECK-LABEL: func.func @slice_from_one(
// CHECK: %[[Y:.*]] = qcc.slice
// CHECK: return %[[Y]]
func.func @slice_from_one(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %start = qcc.constant dense<1> : tensor<1xi64>
  %end = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %y = qcc.slice %x, %start, %end {axes = array<i64: 1>, steps = array<i64: 1>} : (tensor<?x?x64xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x64xf32>
  return %y : tensor<?x?x64xf32>
}

// -----

// Gather(Shape(x), 2) of a static dim of a partially static x is a constant;
// so is Slice(Shape(x), -1, INT64_MAX) (GPT-2's Conv1D reads K this way).
// CHECK-LABEL: func.func @static_dim_of_dynamic_tensor(
// CHECK-DAG: %[[K:.*]] = qcc.constant dense<64> : tensor<i64>
// CHECK-DAG: %[[L:.*]] = qcc.constant dense<64> : tensor<1xi64>
// CHECK-NOT: qcc.shape
// CHECK: return %[[K]], %[[L]]
func.func @static_dim_of_dynamic_tensor(%x: tensor<?x?x64xf32>) -> (tensor<i64>, tensor<1xi64>) {
  %c2 = qcc.constant dense<2> : tensor<i64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %max = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %k = qcc.gather %s, %c2 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %l = qcc.slice %s, %m1, %max {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<3xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %k, %l : tensor<i64>, tensor<1xi64>
}

// -----

// Near miss: dim 1 is dynamic; the Gather stays.
// CHECK-LABEL: func.func @dynamic_dim_of_dynamic_tensor(
// CHECK: qcc.shape
// CHECK: %[[D:.*]] = qcc.gather
// CHECK: return %[[D]]
func.func @dynamic_dim_of_dynamic_tensor(%x: tensor<?x?x64xf32>) -> tensor<i64> {
  %c1 = qcc.constant dense<1> : tensor<i64>
  %s = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %d = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  return %d : tensor<i64>
}

// -----

// Near miss: the intermediate reshape has another user (its Shape, as after
// GPT-2's head merge); both reshapes stay for the raise passes.
// CHECK-LABEL: func.func @reshape_chain_shared(
// CHECK: %[[A:.*]] = qcc.reshape %{{.*}}, %{{.*}} : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x2x32xf32>
// CHECK: qcc.reshape %[[A]]
func.func @reshape_chain_shared(%x: tensor<?x64xf32>) -> (tensor<?x4x16xf32>, tensor<3xi64>) {
  %s1 = qcc.constant dense<[-1, 2, 32]> : tensor<3xi64>
  %s2 = qcc.constant dense<[-1, 4, 16]> : tensor<3xi64>
  %a = qcc.reshape %x, %s1 : (tensor<?x64xf32>, tensor<3xi64>) -> tensor<?x2x32xf32>
  %b = qcc.reshape %a, %s2 : (tensor<?x2x32xf32>, tensor<3xi64>) -> tensor<?x4x16xf32>
  %s = qcc.shape %a : (tensor<?x2x32xf32>) -> tensor<3xi64>
  return %b, %s : tensor<?x4x16xf32>, tensor<3xi64>
}

// -----

// Concat drops an operand that is empty along its axis.
// CHECK-LABEL: func @concat_of_empty
// CHECK-NEXT: return %arg0
func.func @concat_of_empty(%x: tensor<?x4x16xf32>, %e: tensor<?x4x0xf32>) -> tensor<?x4x16xf32> {
  %c = qcc.concat %x, %e {axis = 2 : i64} : (tensor<?x4x16xf32>, tensor<?x4x0xf32>) -> tensor<?x4x16xf32>
  return %c : tensor<?x4x16xf32>
}

// -----

// SDPA's K^T through a 3-D view is one transpose of the last two axes.
// CHECK-LABEL: func @transpose_through_merged_view
// CHECK-NEXT: %[[T:.*]] = qcc.transpose %arg0 {perm = array<i64: 0, 1, 3, 2>}
// CHECK-NEXT: return %[[T]]
func.func @transpose_through_merged_view(%x: tensor<?x4x?x16xf32>) -> tensor<?x?x16x?xf32> {
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %m2 = qcc.constant dense<-2> : tensor<1xi64>
  %lo = qcc.constant dense<-9223372036854775808> : tensor<1xi64>
  %d = qcc.constant dense<16> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %seq = qcc.slice %s, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %bh = qcc.slice %s, %lo, %m2 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %t1 = qcc.concat %m1, %seq, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %r1 = qcc.reshape %x, %t1 : (tensor<?x4x?x16xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  %tr = qcc.transpose %r1 {perm = array<i64: 0, 2, 1>} : (tensor<?x?x16xf32>) -> tensor<?x16x?xf32>
  %t2 = qcc.concat %bh, %d, %seq {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %r2 = qcc.reshape %tr, %t2 : (tensor<?x16x?xf32>, tensor<4xi64>) -> tensor<?x?x16x?xf32>
  return %r2 : tensor<?x?x16x?xf32>
}

// -----

// Two transposes are one: SDPA's K^T after the head split.
// CHECK-LABEL: func @transpose_chain
// CHECK-NEXT: %[[T:.*]] = qcc.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK-NEXT: return %[[T]]
func.func @transpose_chain(%x: tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32> {
  %h = qcc.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %h {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  return %kt : tensor<?x4x16x?xf32>
}

// -----

// One constant index is a slice of size 1 (Falcon picks its K head so);
// -1 slices to the end.
// CHECK-LABEL: func @gather_of_one_index
// CHECK-DAG: %[[M1:.*]] = qcc.constant dense<-1> : tensor<1xi64>
// CHECK-DAG: %[[END:.*]] = qcc.constant dense<9223372036854775807> : tensor<1xi64>
// CHECK: %[[S:.*]] = qcc.slice %arg0, %[[M1]], %[[END]] {axes = array<i64: 2>, steps = array<i64: 1>}
// CHECK-NEXT: return %[[S]]
func.func @gather_of_one_index(%x: tensor<?x?x6x16xf32>) -> tensor<?x?x1x16xf32> {
  %i = qcc.constant dense<-1> : tensor<1xi64>
  %g = qcc.gather %x, %i {axis = 2 : i64} : (tensor<?x?x6x16xf32>, tensor<1xi64>) -> tensor<?x?x1x16xf32>
  return %g : tensor<?x?x1x16xf32>
}

// -----

// An index that may be out of range stays a Gather (its run-time error).
// CHECK-LABEL: func @gather_of_index_out_of_range
// CHECK: qcc.gather
func.func @gather_of_index_out_of_range(%x: tensor<?x?x6x16xf32>) -> tensor<?x?x1x16xf32> {
  %i = qcc.constant dense<6> : tensor<1xi64>
  %g = qcc.gather %x, %i {axis = 2 : i64} : (tensor<?x?x6x16xf32>, tensor<1xi64>) -> tensor<?x?x1x16xf32>
  return %g : tensor<?x?x1x16xf32>
}

// -----

// Heads 4..5 of a [B, S, 6, 16] head split are features 64..80 of the packed
// projection, split into one head.
// CHECK-LABEL: func @head_slice_into_packed
// CHECK-DAG: %[[LO:.*]] = qcc.constant dense<64> : tensor<1xi64>
// CHECK-DAG: %[[HI:.*]] = qcc.constant dense<80> : tensor<1xi64>
// CHECK-DAG: %[[HD:.*]] = qcc.constant dense<[1, 16]> : tensor<2xi64>
// CHECK: %[[P:.*]] = qcc.slice %arg0, %[[LO]], %[[HI]] {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x96xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x16xf32>
// CHECK: %[[BS:.*]] = qcc.shape %[[P]] {end = 2 : i64}
// CHECK: %[[T:.*]] = qcc.concat %[[BS]], %[[HD]]
// CHECK: %[[R:.*]] = qcc.reshape %[[P]], %[[T]] : (tensor<?x?x16xf32>, tensor<4xi64>) -> tensor<?x?x1x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @head_slice_into_packed(%p: tensor<?x?x96xf32>) -> tensor<?x?x1x16xf32> {
  %hd = qcc.constant dense<[6, 16]> : tensor<2xi64>
  %lo = qcc.constant dense<-2> : tensor<1xi64>
  %hi = qcc.constant dense<-1> : tensor<1xi64>
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x96xf32>) -> tensor<2xi64>
  %t = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %h = qcc.reshape %p, %t : (tensor<?x?x96xf32>, tensor<4xi64>) -> tensor<?x?x6x16xf32>
  %s = qcc.slice %h, %lo, %hi {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x6x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x16xf32>
  return %s : tensor<?x?x1x16xf32>
}

// -----

// A reshape to the dims of a batched matmul's operands is the identity: the
// batch and row dims are the lhs's, the columns the rhs's (Falcon's
// multi-query P V, the one kv head broadcast).
// CHECK-LABEL: func @identity_reshape_of_batched_matmul
// CHECK-NEXT: %[[M:.*]] = qcc.matmul
// CHECK-NEXT: return %[[M]]
func.func @identity_reshape_of_batched_matmul(%p: tensor<?x4x?x?xf32>, %v: tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32> {
  %c = qcc.constant dense<[4]> : tensor<1xi64>
  %d = qcc.constant dense<[16]> : tensor<1xi64>
  %b = qcc.shape %p {end = 1 : i64} : (tensor<?x4x?x?xf32>) -> tensor<1xi64>
  %s = qcc.shape %p {start = 2 : i64, end = 3 : i64} : (tensor<?x4x?x?xf32>) -> tensor<1xi64>
  %t = qcc.concat %b, %c, %s, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %m = qcc.matmul %p, %v : (tensor<?x4x?x?xf32>, tensor<?x1x?x16xf32>) -> tensor<?x4x?x16xf32>
  %r = qcc.reshape %m, %t : (tensor<?x4x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  return %r : tensor<?x4x?x16xf32>
}

// -----

// GatherND of one index into axis 0 is a pick (Falcon's dynamo export), and
// a pick through a transpose moves before it: the two transposes then are
// the head transpose of a slice of the head split.
// CHECK-LABEL: func @gather_nd_pick_through_transpose
// CHECK-DAG: %[[LO:.*]] = qcc.constant dense<4> : tensor<1xi64>
// CHECK-DAG: %[[HI:.*]] = qcc.constant dense<5> : tensor<1xi64>
// CHECK: %[[S:.*]] = qcc.slice %arg0, %[[LO]], %[[HI]] {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x6x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1x16xf32>
// CHECK-NEXT: %[[T:.*]] = qcc.transpose %[[S]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-NEXT: return %[[T]]
func.func @gather_nd_pick_through_transpose(%x: tensor<?x?x6x16xf32>) -> tensor<?x1x?x16xf32> {
  %i = qcc.constant dense<-2> : tensor<1x1xi64>
  %h = qcc.transpose %x {perm = array<i64: 2, 0, 1, 3>} : (tensor<?x?x6x16xf32>) -> tensor<6x?x?x16xf32>
  %g = qcc.gather_nd %h, %i : (tensor<6x?x?x16xf32>, tensor<1x1xi64>) -> tensor<1x?x?x16xf32>
  %k = qcc.transpose %g {perm = array<i64: 1, 0, 2, 3>} : (tensor<1x?x?x16xf32>) -> tensor<?x1x?x16xf32>
  return %k : tensor<?x1x?x16xf32>
}

// -----

// A slice of more than one index stays after its transpose (rotate-half).
// CHECK-LABEL: func @half_slice_stays_after_transpose
// CHECK: qcc.transpose
// CHECK-NEXT: qcc.slice
func.func @half_slice_stays_after_transpose(%x: tensor<?x?x4x16xf32>) -> tensor<?x4x?x8xf32> {
  %lo = qcc.constant dense<0> : tensor<1xi64>
  %hi = qcc.constant dense<8> : tensor<1xi64>
  %h = qcc.transpose %x {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %s = qcc.slice %h, %lo, %hi {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<?x4x?x16xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x4x?x8xf32>
  return %s : tensor<?x4x?x8xf32>
}

// -----

// GPT-BigCode: c_attn(x).unsqueeze(1).split(...) along the features. The
// split moves under the unsqueeze (slices of the packed projection), and the
// query part's reshape to heads reads the slice itself.
// CHECK-LABEL: func.func @split_of_unsqueeze(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x96xf32>
// CHECK: %[[P:.*]]:3 = qcc.split %[[X]] {axis = 2 : i64, sizes = array<i64: 64, 16, 16>} : (tensor<?x?x96xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>)
// CHECK-DAG: qcc.unsqueeze %[[P]]#1 {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
// CHECK-DAG: qcc.unsqueeze %[[P]]#2 {axes = array<i64: 1>}
// CHECK-DAG: qcc.reshape %[[P]]#0, %{{.*}} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
func.func @split_of_unsqueeze(%x: tensor<?x?x96xf32>) -> (tensor<?x?x4x16xf32>, tensor<?x1x?x16xf32>, tensor<?x1x?x16xf32>) {
  %u = qcc.unsqueeze %x {axes = array<i64: 1>} : (tensor<?x?x96xf32>) -> tensor<?x1x?x96xf32>
  %p:3 = qcc.split %u {axis = 3 : i64, sizes = array<i64: 64, 16, 16>} : (tensor<?x1x?x96xf32>) -> (tensor<?x1x?x64xf32>, tensor<?x1x?x16xf32>, tensor<?x1x?x16xf32>)
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x96xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %s = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q = qcc.reshape %p#0, %s : (tensor<?x1x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  return %q, %p#1, %p#2 : tensor<?x?x4x16xf32>, tensor<?x1x?x16xf32>, tensor<?x1x?x16xf32>
}

// -----

// MPT's legacy export slices its fused Wqkv with constant bounds into
// [?, ?, ?] parts: the static width comes back into the type.
// CHECK-LABEL: func.func @refine_static_slice(
// CHECK: qcc.slice %{{.*}} : (tensor<?x?x192xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x64xf32>
func.func @refine_static_slice(%x: tensor<?x?x192xf32>, %s: tensor<4xi64>) -> tensor<?x?x4x16xf32> {
  %b = qcc.constant dense<64> : tensor<1xi64>
  %e = qcc.constant dense<128> : tensor<1xi64>
  %k = qcc.slice %x, %b, %e {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x192xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x?xf32>
  %r = qcc.reshape %k, %s : (tensor<?x?x?xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  return %r : tensor<?x?x4x16xf32>
}

// -----

// Constant operands evaluate with the CPU reference kernels, two results
// too (top_k: of equal values the lower index first); a non_zero's result
// size is known only when it runs, so it stays (its type is dynamic).
// CHECK-LABEL: func @evaluate_top_k_leave_non_zero
// CHECK-DAG: qcc.constant dense<5.000000e+00> : tensor<2xf32>
// CHECK-DAG: qcc.constant dense<[1, 3]> : tensor<2xi64>
// CHECK-NOT: qcc.top_k
// CHECK: %[[N:.*]] = qcc.non_zero %{{.*}} : (tensor<4xf32>) -> tensor<1x?xi64>
// CHECK: return %{{.*}}, %{{.*}}, %[[N]]
func.func @evaluate_top_k_leave_non_zero() -> (tensor<2xf32>, tensor<2xi64>, tensor<1x?xi64>) {
  %x = qcc.constant dense<[1.0, 5.0, 0.0, 5.0]> : tensor<4xf32>
  %k = qcc.constant dense<2> : tensor<1xi64>
  %v, %i = qcc.top_k %x, %k {axis = 0 : i64} : (tensor<4xf32>, tensor<1xi64>) -> (tensor<2xf32>, tensor<2xi64>)
  %n = qcc.non_zero %x : (tensor<4xf32>) -> tensor<1x?xi64>
  return %v, %i, %n : tensor<2xf32>, tensor<2xi64>, tensor<1x?xi64>
}


// -----

// A legacy MoE export's loop over `expert_hit.nonzero()`: a split of the
// positions of a 4-entry mask into 4 parts is defined only when every entry
// is set, so part e is the constant e.
// CHECK-LABEL: func @split_of_full_non_zero
// CHECK-NOT: qcc.split
// CHECK-DAG: qcc.constant dense<0> : tensor<1x1xi64>
// CHECK-DAG: qcc.constant dense<3> : tensor<1x1xi64>
func.func @split_of_full_non_zero(%m: tensor<4xi1>) -> (tensor<1x1xi64>, tensor<1x1xi64>, tensor<1x1xi64>, tensor<1x1xi64>) {
  %n = qcc.non_zero %m : (tensor<4xi1>) -> tensor<1x?xi64>
  %t = qcc.transpose %n {perm = array<i64: 1, 0>} : (tensor<1x?xi64>) -> tensor<?x1xi64>
  %p:4 = qcc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1, 1, 1>} : (tensor<?x1xi64>) -> (tensor<1x1xi64>, tensor<1x1xi64>, tensor<1x1xi64>, tensor<1x1xi64>)
  return %p#0, %p#1, %p#2, %p#3 : tensor<1x1xi64>, tensor<1x1xi64>, tensor<1x1xi64>, tensor<1x1xi64>
}

// -----

// Fewer parts than mask entries: the split is defined on other masks too
// (any two set), so it stays.
// CHECK-LABEL: func @split_of_partial_non_zero_stays
// CHECK: qcc.split
func.func @split_of_partial_non_zero_stays(%m: tensor<4xi1>) -> (tensor<1x1xi64>, tensor<1x1xi64>) {
  %n = qcc.non_zero %m : (tensor<4xi1>) -> tensor<1x?xi64>
  %t = qcc.transpose %n {perm = array<i64: 1, 0>} : (tensor<1x?xi64>) -> tensor<?x1xi64>
  %p:2 = qcc.split %t {axis = 0 : i64, sizes = array<i64: 1, 1>} : (tensor<?x1xi64>) -> (tensor<1x1xi64>, tensor<1x1xi64>)
  return %p#0, %p#1 : tensor<1x1xi64>, tensor<1x1xi64>
}

// -----

// A permutation of a linear's output features is its weight rows (and bias)
// in that order (raise-rotary gathers an interleaved rotary's q and k so).
// CHECK-LABEL: func.func @permutation_into_linear(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x2xf32>
// CHECK-DAG: %[[W:.*]] = qcc.constant dense<{{\[}}[5.000000e+00, 6.000000e+00], [1.000000e+00, 2.000000e+00], [7.000000e+00, 8.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<4x2xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<[3.000000e+01, 1.000000e+01, 4.000000e+01, 2.000000e+01]> : tensor<4xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[X]], %[[W]], %[[B]]
// CHECK-NOT: qcc.gather
// CHECK: return %[[Y]]
func.func @permutation_into_linear(%x: tensor<?x?x2xf32>) -> tensor<?x?x4xf32> {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %b = qcc.constant dense<[10.0, 20.0, 30.0, 40.0]> : tensor<4xf32>
  %y = qcc.linear %x, %w, %b : (tensor<?x?x2xf32>, tensor<4x2xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %perm = qcc.constant dense<[2, 0, 3, 1]> : tensor<4xi64>
  %g = qcc.gather %y, %perm {axis = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x4xf32>
  return %g : tensor<?x?x4xf32>
}

// -----

// A part of a fused projection (group-fused-heads' slices): rows [2, 4) are
// permuted in place; the other part reads rows [0, 2) as before. Both parts
// then become linears of their own (every user of the linear is a part).
// CHECK-LABEL: func.func @permutation_into_linear_part(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x2xf32>
// CHECK-DAG: %[[WP:.*]] = qcc.constant dense<{{\[}}[7.000000e+00, 8.000000e+00], [5.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[WA:.*]] = qcc.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[A:.*]] = qcc.linear %[[X]], %[[WA]] :
// CHECK-DAG: %[[P:.*]] = qcc.linear %[[X]], %[[WP]] :
// CHECK-NOT: qcc.gather
// CHECK: return %[[A]], %[[P]]
func.func @permutation_into_linear_part(%x: tensor<?x?x2xf32>) -> (tensor<?x?x2xf32>, tensor<?x?x2xf32>) {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %y = qcc.linear %x, %w : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %c4 = qcc.constant dense<4> : tensor<1xi64>
  %a = qcc.slice %y, %c0, %c2 {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2xf32>
  %p = qcc.slice %y, %c2, %c4 {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x4xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2xf32>
  %perm = qcc.constant dense<[1, 0]> : tensor<2xi64>
  %g = qcc.gather %p, %perm {axis = 2 : i64} : (tensor<?x?x2xf32>, tensor<2xi64>) -> tensor<?x?x2xf32>
  return %a, %g : tensor<?x?x2xf32>, tensor<?x?x2xf32>
}

// -----

// Near miss: the linear's output is also read as it is, in the model's
// order; its rows stay.
// CHECK-LABEL: func.func @permutation_of_shared_linear(
// CHECK: %[[Y:.*]] = qcc.linear
// CHECK: %[[G:.*]] = qcc.gather %[[Y]]
// CHECK: return %[[Y]], %[[G]]
func.func @permutation_of_shared_linear(%x: tensor<?x?x2xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x4xf32>) {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %y = qcc.linear %x, %w : (tensor<?x?x2xf32>, tensor<4x2xf32>) -> tensor<?x?x4xf32>
  %perm = qcc.constant dense<[2, 0, 3, 1]> : tensor<4xi64>
  %g = qcc.gather %y, %perm {axis = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x4xf32>
  return %y, %g : tensor<?x?x4xf32>, tensor<?x?x4xf32>
}

// -----

// A permutation read only for its shape is its input (raise-attention took
// the key before the permutation; the exporter still measures it for the
// mask).
// CHECK-LABEL: func.func @shape_only_permutation(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x4xf32>
// CHECK-NOT: qcc.gather
// CHECK: %[[T:.*]] = qcc.unsqueeze %[[X]]
// CHECK: %[[S:.*]] = qcc.shape %[[T]]
// CHECK: return %[[S]]
func.func @shape_only_permutation(%x: tensor<?x?x4xf32>) -> tensor<4xi64> {
  %perm = qcc.constant dense<[2, 0, 3, 1]> : tensor<4xi64>
  %g = qcc.gather %x, %perm {axis = 2 : i64} : (tensor<?x?x4xf32>, tensor<4xi64>) -> tensor<?x?x4xf32>
  %t = qcc.unsqueeze %g {axes = array<i64: 1>} : (tensor<?x?x4xf32>) -> tensor<?x1x?x4xf32>
  %s = qcc.shape %t : (tensor<?x1x?x4xf32>) -> tensor<4xi64>
  return %s : tensor<4xi64>
}

// -----

// CodeGen views its heads [B, S, 4, 16] again as [B, S, -1, 16], typed
// [?, ?, ?, 16]: the view reads the packed value directly (a head split),
// and the first view stays for the Shape read of it.
// CHECK-LABEL: func.func @retyping_view_of_head_split(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x?x64xf32>
// CHECK: %[[V:.*]] = qcc.reshape %[[P]], %{{.*}} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
// CHECK: return %[[V]]
func.func @retyping_view_of_head_split(%p: tensor<?x?x64xf32>) -> (tensor<?x?x?x16xf32>, tensor<4xi64>) {
  %bs = qcc.shape %p {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %shape = qcc.concat %bs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %p, %shape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %s = qcc.shape %r : (tensor<?x?x4x16xf32>) -> tensor<4xi64>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c2 = qcc.constant dense<2> : tensor<1xi64>
  %lead = qcc.slice %s, %c0, %c2 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %tail = qcc.constant dense<[-1, 16]> : tensor<2xi64>
  %t = qcc.concat %lead, %tail {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v = qcc.reshape %r, %t : (tensor<?x?x4x16xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
  return %v, %s : tensor<?x?x?x16xf32>, tensor<4xi64>
}

// -----

// BLOOM's baddbmm(alibi, q, k^T) on [B * H, S, D] views: q and k merged as
// [B * 4, -1, 16] (B * 4 written Mul(B, 4)), the ALiBi bias [B, 4, T] as
// [B * 4, 1, T], then un-merged to [B, 4, S, -1]: the same ops on the heads,
// the bias with its axis of 1.
// CHECK-LABEL: func.func @merged_heads_scores(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x4x?x16xf32> {{.*}}, %[[K:[^:]*]]: tensor<?x4x?x16xf32> {{.*}}, %[[A:[^:]*]]: tensor<?x4x?xf32>
// CHECK: %[[KT:.*]] = qcc.transpose %[[K]] {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
// CHECK: %[[QK:.*]] = qcc.matmul %[[Q]], %[[KT]] : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
// CHECK: %[[S:.*]] = qcc.mul %[[QK]], %{{.*}} : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
// CHECK: %[[AB:.*]] = qcc.unsqueeze %[[A]] {axes = array<i64: 2>} : (tensor<?x4x?xf32>) -> tensor<?x4x1x?xf32>
// CHECK: %[[R:.*]] = qcc.add %[[S]], %[[AB]] : (tensor<?x4x?x?xf32>, tensor<?x4x1x?xf32>) -> tensor<?x4x?x?xf32>
// CHECK-NOT: qcc.reshape
// CHECK: return %[[R]]
func.func @merged_heads_scores(%q: tensor<?x4x?x16xf32> {qcc.dim_names = ["batch", "", "seq", ""]}, %k: tensor<?x4x?x16xf32> {qcc.dim_names = ["batch", "", "seq", ""]}, %alibi: tensor<?x4x?xf32> {qcc.dim_names = ["batch", "", "seq"]}) -> tensor<?x4x?x?xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c2 = qcc.constant dense<2> : tensor<i64>
  %h = qcc.constant dense<4> : tensor<i64>
  %hv = qcc.constant dense<4> : tensor<1xi64>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %d = qcc.constant dense<16> : tensor<1xi64>
  %s = qcc.shape %q : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %b = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %sq = qcc.gather %s, %c2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %bh = qcc.mul %b, %h : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %bh1 = qcc.unsqueeze %bh {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %merge = qcc.concat %bh1, %m1, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %q3 = qcc.reshape %q, %merge : (tensor<?x4x?x16xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  %k3 = qcc.reshape %k, %merge : (tensor<?x4x?x16xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  %kt = qcc.transpose %k3 {perm = array<i64: 0, 2, 1>} : (tensor<?x?x16xf32>) -> tensor<?x16x?xf32>
  %qk = qcc.matmul %q3, %kt : (tensor<?x?x16xf32>, tensor<?x16x?xf32>) -> tensor<?x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x?x?xf32>, tensor<f32>) -> tensor<?x?x?xf32>
  %as = qcc.shape %alibi {start = 2 : i64} : (tensor<?x4x?xf32>) -> tensor<1xi64>
  %amerge = qcc.concat %bh1, %one, %as {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %a3 = qcc.reshape %alibi, %amerge : (tensor<?x4x?xf32>, tensor<3xi64>) -> tensor<?x1x?xf32>
  %sb = qcc.add %sc, %a3 : (tensor<?x?x?xf32>, tensor<?x1x?xf32>) -> tensor<?x?x?xf32>
  %b1 = qcc.unsqueeze %b {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %sq1 = qcc.unsqueeze %sq {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %unmerge = qcc.concat %b1, %hv, %sq1, %m1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %r = qcc.reshape %sb, %unmerge : (tensor<?x?x?xf32>, tensor<4xi64>) -> tensor<?x4x?x?xf32>
  return %r : tensor<?x4x?x?xf32>
}

// -----

// bmm(probs, v) on merged heads, un-merged to [N / 4, 4, S, 16] read from
// the product's own shape: that shape is computed from the heads' (N / 4
// folds to B), so no [B * H, S, D] op is left.
// CHECK-LABEL: func.func @merged_heads_values(
// CHECK-SAME: %[[P:[^:]*]]: tensor<?x4x?x?xf32> {{.*}}, %[[V:[^:]*]]: tensor<?x4x?x16xf32>
// CHECK: %[[PV:.*]] = qcc.matmul %[[P]], %[[V]] : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
// CHECK-NEXT: return %[[PV]]
func.func @merged_heads_values(%p: tensor<?x4x?x?xf32> {qcc.dim_names = ["batch", "", "seq", "seq"]}, %v: tensor<?x4x?x16xf32> {qcc.dim_names = ["batch", "", "seq", ""]}) -> tensor<?x4x?x16xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %c2 = qcc.constant dense<2> : tensor<i64>
  %h = qcc.constant dense<4> : tensor<i64>
  %hv = qcc.constant dense<4> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %d = qcc.constant dense<16> : tensor<1xi64>
  %s = qcc.shape %p : (tensor<?x4x?x?xf32>) -> tensor<4xi64>
  %b = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %sq = qcc.gather %s, %c2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %bh = qcc.mul %b, %h : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %bh1 = qcc.unsqueeze %bh {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %sq1 = qcc.unsqueeze %sq {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %pmerge = qcc.concat %bh1, %sq1, %m1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %vmerge = qcc.concat %bh1, %m1, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %p3 = qcc.reshape %p, %pmerge : (tensor<?x4x?x?xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %v3 = qcc.reshape %v, %vmerge : (tensor<?x4x?x16xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  %pv = qcc.matmul %p3, %v3 : (tensor<?x?x?xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
  %ps = qcc.shape %pv : (tensor<?x?x16xf32>) -> tensor<3xi64>
  %n = qcc.gather %ps, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %rows = qcc.gather %ps, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %b2 = qcc.div %n, %h : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %b21 = qcc.unsqueeze %b2 {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %rows1 = qcc.unsqueeze %rows {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %unmerge = qcc.concat %b21, %hv, %rows1, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %o = qcc.reshape %pv, %unmerge : (tensor<?x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  return %o : tensor<?x4x?x16xf32>
}

// -----

// Near miss: the merged count is a value the function is given, not B * 4
// (and S is inferred), so the merge may not be per head: nothing changes.
// CHECK-LABEL: func.func @merged_heads_unproven(
// CHECK: qcc.matmul %{{.*}}, %{{.*}} : (tensor<?x?x16xf32>, tensor<?x16x?xf32>) -> tensor<?x?x?xf32>
// CHECK: qcc.reshape %{{.*}}, %{{.*}} : (tensor<?x?x?xf32>, tensor<4xi64>) -> tensor<?x4x?x?xf32>
func.func @merged_heads_unproven(%q: tensor<?x4x?x16xf32> {qcc.dim_names = ["batch", "", "seq", ""]}, %k: tensor<?x4x?x16xf32> {qcc.dim_names = ["batch", "", "seq", ""]}, %n: tensor<1xi64>) -> tensor<?x4x?x?xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c2 = qcc.constant dense<2> : tensor<i64>
  %hv = qcc.constant dense<4> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %d = qcc.constant dense<16> : tensor<1xi64>
  %s = qcc.shape %q : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %b = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %sq = qcc.gather %s, %c2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %merge = qcc.concat %n, %m1, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %q3 = qcc.reshape %q, %merge : (tensor<?x4x?x16xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  %k3 = qcc.reshape %k, %merge : (tensor<?x4x?x16xf32>, tensor<3xi64>) -> tensor<?x?x16xf32>
  %kt = qcc.transpose %k3 {perm = array<i64: 0, 2, 1>} : (tensor<?x?x16xf32>) -> tensor<?x16x?xf32>
  %qk = qcc.matmul %q3, %kt : (tensor<?x?x16xf32>, tensor<?x16x?xf32>) -> tensor<?x?x?xf32>
  %b1 = qcc.unsqueeze %b {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %sq1 = qcc.unsqueeze %sq {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %unmerge = qcc.concat %b1, %hv, %sq1, %m1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %r = qcc.reshape %qk, %unmerge : (tensor<?x?x?xf32>, tensor<4xi64>) -> tensor<?x4x?x?xf32>
  return %r : tensor<?x4x?x?xf32>
}

// -----

// Falcon's legacy export: k [B, S, 2, 1, 16] expanded to [B, S, 2, 2, 16]
// and viewed as [B, S, -1, 16] comes out [?, ?, ?, 16]; the types take the
// static sizes, and the later view of the transposed heads as [B, 4, S, 16]
// is an identity.
// CHECK-LABEL: func.func @refine_repeated_heads_view(
// CHECK: %[[E:.*]] = qcc.expand %{{.*}} : (tensor<?x?x2x1x16xf32>, tensor<5xi64>) -> tensor<?x?x2x2x16xf32>
// CHECK: %[[V:.*]] = qcc.reshape %[[E]], %{{.*}} : (tensor<?x?x2x2x16xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
// CHECK: %[[T:.*]] = qcc.transpose %[[V]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
// CHECK-NEXT: return %[[T]]
func.func @refine_repeated_heads_view(%k: tensor<?x?x2x1x16xf32> {qcc.dim_names = ["batch", "seq", "", "", ""]}, %q: tensor<?x?x4x16xf32> {qcc.dim_names = ["batch", "seq", "", ""]}) -> tensor<?x4x?x16xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %two = qcc.constant dense<2> : tensor<1xi64>
  %hv = qcc.constant dense<4> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %d = qcc.constant dense<16> : tensor<1xi64>
  %lo = qcc.constant dense<0> : tensor<1xi64>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x2x1x16xf32>) -> tensor<2xi64>
  %et = qcc.concat %ks, %two, %two, %d {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %e = qcc.expand %k, %et : (tensor<?x?x2x1x16xf32>, tensor<5xi64>) -> tensor<?x?x2x?x16xf32>
  %es = qcc.shape %e : (tensor<?x?x2x?x16xf32>) -> tensor<5xi64>
  %bs = qcc.slice %es, %lo, %two {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<5xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %vt = qcc.concat %bs, %m1, %d {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %v = qcc.reshape %e, %vt : (tensor<?x?x2x?x16xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
  %t = qcc.transpose %v {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32>
  %qs = qcc.shape %q : (tensor<?x?x4x16xf32>) -> tensor<4xi64>
  %b = qcc.gather %qs, %c0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %s = qcc.gather %qs, %c1 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %b1 = qcc.unsqueeze %b {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %s1 = qcc.unsqueeze %s {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ht = qcc.concat %b1, %hv, %s1, %d {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %h = qcc.reshape %t, %ht : (tensor<?x?x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  return %h : tensor<?x4x?x16xf32>
}

// -----

// Near miss: a view read by arithmetic keeps its type (the Add's was
// inferred from it).
// CHECK-LABEL: func.func @refine_view_type_read_by_add(
// CHECK: qcc.reshape %{{.*}} : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
func.func @refine_view_type_read_by_add(%x: tensor<?x?x64xf32>, %y: tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32> {
  %hd = qcc.constant dense<[-1, 16]> : tensor<2xi64>
  %s = qcc.shape %x {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %t = qcc.concat %s, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %r = qcc.reshape %x, %t : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
  %a = qcc.add %r, %y : (tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32>
  return %a : tensor<?x?x?x16xf32>
}

// -----

// Hugging Face's attention output `reshape(*input_shape, -1)` before o_proj:
// the batch and sequence sizes read off the layer's input, the last one
// inferred. The linear reading it checks only that sizes agree, so the view
// takes its input's type and folds away with the shape arithmetic (decode
// steps then have no host node).
// CHECK-LABEL: func.func @o_proj_input_view(
// CHECK-SAME: %[[X:.*]]: tensor<?x?x128xf32>
// CHECK-NOT: qcc.reshape
// CHECK-NOT: qcc.shape
// CHECK: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x128xf32>, tensor<64x128xf32>)
func.func @o_proj_input_view(%x: tensor<?x?x128xf32>, %w: tensor<128x128xf32>, %wo: tensor<64x128xf32>) -> tensor<?x?x64xf32> {
  %c0 = qcc.constant dense<0> : tensor<i64>
  %c1 = qcc.constant dense<1> : tensor<i64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %s = qcc.shape %x : (tensor<?x?x128xf32>) -> tensor<3xi64>
  %b = qcc.gather %s, %c0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %l = qcc.gather %s, %c1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %a = qcc.linear %x, %w : (tensor<?x?x128xf32>, tensor<128x128xf32>) -> tensor<?x?x128xf32>
  %b1 = qcc.unsqueeze %b {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %l1 = qcc.unsqueeze %l {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %t = qcc.concat %b1, %l1, %m1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<3xi64>
  %v = qcc.reshape %a, %t : (tensor<?x?x128xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  %o = qcc.linear %v, %wo : (tensor<?x?x?xf32>, tensor<64x128xf32>) -> tensor<?x?x64xf32>
  return %o : tensor<?x?x64xf32>
}

// -----

// A fused projection read only through constant last-axis parts (BLOOM's
// query_key_value after group-fused-heads): one linear per part, over its
// rows of the weight and the bias; no strided copy of the fused result.
// CHECK-LABEL: func.func @slices_into_linears(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x2xf32>
// CHECK-DAG: %[[W0:.*]] = qcc.constant dense<{{\[}}[1.000000e+00, 2.000000e+00]]> : tensor<1x2xf32>
// CHECK-DAG: %[[B0:.*]] = qcc.constant dense<1.000000e+01> : tensor<1xf32>
// CHECK-DAG: %[[W1:.*]] = qcc.constant dense<{{\[}}[3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
// CHECK-DAG: %[[B1:.*]] = qcc.constant dense<[2.000000e+01, 3.000000e+01]> : tensor<2xf32>
// CHECK-DAG: %[[Q:.*]] = qcc.linear %[[X]], %[[W0]], %[[B0]] :
// CHECK-DAG: %[[K:.*]] = qcc.linear %[[X]], %[[W1]], %[[B1]] :
// CHECK-NOT: qcc.slice
// CHECK: return %[[Q]], %[[K]]
func.func @slices_into_linears(%x: tensor<?x?x2xf32>) -> (tensor<?x?x1xf32>, tensor<?x?x2xf32>) {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %b = qcc.constant dense<[10.0, 20.0, 30.0]> : tensor<3xf32>
  %y = qcc.linear %x, %w, %b : (tensor<?x?x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<?x?x3xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c1 = qcc.constant dense<1> : tensor<1xi64>
  %end = qcc.constant dense<9223372036854775807> : tensor<1xi64>
  %q = qcc.slice %y, %c0, %c1 {axes = array<i64: -1>, steps = array<i64: 1>} : (tensor<?x?x3xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1xf32>
  %k = qcc.slice %y, %c1, %end {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x3xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x2xf32>
  return %q, %k : tensor<?x?x1xf32>, tensor<?x?x2xf32>
}

// -----

// Near miss: the fused result is also read whole; the linear and its part
// stay (splitting would compute the part's rows twice).
// CHECK-LABEL: func.func @slice_of_linear_read_whole(
// CHECK: %[[Y:.*]] = qcc.linear
// CHECK: %[[P:.*]] = qcc.slice %[[Y]]
// CHECK: return %[[Y]], %[[P]]
func.func @slice_of_linear_read_whole(%x: tensor<?x?x2xf32>) -> (tensor<?x?x3xf32>, tensor<?x?x1xf32>) {
  %w = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %y = qcc.linear %x, %w : (tensor<?x?x2xf32>, tensor<3x2xf32>) -> tensor<?x?x3xf32>
  %c0 = qcc.constant dense<0> : tensor<1xi64>
  %c1 = qcc.constant dense<1> : tensor<1xi64>
  %p = qcc.slice %y, %c0, %c1 {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<?x?x3xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<?x?x1xf32>
  return %y, %p : tensor<?x?x3xf32>, tensor<?x?x1xf32>
}
