//===- Metrics.cpp --------------------------------------------------------===//
#include "serve/Metrics.h"

#include <sstream>

using namespace qcc::serve;

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i])
    ++i;
  ++counts[i];
  ++count;
  sum += seconds;
}

namespace {

/// A label value with Prometheus' escapes (backslash, quote, newline).
std::string labelValue(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void histogram(std::ostream &os, const char *name, const char *help,
               const Histogram &h, const std::string &label) {
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name
     << " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < Histogram::kBounds.size(); ++i) {
    cumulative += h.counts[i];
    os << name << "_bucket{" << label << ",le=\"" << Histogram::kBounds[i]
       << "\"} " << cumulative << '\n';
  }
  os << name << "_bucket{" << label << ",le=\"+Inf\"} " << h.count << '\n'
     << name << "_sum{" << label << "} " << h.sum << '\n'
     << name << "_count{" << label << "} " << h.count << '\n';
}

} // namespace

std::string qcc::serve::renderPrometheus(const MetricsSnapshot &s,
                                         const std::string &model) {
  std::ostringstream os;
  std::string label = "model=\"" + labelValue(model) + "\"";
  auto scalar = [&](const char *name, const char *type, const char *help,
                    auto value, const std::string &extra = {}) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' '
       << type << '\n'
       << name << '{' << label << extra << "} " << value << '\n';
  };
  const Metrics &m = s.totals;
  os << "# HELP qcc_requests_total Requests finished, by finish reason.\n"
        "# TYPE qcc_requests_total counter\n";
  const char *reasons[] = {"stop", "length", "cancelled", "error"};
  for (int i = 0; i < 4; ++i)
    os << "qcc_requests_total{" << label << ",finish_reason=\"" << reasons[i]
       << "\"} " << m.requestsFinished[i] << '\n';
  scalar("qcc_requests_rejected_total", "counter",
         "Requests refused before they were queued (400, 429, 503).",
         m.requestsRejected);
  scalar("qcc_prompt_tokens_total", "counter", "Prompt tokens prefilled.",
         m.promptTokens);
  scalar("qcc_generation_tokens_total", "counter", "Tokens generated.",
         m.generatedTokens);
  scalar("qcc_decode_steps_total", "counter", "Decode calls.", m.decodeSteps);
  scalar("qcc_decode_rows_total", "counter",
         "Requests advanced by decode calls (over qcc_decode_steps_total: the "
         "mean decode batch).",
         m.decodeRows);
  scalar("qcc_prefill_calls_total", "counter",
         "Prefill calls (each at most --prefill-chunk prompt tokens).",
         m.prefillCalls);
  scalar("qcc_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens whose KV blocks came from the prefix cache.",
         m.prefixCacheHitTokens);
  scalar("qcc_preemptions_total", "counter",
         "Running requests sent back to the queue (their KV blocks freed, "
         "recomputed when admitted again) to make room for others' tokens.",
         m.preemptions);
  scalar("qcc_prefix_cache_blocks", "gauge",
         "KV blocks published for prefix sharing (in use or evictable).",
         s.prefixCacheBlocks);
  scalar("qcc_requests_waiting", "gauge", "Requests queued, not yet admitted.",
         s.waiting);
  scalar("qcc_requests_running", "gauge",
         "Requests in the running batch (prefilling or decoding).", s.running);
  scalar("qcc_kv_cache_units_in_use", "gauge",
         "KV cache blocks (paged) or slots (contiguous) held by requests.",
         s.cacheUnitsInUse,
         std::string(",unit=\"") + (s.paged ? "block" : "slot") + "\"");
  scalar("qcc_kv_cache_units", "gauge",
         "KV cache blocks (paged) or slots (contiguous) in all.", s.cacheUnits,
         std::string(",unit=\"") + (s.paged ? "block" : "slot") + "\"");
  histogram(os, "qcc_time_to_first_token_seconds",
            "From arrival to the first generated token.", m.timeToFirstToken,
            label);
  histogram(os, "qcc_inter_token_latency_seconds",
            "Between consecutive generated tokens of a request.",
            m.interTokenLatency, label);
  histogram(os, "qcc_request_latency_seconds",
            "From arrival to the end of a request.", m.requestLatency, label);
  return os.str();
}
