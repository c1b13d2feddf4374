//===- KvAttention.h - qcc.kv_attention on the CPU --------------*- C++ -*-===//
#ifndef QCC_RUNTIME_CPU_KVATTENTION_H
#define QCC_RUNTIME_CPU_KVATTENTION_H

#include "runtime/core/KvCache.h"
#include "runtime/cpu/CpuKernels.h"

namespace qcc::rt {

/// `qcc.kv_attention` on the CPU (docs/KV_CACHE.md): appends the valid
/// tokens' keys/values at positions cached_b + t and attends causally over
/// the cache. Does not advance the cache (the session does, after all
/// layers). Operands: query [B, S, H*D], key, value [B, S, Hkv*D]; attrs
/// layer, num_heads, num_kv_heads, scale.
Tensor kvAttention(const Attrs &attrs, const Operands &ops, KvBatch &kv);

/// Whether a decode step's `pairs` (sequence, kv head) pairs are split
/// below a pair (attendRuns's phases apart) for `threads` threads: where a
/// task per pair would leave a thread without one. (3 pairs on 2 threads,
/// 2:1, measured no faster split on a 2-core EPYC: the shared memory
/// bandwidth, not the cores, bounds them; docs/CPU_BACKEND.md.)
bool kvAttentionSplitsDecode(int64_t pairs, int threads);

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPU_KVATTENTION_H
