# Writes test/passes/raise-moe.mlir (python3 test/passes/gen-raise-moe.py >
# test/passes/raise-moe.mlir): the optimum (past) spelling of
# a 3-expert, top-2 loop as exported by Qwen3-MoE, H=4, I=6.
E, K, H, I = 3, 2, 4, 6
def fn(name, spelling, gated=True, mutate=None):
    L = []
    a = L.append
    a(f"func.func @{name}(%x: tensor<?x{H}xf32>, %scores: tensor<?x{E}xf32>) -> tensor<?x{H}xf32> {{")
    a(f"  %k = qcc.constant dense<{K}> : tensor<1xi64>")
    a(f"  %depth = qcc.constant dense<{E}> : tensor<i64>")
    a(f"  %onoff = qcc.constant dense<[0, 1]> : tensor<2xi64>")
    a(f"  %shape = qcc.shape %x : (tensor<?x{H}xf32>) -> tensor<2xi64>")
    a(f"  %gates0, %ids = qcc.top_k %scores, %k {{axis = 1 : i64}} : (tensor<?x{E}xf32>, tensor<1xi64>) -> (tensor<?x{K}xf32>, tensor<?x{K}xi64>)")
    a(f"  %sum = qcc.reduce_sum %gates0 {{axes = array<i64: 1>}} : (tensor<?x{K}xf32>) -> tensor<?x1xf32>")
    a(f"  %gates = qcc.div %gates0, %sum : (tensor<?x{K}xf32>, tensor<?x1xf32>) -> tensor<?x{K}xf32>")
    a(f"  %oh = qcc.one_hot %ids, %depth, %onoff {{axis = 2 : i64}} : (tensor<?x{K}xi64>, tensor<i64>, tensor<2xi64>) -> tensor<?x{K}x{E}xi64>")
    a(f"  %ohT = qcc.transpose %oh {{perm = array<i64: 2, 1, 0>}} : (tensor<?x{K}x{E}xi64>) -> tensor<{E}x{K}x?xi64>")
    a(f"  %gu = qcc.unsqueeze %gates {{axes = array<i64: 2>}} : (tensor<?x{K}xf32>) -> tensor<?x{K}x1xf32>")
    a(f"  %gf = qcc.flatten %gu {{axis = 2 : i64}} : (tensor<?x{K}x1xf32>) -> tensor<?x1xf32>")
    a(f"  %xu = qcc.unsqueeze %x {{axes = array<i64: 0>}} : (tensor<?x{H}xf32>) -> tensor<1x?x{H}xf32>")
    a(f"  %rowshape = qcc.constant dense<[-1, {H}]> : tensor<2xi64>")
    a(f"  %acc0 = qcc.constant_of_shape %shape {{value = dense<0.000000e+00> : tensor<1xf32>}} : (tensor<2xi64>) -> tensor<?x{H}xf32>")
    acc = "%acc0"
    for e in range(E):
        ee = e if not (mutate == "swap" and e < 2) else 1 - e
        a(f"  %e{e} = qcc.constant dense<{ee}> : tensor<i64>")
        a(f"  %m{e} = qcc.gather %ohT, %e{e} {{axis = 0 : i64}} : (tensor<{E}x{K}x?xi64>, tensor<i64>) -> tensor<{K}x?xi64>")
        a(f"  %b{e} = qcc.cast %m{e} : tensor<{K}x?xi64> to tensor<{K}x?xi1>")
        a(f"  %nz{e} = qcc.non_zero %b{e} : (tensor<{K}x?xi1>) -> tensor<2x?xi64>")
        a(f"  %nzT{e} = qcc.transpose %nz{e} {{perm = array<i64: 1, 0>}} : (tensor<2x?xi64>) -> tensor<?x2xi64>")
        a(f"  %p{e}:2 = qcc.split %nzT{e} {{axis = 1 : i64, sizes = array<i64: 1, 1>}} : (tensor<?x2xi64>) -> (tensor<?x1xi64>, tensor<?x1xi64>)")
        a(f"  %slot{e} = qcc.squeeze %p{e}#0 {{axes = array<i64: 1>}} : (tensor<?x1xi64>) -> tensor<?xi64>")
        a(f"  %tok{e} = qcc.squeeze %p{e}#1 {{axes = array<i64: 1>}} : (tensor<?x1xi64>) -> tensor<?xi64>")
        a(f"  %g3{e} = qcc.gather %xu, %tok{e} {{axis = 1 : i64}} : (tensor<1x?x{H}xf32>, tensor<?xi64>) -> tensor<1x?x{H}xf32>")
        a(f"  %r{e} = qcc.reshape %g3{e}, %rowshape : (tensor<1x?x{H}xf32>, tensor<2xi64>) -> tensor<?x{H}xf32>")
        def w(nm, n, k, seed):
            vals = ", ".join(f"{((seed*7 + i*3) % 11 - 5) / 8.0}" for i in range(n*k))
            return f"  %{nm} = qcc.constant dense<[{vals}]> : tensor<{n*k}xf32>"
        # Constants as 2-D tensors via a dense splat-free literal.
        def w2(nm, n, k, seed):
            rows = ", ".join("[" + ", ".join(f"{((seed*7 + (r*k+c)*3) % 11 - 5) / 8.0}" for c in range(k)) + "]" for r in range(n))
            return f"  %{nm} = qcc.constant dense<[{rows}]> : tensor<{n}x{k}xf32>"
        a(w2(f"wu{e}", I, H, 3*e+1))
        a(w2(f"wd{e}", H, I, 3*e+2))
        a(f"  %u{e} = qcc.linear %r{e}, %wu{e} : (tensor<?x{H}xf32>, tensor<{I}x{H}xf32>) -> tensor<?x{I}xf32>")
        if gated:
            a(w2(f"wg{e}", I, H, 3*e+3))
            a(f"  %gl{e} = qcc.linear %r{e}, %wg{e} : (tensor<?x{H}xf32>, tensor<{I}x{H}xf32>) -> tensor<?x{I}xf32>")
            a(f"  %s{e} = qcc.silu %gl{e} : tensor<?x{I}xf32>")
            a(f"  %h{e} = qcc.mul %s{e}, %u{e} : (tensor<?x{I}xf32>, tensor<?x{I}xf32>) -> tensor<?x{I}xf32>")
        else:
            a(f"  %h{e} = qcc.gelu %u{e} : tensor<?x{I}xf32>")
        a(f"  %y{e} = qcc.linear %h{e}, %wd{e} : (tensor<?x{I}xf32>, tensor<{H}x{I}xf32>) -> tensor<?x{H}xf32>")
        a(f"  %tk{e} = qcc.mul %tok{e}, %k : (tensor<?xi64>, tensor<1xi64>) -> tensor<?xi64>")
        if mutate == "wrong_gate":
            a(f"  %gi{e} = qcc.add %tok{e}, %tk{e} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>")
        else:
            a(f"  %gi{e} = qcc.add %slot{e}, %tk{e} : (tensor<?xi64>, tensor<?xi64>) -> tensor<?xi64>")
        a(f"  %gw{e} = qcc.gather %gf, %gi{e} {{axis = 0 : i64}} : (tensor<?x1xf32>, tensor<?xi64>) -> tensor<?x1xf32>")
        a(f"  %yw{e} = qcc.mul %y{e}, %gw{e} : (tensor<?x{H}xf32>, tensor<?x1xf32>) -> tensor<?x{H}xf32>")
        a(f"  %tu{e} = qcc.unsqueeze %tok{e} {{axes = array<i64: 1>}} : (tensor<?xi64>) -> tensor<?x1xi64>")
        a(f"  %ysh{e} = qcc.shape %yw{e} : (tensor<?x{H}xf32>) -> tensor<2xi64>")
        a(f"  %ti{e} = qcc.expand %tu{e}, %ysh{e} : (tensor<?x1xi64>, tensor<2xi64>) -> tensor<?x{H}xi64>")
        a(f"  %z{e} = qcc.constant_of_shape %shape {{value = dense<0.000000e+00> : tensor<1xf32>}} : (tensor<2xi64>) -> tensor<?x{H}xf32>")
        a(f"  %sc{e} = qcc.scatter_elements %z{e}, %ti{e}, %yw{e} {{axis = 0 : i64}} : (tensor<?x{H}xf32>, tensor<?x{H}xi64>, tensor<?x{H}xf32>) -> tensor<?x{H}xf32>")
        a(f"  %acc{e+1} = qcc.add {acc}, %sc{e} : (tensor<?x{H}xf32>, tensor<?x{H}xf32>) -> tensor<?x{H}xf32>")
        acc = f"%acc{e+1}"
    a(f"  return {acc} : tensor<?x{H}xf32>")
    a("}")
    return "\n".join(L)

print("""// RUN: qcc-opt %s --raise-moe --split-input-file | FileCheck %s
// Written by test/passes/gen-raise-moe.py (python3 test/passes/gen-raise-moe.py
// > test/passes/raise-moe.mlir).

// Qwen3-MoE as optimum exports it (3 experts, top-2, H = 4, I = 6): per
// expert, its routes from the one-hot mask, its rows, a SwiGLU MLP, the
// routes' gates, a scatter into zeros, added up. One qcc.moe over the
// experts' weights stacked in id order.
// CHECK-LABEL: func @optimum_swiglu
// CHECK-DAG: %[[G:.*]] = qcc.div
// CHECK-DAG: %{{.*}}, %[[IDS:.*]] = qcc.top_k
// CHECK: %[[Y:.*]] = qcc.moe %arg0, %[[IDS]], %[[G]], %{{.*}}, %{{.*}}, %{{.*}} {activation = "silu"} : (tensor<?x4xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<3x6x4xf32>, tensor<3x4x6xf32>, tensor<3x6x4xf32>) -> tensor<?x4xf32>
// CHECK-NOT: qcc.non_zero
// CHECK-NOT: qcc.scatter_elements
// CHECK: return %[[Y]]""")
print(fn("optimum_swiglu", "past"))
print("""
// -----

// Experts without a gate (act(up x)) and GELU.
// CHECK-LABEL: func @ungated_gelu
// CHECK: qcc.moe %arg0, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = "gelu"} : (tensor<?x4xf32>, tensor<?x2xi64>, tensor<?x2xf32>, tensor<3x6x4xf32>, tensor<3x4x6xf32>) -> tensor<?x4xf32>""")
print(fn("ungated_gelu", "past", gated=False))
print("""
// -----

// Experts 0 and 1 read each other's mask: the loop is still over every
// expert, and the stacking follows the ids the masks select (expert 0's
// weights are the second term's).
// CHECK-LABEL: func @masks_in_other_order
// CHECK: qcc.moe""")
print(fn("masks_in_other_order", "past", mutate="swap"))
print("""
// -----

// Near miss: the gate lookup reads token * k + token, not + slot: another
// route's gate, so nothing is raised.
// CHECK-LABEL: func @wrong_gate_stays
// CHECK-NOT: qcc.moe
// CHECK: qcc.scatter_elements""")
print(fn("wrong_gate_stays", "past", mutate="wrong_gate"))
