// RUN: qcc-opt %s --raise-attention --split-input-file | FileCheck %s
// RUN: qcc-opt %s --raise-attention --split-input-file 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN --implicit-check-not=warning:

// GPT-2: heads split from the packed projections, K^T written as one
// Transpose[0, 2, 3, 1], Div by sqrt(D), and the causal mask as a Where over
// the registered lower-triangular bias Slice'd to rows [k_len - q_len, k_len)
// and columns [0, k_len).
// CHECK-LABEL: func.func @gpt2_causal(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]] {causal = true, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.softmax
// CHECK: return %[[A]]
func.func @gpt2_causal(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %m2 = qcc.constant dense<-2> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %z = qcc.constant dense<0> : tensor<1xi64>
  %qsh = qcc.shape %qh : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %ql1 = qcc.slice %qsh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %ql = qcc.squeeze %ql1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %ksh = qcc.shape %kh : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %kl1 = qcc.slice %ksh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %kl = qcc.squeeze %kl1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %d = qcc.sub %kl, %ql : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %start = qcc.unsqueeze %d {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %end = qcc.unsqueeze %kl {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %bias = qcc.constant dense<[[[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]]]> : tensor<1x1x8x8xi1>
  %rows = qcc.slice %bias, %start, %end {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<1x1x8x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x8xi1>
  %mask = qcc.slice %rows, %z, %end {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<1x1x?x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %mask2 = qcc.cast %mask : tensor<1x1x?x?xi1> to tensor<1x1x?x?xi1>
  %ninf = qcc.constant dense<-3.40282347E+38> : tensor<f32>
  %w = qcc.where %mask2, %sc, %ninf : (tensor<1x1x?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Near miss: the bias buffer is strictly lower-triangular, so the Where also
// masks the diagonal: not the causal mask, so not `causal`; the same Where
// over 0 and the fill is the attention's additive mask.
// CHECK-LABEL: func.func @gpt2_diagonal_masked(
// CHECK: %[[M:.*]] = qcc.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?x?x?xf32>
// CHECK: qcc.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {causal = false
// CHECK-NOT: qcc.softmax
func.func @gpt2_diagonal_masked(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %m2 = qcc.constant dense<-2> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %z = qcc.constant dense<0> : tensor<1xi64>
  %qsh = qcc.shape %qh : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %ql1 = qcc.slice %qsh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %ql = qcc.squeeze %ql1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %ksh = qcc.shape %kh : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %kl1 = qcc.slice %ksh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %kl = qcc.squeeze %kl1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %d = qcc.sub %kl, %ql : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %start = qcc.unsqueeze %d {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %end = qcc.unsqueeze %kl {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %bias = qcc.constant dense<[[[[false, false, false, false, false, false, false, false], [true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false]]]]> : tensor<1x1x8x8xi1>
  %rows = qcc.slice %bias, %start, %end {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<1x1x8x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x8xi1>
  %mask = qcc.slice %rows, %z, %end {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<1x1x?x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %ninf = qcc.constant dense<-3.40282347E+38> : tensor<f32>
  %w = qcc.where %mask, %sc, %ninf : (tensor<1x1x?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// LLaMA: grouped-query attention (4 query heads, 2 kv heads) with K and V
// repeated by repeat_kv (Unsqueeze, Expand behind the exporter's -1 guard,
// Reshape), K^T as Transpose[0, 1, 3, 2], scale as a Mul, and the causal mask
// added as Trilu(ConstantOfShape([S, S], -inf), upper, k = 1).
// CHECK-LABEL: func.func @llama_gqa_causal(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x64xf32>
// CHECK-DAG: %[[Q:.*]] = qcc.linear %[[X]], %[[WQ:[^ ]*]] :
// CHECK-DAG: %[[K:.*]] = qcc.linear %[[X]], %[[WK:[^ ]*]] :
// CHECK-DAG: %[[V:.*]] = qcc.linear %[[X]], %[[WV:[^ ]*]] :
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]] {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x32xf32>, tensor<?x?x32xf32>) -> tensor<?x?x64xf32>
// CHECK-NOT: qcc.softmax
// CHECK: return %[[A]]
func.func @llama_gqa_causal(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %wq = qcc.constant dense<1.000000e+00> : tensor<64x64xf32>
  %wk = qcc.constant dense<2.000000e+00> : tensor<32x64xf32>
  %wv = qcc.constant dense<3.000000e+00> : tensor<32x64xf32>
  %q = qcc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %k = qcc.linear %x, %wk : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %v = qcc.linear %x, %wv : (tensor<?x?x64xf32>, tensor<32x64xf32>) -> tensor<?x?x32xf32>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hq = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %hkv = qcc.constant dense<[2, 16]> : tensor<2xi64>
  %qshape = qcc.concat %bs, %hq {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %kvshape = qcc.concat %bs, %hkv {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %k4 = qcc.reshape %k, %kvshape : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x2x16xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x16xf32>) -> tensor<?x2x?x16xf32>
  %v4 = qcc.reshape %v, %kvshape : (tensor<?x?x32xf32>, tensor<4xi64>) -> tensor<?x?x2x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x2x16xf32>) -> tensor<?x2x?x16xf32>
  // repeat_kv(k, 2)
  %i0 = qcc.constant dense<0> : tensor<i64>
  %i2 = qcc.constant dense<2> : tensor<i64>
  %two = qcc.constant dense<2> : tensor<1xi64>
  %d16 = qcc.constant dense<16> : tensor<1xi64>
  %ones = qcc.constant dense<1> : tensor<5xi64>
  %neg1 = qcc.constant dense<-1> : tensor<i64>
  %minus = qcc.mul %ones, %neg1 : (tensor<5xi64>, tensor<i64>) -> tensor<5xi64>
  %ksh = qcc.shape %kh : (tensor<?x2x?x16xf32>) -> tensor<4xi64>
  %kb = qcc.gather %ksh, %i0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %ks = qcc.gather %ksh, %i2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %kb1 = qcc.unsqueeze %kb {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ks1 = qcc.unsqueeze %ks {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ke = qcc.concat %kb1, %two, %two, %ks1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %keq = qcc.equal %ke, %minus : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi1>
  %kes = qcc.where %keq, %ones, %ke : (tensor<5xi1>, tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
  %ku = qcc.unsqueeze %kh {axes = array<i64: 2>} : (tensor<?x2x?x16xf32>) -> tensor<?x2x1x?x16xf32>
  %kx = qcc.expand %ku, %kes : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x?x?x16xf32>
  %nh = qcc.mul %i2, %i2 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %nh1 = qcc.unsqueeze %nh {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %kr = qcc.concat %kb1, %nh1, %ks1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %krep = qcc.reshape %kx, %kr : (tensor<?x2x?x?x16xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
  // repeat_kv(v, 2), with a plain constant-and-shape Expand target
  %vsh = qcc.shape %vh : (tensor<?x2x?x16xf32>) -> tensor<4xi64>
  %vb = qcc.gather %vsh, %i0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %vs = qcc.gather %vsh, %i2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %vb1 = qcc.unsqueeze %vb {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %vs1 = qcc.unsqueeze %vs {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ve = qcc.concat %vb1, %two, %two, %vs1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %vu = qcc.unsqueeze %vh {axes = array<i64: 2>} : (tensor<?x2x?x16xf32>) -> tensor<?x2x1x?x16xf32>
  %vx = qcc.expand %vu, %ve : (tensor<?x2x1x?x16xf32>, tensor<5xi64>) -> tensor<?x2x2x?x16xf32>
  %four = qcc.constant dense<4> : tensor<1xi64>
  %vr = qcc.concat %vb1, %four, %vs1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %vrep = qcc.reshape %vx, %vr : (tensor<?x2x2x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %krep {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x?x?x16xf32>) -> tensor<?x?x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x?x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %c, %qk : (tensor<f32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  // causal mask
  %i1 = qcc.constant dense<1> : tensor<i64>
  %xs = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %s = qcc.gather %xs, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %s1 = qcc.unsqueeze %s {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ss = qcc.concat %s1, %s1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %full = qcc.constant_of_shape %ss {value = dense<0xFF800000> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x?xf32>
  %tri = qcc.trilu %full {k = 1 : i64, upper = true} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %m3 = qcc.unsqueeze %tri {axes = array<i64: 0>} : (tensor<?x?xf32>) -> tensor<1x?x?xf32>
  %mask = qcc.unsqueeze %m3 {axes = array<i64: 1>} : (tensor<1x?x?xf32>) -> tensor<1x1x?x?xf32>
  %sm = qcc.add %sc, %mask : (tensor<?x4x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = 3 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vrep : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %bs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// The same additive mask with k = 0 also masks the diagonal: not causal. It is
// still an additive mask, so it stays as the op's mask operand with
// causal = false (the result is unchanged).
// CHECK-LABEL: func.func @additive_diagonal_masked(
// CHECK: %[[M:.*]] = qcc.unsqueeze %{{.*}} {axes = array<i64: 1>}
// CHECK: qcc.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64
func.func @additive_diagonal_masked(%x: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %wq = qcc.constant dense<1.000000e+00> : tensor<64x64xf32>
  %q = qcc.linear %x, %wq : (tensor<?x?x64xf32>, tensor<64x64xf32>) -> tensor<?x?x64xf32>
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hq = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qshape = qcc.concat %bs, %hq {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %qh {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %i1 = qcc.constant dense<1> : tensor<i64>
  %xs = qcc.shape %x : (tensor<?x?x64xf32>) -> tensor<3xi64>
  %s = qcc.gather %xs, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %s1 = qcc.unsqueeze %s {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ss = qcc.concat %s1, %s1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %full = qcc.constant_of_shape %ss {value = dense<0xFF800000> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<?x?xf32>
  %tri = qcc.trilu %full {k = 0 : i64, upper = true} : (tensor<?x?xf32>) -> tensor<?x?xf32>
  %m3 = qcc.unsqueeze %tri {axes = array<i64: 0>} : (tensor<?x?xf32>) -> tensor<1x?x?xf32>
  %mask = qcc.unsqueeze %m3 {axes = array<i64: 1>} : (tensor<1x?x?xf32>) -> tensor<1x1x?x?xf32>
  %sm = qcc.add %qk, %mask : (tensor<?x4x?x?xf32>, tensor<1x1x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %qh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %bs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Gemma-2 (HF eager): the scaled scores are softcapped, cap * tanh(x / cap),
// before the mask: the op's softcap attribute.
// CHECK-LABEL: func.func @gemma2_softcap(
// CHECK: qcc.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32, softcap = 5.000000e+01 : f32}
// CHECK-NOT: qcc.tanh
func.func @gemma2_softcap(%x: tensor<?x?x64xf32>, %mask: tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32> {
  %bs = qcc.shape %x {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hq = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qshape = qcc.concat %bs, %hq {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %x, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %qh {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %scale = qcc.constant dense<2.500000e-01> : tensor<f32>
  %scaled = qcc.mul %qk, %scale : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %cap = qcc.constant dense<5.000000e+01> : tensor<f32>
  %d = qcc.div %scaled, %cap : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %t = qcc.tanh %d : tensor<?x4x?x?xf32>
  %capped = qcc.mul %t, %cap : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %sm = qcc.add %capped, %mask : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %qh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %bs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// BERT: bidirectional with an additive [B, 1, 1, S] padding mask, which
// becomes the mask operand.
// CHECK-LABEL: func.func @bert_padding_mask(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>, %[[M:[^:]*]]: tensor<?x1x1x?xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]], %[[M]] {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32>
// CHECK: return %[[A]]
func.func @bert_padding_mask(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %m: tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %sm = qcc.add %sc, %m : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// GPT-2's Conv1D flattens the merged heads to [B * S, H * D]: the same
// reshape, now of the op's [B, S, H * D] result.
// CHECK-LABEL: func.func @flattened_merge(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>
// CHECK: %[[FLAT:.*]] = qcc.constant dense<[-1, 64]>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]] {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[R:.*]] = qcc.reshape %[[A]], %[[FLAT]] : (tensor<?x?x64xf32>, tensor<2xi64>) -> tensor<?x64xf32>
// CHECK-NOT: qcc.softmax
// CHECK: return %[[R]]
func.func @flattened_merge(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %flat = qcc.constant dense<[-1, 64]> : tensor<2xi64>
  %out = qcc.reshape %o, %flat : (tensor<?x?x4x16xf32>, tensor<2xi64>) -> tensor<?x64xf32>
  return %out : tensor<?x64xf32>
}

// -----

// Near miss: the softmax runs over the query axis.
// CHECK-LABEL: func.func @softmax_not_last_axis(
// CHECK-NOT: qcc.attention
// CHECK: qcc.softmax
func.func @softmax_not_last_axis(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %vh4: tensor<?x4x?x16xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
// WARN: :[[@LINE+1]]:8: warning: raise-attention: attention at node {{.*}} not raised: softmax is not over the key axis; it runs as separate ops, without fused kernels or a KV cache
  %p = qcc.softmax %sc {axis = 2 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Near miss: the Q reshape's target starts [S, B], so it also reorders the
// leading dimensions.
// CHECK-LABEL: func.func @q_reshape_reorders_leading_dims(
// CHECK-NOT: qcc.attention
// CHECK: qcc.softmax
func.func @q_reshape_reorders_leading_dims(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %vh4: tensor<?x4x?x16xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %i10 = qcc.constant dense<[1, 0]> : tensor<2xi64>
  %sb = qcc.gather %qs, %i10 {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %qshape2 = qcc.concat %sb, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape2 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
// WARN: :[[@LINE+1]]:8: warning: raise-attention: attention at node {{.*}} not raised: Q is not a head split of a packed {{\[}}B, S, H * D] value; it runs as separate ops, without fused kernels or a KV cache
  %p = qcc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Near miss: V is a [B, H, S, D] argument, not split from a packed value.
// CHECK-LABEL: func.func @v_not_head_split(
// CHECK-NOT: qcc.attention
// CHECK: qcc.softmax
func.func @v_not_head_split(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %vh4: tensor<?x4x?x16xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
// WARN: :[[@LINE+1]]:8: warning: raise-attention: attention at node {{.*}} not raised: V is not a head split (or repeat_kv of one); it runs as separate ops, without fused kernels or a KV cache
  %p = qcc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh4 : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// nanoGPT-style masked_fill (the demo model's export): Where(Not(keep), -inf,
// scores) with the tril buffer sliced [0, T) on both axes, and q, k, v split
// from one tensor so that the query and key lengths are the same dimension.
// CHECK-LABEL: func.func @masked_fill_causal(
// CHECK-SAME: %[[X:[^:]*]]: tensor<?x?x192xf32>
// CHECK: %[[S:.*]]:3 = qcc.split %[[X]]
// CHECK: %[[A:.*]] = qcc.attention %[[S]]#0, %[[S]]#1, %[[S]]#2 {causal = true, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 1.250000e-01 : f32}
// CHECK-NOT: qcc.softmax
// CHECK: return %[[A]]
func.func @masked_fill_causal(%x: tensor<?x?x192xf32>) -> tensor<?x?x64xf32> {
  %parts:3 = qcc.split %x {axis = 2 : i64, sizes = array<i64: 64, 64, 64>} : (tensor<?x?x192xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %bt = qcc.shape %x {end = 2 : i64} : (tensor<?x?x192xf32>) -> tensor<2xi64>
  %shape4 = qcc.concat %bt, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %parts#0, %shape4 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %k4 = qcc.reshape %parts#1, %shape4 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %v4 = qcc.reshape %parts#2, %shape4 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<1.250000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %z = qcc.constant dense<0> : tensor<1xi64>
  %t = qcc.gather %bt, %one {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %bias = qcc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %rows = qcc.slice %bias, %z, %t {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<1x1x4x4xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x4xi1>
  %keep = qcc.slice %rows, %z, %t {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<1x1x?x4xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %drop = qcc.not %keep : tensor<1x1x?x?xi1>
  %ninf = qcc.constant dense<0xFF800000> : tensor<f32>
  %w = qcc.where %drop, %ninf, %sc : (tensor<1x1x?x?xi1>, tensor<f32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %bt, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Near miss: Not of the mask but the scores on the dropped side
// (Where(Not(keep), scores, -inf) keeps the future, masks the past): not
// causal; the mask is that Where over 0 and the fill, exactly.
// CHECK-LABEL: func.func @masked_fill_inverted(
// CHECK: %[[M:.*]] = qcc.where %{{.*}}, %{{.*}}, %{{.*}} : (tensor<{{.*}}xi1>, tensor<f32>, tensor<f32>) -> tensor<?x?x?x?xf32>
// CHECK: qcc.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {causal = false
// CHECK-NOT: qcc.softmax
func.func @masked_fill_inverted(%x: tensor<?x?x192xf32>) -> tensor<?x?x64xf32> {
  %parts:3 = qcc.split %x {axis = 2 : i64, sizes = array<i64: 64, 64, 64>} : (tensor<?x?x192xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %bt = qcc.shape %x {end = 2 : i64} : (tensor<?x?x192xf32>) -> tensor<2xi64>
  %shape4 = qcc.concat %bt, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %parts#0, %shape4 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %k4 = qcc.reshape %parts#1, %shape4 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %v4 = qcc.reshape %parts#2, %shape4 : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %z = qcc.constant dense<0> : tensor<1xi64>
  %t = qcc.gather %bt, %one {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %bias = qcc.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %rows = qcc.slice %bias, %z, %t {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<1x1x4x4xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x4xi1>
  %keep = qcc.slice %rows, %z, %t {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<1x1x?x4xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %drop = qcc.not %keep : tensor<1x1x?x?xi1>
  %ninf = qcc.constant dense<0xFF800000> : tensor<f32>
  %w = qcc.where %drop, %qk, %ninf : (tensor<1x1x?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %bt, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// HF past_key_values (GPT-2 with use_cache): K and V heads are
// Concat(past [B, H, P, D], heads of the new k/v, axis 2); the mask rows are
// [k_len - q_len, k_len) with k_len the concatenated length. The op attends
// over the packed past followed by the packed new keys/values; the
// head-layout Concats stay for the `present` outputs.
// CHECK-LABEL: func.func @gpt2_past(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>, %[[PK:[^:]*]]: tensor<?x4x?x16xf32>, %[[PV:[^:]*]]: tensor<?x4x?x16xf32>
// CHECK: %[[PRK:.*]] = qcc.concat %[[PK]], %{{.*}} {axis = 2 : i64}
// CHECK: %[[PRV:.*]] = qcc.concat %[[PV]], %{{.*}} {axis = 2 : i64}
// CHECK: %[[TK:.*]] = qcc.transpose %[[PK]] {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
// CHECK: %[[SK:.*]] = qcc.shape %[[TK]] {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
// CHECK: %[[SHK:.*]] = qcc.concat %[[SK]], %{{.*}} {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
// CHECK: %[[RK:.*]] = qcc.reshape %[[TK]], %[[SHK]] : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
// CHECK: %[[KA:.*]] = qcc.concat %[[RK]], %[[K]] {axis = 1 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[TV:.*]] = qcc.transpose %[[PV]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK: %[[RV:.*]] = qcc.reshape %[[TV]]
// CHECK: %[[VA:.*]] = qcc.concat %[[RV]], %[[V]] {axis = 1 : i64} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[KA]], %[[VA]] {causal = true, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
// CHECK-NOT: qcc.softmax
// CHECK: return %[[A]], %[[PRK]], %[[PRV]]
func.func @gpt2_past(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %pk: tensor<?x4x?x16xf32>, %pv: tensor<?x4x?x16xf32>) -> (tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kall = qcc.concat %pk, %kh {axis = 2 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %vall = qcc.concat %pv, %vh {axis = 2 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %kall {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %m2 = qcc.constant dense<-2> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %z = qcc.constant dense<0> : tensor<1xi64>
  %qsh = qcc.shape %qh : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %ql1 = qcc.slice %qsh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %ql = qcc.squeeze %ql1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %ksh = qcc.shape %kall : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %kl1 = qcc.slice %ksh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %kl = qcc.squeeze %kl1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %d = qcc.sub %kl, %ql : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %start = qcc.unsqueeze %d {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %end = qcc.unsqueeze %kl {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %bias = qcc.constant dense<[[[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]]]> : tensor<1x1x8x8xi1>
  %rows = qcc.slice %bias, %start, %end {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<1x1x8x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x8xi1>
  %mask = qcc.slice %rows, %z, %end {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<1x1x?x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %ninf = qcc.constant dense<-3.40282347E+38> : tensor<f32>
  %w = qcc.where %mask, %sc, %ninf : (tensor<1x1x?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv2 = qcc.matmul %p, %vall : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv2 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out, %kall, %vall : tensor<?x?x64xf32>, tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>
}

// -----

// Near miss: the past is concatenated along the head axis (1), not the
// sequence (2): not a cache append, so nothing is raised.
// CHECK-LABEL: func.func @gpt2_past_wrong_axis(
// CHECK-NOT: qcc.attention
// CHECK: qcc.softmax
func.func @gpt2_past_wrong_axis(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %pk: tensor<?x4x?x16xf32>, %pv: tensor<?x4x?x16xf32>) -> (tensor<?x?x64xf32>, tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>) {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %kh = qcc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kall = qcc.concat %pk, %kh {axis = 1 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x?x?x16xf32>
  %vall = qcc.concat %pv, %vh {axis = 1 : i64} : (tensor<?x4x?x16xf32>, tensor<?x4x?x16xf32>) -> tensor<?x?x?x16xf32>
  %kt = qcc.transpose %kall {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x?x?x16xf32>) -> tensor<?x?x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x?x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qk, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %m2 = qcc.constant dense<-2> : tensor<1xi64>
  %m1 = qcc.constant dense<-1> : tensor<1xi64>
  %z = qcc.constant dense<0> : tensor<1xi64>
  %qsh = qcc.shape %qh : (tensor<?x4x?x16xf32>) -> tensor<4xi64>
  %ql1 = qcc.slice %qsh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %ql = qcc.squeeze %ql1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %ksh = qcc.shape %kall : (tensor<?x?x?x16xf32>) -> tensor<4xi64>
  %kl1 = qcc.slice %ksh, %m2, %m1 {axes = array<i64: 0>, steps = array<i64: 1>} : (tensor<4xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %kl = qcc.squeeze %kl1 {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<i64>
  %d = qcc.sub %kl, %ql : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %start = qcc.unsqueeze %d {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %end = qcc.unsqueeze %kl {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %bias = qcc.constant dense<[[[[true, false, false, false, false, false, false, false], [true, true, false, false, false, false, false, false], [true, true, true, false, false, false, false, false], [true, true, true, true, false, false, false, false], [true, true, true, true, true, false, false, false], [true, true, true, true, true, true, false, false], [true, true, true, true, true, true, true, false], [true, true, true, true, true, true, true, true]]]]> : tensor<1x1x8x8xi1>
  %rows = qcc.slice %bias, %start, %end {axes = array<i64: 2>, steps = array<i64: 1>} : (tensor<1x1x8x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x8xi1>
  %mask = qcc.slice %rows, %z, %end {axes = array<i64: 3>, steps = array<i64: 1>} : (tensor<1x1x?x8xi1>, tensor<1xi64>, tensor<1xi64>) -> tensor<1x1x?x?xi1>
  %ninf = qcc.constant dense<-3.40282347E+38> : tensor<f32>
  %w = qcc.where %mask, %sc, %ninf : (tensor<1x1x?x?xi1>, tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
// WARN: :[[@LINE+1]]:8: warning: raise-attention: attention at node {{.*}} not raised: K^T is not a transposed head split (or repeat_kv of one); it runs as separate ops, without fused kernels or a KV cache
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv2 = qcc.matmul %p, %vall : (tensor<?x4x?x?xf32>, tensor<?x?x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv2 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out, %kall, %vall : tensor<?x?x64xf32>, tensor<?x?x?x16xf32>, tensor<?x?x?x16xf32>
}

// -----

// GPT-BigCode: multi-query attention. K and V are one head each, viewed as
// [B, 1, S, D] by an Unsqueeze (no head split) and expanded to the 4 query
// heads; the query's head count is written -1 (inferred from the width).
// CHECK-LABEL: func.func @bigcode_mqa(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x16xf32>, %[[V:[^:]*]]: tensor<?x?x16xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]] {causal = false, num_heads = 4 : i64, num_kv_heads = 1 : i64, scale = 2.500000e-01 : f32}
// CHECK-NOT: qcc.softmax
// CHECK: return %[[A]]
func.func @bigcode_mqa(%q: tensor<?x?x64xf32>, %k: tensor<?x?x16xf32>, %v: tensor<?x?x16xf32>) -> tensor<?x?x64xf32> {
  %bs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %hq = qcc.constant dense<[-1, 16]> : tensor<2xi64>
  %qshape = qcc.concat %bs, %hq {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x?x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x?x16xf32>) -> tensor<?x?x?x16xf32>
  %kh = qcc.unsqueeze %k {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %vh = qcc.unsqueeze %v {axes = array<i64: 1>} : (tensor<?x?x16xf32>) -> tensor<?x1x?x16xf32>
  %i0 = qcc.constant dense<0> : tensor<i64>
  %i2 = qcc.constant dense<2> : tensor<i64>
  %one = qcc.constant dense<1> : tensor<1xi64>
  %four = qcc.constant dense<4> : tensor<1xi64>
  %d16 = qcc.constant dense<16> : tensor<1xi64>
  %ksh = qcc.shape %kh : (tensor<?x1x?x16xf32>) -> tensor<4xi64>
  %kb = qcc.gather %ksh, %i0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %ks = qcc.gather %ksh, %i2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %kb1 = qcc.unsqueeze %kb {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ks1 = qcc.unsqueeze %ks {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ke = qcc.concat %kb1, %one, %four, %ks1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %kr = qcc.concat %kb1, %four, %ks1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %ku = qcc.unsqueeze %kh {axes = array<i64: 2>} : (tensor<?x1x?x16xf32>) -> tensor<?x1x1x?x16xf32>
  %kx = qcc.expand %ku, %ke : (tensor<?x1x1x?x16xf32>, tensor<5xi64>) -> tensor<?x1x4x?x16xf32>
  %krep = qcc.reshape %kx, %kr : (tensor<?x1x4x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %vsh = qcc.shape %vh : (tensor<?x1x?x16xf32>) -> tensor<4xi64>
  %vb = qcc.gather %vsh, %i0 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %vs = qcc.gather %vsh, %i2 {axis = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  %vb1 = qcc.unsqueeze %vb {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %vs1 = qcc.unsqueeze %vs {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %ve = qcc.concat %vb1, %one, %four, %vs1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<5xi64>
  %vr = qcc.concat %vb1, %four, %vs1, %d16 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  %vu = qcc.unsqueeze %vh {axes = array<i64: 2>} : (tensor<?x1x?x16xf32>) -> tensor<?x1x1x?x16xf32>
  %vx = qcc.expand %vu, %ve : (tensor<?x1x1x?x16xf32>, tensor<5xi64>) -> tensor<?x1x4x?x16xf32>
  %vrep = qcc.reshape %vx, %vr : (tensor<?x1x4x?x16xf32>, tensor<4xi64>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %krep {perm = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x?x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vrep : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %bs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// MPT: the ALiBi bias is added to the scaled scores and the padding/causal
// condition fills the masked ones: Where(masked, fill, scores + bias). The
// additive mask becomes Where(masked, fill, bias) (kv-cache-layout proves
// what it is: causal + padding + ALiBi).
// CHECK-LABEL: func.func @mpt_alibi(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>, %[[M:[^:]*]]: tensor<?x1x?x?xi1>, %[[B:[^:]*]]: tensor<4x1x?xf32>
// CHECK: %[[W:.*]] = qcc.where %[[M]], %{{.*}}, %[[B]] : (tensor<?x1x?x?xi1>, tensor<f32>, tensor<4x1x?xf32>) -> tensor<?x?x?x?xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]], %[[W]] {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
// CHECK-NOT: qcc.softmax
func.func @mpt_alibi(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %masked: tensor<?x1x?x?xi1>, %bias: tensor<4x1x?xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %sb = qcc.add %sc, %bias : (tensor<?x4x?x?xf32>, tensor<4x1x?xf32>) -> tensor<?x4x?x?xf32>
  %fill = qcc.constant dense<-3.40282347E+38> : tensor<f32>
  %w = qcc.where %masked, %fill, %sb : (tensor<?x1x?x?xi1>, tensor<f32>, tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %w {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %qs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// CodeGen masks before it scales: (Q K^T + m) / c is Q K^T / c with the
// additive mask m / c.
// CHECK-LABEL: func.func @mask_before_scale(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>, %[[M:[^:]*]]: tensor<?x1x1x?xf32>
// CHECK: %[[C4:.*]] = qcc.constant dense<4.000000e+00> : tensor<f32>
// CHECK: %[[MS:.*]] = qcc.div %[[M]], %[[C4]] : (tensor<?x1x1x?xf32>, tensor<f32>) -> tensor<?x1x1x?xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]], %[[MS]] {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
// CHECK: return %[[A]]
func.func @mask_before_scale(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %m: tensor<?x1x1x?xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %qkm = qcc.add %qk, %m : (tensor<?x4x?x?xf32>, tensor<?x1x1x?xf32>) -> tensor<?x4x?x?xf32>
  %c4 = qcc.constant dense<4.000000e+00> : tensor<f32>
  %sc = qcc.div %qkm, %c4 : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sc {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %os = qcc.shape %o {end = 2 : i64} : (tensor<?x?x4x16xf32>) -> tensor<2xi64>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %os, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// q and k gathered in one order within every head (raise-rotary's
// interleaved rotary): the scores do not depend on it, the gathers go. GQA:
// 4 query heads, 2 kv heads of 8.
// CHECK-LABEL: func.func @heads_permuted_alike(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x32xf32>, %[[K:[^:]*]]: tensor<?x?x16xf32>, %[[V:[^:]*]]: tensor<?x?x16xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]] {causal = true
// CHECK: return %[[A]]
func.func @heads_permuted_alike(%q: tensor<?x?x32xf32>, %k: tensor<?x?x16xf32>, %v: tensor<?x?x16xf32>) -> tensor<?x?x32xf32> {
  %qi = qcc.constant dense<[0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 16, 18, 20, 22, 17, 19, 21, 23, 24, 26, 28, 30, 25, 27, 29, 31]> : tensor<32xi64>
  %ki = qcc.constant dense<[0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]> : tensor<16xi64>
  %qp = qcc.gather %q, %qi {axis = 2 : i64} : (tensor<?x?x32xf32>, tensor<32xi64>) -> tensor<?x?x32xf32>
  %kp = qcc.gather %k, %ki {axis = 2 : i64} : (tensor<?x?x16xf32>, tensor<16xi64>) -> tensor<?x?x16xf32>
  %a = qcc.attention %qp, %kp, %v {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.353553385 : f32} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
  return %a : tensor<?x?x32xf32>
}

// -----

// Near miss: k's second head keeps its order while q's heads are all
// permuted: the scores of the heads reading it would change.
// CHECK-LABEL: func.func @heads_permuted_differently(
// CHECK: %[[QP:.*]] = qcc.gather
// CHECK: %[[KP:.*]] = qcc.gather
// CHECK: qcc.attention %[[QP]], %[[KP]]
func.func @heads_permuted_differently(%q: tensor<?x?x32xf32>, %k: tensor<?x?x16xf32>, %v: tensor<?x?x16xf32>) -> tensor<?x?x32xf32> {
  %qi = qcc.constant dense<[0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15, 16, 18, 20, 22, 17, 19, 21, 23, 24, 26, 28, 30, 25, 27, 29, 31]> : tensor<32xi64>
  %ki = qcc.constant dense<[0, 2, 4, 6, 1, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
  %qp = qcc.gather %q, %qi {axis = 2 : i64} : (tensor<?x?x32xf32>, tensor<32xi64>) -> tensor<?x?x32xf32>
  %kp = qcc.gather %k, %ki {axis = 2 : i64} : (tensor<?x?x16xf32>, tensor<16xi64>) -> tensor<?x?x16xf32>
  %a = qcc.attention %qp, %kp, %v {causal = true, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 0.353553385 : f32} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
  return %a : tensor<?x?x32xf32>
}

// -----

// BLOOM (after fold-shapes has put its [B * H, S, D] views back on the
// heads): baddbmm adds the ALiBi bias to the scaled scores before the
// additive mask. Both make the op's mask, bias + mask (kv-cache-layout
// proves what it is: causal + padding + ALiBi).
// CHECK-LABEL: func.func @bloom_alibi_bias(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x64xf32>, %[[V:[^:]*]]: tensor<?x?x64xf32>, %[[B:[^:]*]]: tensor<?x4x1x?xf32>, %[[M:[^:]*]]: tensor<?x1x?x?xf32>
// CHECK: %[[BM:.*]] = qcc.add %[[B]], %[[M]] : (tensor<?x4x1x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x?x?x?xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[K]], %[[V]], %[[BM]] {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32}
// CHECK-NOT: qcc.softmax
// CHECK: return %[[A]]
func.func @bloom_alibi_bias(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>, %alibi: tensor<?x4x1x?xf32>, %mask: tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32> {
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %k {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %k, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %v {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %v, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %sb = qcc.add %sc, %alibi : (tensor<?x4x?x?xf32>, tensor<?x4x1x?xf32>) -> tensor<?x4x?x?xf32>
  %sm = qcc.add %sb, %mask : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %qs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Falcon's new decoder architecture (as group-fused-heads leaves it): K and
// V are heads of their 2 kv heads repeated per token (head h reads kv head
// h / 2), K rotated after the repeat. The op takes the 2 kv heads (GQA),
// with the rotary applied to them (it rotates every head alike).
// CHECK-LABEL: func.func @falcon_repeated_kv(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<?x?x64xf32>, %[[K:[^:]*]]: tensor<?x?x32xf32>, %[[V:[^:]*]]: tensor<?x?x32xf32>, %[[COS:[^:]*]]: tensor<?x?x16xf32>, %[[SIN:[^:]*]]: tensor<?x?x16xf32>, %[[M:[^:]*]]: tensor<?x1x?x?xf32>
// CHECK: %[[KR:.*]] = qcc.rotary %[[K]], %[[COS]], %[[SIN]] {head_dim = 16 : i64} : (tensor<?x?x32xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x32xf32>
// CHECK: %[[A:.*]] = qcc.attention %[[Q]], %[[KR]], %[[V]], %[[M]] {causal = false, num_heads = 4 : i64, num_kv_heads = 2 : i64, scale = 2.500000e-01 : f32}
// CHECK: return %[[A]]
func.func @falcon_repeated_kv(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %v: tensor<?x?x32xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>, %mask: tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32> {
  %rep = qcc.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]> : tensor<64xi64>
  %kr = qcc.gather %k, %rep {axis = 2 : i64} : (tensor<?x?x32xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
  %vr = qcc.gather %v, %rep {axis = 2 : i64} : (tensor<?x?x32xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
  %krot = qcc.rotary %kr, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x64xf32>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %krot {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %krot, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %vr {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %vr, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %sm = qcc.add %sc, %mask : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %qs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}

// -----

// Near miss: the gathered heads are kv heads 1, 0, 0, 1 (not h / 2): no
// repeat to see through, so the op attends over the 4 gathered heads.
// CHECK-LABEL: func.func @gathered_heads_not_repeated(
// CHECK: %[[KG:.*]] = qcc.gather
// CHECK: %[[VG:.*]] = qcc.gather
// CHECK: %[[KR:.*]] = qcc.rotary %[[KG]]
// CHECK: qcc.attention %{{.*}}, %[[KR]], %[[VG]], %{{.*}} {causal = false, num_heads = 4 : i64, num_kv_heads = 4 : i64
func.func @gathered_heads_not_repeated(%q: tensor<?x?x64xf32>, %k: tensor<?x?x32xf32>, %v: tensor<?x?x32xf32>, %cos: tensor<?x?x16xf32>, %sin: tensor<?x?x16xf32>, %mask: tensor<?x1x?x?xf32>) -> tensor<?x?x64xf32> {
  %rep = qcc.constant dense<[16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]> : tensor<64xi64>
  %kr = qcc.gather %k, %rep {axis = 2 : i64} : (tensor<?x?x32xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
  %vr = qcc.gather %v, %rep {axis = 2 : i64} : (tensor<?x?x32xf32>, tensor<64xi64>) -> tensor<?x?x64xf32>
  %krot = qcc.rotary %kr, %cos, %sin {head_dim = 16 : i64} : (tensor<?x?x64xf32>, tensor<?x?x16xf32>, tensor<?x?x16xf32>) -> tensor<?x?x64xf32>
  %hd = qcc.constant dense<[4, 16]> : tensor<2xi64>
  %qs = qcc.shape %q {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %qshape = qcc.concat %qs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %q4 = qcc.reshape %q, %qshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %qh = qcc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %ks = qcc.shape %krot {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %kshape = qcc.concat %ks, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %k4 = qcc.reshape %krot, %kshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vs = qcc.shape %vr {end = 2 : i64} : (tensor<?x?x64xf32>) -> tensor<2xi64>
  %vshape = qcc.concat %vs, %hd {axis = 0 : i64} : (tensor<2xi64>, tensor<2xi64>) -> tensor<4xi64>
  %v4 = qcc.reshape %vr, %vshape : (tensor<?x?x64xf32>, tensor<4xi64>) -> tensor<?x?x4x16xf32>
  %vh = qcc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x?x16xf32>
  %kt = qcc.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : (tensor<?x?x4x16xf32>) -> tensor<?x4x16x?xf32>
  %qk = qcc.matmul %qh, %kt : (tensor<?x4x?x16xf32>, tensor<?x4x16x?xf32>) -> tensor<?x4x?x?xf32>
  %c = qcc.constant dense<2.500000e-01> : tensor<f32>
  %sc = qcc.mul %qk, %c : (tensor<?x4x?x?xf32>, tensor<f32>) -> tensor<?x4x?x?xf32>
  %sm = qcc.add %sc, %mask : (tensor<?x4x?x?xf32>, tensor<?x1x?x?xf32>) -> tensor<?x4x?x?xf32>
  %p = qcc.softmax %sm {axis = -1 : i64} : tensor<?x4x?x?xf32>
  %pv = qcc.matmul %p, %vh : (tensor<?x4x?x?xf32>, tensor<?x4x?x16xf32>) -> tensor<?x4x?x16xf32>
  %o = qcc.transpose %pv {perm = array<i64: 0, 2, 1, 3>} : (tensor<?x4x?x16xf32>) -> tensor<?x?x4x16xf32>
  %w64 = qcc.constant dense<64> : tensor<1xi64>
  %oshape = qcc.concat %qs, %w64 {axis = 0 : i64} : (tensor<2xi64>, tensor<1xi64>) -> tensor<3xi64>
  %out = qcc.reshape %o, %oshape : (tensor<?x?x4x16xf32>, tensor<3xi64>) -> tensor<?x?x64xf32>
  return %out : tensor<?x?x64xf32>
}
