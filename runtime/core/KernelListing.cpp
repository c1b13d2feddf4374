//===- KernelListing.cpp - an artifact's GPU kernels as text --------------===//
#include "runtime/core/KernelListing.h"
#include "format/KernelKinds.h"

#include <algorithm>

using namespace qcc::rt;

void qcc::rt::listKernels(const Artifact &a, std::ostream &os) {
  std::vector<const Function *> plans;
  for (const Function &f : a.functions())
    if (const Function *g = a.gpuFunction(f.name))
      plans.push_back(g);
  if (plans.empty()) {
    os << "no GPU kernels (compiled with --no-cuda or without CUDA)\n";
    return;
  }
  std::sort(plans.begin(), plans.end(),
            [](const Function *x, const Function *y) { return x->name < y->name; });
  for (const Function *fn : plans) {
    std::vector<const KernelRecord *> launches;
    for (const Node &n : fn->nodes)
      if (n.body && n.attrs.value("kernel", int64_t(-1)) >= 0)
        launches.push_back(&a.kernels()[n.attrs["kernel"].get<size_t>()]);
    os << "function " << fn->name << ": " << launches.size() << " launches\n";
    for (const KernelRecord *k : launches) {
      os << "  " << k->region << " " << qcc::format::spelling(k->kind);
      if (!k->unsupported.empty()) {
        os << " unsupported: " << k->unsupported << "\n";
        continue;
      }
      os << " " << k->entry;
      for (const char *t : {"sm_80", "sm_90", "ptx"}) {
        auto it = k->binaries.find(t);
        os << " " << t << "="
           << (it == k->binaries.end() ? 0 : it->second.second);
      }
      size_t smem = 0;
      for (const auto &step : k->launch.steps)
        smem = std::max<size_t>(smem, step.dynamicSmem);
      os << " smem=" << smem << "\n";
    }
  }
}
