//===- qcc-calib.cpp - activation statistics for W8A8 quantization --------===//
//
//   qcc-calib FLOAT.qpkg --source SOURCE --samples N --seq-len L --out STATS.json
//             [--pruning-stats]
//
// docs/QUANTIZATION.md section 1; the statistics are runtime/generate/Calibrator.h's.
// SOURCE is a text file (tokenized whole with the artifact's tokenizer; N
// windows of L tokens spread evenly over it) or a folder with one
// <input>.npy per model input whose first dimension runs over samples (run
// in batches of up to 8; an `attention_mask` input's zeros mark positions
// that are not observed; --seq-len is then unused). qcc runs this tool: the
// tokenizer cannot share a process with ONNX (runtime/text/CMakeLists.txt).
// --pruning-stats also writes the linears' input Gram matrices to
// STATS.json.gram (float64; docs/SPARSITY.md), referenced from the JSON.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Artifact.h"
#include "runtime/generate/Calibrator.h"
#include "runtime/core/Progress.h"
#include "runtime/text/Tokenizer.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

using namespace qcc::rt;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string model, source, out, rotation;
  int64_t samples = 64, seqLen = 128;
  bool quiet = false;
  bool pruningStats = false;
  int64_t activationRows = 0;
};

[[noreturn]] void fail(const std::string &m) { throw std::runtime_error(m); }

/// Text: the source tokenized with the artifact's tokenizer.
std::vector<CalibrationBatch> textSource(const Options &o, const Artifact &a,
                                         const Function &fn) {
  checkTextInputs(fn);
  if (!a.section("tokenizer"))
    fail(a.path() + ": the artifact has no tokenizer (compile with "
         "--tokenizer, or calibrate with a folder of .npy inputs)");
  Tokenizer tok = artifactTokenizer(a);
  std::ifstream in(o.source, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return textBatches(fn, tok.encode(ss.str()), o.samples, o.seqLen, o.source);
}

/// Writes `bytes` to a temporary file beside `path`, renamed over it when
/// complete: an error leaves neither a partial file nor a lost old one.
void writeAtomically(const std::string &path, const std::string &bytes) {
  fs::path target(path);
  std::string tmp = (target.has_parent_path() ? target.parent_path() / "" : fs::path())
                        .string() +
                    "." + target.filename().string() + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    fail("cannot write " + path + ": " + std::strerror(errno));
  bool ok = true;
  for (size_t done = 0; ok && done < bytes.size();) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    ok = n > 0;
    done += ok ? n : 0;
  }
  ok = ::close(fd) == 0 && ok;
  std::error_code ec;
  if (ok)
    fs::rename(tmp, target, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    fail("cannot write " + path);
  }
}

/// True if `a` and `b` name one existing file.
bool sameFile(const std::string &a, const std::string &b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec) && !ec;
}

int run(Options &o) {
  auto t0 = std::chrono::steady_clock::now();
  if (o.samples <= 0 || o.seqLen <= 0)
    fail("--samples and --seq-len must be positive");
  if (sameFile(o.out, o.model) || sameFile(o.out, o.source))
    fail("--out " + o.out + " is an input; refusing to overwrite it");
  if (!fs::exists(o.source))
    fail("cannot read --source " + o.source + ": no such file or directory");
  // A device (/dev/zero) never ends: text is read only from a regular file.
  std::error_code ec;
  if (!fs::is_directory(o.source) &&
      (!fs::is_regular_file(o.source) ||
       fs::file_size(o.source, ec) > (uintmax_t(1) << 30) || ec))
    fail("cannot read --source " + o.source + ": not a folder or a regular "
         "file of at most 1 GiB");
  Artifact a = Artifact::load(o.model);
  const Function &fn = a.function("main");
  if (o.activationRows < 0 || o.activationRows > (1 << 16))
    fail("--activation-rows must be in [0, 65536]");
  Calibrator calibrator(a, o.pruningStats, o.activationRows);
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
  auto statistics = calibrator.statistics(
      o.samples, o.seqLen, o.pruningStats ? o.out + ".gram" : std::string(),
      o.activationRows > 0 ? o.out + ".rows" : std::string());
  if (!o.rotation.empty())
    statistics["rotation"] = o.rotation;
  writeAtomically(o.out, statistics.dump() + "\n");
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
  app.add_option("--activation-rows", o.activationRows,
                 "Also keep this many sampled rows of every linear's input, "
                 "for SmoothQuant's alpha search (written to OUT.rows)")
      ->capture_default_str();
  app.add_option("--rotation", o.rotation,
                 "The residual rotation the artifact was compiled with "
                 "(qcc --rotate), recorded in the statistics so that they "
                 "are not reused for another rotation");
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
