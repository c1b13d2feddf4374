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

} // namespace qcc::rt

#endif // QCC_RUNTIME_CPU_KVATTENTION_H
