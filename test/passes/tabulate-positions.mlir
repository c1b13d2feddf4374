// RUN: qcc-opt %s --pass-pipeline='builtin.module(func.func(tabulate-positions))' --split-input-file | FileCheck %s

// A Hugging Face rotary's cos and sin of the positions (positions x
// inv_freq, duplicated, cos / sin) become [max_positions, D] tables read with
// qcc.embedding; the ops computing them go. Row p of the cos table is
// cos(p * inv_freq) (row 1: cos(1) = 0.540302277, cos(0.1) = 0.995004177).
// CHECK-LABEL: func.func @decode(
// CHECK-DAG: %[[COS:.*]] = qcc.constant dense<{{\[\[}}1.000000e+00, 1.000000e+00, 1.000000e+00, 1.000000e+00], [0.540302277, 0.995004177, 0.540302277, 0.995004177],{{.*}}> : tensor<8x4xf32>
// CHECK-DAG: %[[SIN:.*]] = qcc.constant dense<{{\[\[}}0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.841470957, 0.0998334214,{{.*}}> : tensor<8x4xf32>
// CHECK-NOT: qcc.cos
// CHECK-NOT: qcc.sin
// CHECK-NOT: qcc.cast
// CHECK: %[[C:.*]] = qcc.embedding %[[COS]], %arg1 : (tensor<8x4xf32>, tensor<?x1xi64>) -> tensor<?x?x4xf32>
// CHECK: %[[S:.*]] = qcc.embedding %[[SIN]], %arg1 : (tensor<8x4xf32>, tensor<?x1xi64>) -> tensor<?x?x4xf32>
// CHECK: qcc.rotary %arg0, %[[C]], %[[S]] {head_dim = 4 : i64}
module attributes {qcc.kv_cache = {block_tokens = 16 : i64, dtype = "f32", head_dim = 4 : i64, kv_heads = 1 : i64, layers = 1 : i64, layout = "paged", max_positions = 8 : i64}} {
func.func @decode(%q: tensor<?x1x4xf32>, %pos: tensor<?x1xi64> {qcc.name = "positions"}) -> tensor<?x1x4xf32> attributes {qcc.tokens_per_row = 1 : i64} {
  %inv = qcc.constant dense<[1.0, 0.1]> : tensor<2xf32>
  %u = qcc.unsqueeze %pos {axes = array<i64: 2>} : (tensor<?x1xi64>) -> tensor<?x?x1xi64>
  %f = qcc.cast %u : tensor<?x?x1xi64> to tensor<?x?x1xf32>
  %a = qcc.mul %f, %inv : (tensor<?x?x1xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %e = qcc.concat %a, %a {axis = 2 : i64} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x4xf32>
  %c = qcc.cos %e : tensor<?x?x4xf32>
  %s = qcc.sin %e : tensor<?x?x4xf32>
  %r = qcc.rotary %q, %c, %s {head_dim = 4 : i64} : (tensor<?x1x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x1x4xf32>
  return %r : tensor<?x1x4xf32>
}
}

// -----

// Near misses: a value that mixes the positions of a row (a sum over the
// sequence axis is not one row per position) stays, and so does what only
// it reads; so does everything outside an entry point with positions or a
// module without a KV cache (below).
// CHECK-LABEL: func.func @decode(
// CHECK: qcc.cast
// CHECK: qcc.reduce_sum
// CHECK-NOT: qcc.embedding
module attributes {qcc.kv_cache = {block_tokens = 16 : i64, dtype = "f32", head_dim = 4 : i64, kv_heads = 1 : i64, layers = 1 : i64, layout = "paged", max_positions = 8 : i64}} {
func.func @decode(%q: tensor<?x1x4xf32>, %pos: tensor<?x1xi64> {qcc.name = "positions"}) -> tensor<?x1x4xf32> {
  %inv = qcc.constant dense<[1.0, 0.1, 0.01, 0.001]> : tensor<4xf32>
  %u = qcc.unsqueeze %pos {axes = array<i64: 2>} : (tensor<?x1xi64>) -> tensor<?x?x1xi64>
  %f = qcc.cast %u : tensor<?x?x1xi64> to tensor<?x?x1xf32>
  %a = qcc.mul %f, %inv : (tensor<?x?x1xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %sum = qcc.reduce_sum %a {axes = array<i64: 1>, keepdims = true} : (tensor<?x?x4xf32>) -> tensor<?x1x4xf32>
  %r = qcc.add %sum, %q : (tensor<?x1x4xf32>, tensor<?x1x4xf32>) -> tensor<?x1x4xf32>
  return %r : tensor<?x1x4xf32>
}
}

// -----

// CHECK-LABEL: func.func @no_cache(
// CHECK: qcc.cos
module {
func.func @no_cache(%pos: tensor<?x1xi64> {qcc.name = "positions"}) -> tensor<?x?x2xf32> {
  %inv = qcc.constant dense<[1.0, 0.1]> : tensor<2xf32>
  %u = qcc.unsqueeze %pos {axes = array<i64: 2>} : (tensor<?x1xi64>) -> tensor<?x?x1xi64>
  %f = qcc.cast %u : tensor<?x?x1xi64> to tensor<?x?x1xf32>
  %a = qcc.mul %f, %inv : (tensor<?x?x1xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %c = qcc.cos %a : tensor<?x?x2xf32>
  return %c : tensor<?x?x2xf32>
}
}
