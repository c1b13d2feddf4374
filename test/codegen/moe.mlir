// Mixture of experts (qcc.moe): four launches over the routed tokens only,
// routes by expert (one CTA), the grouped up GEMM (gate, activation) and
// down GEMM (grid: feature tiles of 64 x experts x route chunks of 16; a
// CTA past its expert's routes returns), then each token's gate-weighted sum.

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK-LABEL: ===== unit qcc_experts_k0 (regions: experts/k0) kind moe
// CHECK-NEXT: // launch: {"steps":[{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_experts_k0_routes","grid":{"x":1,"y":1,"z":1},"name":"routes","params":[{"name":"expert_ids","operand":1},{"int":"routes","name":"routes"},{"int":8,"name":"experts"},{"name":"offsets","workspace":"offsets"},{"name":"list","workspace":"list"},{"name":"error_flag","runtime":"error_flag"}],"waits_for_prior_grids":true,"when":{"gt":["tokens",0]}},{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_experts_k0_up","grid":{"x":4,"y":8,"z":{"ceil_div":["routes",16]}},"name":"up","params":[{"name":"x","operand":0},{"name":"up","operand":3},{"name":"gate","operand":5},{"name":"offsets","workspace":"offsets"},{"name":"list","workspace":"list"},{"int":2,"name":"k"},{"int":256,"name":"n"},{"int":128,"name":"kdim"},{"name":"h","workspace":"h"}],"waits_for_prior_grids":true,"when":{"gt":["tokens",0]}},{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_experts_k0_down","grid":{"x":2,"y":8,"z":{"ceil_div":["routes",16]}},"name":"down","params":[{"name":"h","workspace":"h"},{"name":"down","operand":4},{"name":"offsets","workspace":"offsets"},{"name":"list","workspace":"list"},{"int":2,"name":"k"},{"int":128,"name":"n"},{"int":256,"name":"kdim"},{"name":"y","workspace":"y"}],"waits_for_prior_grids":true,"when":{"gt":["tokens",0]}},{"block":{"x":256,"y":1,"z":1},"dynamic_smem":0,"entry":"qcc_experts_k0","grid":{"x":{"ceil_div":[{"mul":["tokens",128]},256]},"y":1,"z":1},"name":"combine","params":[{"name":"y","workspace":"y"},{"name":"gates","operand":2},{"name":"expert_ids","operand":1},{"int":8,"name":"experts"},{"int":"tokens","name":"tokens"},{"int":2,"name":"k"},{"int":128,"name":"hidden"},{"name":"out","result":0}],"waits_for_prior_grids":true,"when":{"gt":["tokens",0]}}],"symbols":{"routes":{"mul":["tokens",2]},"tokens":{"dim":{"axis":0,"operand":0}}},"version":1,"workspace":{"h":{"mul":["routes",1024]},"list":{"mul":["routes",4]},"offsets":36,"y":{"mul":["routes",512]}}}
// CHECK: #include "qcc/moe.cuh"
// CHECK: typedef qcc::MoeLaunch<64, 16, 32, 256> Cfg;
// CHECK: qcc_experts_k0_routes(
// CHECK: qcc::moeRoutes<Cfg>(
// CHECK: qcc_experts_k0_up(
// CHECK: qcc::moeGroupedGemm<Cfg, true, qcc::MoeActivation::Silu, true, true>(x, up, gate,
// CHECK: qcc_experts_k0_down(
// CHECK: qcc::moeGroupedGemm<Cfg, false, qcc::MoeActivation::Silu, false, false>(h, down, nullptr,
// CHECK: qcc_experts_k0(
// CHECK: qcc::moeCombine<Cfg>(
func.func @experts(%x: tensor<?x128xf32>, %ids: tensor<?x2xi64>, %g: tensor<?x2xf32>, %up: tensor<8x256x128xf32>, %down: tensor<8x128x256xf32>, %gate: tensor<8x256x128xf32>) -> tensor<?x128xf32> {
  %0 = qcc.kernel moe "k0"(%x, %ids, %g, %up, %down, %gate) : (tensor<?x128xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<8x256x128xf32>, tensor<8x128x256xf32>, tensor<8x256x128xf32>) -> tensor<?x128xf32> {
  ^bb0(%a1: tensor<?x128xf32>, %a2: tensor<?x2xi64>, %a3: tensor<?x2xf32>, %a4: tensor<8x256x128xf32>, %a5: tensor<8x128x256xf32>, %a6: tensor<8x256x128xf32>):
    %1 = qcc.moe %a1, %a2, %a3, %a4, %a5, %a6 {activation = "silu"} : (tensor<?x128xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<8x256x128xf32>, tensor<8x128x256xf32>, tensor<8x256x128xf32>) -> tensor<?x128xf32>
    qcc.yield %1 : tensor<?x128xf32>
  }
  return %0 : tensor<?x128xf32>
}

// Without a gate projection (act(x W_up) W_down), GELU (tanh): no gate
// operand (a null parameter).
// CHECK-LABEL: ===== unit qcc_plain_k0 (regions: plain/k0) kind moe
// CHECK-NEXT: // launch: {{.*}}"name":"up","params":[{"name":"x","operand":0},{"name":"up","operand":3},{"name":"gate","null":true}
// CHECK: qcc::moeGroupedGemm<Cfg, false, qcc::MoeActivation::GeluTanh, true, true>(x, up, gate,
func.func @plain(%x: tensor<?x64xf32>, %ids: tensor<?x1xi64>, %g: tensor<?x1xf32>, %up: tensor<4x96x64xf32>, %down: tensor<4x64x96xf32>) -> tensor<?x64xf32> {
  %0 = qcc.kernel moe "k0"(%x, %ids, %g, %up, %down) : (tensor<?x64xf32>, tensor<?x1xi64>, tensor<?x1xf32>, tensor<4x96x64xf32>, tensor<4x64x96xf32>) -> tensor<?x64xf32> {
  ^bb0(%a1: tensor<?x64xf32>, %a2: tensor<?x1xi64>, %a3: tensor<?x1xf32>, %a4: tensor<4x96x64xf32>, %a5: tensor<4x64x96xf32>):
    %1 = qcc.moe %a1, %a2, %a3, %a4, %a5 {activation = "gelu_tanh"} : (tensor<?x64xf32>, tensor<?x1xi64>, tensor<?x1xf32>, tensor<4x96x64xf32>, tensor<4x64x96xf32>) -> tensor<?x64xf32>
    qcc.yield %1 : tensor<?x64xf32>
  }
  return %0 : tensor<?x64xf32>
}

// CHECK-NOT: ===== no kernel
