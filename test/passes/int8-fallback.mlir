// RUN: qcc-opt %s --int8-fallback --split-input-file | FileCheck %s
// RUN: qcc-opt %s --int8-fallback="max-fraction=0.25" --split-input-file | FileCheck %s --check-prefix=WIDE
// RUN: qcc-opt %s --int8-fallback="error-threshold=0.5" --split-input-file | FileCheck %s --check-prefix=HIGH
// A linear left alone gets a remark saying why:
// RUN: qcc-opt %s --int8-fallback --split-input-file --verify-diagnostics -o /dev/null

// Column 5's absmax is 64x the median: with it in float, the per-token
// scale of the other seven columns shrinks from |x_5| / 127 to about
// 1 / 127, and the W8A8 error on the rows drops. The rows go no further.
// CHECK-LABEL: func.func @outlier_column(
// CHECK: qcc.linear %{{.*}} {qcc.input_absmax = {{.*}}, qcc.outlier_columns = array<i64: 5>}
// CHECK-NOT: qcc.input_samples
// HIGH-LABEL: func.func @outlier_column(
// HIGH-NOT: qcc.outlier_columns
func.func @outlier_column(%x: tensor<?x8xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[0.5, -0.25, 0.125, 1.0, -1.0, 0.02, 0.75, -0.5], [-0.3, 0.6, 0.9, -0.1, 0.2, -0.01, 0.4, 0.8]]> : tensor<2x8xf32>
  // HIGH's threshold (50%) is above this linear's error: left alone.
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[0.99, 0.94, 0.94, 0.96, 0.95, 64.0, 0.88, 0.63]> : tensor<8xf32>, qcc.input_samples = dense<[[-0.73, 0.69, 0.53, -0.49, -0.01, 64.0, 0.3, 0.58], [-0.81, -0.94, 0.67, -0.13, 0.52, -40.0, -0.11, 0.44], [-0.54, 0.89, 0.8, -0.94, -0.95, 12.0, 0.88, -0.24], [-0.57, -0.16, -0.94, -0.56, -0.12, -3.0, -0.53, -0.54], [-0.56, -0.08, -0.42, -0.96, 0.68, 50.0, 0.28, -0.63], [0.99, 0.72, -0.76, -0.33, 0.44, 8.0, 0.87, -0.16]]> : tensor<6x8xf32>} : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// Two outlier columns (1 and 5): at most max(1, 2% of K) = 1 stays in float
// by default, the larger (5); max-fraction 0.25 allows both.
// CHECK-LABEL: func.func @two_outliers(
// CHECK: qcc.outlier_columns = array<i64: 5>
// WIDE-LABEL: func.func @two_outliers(
// WIDE: qcc.outlier_columns = array<i64: 1, 5>
func.func @two_outliers(%x: tensor<?x8xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[0.5, -0.25, 0.125, 1.0, -1.0, 0.02, 0.75, -0.5], [-0.3, 0.6, 0.9, -0.1, 0.2, -0.01, 0.4, 0.8]]> : tensor<2x8xf32>
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[0.99, 30.0, 0.94, 0.96, 0.95, 64.0, 0.88, 0.63]> : tensor<8xf32>, qcc.input_samples = dense<[[-0.73, 30.0, 0.53, -0.49, -0.01, 64.0, 0.3, 0.58], [-0.81, -20.0, 0.67, -0.13, 0.52, -40.0, -0.11, 0.44], [-0.54, 0.89, 0.8, -0.94, -0.95, 12.0, 0.88, -0.24], [-0.57, -0.16, -0.94, -0.56, -0.12, -3.0, -0.53, -0.54], [-0.56, 9.0, -0.42, -0.96, 0.68, 50.0, 0.28, -0.63], [0.99, 0.72, -0.76, -0.33, 0.44, 8.0, 0.87, -0.16]]> : tensor<6x8xf32>} : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// An outlier in the weight (where a high smoothing alpha moves it): column 2
// is 60x the median weight column and coarsens every output channel's scale.
// CHECK-LABEL: func.func @weight_column(
// CHECK: qcc.outlier_columns = array<i64: 2>
func.func @weight_column(%x: tensor<?x8xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<[[0.5, -0.25, 30.0, 1.0, -1.0, 0.5, 0.75, -0.5], [-0.3, 0.6, -24.0, -0.1, 0.2, -0.4, 0.4, 0.8]]> : tensor<2x8xf32>
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[0.99, 0.94, 0.94, 0.96, 0.95, 0.7, 0.88, 0.63]> : tensor<8xf32>, qcc.input_samples = dense<[[-0.73, 0.69, 0.53, -0.49, -0.01, 0.7, 0.3, 0.58], [-0.81, -0.94, 0.67, -0.13, 0.52, -0.4, -0.11, 0.44], [-0.54, 0.89, 0.8, -0.94, -0.95, 0.12, 0.88, -0.24], [-0.57, -0.16, -0.94, -0.56, -0.12, -0.3, -0.53, -0.54], [-0.56, -0.08, -0.42, -0.96, 0.68, 0.5, 0.28, -0.63], [0.99, 0.72, -0.76, -0.33, 0.44, 0.08, 0.87, -0.16]]> : tensor<6x8xf32>} : (tensor<?x8xf32>, tensor<2x8xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// No column stands out (the largest is 1.6x the median): nothing to do.
// CHECK-LABEL: func.func @no_outlier(
// CHECK-NOT: qcc.outlier_columns
func.func @no_outlier(%x: tensor<?x4xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<2x4xf32>
  // expected-remark @+1 {{int8-fallback: no outlier columns: no column's absmax (activation or weight) exceeds the outlier ratio}}
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[1.0, 1.6, 0.9, 1.2]> : tensor<4xf32>, qcc.input_samples = dense<[[1.0, 1.6, 0.9, 1.2]]> : tensor<1x4xf32>} : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// An outlier, but no calibration rows to measure the error on.
// CHECK-LABEL: func.func @no_rows(
// CHECK-NOT: qcc.outlier_columns
func.func @no_rows(%x: tensor<?x4xf32>) -> tensor<?x2xf32> {
  %w = qcc.constant dense<1.0> : tensor<2x4xf32>
  // expected-remark @+1 {{int8-fallback: no outlier columns: no calibration rows (qcc.input_samples) to measure the error on}}
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[1.0, 100.0, 1.0, 1.0]> : tensor<4xf32>} : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}

// -----

// A computed weight stays float anyway.
// CHECK-LABEL: func.func @computed_weight(
// CHECK-NOT: qcc.outlier_columns
func.func @computed_weight(%x: tensor<?x4xf32>, %w: tensor<2x4xf32>) -> tensor<?x2xf32> {
  // expected-remark @+1 {{int8-fallback: no outlier columns: its weight is not a dense constant}}
  %y = qcc.linear %x, %w {qcc.input_absmax = dense<[1.0, 100.0, 1.0, 1.0]> : tensor<4xf32>} : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x2xf32>
  return %y : tensor<?x2xf32>
}
