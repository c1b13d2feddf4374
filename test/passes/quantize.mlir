// RUN: qcc-opt %s --quantize --split-input-file | FileCheck %s --check-prefix=O1
// RUN: qcc-opt %s --quantize="activations=per-tensor" --split-input-file | FileCheck %s --check-prefix=O2
// RUN: qcc-opt %s --quantize="activations=static" --split-input-file | FileCheck %s --check-prefix=O3
// RUN: qcc-opt %s --quantize="asymmetric=true" --split-input-file | FileCheck %s --check-prefix=ASYM

// Weights per output channel: row [254, -127] has scale 2 -> [127, -64]
// (-63.5 rounds half to even to -64); row [1, 0.5] has scale 1/127 ->
// [127, 64] (63.5 -> 64); sums 63 and 191.
// O1-LABEL: func.func @linear(
// O1: %[[Q:[^,]*]], %[[S:[^,]*]], %[[Z:[^ ]*]] = qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_token>} : (tensor<?x2xf32>) -> (tensor<?x2xi8>, tensor<?x1xf32>, tensor<?x1xi32>)
// O1-DAG: %[[WQ:.*]] = qcc.constant dense<{{\[\[}}127, -64], [127, 64]]> : tensor<2x2xi8>
// O1-DAG: %[[WS:.*]] = qcc.constant dense<[2.000000e+00, 0.00787401571]> : tensor<2xf32>
// O1-DAG: %[[SUM:.*]] = qcc.constant dense<[63, 191]> : tensor<2xi32>
// O1: qcc.qlinear %[[Q]], %[[S]], %[[Z]], %[[WQ]], %[[WS]], %[[SUM]], %{{.*}} : {{.*}} -> tensor<?x2xf32>
// O1-NOT: qcc.linear
// O2-LABEL: func.func @linear(
// O2: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_tensor>} : (tensor<?x2xf32>) -> (tensor<?x2xi8>, tensor<1xf32>, tensor<1xi32>)
// O3-LABEL: func.func @linear(
// O3: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, symmetric, per_tensor>, scale = 0.0314960629 : f32}
// ASYM-LABEL: func.func @linear(
// ASYM: qcc.quantize %{{.*}} {quant = #qcc.quant<bits = 8, asymmetric, per_token>}
func.func @linear(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[254.0, -127.0], [1.0, 0.5]]> : tensor<2x2xf32>
  %b = qcc.constant dense<[0.5, -0.5]> : tensor<2xf32>
  %y = qcc.linear %x, %w, %b {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// A computed weight (x @ y of two activations) stays float.
// O1-LABEL: func.func @computed_weight(
// O1: qcc.linear
// O1-NOT: qcc.qlinear
func.func @computed_weight(%x: tensor<?x2xf32>, %w: tensor<2x2xf32>) -> tensor<?x2xf32> {
  %y = qcc.linear %x, %w : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// A 2:4 sparse weight stays compressed: the values [2, 16] are quantized
// like the dense pruned rows (the same scales and sums as @linear: the
// pruned zeros change neither), the metadata is reused.
// O1-LABEL: func.func @sparse_2_4(
// O1-DAG: %[[M:.*]] = qcc.constant dense<1145324612> : tensor<2x1xi32>
// O1-DAG: %[[WQ:.*]] = qcc.constant dense<{{\[\[}}127, -64, 0, {{.*}}], [127, 64, 0, {{.*}}]]> : tensor<2x16xi8>
// O1: %[[W:.*]] = qcc.sparse_2_4 %[[WQ]], %[[M]] : (tensor<2x16xi8>, tensor<2x1xi32>) -> tensor<2x32xi8>
// O1-DAG: %[[WS:.*]] = qcc.constant dense<[2.000000e+00, 0.00787401571]> : tensor<2xf32>
// O1-DAG: %[[SUM:.*]] = qcc.constant dense<[63, 191]> : tensor<2xi32>
// O1: qcc.qlinear %{{.*}}, %{{.*}}, %{{.*}}, %[[W]], %[[WS]], %[[SUM]] : {{.*}} -> tensor<?x2xf32>
// O1-NOT: tensor<2x16xf32>
func.func @sparse_2_4(%x: tensor<?x32xf32>) -> tensor<?x2xf32> {
  %v = qcc.constant dense<[[254.0, -127.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<2x16xf32>
  %m = qcc.constant dense<1145324612> : tensor<2x1xi32>
  %w = qcc.sparse_2_4 %v, %m : (tensor<2x16xf32>, tensor<2x1xi32>) -> tensor<2x32xf32>
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<1.0> : tensor<32xf32>} : (tensor<?x32xf32>, tensor<2x32xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Outlier columns (int8-fallback's choice): column 1 leaves the int8 weight
// for a float slice [2, 1]; the int8 rows [1, 0, 2, -3] and [4, 0, -5, 6]
// have scales 3/127 and 6/127 -> [42, 0, 85, -127] and [85, 0, -106, 127]
// (sums 0 and 106); the quantize reads column 1 as 0 and the qlinear takes
// the float input. A static scale is the max absmax of the other columns.
// O1-LABEL: func.func @outlier_columns(
// O1: %[[Q:[^,]*]], %[[S:[^,]*]], %[[Z:[^ ]*]] = qcc.quantize %[[X:[^ ]*]] {outlier_columns = array<i64: 1>, quant = #qcc.quant<bits = 8, symmetric, per_token>}
// O1-DAG: %[[WQ:.*]] = qcc.constant dense<{{\[\[}}42, 0, 85, -127], [85, 0, -106, 127]]> : tensor<2x4xi8>
// O1-DAG: %[[SUM:.*]] = qcc.constant dense<[0, 106]> : tensor<2xi32>
// O1-DAG: %[[WO:.*]] = qcc.constant dense<{{\[\[}}1.000000e+02], [5.000000e+01]]> : tensor<2x1xf32>
// O1: qcc.qlinear %[[Q]], %[[S]], %[[Z]], %[[WQ]], %{{.*}}, %[[SUM]] outliers(%[[X]], %[[WO]]) {outlier_columns = array<i64: 1>}
// O3-LABEL: func.func @outlier_columns(
// O3: qcc.quantize %{{.*}} {outlier_columns = array<i64: 1>, quant = #qcc.quant<bits = 8, symmetric, per_tensor>, scale = 0.0236220472 : f32}
func.func @outlier_columns(%x: tensor<?x4xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[1.0, 100.0, 2.0, -3.0], [4.0, 50.0, -5.0, 6.0]]> : tensor<2x4xf32>
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[2.0, 500.0, 1.0, 3.0]> : tensor<4xf32>, qcc.outlier_columns = array<i64: 1>} : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// A mixture-of-experts router (its logits reach top_k through softmax)
// stays float; the expert's linear reading the same input is quantized.
// O1-LABEL: func.func @router_stays_float(
// O1: qcc.linear %{{.*}}, %{{.*}} : (tensor<?x2xf32>, tensor<4x2xf32>) -> tensor<?x4xf32>
// O1: qcc.top_k
// O1: qcc.qlinear
func.func @router_stays_float(%x: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>) {
  %wr = qcc.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %k = qcc.constant dense<2> : tensor<1xi64>
  %logits = qcc.linear %x, %wr : (tensor<?x2xf32>, tensor<4x2xf32>) -> tensor<?x4xf32>
  %p = qcc.softmax %logits {axis = 1 : i64} : tensor<?x4xf32>
  %v, %i = qcc.top_k %p, %k {axis = 1 : i64} : (tensor<?x4xf32>, tensor<1xi64>) -> (tensor<?x2xf32>, tensor<?x2xi64>)
  %we = qcc.constant dense<[[1.0, -1.0], [0.5, 0.25]]> : tensor<2x2xf32>
  %y = qcc.linear %x, %we {qcc.input_absmax = dense<[4.0, 1.0]> : tensor<2xf32>} : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %v, %i, %y : tensor<?x2xf32>, tensor<?x2xi64>, tensor<?x2xf32>
}
