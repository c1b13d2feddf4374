//===- Progress.h - progress lines for long work ---------------*- C++ -*-===//
//
// Long work (calibration, NVRTC compiles, perplexity windows) shows one line
// redrawn in place on a terminal, "label: done/total detail (12 s, ETA 30 s)",
// and nothing at all when stderr is not a terminal (pipes, CI logs) or the
// tool runs with --quiet.
//
//===----------------------------------------------------------------------===//
#ifndef QCC_RUNTIME_PROGRESS_H
#define QCC_RUNTIME_PROGRESS_H

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace qcc::rt {

class Progress {
public:
  /// Shown only where `enabled` (default: stderr is a terminal).
  Progress(std::string label, int64_t total, bool enabled = stderrIsTerminal());
  ~Progress();
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;

  /// `done` of `total` steps finished; `detail` names the current one.
  void update(int64_t done, std::string_view detail = {});
  /// Clears the line (before other output, and at the end).
  void clear();

  static bool stderrIsTerminal();

private:
  std::string label;
  int64_t total;
  bool enabled;
  size_t shown = 0; // characters on the line now
  std::chrono::steady_clock::time_point start;
};

/// "42 s", "3 min 5 s": a duration for progress lines.
std::string formatSeconds(double seconds);

} // namespace qcc::rt

#endif // QCC_RUNTIME_PROGRESS_H
