//===- qcc-calib.cpp - activation statistics for W8A8 quantization --------===//
//
//   qcc-calib FLOAT.qpkg --source SOURCE --samples N --seq-len L --out STATS.json
//             [--pruning-stats]
//
// docs/QUANTIZATION.md section 1; the statistics are runtime/Calibrator.h's.
// SOURCE is a text file (tokenized whole with the artifact's tokenizer; N
// windows of L tokens spread evenly over it) or a folder with one
// <input>.npy per model input whose first dimension runs over samples (run
// in batches of up to 8; an `attention_mask` input's zeros mark positions
// that are not observed; --seq-len is then unused). qcc runs this tool: the
// tokenizer cannot share a process with ONNX (runtime/CMakeLists.txt).
// --pruning-stats also writes the linears' input Gram matrices to
// STATS.json.gram (float64; docs/SPARSITY.md), referenced from the JSON.
//
//===----------------------------------------------------------------------===//
#include "runtime/Artifact.h"
#include "runtime/Calibrator.h"
#include "runtime/Progress.h"
#include "runtime/Tokenizer.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

using namespace qcc::rt;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string model, source, out;
  int64_t samples = 64, seqLen = 128;
  bool quiet = false;
  bool pruningStats = false;
};

[[noreturn]] void fail(const std::string &m) { throw std::runtime_error(m); }

/// Text: the source tokenized with the artifact's tokenizer.
std::vector<CalibrationBatch> textSource(const Options &o, const Artifact &a,
                                         const Function &fn) {
  checkTextInputs(fn);
  auto blob = a.section("tokenizer");
  if (!blob)
    fail(a.path() + ": the artifact has no tokenizer (compile with "
         "--tokenizer, or calibrate with a folder of .npy inputs)");
  Tokenizer tok(*blob);
  std::ifstream in(o.source, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return textBatches(fn, tok.encode(ss.str()), o.samples, o.seqLen, o.source);
}

int run(Options &o) {
  auto t0 = std::chrono::steady_clock::now();
  if (o.samples <= 0 || o.seqLen <= 0)
    fail("--samples and --seq-len must be positive");
  if (!fs::exists(o.source))
    fail("cannot read --source " + o.source + ": no such file or directory");
  Artifact a = Artifact::load(o.model);
  const Function &fn = a.function("main");
  Calibrator calibrator(a, o.pruningStats);
  std::vector<CalibrationBatch> batches =
      fs::is_directory(o.source)
          ? npyBatches(fn, o.source, o.samples, o.seqLen, o.quiet)
          : textSource(o, a, fn);
  int64_t done = 0;
  Progress progress("calibration samples", o.samples,
                    !o.quiet && Progress::stderrIsTerminal());
  for (const CalibrationBatch &b : batches) {
    done += calibrator.run(b);
    progress.update(done);
  }
  progress.clear();
  std::string stats =
      calibrator
          .statistics(o.samples, o.seqLen,
                      o.pruningStats ? o.out + ".gram" : std::string())
          .dump();
  std::ofstream f(o.out);
  if (!f)
    fail("cannot write " + o.out);
  f << stats << "\n";
  if (!f)
    fail("cannot write " + o.out);
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!o.quiet)
    std::cerr << "calibrated " << calibrator.linears() << " linears and "
              << calibrator.attentions() << " attentions on " << o.samples
              << " samples of " << o.seqLen << " tokens in "
              << formatSeconds(secs) << "; wrote " << o.out << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  CLI::App app{"qcc-calib: activation statistics of a float qcc artifact for "
               "W8A8 quantization (docs/QUANTIZATION.md). Nodes are identified "
               "by attrs qcc.calib_id; in an artifact without any, the linear "
               "and attention nodes of main are numbered in program order."};
  app.add_option("model", o.model, "The float artifact (.qpkg)")->required();
  app.add_option("--source", o.source,
                 "A text file, or a folder with <input>.npy per model input")
      ->required();
  app.add_option("--samples", o.samples, "Calibration samples")
      ->capture_default_str();
  app.add_option("--seq-len", o.seqLen,
                 "Tokens per sample (text sources)")
      ->capture_default_str();
  app.add_option("--out", o.out, "The statistics (JSON)")->required();
  app.add_flag("--pruning-stats", o.pruningStats,
               "Also the Gram matrix X^T X of every linear's input, for "
               "2:4 pruning (written to OUT.gram)");
  app.add_flag("--quiet", o.quiet,
               "No progress line and no summary (errors only)");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception &e) {
    std::cerr << "qcc-calib: error: " << e.what() << "\n";
    return 1;
  }
}
