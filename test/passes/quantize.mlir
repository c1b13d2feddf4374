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
