// RUN: qcc-opt %s --rotate-residual --split-input-file | FileCheck %s
// Graphs the rotation cannot absorb: rotate-residual-invalid.mlir.

// D = 2, seed 0: signs s = [-1, 1], so Q = diag(s) H_2 / sqrt(2) =
// [[-1, -1], [1, -1]] / sqrt(2). The embedding's rows become x Q, the norms
// keep weight 1, the readers' W diag(gamma) Q (gamma = [2, 3]), the writer's
// Q^T W (its column [1, -1] becomes [-2, 0] / sqrt(2)).
// CHECK: module attributes {qcc.rotation = "hadamard 2 x dct 1, seed 0"}
// CHECK-LABEL: func.func @rms(
// CHECK: %[[T:.*]] = qcc.constant dense<{{\[\[}}-0.707106769, -0.707106769], [1.41421354, -1.41421354], [0.707106769, -4.94974756]]> : tensor<3x2xf32>
// CHECK: %[[H:.*]] = qcc.embedding %[[T]]
// CHECK: %[[ONES:.*]] = qcc.constant dense<1.000000e+00> : tensor<2xf32>
// CHECK: %[[N:.*]] = qcc.rms_norm %[[H]], %[[ONES]]
// CHECK: %[[W:.*]] = qcc.constant dense<{{\[\[}}0.707106769, -3.53553391]]> : tensor<1x2xf32>
// CHECK: %[[Y:.*]] = qcc.linear %[[N]], %[[W]]
// CHECK: %[[WO:.*]] = qcc.constant dense<{{\[\[}}-1.41421354], [0.000000e+00]]> : tensor<2x1xf32>
// CHECK: %[[O:.*]] = qcc.linear %[[Y]], %[[WO]]
// CHECK: %[[H2:.*]] = qcc.add %[[H]], %[[O]]
// CHECK: qcc.rms_norm %[[H2]]
// CHECK: qcc.constant dense<{{\[\[}}-1.41421354, -1.41421354], [2.12132025, -2.12132025], [0.707106769, -3.53553391]]> : tensor<3x2xf32>
func.func @rms(%ids: tensor<?x?xi64>) -> tensor<?x?x3xf32> {
  %t = qcc.constant dense<[[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]> : tensor<3x2xf32>
  %g = qcc.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %w = qcc.constant dense<[[1.0, 1.0]]> : tensor<1x2xf32>
  %wo = qcc.constant dense<[[1.0], [-1.0]]> : tensor<2x1xf32>
  %head = qcc.constant dense<[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]> : tensor<3x2xf32>
  %h = qcc.embedding %t, %ids : (tensor<3x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.linear %n, %w : (tensor<?x?x2xf32>, tensor<1x2xf32>) -> tensor<?x?x1xf32>
  %o = qcc.linear %y, %wo : (tensor<?x?x1xf32>, tensor<2x1xf32>) -> tensor<?x?x2xf32>
  %h2 = qcc.add %h, %o : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %n2 = qcc.rms_norm %h2, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %l = qcc.linear %n2, %head : (tensor<?x?x2xf32>, tensor<3x2xf32>) -> tensor<?x?x3xf32>
  return %l : tensor<?x?x3xf32>
}

// -----

// A layer norm: the producers are centred ([1, 3] -> [-1, 1], then
// rotated: [sqrt(2), 0]), the layer norm becomes rms_norm, and its bias
// folds into the reader's: W beta = 1 - 2 = -1.
// CHECK-LABEL: func.func @layer_norm(
// CHECK: qcc.constant dense<{{\[\[}}1.41421354, 0.000000e+00], [1.41421354, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK-NOT: qcc.layer_norm
// CHECK: qcc.rms_norm
// CHECK-DAG: %[[W:.*]] = qcc.constant dense<{{\[\[}}2.82842708, -5.65685415]]> : tensor<1x2xf32>
// CHECK-DAG: %[[B:.*]] = qcc.constant dense<-1.000000e+00> : tensor<1xf32>
// CHECK: qcc.linear %{{.*}}, %[[W]], %[[B]]
func.func @layer_norm(%ids: tensor<?x?xi64>) -> tensor<?x?x1xf32> {
  %t = qcc.constant dense<[[1.0, 3.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %g = qcc.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %b = qcc.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %w = qcc.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %h = qcc.embedding %t, %ids : (tensor<2x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  %n = qcc.layer_norm %h, %g, %b {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.linear %n, %w : (tensor<?x?x2xf32>, tensor<1x2xf32>) -> tensor<?x?x1xf32>
  return %y : tensor<?x?x1xf32>
}

// -----

// An MLP's down projection reads its GLU product through qcc.hadamard (the
// online rotation of its width, 2 here) and absorbs the same Q: W -> W Q;
// it also writes the stream (W -> Q^T W), so [[1, 0], [0, 0]] becomes
// Q^T W Q = [[1, 1], [1, 1]] / 2.
// CHECK: module attributes {qcc.rotation = "hadamard 2 x dct 1, seed 0, online"}
// CHECK-LABEL: func.func @glu(
// CHECK: %[[P:.*]] = qcc.mul
// CHECK: %[[R:.*]] = qcc.hadamard %[[P]] {seed = 0 : i64} : tensor<?x?x2xf32>
// CHECK: %[[WD:.*]] = qcc.constant dense<5.000000e-01> : tensor<2x2xf32>
// CHECK: qcc.linear %[[R]], %[[WD]]
func.func @glu(%ids: tensor<?x?xi64>) -> tensor<?x?x2xf32> {
  %t = qcc.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %wg = qcc.constant dense<[[1.0, 0.5], [0.5, 1.0]]> : tensor<2x2xf32>
  %wu = qcc.constant dense<[[2.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %wd = qcc.constant dense<[[1.0, 0.0], [0.0, 0.0]]> : tensor<2x2xf32>
  %wh = qcc.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %h = qcc.embedding %t, %ids : (tensor<2x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %a = qcc.linear %n, %wg : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %s = qcc.silu %a : tensor<?x?x2xf32>
  %u = qcc.linear %n, %wu : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %p = qcc.mul %s, %u : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %d = qcc.linear %p, %wd : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %h2 = qcc.add %h, %d : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %n2 = qcc.rms_norm %h2, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %l = qcc.linear %n2, %wh : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  return %l : tensor<?x?x2xf32>
}

// -----

// The values, per head (head_dim 2, R = Q here): the value projection
// absorbs R^T on its rows (after the norm's Q on its columns), the output
// projection R on its columns (and Q^T on its rows, as a writer). With both
// weights [[1, 0], [0, 0]], each becomes [[1, 1], [1, 1]] / 2.
// CHECK: module attributes {qcc.rotation = "hadamard 2 x dct 1, seed 0, value heads"}
// CHECK-LABEL: func.func @value_heads(
// CHECK: %[[WV:.*]] = qcc.constant dense<5.000000e-01> : tensor<2x2xf32>
// CHECK: %[[V:.*]] = qcc.linear %{{.*}}, %[[WV]]
// CHECK: %[[A:.*]] = qcc.attention %{{.*}}, %{{.*}}, %[[V]]
// CHECK: %[[WO:.*]] = qcc.constant dense<5.000000e-01> : tensor<2x2xf32>
// CHECK: qcc.linear %[[A]], %[[WO]]
func.func @value_heads(%ids: tensor<?x?xi64>) -> tensor<?x?x2xf32> {
  %t = qcc.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %g = qcc.constant dense<1.0> : tensor<2xf32>
  %wi = qcc.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %wv = qcc.constant dense<[[1.0, 0.0], [0.0, 0.0]]> : tensor<2x2xf32>
  %wo = qcc.constant dense<[[1.0, 0.0], [0.0, 0.0]]> : tensor<2x2xf32>
  %h = qcc.embedding %t, %ids : (tensor<2x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %q = qcc.linear %n, %wi : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %k = qcc.linear %n, %wi : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %v = qcc.linear %n, %wv : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %a = qcc.attention %q, %k, %v {causal = true, num_heads = 1 : i64, num_kv_heads = 1 : i64, scale = 0.707106769 : f32} : (tensor<?x?x2xf32>, tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %o = qcc.linear %a, %wo : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  %h2 = qcc.add %h, %o : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %n2 = qcc.rms_norm %h2, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %l = qcc.linear %n2, %wi : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  return %l : tensor<?x?x2xf32>
}
