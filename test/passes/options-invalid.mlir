// Pass options with a fixed set of values are enum-typed: a value outside the
// set is refused by the option parser, before any pass runs, with one line
// naming the option and the value.
// RUN: not qcc-opt %s --kv-cache-layout="layout=ring" 2>&1 | FileCheck %s --check-prefix=LAYOUT
// RUN: not qcc-opt %s --kv-cache-layout="kv-dtype=bf16" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not qcc-opt %s --quantize="activations=per-row" 2>&1 | FileCheck %s --check-prefix=ACT
// The values in the set are accepted:
// RUN: qcc-opt %s --kv-cache-layout="layout=contiguous kv-dtype=i8" --quantize="activations=static" | FileCheck %s --check-prefix=OK

// LAYOUT: for the --layout option: Cannot find option named 'ring'!
// DTYPE: for the --kv-dtype option: Cannot find option named 'bf16'!
// ACT: for the --activations option: Cannot find option named 'per-row'!
// OK: func.func @empty()

func.func @empty() {
  return
}
