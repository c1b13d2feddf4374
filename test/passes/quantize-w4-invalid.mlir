// gptq refuses a linear without the calibration Hessian, naming it; bad
// options are refused.
// RUN: not qcc-opt %s --quantize-w4="all-linears=true group-size=32" --split-input-file 2>&1 | FileCheck %s --check-prefix=GPTQ
// RUN: not qcc-opt %s --quantize-w4="all-linears=true group-size=32 act-order=true" --split-input-file 2>&1 | FileCheck %s --check-prefix=GPTQ
// RUN: not qcc-opt %s --quantize-w4="group-size=3" --split-input-file 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not qcc-opt %s --quantize-w4="method=rtn act-order=true" --split-input-file 2>&1 | FileCheck %s --check-prefix=ORDER

// GPTQ: error: quantize-w4: gptq needs the input's Gram matrix (qcc.input_gram, f64 [32, 32]) on a linear (calibrate)
// GPTQ: error: quantize-w4: gptq needs the input's Gram matrix (qcc.input_gram, f64 [32, 32]) on a linear (calibrate)
// GROUP: error: quantize-w4: group size 3 must be positive and even
// ORDER: error: quantize-w4: act-order needs method gptq
func.func @no_statistics(%x: tensor<?x32xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<1.0> : tensor<1x32xf32>
  %y = qcc.linear %x, %w : (tensor<?x32xf32>, tensor<1x32xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}

// -----

// A Gram matrix of the wrong width is refused like a missing one.
func.func @wrong_gram(%x: tensor<?x32xf32>) -> tensor<?x1xf32> {
  %w = qcc.constant dense<1.0> : tensor<1x32xf32>
  %y = qcc.linear %x, %w {qcc.input_gram = dense<1.0> : tensor<16x16xf64>} : (tensor<?x32xf32>, tensor<1x32xf32>) -> tensor<?x1xf32>
  return %y : tensor<?x1xf32>
}
