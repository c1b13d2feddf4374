// RUN: qcc-opt %s --rotate-residual --split-input-file --verify-diagnostics

// The stream returned as it is (an encoder's hidden states) cannot be
// rotated.
func.func @returned(%ids: tensor<?x?xi64>) -> tensor<?x?x2xf32> {
  %t = qcc.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %h = qcc.embedding %t, %ids : (tensor<2x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  // expected-error @+1 {{rotate-residual: cannot rotate the residual stream: 'func.return' reads the residual stream}}
  return %h : tensor<?x?x2xf32>
}

// -----

// Gemma 2's norm after each block writes the stream: its weight cannot
// pass through Q.
func.func @norm_writes_stream(%ids: tensor<?x?xi64>) -> tensor<?x?x2xf32> {
  %t = qcc.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %g = qcc.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %w = qcc.constant dense<[[1.0, 1.0], [1.0, -1.0]]> : tensor<2x2xf32>
  %h = qcc.embedding %t, %ids : (tensor<2x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %y = qcc.linear %n, %w : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  // expected-error @+1 {{'qcc.rms_norm' writes the residual stream}}
  %post = qcc.rms_norm %y, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %h2 = qcc.add %h, %post : (tensor<?x?x2xf32>, tensor<?x?x2xf32>) -> tensor<?x?x2xf32>
  %n2 = qcc.rms_norm %h2, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  %l = qcc.linear %n2, %w : (tensor<?x?x2xf32>, tensor<2x2xf32>) -> tensor<?x?x2xf32>
  return %l : tensor<?x?x2xf32>
}

// -----

// A norm's output read by something other than a linear (its weight has
// nowhere to go).
func.func @norm_read_by_mul(%ids: tensor<?x?xi64>) -> tensor<?x?x2xf32> {
  %t = qcc.constant dense<[[1.0, 0.0], [0.0, 2.0]]> : tensor<2x2xf32>
  %g = qcc.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %h = qcc.embedding %t, %ids : (tensor<2x2xf32>, tensor<?x?xi64>) -> tensor<?x?x2xf32>
  %n = qcc.rms_norm %h, %g {epsilon = 1.0e-5 : f32} : (tensor<?x?x2xf32>, tensor<2xf32>) -> tensor<?x?x2xf32>
  // expected-error @+1 {{'qcc.silu' reads a norm of the residual stream}}
  %s = qcc.silu %n : tensor<?x?x2xf32>
  return %s : tensor<?x?x2xf32>
}
