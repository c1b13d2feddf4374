//===- Progress.cpp - progress lines for long work -----------------------===//
#include "runtime/core/Progress.h"

#include <cmath>
#include <cstdio>
#include <unistd.h>

using namespace qcc::rt;

bool Progress::stderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }

std::string qcc::rt::formatSeconds(double seconds) {
  long s = std::lround(std::max(0.0, seconds));
  if (s < 60)
    return std::to_string(s) + " s";
  return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
}

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label(std::move(label)), total(total), enabled(enabled),
      start(std::chrono::steady_clock::now()) {}

Progress::~Progress() { clear(); }

void Progress::update(int64_t done, std::string_view detail) {
  if (!enabled)
    return;
  double elapsed = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  std::string line = label + ": " + std::to_string(done) + "/" +
                     std::to_string(total);
  if (!detail.empty())
    (line += ' ') += detail;
  line += " (" + formatSeconds(elapsed);
  // The mean step time so far predicts the rest.
  if (done > 0 && done < total)
    line += ", ETA " + formatSeconds(elapsed / done * (total - done));
  line += ")";
  std::string pad(line.size() < shown ? shown - line.size() : 0, ' ');
  std::fprintf(stderr, "\r%s%s", line.c_str(), pad.c_str());
  std::fflush(stderr);
  shown = line.size();
}

void Progress::clear() {
  if (!enabled || shown == 0)
    return;
  std::fprintf(stderr, "\r%s\r", std::string(shown, ' ').c_str());
  std::fflush(stderr);
  shown = 0;
}
