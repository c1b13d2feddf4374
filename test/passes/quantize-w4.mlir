// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=2 method=rtn" --split-input-file | FileCheck %s --check-prefix=RTN
// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=2" --split-input-file | FileCheck %s --check-prefix=GPTQ
// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=2 act-order=true" --split-input-file | FileCheck %s --check-prefix=ACT
// RUN: qcc-opt %s --quantize-w4="group-size=2" --split-input-file | FileCheck %s --check-prefix=BLOCKS
// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=4 method=rtn asymmetric=true" --split-input-file | FileCheck %s --check-prefix=ARTN
// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=4 asymmetric=true" --split-input-file | FileCheck %s --check-prefix=AGPTQ
// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=4 act-order=true asymmetric=true" --split-input-file | FileCheck %s --check-prefix=AACT
// RUN: qcc-opt %s --quantize-w4="group-size=2 method=rtn int8-activations=true" --split-input-file | FileCheck %s --check-prefix=A8
// The K % group-size warning (and nothing else) with all-linears:
// RUN: qcc-opt %s --quantize-w4="all-linears=true group-size=2 method=rtn" --split-input-file --verify-diagnostics -o /dev/null

// One row W = [1.4, -0.5, 0.3, 0.1], groups of 2, H = X^T X with inputs 1
// and 2 correlated (H_12 = 0.9) and diag H = [0.5, 1, 2, 0.8]. Each value
// below was also computed by an independent numpy GPTQ (the structure of
// the paper's reference code, symmetric int4 in [-7, 7], f16 scales).
//  - rtn: group 0 s = f16(1.4 / 7) = 0.19995, q = [7, -3] (-0.5 / 0.19995
//    = -2.5006 rounds to -3): byte 0x7 | 0xD << 4 = 0xD7 = -41; group 1
//    s = f16(0.3 / 7) = 0.042847, q = [7, 2]: byte 0x27 = 39.
//  - gptq: the same q, but w_1's rounding error (-0.5 + 0.59985) / U_11
//    moves onto w_2 through H_12 (0.3 -> 0.345), so group 1's scale is
//    computed from the updated weight: 0.049255. The error
//    (w - w')^T H (w - w') is 0.0059 against rtn's 0.0101.
//  - act-order: columns by descending H_jj: perm [2, 1, 3, 0]; stored
//    groups {2, 1} and {3, 0}: q = [4, -7] and [1, 7] (bytes 0x94 = -108,
//    0x71 = 113), scales 0.071411, 0.19995.
// RTN-LABEL: func.func @methods(
// RTN-DAG: %[[P:.*]] = qcc.constant dense<{{\[\[}}-41, 39]]> : tensor<1x2xi8>
// RTN-DAG: %[[S:.*]] = qcc.constant dense<{{\[\[}}1.999510e-01, 4.284670e-02]]> : tensor<1x2xf16>
// RTN: %[[W:.*]] = qcc.weight_int4 %[[P]], %[[S]] group_size 2 : (tensor<1x2xi8>, tensor<1x2xf16>) -> tensor<1x4xf32>
// RTN: qcc.linear %arg0, %[[W]] : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x1xf32>
// RTN-NOT: qcc.input_gram
// GPTQ-LABEL: func.func @methods(
// GPTQ-DAG: qcc.constant dense<{{\[\[}}-41, 39]]> : tensor<1x2xi8>
// GPTQ-DAG: qcc.constant dense<{{\[\[}}1.999510e-01, 4.925540e-02]]> : tensor<1x2xf16>
// GPTQ-NOT: qcc.input_gram
// ACT-LABEL: func.func @methods(
// ACT-DAG: %[[P:.*]] = qcc.constant dense<{{\[\[}}-108, 113]]> : tensor<1x2xi8>
// ACT-DAG: %[[S:.*]] = qcc.constant dense<{{\[\[}}7.141110e-02, 1.999510e-01]]> : tensor<1x2xf16>
// ACT-DAG: %[[R:.*]] = qcc.constant dense<[2, 1, 3, 0]> : tensor<4xi32>
// ACT: qcc.weight_int4 %[[P]], %[[S]], %[[R]] group_size 2 : (tensor<1x2xi8>, tensor<1x2xf16>, tensor<4xi32>) -> tensor<1x4xf32>
// Outside a transformer block (no attention or norm after it: an LM head)
// the linear stays float unless all-linears.
// BLOCKS-LABEL: func.func @methods(
// BLOCKS-NOT: qcc.weight_int4
// BLOCKS: qcc.linear %arg0, %{{.*}} : (tensor<?x4xf32>, tensor<1x4xf32>)
func.func @methods(%x: tensor<?x4xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<[[1.4, -0.5, 0.3, 0.1]]> : tensor<1x4xf32>
  %y = qcc.linear %x, %w {qcc.input_gram = dense<[[0.5, 0.0, 0.0, 0.0], [0.0, 1.0, 0.9, 0.0], [0.0, 0.9, 2.0, 0.0], [0.0, 0.0, 0.0, 0.8]]> : tensor<4x4xf64>} : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// Inside a block (the q/k/v projection feeding an attention; its output
// projection) the default quantizes the linear; a K that the group size does
// not divide stays float with a warning; the LM head stays float.
// BLOCKS-LABEL: func.func @block(
// BLOCKS: %[[QKV:.*]] = qcc.weight_int4 %{{.*}}, %{{.*}} group_size 2 : (tensor<4x2xi8>, tensor<4x2xf16>) -> tensor<4x4xf32>
// BLOCKS: qcc.linear %{{.*}}, %[[QKV]]
// BLOCKS: %[[O:.*]] = qcc.weight_int4
// BLOCKS: qcc.linear %{{.*}}, %[[O]]
// BLOCKS-NOT: qcc.weight_int4
// BLOCKS: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x3xf32>, tensor<4x3xf32>)
// BLOCKS-NOT: qcc.weight_int4
// BLOCKS: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<8x4xf32>)
// W4A8 (int8-activations): each int4 linear reads its input as per-token
// int8 codes read back (a quantize with an f32 result); the linears that
// stay float (K = 3, the LM head) read theirs as they were.
// A8-LABEL: func.func @block(
// A8: %[[QKV:.*]] = qcc.weight_int4
// A8: %[[XQ:[^,]*]], %{{.*}}, %{{.*}} = qcc.quantize %arg0 {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x?x4xf32>) -> (tensor<?x?x4xf32>, tensor<?x?x1xf32>, tensor<?x?x1xi32>)
// A8: %[[Q:.*]] = qcc.linear %[[XQ]], %[[QKV]]
// A8: %[[A:.*]] = qcc.attention %[[Q]], %[[Q]], %[[Q]]
// A8: %[[AQ:[^,]*]], %{{.*}}, %{{.*}} = qcc.quantize %[[A]]
// A8: qcc.linear %[[AQ]], %{{.*}} : (tensor<?x?x4xf32>, tensor<4x4xf32>)
// A8-NOT: qcc.quantize
// A8: qcc.linear %arg1, %{{.*}} : (tensor<?x?x3xf32>, tensor<4x3xf32>)
// A8-NOT: qcc.quantize
// A8: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x4xf32>, tensor<8x4xf32>)
func.func @block(%x: tensor<?x?x4xf32>, %x3: tensor<?x?x3xf32>, %g: tensor<4xf32>) -> tensor<?x?x8xf32> {
  %wq = qcc.constant dense<0.5> : tensor<4x4xf32>
  %q = qcc.linear %x, %wq {qcc.input_gram = dense<[[0.5, 0.0, 0.0, 0.0], [0.0, 1.0, 0.9, 0.0], [0.0, 0.9, 2.0, 0.0], [0.0, 0.0, 0.0, 0.8]]> : tensor<4x4xf64>} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
  %a = qcc.attention %q, %q, %q {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 0.5 : f32, causal = true} : (tensor<?x?x4xf32>, tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %wo = qcc.constant dense<0.25> : tensor<4x4xf32>
  %o = qcc.linear %a, %wo {qcc.input_gram = dense<[[0.5, 0.0, 0.0, 0.0], [0.0, 1.0, 0.9, 0.0], [0.0, 0.9, 2.0, 0.0], [0.0, 0.0, 0.0, 0.8]]> : tensor<4x4xf64>} : (tensor<?x?x4xf32>, tensor<4x4xf32>) -> tensor<?x?x4xf32>
  %w3 = qcc.constant dense<0.125> : tensor<4x3xf32>
  // expected-warning @+1 {{quantize-w4: a linear stays float: K = 3 is not a multiple of the group size 2}}
  %y3 = qcc.linear %x3, %w3 : (tensor<?x?x3xf32>, tensor<4x3xf32>) -> tensor<?x?x4xf32>
  %r = qcc.add %o, %y3 : (tensor<?x?x4xf32>, tensor<?x?x4xf32>) -> tensor<?x?x4xf32>
  %n = qcc.rms_norm %r, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x4xf32>, tensor<4xf32>) -> tensor<?x?x4xf32>
  %wh = qcc.constant dense<1.0> : tensor<8x4xf32>
  %h = qcc.linear %n, %wh {qcc.input_gram = dense<[[0.5, 0.0, 0.0, 0.0], [0.0, 1.0, 0.9, 0.0], [0.0, 0.9, 2.0, 0.0], [0.0, 0.0, 0.0, 0.8]]> : tensor<4x4xf64>} : (tensor<?x?x4xf32>, tensor<8x4xf32>) -> tensor<?x?x8xf32>
  return %h : tensor<?x?x8xf32>
}

// -----

// Asymmetric (scale + min), one group of 4: W = [1.4, 0.43, 0.3, -0.5] with
// the H above; values checked by the same independent numpy GPTQ.
//  - rtn: m = f16(-0.5) = -0.5, s = f16(1.9 / 15) = 0.126709, u =
//    round((w - m) / s) = [15, 7, 6, 0]: bytes 0x7F = 127, 0x06 = 6.
//  - gptq: the same codes (w_1's error moves w_2 by too little to change
//    its code).
//  - act-order: perm [2, 1, 3, 0]; w_2 = 0.3 -> u = 6 first, its error
//    moves w_1 up (H_12) from 0.43 to a code of 8: u = [6, 8, 0, 15] in the
//    stored order (bytes 0x86 = -122, 0xF0 = -16); the error
//    (w - w')^T H (w - w') is 0.0042 against rtn's 0.0081.
// ARTN-LABEL: func.func @asymmetric(
// ARTN-DAG: %[[P:.*]] = qcc.constant dense<{{\[\[}}127, 6]]> : tensor<1x2xi8>
// ARTN-DAG: %[[S:.*]] = qcc.constant dense<1.267090e-01> : tensor<1x1xf16>
// ARTN-DAG: %[[O:.*]] = qcc.constant dense<-5.000000e-01> : tensor<1x1xf16>
// ARTN: %[[W:.*]] = qcc.weight_int4 %[[P]], %[[S]] offsets %[[O]] group_size 4 : (tensor<1x2xi8>, tensor<1x1xf16>, tensor<1x1xf16>) -> tensor<1x4xf32>
// ARTN: qcc.linear %arg0, %[[W]]
// AGPTQ-LABEL: func.func @asymmetric(
// AGPTQ-DAG: qcc.constant dense<{{\[\[}}127, 6]]> : tensor<1x2xi8>
// AGPTQ-DAG: qcc.constant dense<-5.000000e-01> : tensor<1x1xf16>
// AGPTQ: qcc.weight_int4 %{{.*}}, %{{.*}} offsets %{{.*}} group_size 4
// AACT-LABEL: func.func @asymmetric(
// AACT-DAG: %[[P:.*]] = qcc.constant dense<{{\[\[}}-122, -16]]> : tensor<1x2xi8>
// AACT-DAG: %[[S:.*]] = qcc.constant dense<1.267090e-01> : tensor<1x1xf16>
// AACT-DAG: %[[O:.*]] = qcc.constant dense<-5.000000e-01> : tensor<1x1xf16>
// AACT-DAG: %[[R:.*]] = qcc.constant dense<[2, 1, 3, 0]> : tensor<4xi32>
// AACT: qcc.weight_int4 %[[P]], %[[S]], %[[R]] offsets %[[O]] group_size 4 : (tensor<1x2xi8>, tensor<1x1xf16>, tensor<4xi32>, tensor<1x1xf16>) -> tensor<1x4xf32>
func.func @asymmetric(%x: tensor<?x4xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<[[1.4, 0.43, 0.3, -0.5]]> : tensor<1x4xf32>
  %y = qcc.linear %x, %w {qcc.input_gram = dense<[[0.5, 0.0, 0.0, 0.0], [0.0, 1.0, 0.9, 0.0], [0.0, 0.9, 2.0, 0.0], [0.0, 0.0, 0.0, 0.8]]> : tensor<4x4xf64>} : (tensor<?x4xf32>, tensor<1x4xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// A mixture-of-experts router (its logits reach top_k through softmax)
// keeps its float weight even with all-linears.
// RTN-LABEL: func.func @router_stays_float(
// RTN-NOT: qcc.weight_int4
// RTN: qcc.top_k
func.func @router_stays_float(%x: tensor<?x4xf32>) -> (tensor<?x2xf32>, tensor<?x2xi64>) {
  %wr = qcc.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [1.0, -2.0, 3.0, -4.0], [5.0, -6.0, 7.0, -8.0]]> : tensor<4x4xf32>
  %k = qcc.constant dense<2> : tensor<1xi64>
  %logits = qcc.linear %x, %wr : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %p = qcc.softmax %logits {axis = 1 : i64} : tensor<?x4xf32>
  %v, %i = qcc.top_k %p, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  return %v, %i : tensor<?x2xf32>, tensor<?x2xi64>
}
