// A region the emitter has no kernel for gets none, and a reason; the
// others of the module are emitted as usual (the runtime runs such regions
// on the CPU).

// RUN: qcc-opt --qcc-print-cuda %s -o /dev/null | FileCheck %s

// CHECK: ===== unit qcc_supported_k0 (regions: supported/k0) kind elementwise
// CHECK-NOT: ===== unit
// CHECK: ===== no kernel for head16/k0 (attention): attention with head size 16 (needs a multiple of 32 <= 256)
// CHECK-NEXT: ===== no kernel for logarithm/k0 (elementwise): no CUDA kernel for 'qcc.log' in an elementwise chain yet
// CHECK-NEXT: ===== no kernel for odd_k/k0 (gemm_f16): GEMM with K = 172 (K * 2 bytes must be a multiple of 16)
// CHECK-NOT: =====

func.func @head16(%q: tensor<?x?x64xf32>, %k: tensor<?x?x64xf32>, %v: tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  %0 = qcc.kernel attention "k0"(%q, %k, %v) : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32> {
  ^bb0(%a1: tensor<?x?x64xf32>, %a2: tensor<?x?x64xf32>, %a3: tensor<?x?x64xf32>):
    %1 = qcc.attention %a1, %a2, %a3 {causal = true, num_heads = 4 : i64, num_kv_heads = 4 : i64, scale = 2.500000e-01 : f32} : (tensor<?x?x64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>) -> tensor<?x?x64xf32>
    qcc.yield %1 : tensor<?x?x64xf32>
  }
  return %0 : tensor<?x?x64xf32>
}

func.func @logarithm(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %0 = qcc.kernel elementwise "k0"(%x) : (tensor<?x16xf32>) -> tensor<?x16xf32> {
  ^bb0(%a1: tensor<?x16xf32>):
    %1 = qcc.log %a1 : tensor<?x16xf32>
    qcc.yield %1 : tensor<?x16xf32>
  }
  return %0 : tensor<?x16xf32>
}

func.func @odd_k(%x: tensor<?x?x172xf32>, %w: tensor<64x172xf32>) -> tensor<?x?x64xf32> {
  %0 = qcc.kernel gemm_f16 "k0"(%x, %w) : (tensor<?x?x172xf32>, tensor<64x172xf32>) -> tensor<?x?x64xf32> {
  ^bb0(%a1: tensor<?x?x172xf32>, %a2: tensor<64x172xf32>):
    %1 = qcc.linear %a1, %a2 : (tensor<?x?x172xf32>, tensor<64x172xf32>) -> tensor<?x?x64xf32>
    qcc.yield %1 : tensor<?x?x64xf32>
  }
  return %0 : tensor<?x?x64xf32>
}

func.func @supported(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  %0 = qcc.kernel elementwise "k0"(%x) : (tensor<?x16xf32>) -> tensor<?x16xf32> {
  ^bb0(%a1: tensor<?x16xf32>):
    %1 = qcc.neg %a1 : tensor<?x16xf32>
    qcc.yield %1 : tensor<?x16xf32>
  }
  return %0 : tensor<?x16xf32>
}
