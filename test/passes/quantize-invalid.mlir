// RUN: qcc-opt %s --quantize="activations=static" --split-input-file --verify-diagnostics

// Static (O3) scales come from calibration: without statistics, an error.
func.func @no_stats(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<2x2xf32>
  // expected-error @+1 {{quantize: static activation scales need calibration statistics (qcc.input_absmax)}}
  %y = qcc.linear %x, %w : (tensor<?x2xf32>, tensor<2x2xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
