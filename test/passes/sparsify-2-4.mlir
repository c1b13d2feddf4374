// RUN: qcc-opt %s --sparsify-2-4="all-linears=true" --split-input-file | FileCheck %s --check-prefix=MAG
// RUN: qcc-opt %s --sparsify-2-4="all-linears=true method=wanda" --split-input-file | FileCheck %s --check-prefix=WANDA
// RUN: qcc-opt %s --sparsify-2-4="all-linears=true method=sparsegpt" --split-input-file | FileCheck %s --check-prefix=SGPT
// RUN: qcc-opt %s --sparsify-2-4 --split-input-file | FileCheck %s --check-prefix=BLOCKS
// RUN: qcc-opt %s --sparsify-2-4="exclude=0" --split-input-file | FileCheck %s --check-prefix=EXCL0
// RUN: qcc-opt %s --sparsify-2-4="exclude=o_*" --split-input-file | FileCheck %s --check-prefix=EXCLNAME
// The K % 32 warning (and nothing else) with all-linears:
// RUN: qcc-opt %s --sparsify-2-4="all-linears=true" --split-input-file --verify-diagnostics -o /dev/null

// One row, K = 32, group 0 = [2.0, 2.5, 1.0, 1.2], the other groups zero
// (ties keep positions 0 and 1: nibble 0x4, so the metadata word is
// 0x4444444X with X group 0's nibble).
//  - magnitude keeps the two largest |w|: k = 0, 1 (0x4: 0x44444444 =
//    1145324612), values [2.0, 2.5];
//  - wanda with ||X|| = [1, 1, 4, 1, ...] scores [2, 2.5, 4, 1.2]: k = 1, 2
//    (0x9: 1145324617), values [2.5, 1.0];
//  - sparsegpt with H = I except H_01 = H_10 = 0.95 (channels 0 and 1
//    nearly equal): damp 0.01, U = chol((H + 0.01 I)^-1)^T; scores
//    w^2 / U_jj^2 = [0.47, 6.31, 1.01, 1.45] keep k = 1, 3 (0xD:
//    1145324621); pruning w_0 = 2 moves 2 * 0.95 / 1.01 = 1.881188 onto
//    w_1 (2.5 -> 4.381188), channel 2 (uncorrelated) is pruned, w_3 kept.
//    Reconstruction error (w - w')^T H (w - w'): 1.39 against magnitude's
//    2.44.
// MAG-LABEL: func.func @methods(
// MAG-DAG: %[[V:.*]] = qcc.constant dense<{{\[\[}}2.000000e+00, 2.500000e+00, 0.000000e+00, 0.000000e+00, {{.*}}]]> : tensor<1x16xf32>
// MAG-DAG: %[[M:.*]] = qcc.constant dense<1145324612> : tensor<1x1xi32>
// MAG: %[[S:.*]] = qcc.sparse_2_4 %[[V]], %[[M]] : (tensor<1x16xf32>, tensor<1x1xi32>) -> tensor<1x32xf32>
// MAG: qcc.linear %arg0, %[[S]] : (tensor<?x32xf32>, tensor<1x32xf32>) -> tensor<?x1xf32>
// MAG-NOT: qcc.input_
// WANDA-LABEL: func.func @methods(
// WANDA-DAG: qcc.constant dense<{{\[\[}}2.500000e+00, 1.000000e+00, 0.000000e+00, {{.*}}]]> : tensor<1x16xf32>
// WANDA-DAG: qcc.constant dense<1145324617> : tensor<1x1xi32>
// SGPT-LABEL: func.func @methods(
// SGPT-DAG: qcc.constant dense<{{\[\[}}4.38118{{[0-9]*}}, 1.200000e+00, 0.000000e+00, {{.*}}]]> : tensor<1x16xf32>
// SGPT-DAG: qcc.constant dense<1145324621> : tensor<1x1xi32>
// SGPT-NOT: qcc.input_
func.func @methods(%x: tensor<?x32xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<[[2.0, 2.5, 1.0, 1.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<1x32xf32>
  %y = qcc.linear %x, %w {qcc.input_l2norm = dense<[1.0, 1.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]> : tensor<32xf32>,
    qcc.input_gram = dense<[[1.0, 0.95, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.95, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]]> : tensor<32x32xf64>} : (tensor<?x32xf32>, tensor<1x32xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// (The splat statistics only let the wanda and sparsegpt runs through.)
// Which linears are in a transformer block: the q/k/v projection feeding
// attention 0 and the output projection after it (layer 0; it reaches the
// final norm) are pruned, the LM head (reaching no attention or norm) is
// not, unless all-linears. exclude=0 leaves layer 0 dense, exclude=o_*
// the linear named o_proj.
// BLOCKS-LABEL: func.func @placement(
// BLOCKS: %[[QKV:.*]] = qcc.sparse_2_4 %{{.*}}, %{{.*}} : (tensor<32x16xf32>, tensor<32x1xi32>) -> tensor<32x32xf32>
// BLOCKS: qcc.linear %{{.*}}, %[[QKV]]
// BLOCKS: %[[O:.*]] = qcc.sparse_2_4
// BLOCKS: qcc.linear %{{.*}}, %[[O]]
// BLOCKS-NOT: qcc.sparse_2_4
// BLOCKS: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x?x32xf32>, tensor<64x32xf32>) -> tensor<?x?x64xf32>
// EXCL0-LABEL: func.func @placement(
// EXCL0-NOT: qcc.sparse_2_4
// EXCLNAME-LABEL: func.func @placement(
// EXCLNAME-COUNT-1: qcc.sparse_2_4
// EXCLNAME-NOT: qcc.sparse_2_4
// MAG-LABEL: func.func @placement(
// MAG-COUNT-3: qcc.sparse_2_4
func.func @placement(%x: tensor<?x?x32xf32>) -> tensor<?x?x64xf32> {
  %g = qcc.constant dense<1.0> : tensor<32xf32>
  %wq = qcc.constant dense<0.5> : tensor<32x32xf32>
  %wo = qcc.constant dense<0.25> : tensor<32x32xf32>
  %wh = qcc.constant dense<2.0> : tensor<64x32xf32>
  %n = qcc.rms_norm %x, %g {epsilon = 1.0e-6 : f32} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %q = qcc.linear %n, %wq {qcc.input_l2norm = dense<1.0> : tensor<32xf32>, qcc.input_gram = dense<1.0> : tensor<32x32xf64>} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32> loc("qkv_proj")
  %a = qcc.attention %q, %q, %q {num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 0.25 : f32, causal = true} : (tensor<?x?x32xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  %o = qcc.linear %a, %wo {qcc.input_l2norm = dense<1.0> : tensor<32xf32>, qcc.input_gram = dense<1.0> : tensor<32x32xf64>} : (tensor<?x?x32xf32>, tensor<32x32xf32>) -> tensor<?x?x32xf32> loc("o_proj")
  %r = qcc.add %o, %x : (tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x32xf32>
  %f = qcc.rms_norm %r, %g {epsilon = 1.0e-6 : f32} : (tensor<?x?x32xf32>, tensor<32xf32>) -> tensor<?x?x32xf32>
  %h = qcc.linear %f, %wh {qcc.input_l2norm = dense<1.0> : tensor<32xf32>, qcc.input_gram = dense<1.0> : tensor<32x32xf64>} : (tensor<?x?x32xf32>, tensor<64x32xf32>) -> tensor<?x?x64xf32> loc("lm_head")
  return %h : tensor<?x?x64xf32>
}

// -----

// f16 weights stay f16; K = 48 is not a multiple of 32: dense, with a warning.
// MAG-LABEL: func.func @f16_and_k48(
// MAG: qcc.sparse_2_4 %{{.*}}, %{{.*}} : (tensor<1x16xf16>, tensor<1x1xi32>) -> tensor<1x32xf16>
// MAG-NOT: qcc.sparse_2_4
func.func @f16_and_k48(%x: tensor<?x32xf16>, %z: tensor<?x48xf32>) -> (tensor<?x1xf16>, tensor<?x1xf32>) {
  %w = qcc.constant dense<[[2.0, 2.5, 1.0, 1.2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<1x32xf16>
  %w48 = qcc.constant dense<1.0> : tensor<1x48xf32>
  %y = qcc.linear %x, %w {qcc.input_l2norm = dense<1.0> : tensor<32xf32>, qcc.input_gram = dense<1.0> : tensor<32x32xf64>} : (tensor<?x32xf16>, tensor<1x32xf16>) -> tensor<?x1xf16>
  // expected-warning @+1 {{sparsify-2-4: a linear stays dense: K = 48 is not a multiple of 32}}
  %v = qcc.linear %z, %w48 : (tensor<?x48xf32>, tensor<1x48xf32>) -> tensor<?x1xf32>
  return %y, %v : tensor<?x1xf16>, tensor<?x1xf32>
}
