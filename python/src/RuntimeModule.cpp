//===- RuntimeModule.cpp - qcc._runtime: artifacts, sessions, text -------===//
//
// The runtime libraries for Python (python/qcc/__init__.py wraps them; docs/
// PYTHON.md): an Artifact loaded once, Sessions that run its entry points on
// the CPU or CUDA backend (runtime/generate/Backend.h), generation as qrun --prompt
// runs it (runtime/generate/Generator.h: generateText), perplexity, the tokenizer.
//
// The GIL is released while the runtime works. A session serializes its
// calls with a mutex (one executor, one KV cache at a time), so one session
// may be shared by Python threads; sessions of one artifact run in parallel.
// Errors from the runtime are qcc.Error with the runtime's one line; bad
// arguments (types, ranges, arrays) are TypeError or ValueError.
//
//===----------------------------------------------------------------------===//
#include "runtime/core/Artifact.h"
#include "runtime/generate/Backend.h"
#include "runtime/cpu/CpuF32Gemm.h"
#include "runtime/cpu/CpuKernels.h"
#include "runtime/generate/Generator.h"
#include "runtime/core/HalfFloat.h"
#include "runtime/generate/Perplexity.h"
#include "runtime/generate/Sampler.h"
#include "runtime/cpu/Session.h"
#include "runtime/text/TextStream.h"
#include "runtime/text/Tokenizer.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <variant>

namespace nb = nanobind;
using namespace qcc::rt;

namespace {

/// Raises qcc.Error (python/qcc/_errors.py) with `message`.
[[noreturn]] void raiseError(const std::string &message) {
  nb::object type = nb::module_::import_("qcc._errors").attr("Error");
  PyErr_SetString(type.ptr(), message.c_str());
  throw nb::python_error();
}

/// Runs `work` without the GIL; a runtime error becomes qcc.Error (raised
/// with the GIL held again). Python errors raised inside (callbacks) pass.
template <typename F> auto withoutGil(F &&work) -> decltype(work()) {
  std::string error;
  {
    nb::gil_scoped_release release;
    try {
      return work();
    } catch (const nb::python_error &) {
      throw;
    } catch (const std::bad_alloc &) {
      error = "out of memory";
    } catch (const std::exception &e) {
      error = e.what();
    }
  }
  raiseError(error);
}

/// numpy's view of a runtime element type (bfloat16 and float8 have none:
/// widened).
nb::dlpack::dtype dlpackType(DType t) {
  switch (t) {
  case DType::F32:
  case DType::BF16:
  case DType::F8E4M3:
    return nb::dtype<float>();
  case DType::F16:
    return {(uint8_t)nb::dlpack::dtype_code::Float, 16, 1};
  case DType::I64:
    return nb::dtype<int64_t>();
  case DType::I32:
    return nb::dtype<int32_t>();
  case DType::I8:
    return nb::dtype<int8_t>();
  case DType::Bool:
    return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

/// The runtime element type of a numpy array (dlpackType's inverse; numpy
/// has no bfloat16), or nullopt.
std::optional<DType> runtimeType(nb::dlpack::dtype d) {
  for (DType t : {DType::F32, DType::F16, DType::I64, DType::I32, DType::I8,
                  DType::Bool})
    if (dlpackType(t) == d)
      return t;
  return std::nullopt;
}

/// A C-contiguous numpy array as a tensor: a view of its memory (no copy;
/// the caller keeps the array alive while the tensor is used), or a copy
/// widened to the port's bfloat16 from float32.
Tensor inputTensor(const std::string &name, nb::handle value,
                   const Port *port) {
  nb::ndarray<nb::ro, nb::numpy> array;
  if (!nb::try_cast(value, array))
    throw nb::type_error(("input '" + name + "': expected a numpy array, got " +
                          nb::type_name(value.type()).c_str())
                             .c_str());
  if (array.device_type() != nb::device::cpu::value)
    throw nb::value_error(("input '" + name + "': not in host memory").c_str());
  std::optional<DType> dtype = runtimeType(array.dtype());
  if (!dtype)
    throw nb::value_error(
        ("input '" + name +
         "': element type not supported (float32, float16, int64, int32, "
         "int8 or bool)")
            .c_str());
  Shape shape(array.ndim());
  int64_t expected = 1; // C order: each stride the product of later sizes
  bool contiguous = true;
  for (size_t i = array.ndim(); i-- > 0;) {
    shape[i] = (int64_t)array.shape(i);
    if (shape[i] != 1 && array.stride(i) != expected)
      contiguous = false;
    expected *= shape[i];
  }
  if (!contiguous)
    throw nb::value_error(("input '" + name +
                           "': the array is not C-contiguous (pass "
                           "numpy.ascontiguousarray(x))")
                              .c_str());
  Tensor t = Tensor::view(*dtype, shape, array.data());
  if (port && port->dtype == DType::BF16 && *dtype == DType::F32)
    return convertFloat(t, DType::BF16);
  return t;
}

/// A tensor as a numpy array over the same memory when the tensor owns it
/// (the array keeps it alive), else a copy; bfloat16 widened to float32.
nb::object outputArray(Tensor t) {
  if (t.dtype() == DType::BF16 || t.dtype() == DType::F8E4M3)
    t = convertFloat(t, DType::F32);
  if (t.isView()) {
    Tensor copy = Tensor::uninitialized(t.dtype(), t.shape());
    if (t.bytes())
      std::memcpy(copy.data<std::byte>(), t.raw(), t.bytes());
    t = std::move(copy);
  }
  auto *owned = new Tensor(std::move(t));
  nb::capsule owner(owned, [](void *p) noexcept { delete (Tensor *)p; });
  std::vector<size_t> shape(owned->shape().begin(), owned->shape().end());
  nb::ndarray<nb::numpy> array(const_cast<void *>(owned->raw()), shape.size(),
                               shape.data(), owner, nullptr,
                               dlpackType(owned->dtype()));
  return array.cast(nb::rv_policy::reference);
}

struct PyArtifact {
  std::shared_ptr<const Artifact> artifact;

  explicit PyArtifact(const std::string &path)
      : artifact(withoutGil([&] {
          return std::make_shared<const Artifact>(Artifact::load(path));
        })) {}

  /// Entry point `name`, or qcc.Error naming the artifact.
  const Function &function(const std::string &name) const {
    return *withoutGil([&] { return &artifact->function(name); });
  }

  nb::list ports(const std::vector<Port> &list) const {
    nb::list out;
    for (const Port &p : list) {
      nb::list shape;
      for (size_t i = 0; i < p.shape.size(); ++i) {
        if (p.shape[i] >= 0)
          shape.append(p.shape[i]);
        else if (i < p.dims.size() && !p.dims[i].empty())
          shape.append(nb::str(p.dims[i].c_str()));
        else
          shape.append(nb::none());
      }
      nb::dict d;
      d["name"] = p.name;
      d["dtype"] = dtypeName(
          p.dtype == DType::BF16 || p.dtype == DType::F8E4M3 ? DType::F32
                                                              : p.dtype);
      d["shape"] = nb::tuple(shape);
      out.append(d);
    }
    return out;
  }
};

struct GenerationRequest {
  std::vector<std::string> prompts;
  GenerateOptions options;
  std::vector<std::string> stop;
  std::optional<std::string> eosToken;
  GenerationMode mode;
  nb::object onText; // (prompt index, text piece) -> bool | None
};

class PySession {
public:
  /// A runtime LoRA adapter's index by name (Artifact::loraAdapterIndex).
  int64_t loraAdapterIndex(const std::string &name) const {
    return artifact->loraAdapterIndex(name);
  }
  PySession(const PyArtifact &a, const std::string &backend, int threads,
            const std::string &plan)
      : artifact(a.artifact) {
    BackendOptions b;
    if (backend == "auto")
      b.backend = Backend::Auto;
    else if (backend == "cpu")
      b.backend = Backend::Cpu;
    else if (backend == "cuda")
      b.backend = Backend::Cuda;
    else
      throw nb::value_error(("backend must be auto, cpu or cuda, not '" +
                             backend + "'")
                                .c_str());
    if (plan != "ops" && plan != "kernels")
      throw nb::value_error(
          ("plan must be ops or kernels, not '" + plan + "'").c_str());
    if (threads < 0 || threads > 4096)
      throw nb::value_error(
          ("threads must be in [0, 4096], not " + std::to_string(threads))
              .c_str());
    b.plan = plan == "kernels" ? Session::Plan::Kernels : Session::Plan::Ops;
    withoutGil([&] {
      if (threads > 0)
        setCpuThreads(threads);
      std::ostringstream log;
      executor = makeExecutor(*artifact, b, log);
      // "[qrun] CPU backend: WHY": the line without qrun's tag.
      backendLine = log.str();
      while (!backendLine.empty() && backendLine.back() == '\n')
        backendLine.pop_back();
      if (backendLine.rfind("[qrun] ", 0) == 0)
        backendLine.erase(0, 7);
      return 0;
    });
    backendName = dynamic_cast<Session *>(executor.get()) ? "cpu" : "cuda";
  }

  nb::dict run(const nb::dict &inputs, const std::string &function) {
    const Function *fn = nullptr;
    for (const Function &f : artifact->functions())
      if (f.name == function)
        fn = &f;
    if (!fn)
      raiseError(artifact->path() + ": no entry point '" + function + "'");
    std::map<std::string, Tensor> tensors;
    for (auto [key, value] : inputs) {
      if (!nb::isinstance<nb::str>(key))
        throw nb::type_error("inputs: keys must be input names (str)");
      std::string name = nb::cast<std::string>(key);
      const Port *port = nullptr;
      for (const Port &p : fn->inputs)
        if (p.name == name)
          port = &p;
      tensors[name] = inputTensor(name, value, port);
    }
    // `inputs` holds the arrays the views read while the GIL is released.
    auto outputs = withoutGil([&] {
      std::lock_guard<std::mutex> lock(mutex);
      return executor->run(function, tensors);
    });
    nb::dict result;
    for (auto &[name, t] : outputs)
      result[nb::str(name.c_str())] = outputArray(std::move(t));
    return result;
  }

  nb::list generate(GenerationRequest &r) {
    if (r.prompts.empty())
      throw nb::value_error("generate: no prompts");
    if (r.options.maxNewTokens < 0)
      throw nb::value_error("max_new_tokens must be >= 0");
    if (!(std::isfinite(r.options.sampler.temperature) &&
          r.options.sampler.temperature >= 0))
      throw nb::value_error("temperature must be a finite number >= 0");
    if (r.mode.context <= 0)
      throw nb::value_error("context must be > 0");
    try {
      Sampler check(r.options.sampler);
    } catch (const std::exception &e) {
      throw nb::value_error(e.what());
    }
    size_t n = r.prompts.size();
    std::vector<std::vector<int64_t>> prompts(n);
    std::vector<std::optional<TextStream>> streams(n);
    std::vector<bool> consumerGone(n, false);
    std::optional<nb::python_error> callbackError;
    GenerateResult result = withoutGil([&] {
      std::lock_guard<std::mutex> lock(mutex);
      const Tokenizer &tok = tokenizer();
      for (size_t i = 0; i < n; ++i) {
        prompts[i] = tok.encode(r.prompts[i]);
        if (prompts[i].empty())
          throw std::runtime_error("the prompt '" + r.prompts[i] +
                                   "' encodes to no tokens");
        streams[i].emplace(tok, prompts[i], r.stop);
      }
      r.options.eosId = tok.eosId();
      if (r.eosToken) {
        r.options.eosId = tok.tokenId(*r.eosToken);
        if (r.options.eosId < 0)
          throw std::runtime_error("eos_token: '" + *r.eosToken +
                                   "' is not a token of the artifact's "
                                   "tokenizer");
      }
      auto deliver = [&](size_t i, const std::string &piece) {
        if (r.onText.is_none() || piece.empty() || callbackError)
          return;
        nb::gil_scoped_acquire acquire;
        try {
          nb::object ok = r.onText(i, nb::str(piece.data(), piece.size()));
          if (!ok.is_none() && !nb::cast<bool>(ok))
            consumerGone[i] = true;
        } catch (nb::python_error &e) {
          callbackError.emplace(std::move(e));
        } catch (const std::exception &e) { // a cast of the return value
          PyErr_SetString(PyExc_TypeError, e.what());
          callbackError.emplace();
        }
      };
      r.options.onToken = [&](size_t i, int64_t id) {
        deliver(i, streams[i]->push(id));
      };
      r.options.onFinish = [&](size_t i) { deliver(i, streams[i]->finish()); };
      r.options.stopAfter = [&](size_t i) {
        return streams[i]->stopped() || consumerGone[i] || callbackError;
      };
      return generateText(*artifact, *executor, prompts, r.options, r.mode);
    });
    if (callbackError)
      throw std::move(*callbackError);
    nb::list out;
    for (size_t i = 0; i < n; ++i) {
      nb::dict d;
      d["text"] = streams[i]->text();
      d["token_ids"] = result.tokens[i];
      d["prompt_tokens"] = prompts[i].size();
      bool length = (int64_t)result.tokens[i].size() >= r.options.maxNewTokens &&
                    !streams[i]->stopped();
      d["finish_reason"] = length ? "length" : "stop";
      out.append(d);
    }
    return out;
  }

  /// Over `text` (tokenized with the artifact's tokenizer) or token ids.
  nb::dict perplexity(const std::variant<std::string, std::vector<int64_t>> &text,
                      int64_t context, bool noCache,
                      const std::string &function) {
    if (context <= 0)
      throw nb::value_error("context must be > 0");
    PerplexityResult r;
    size_t tokens = 0;
    withoutGil([&] {
      std::lock_guard<std::mutex> lock(mutex);
      PerplexityOptions p;
      p.function = function;
      p.context = context;
      p.useCache = !noCache;
      PerplexityEvaluator evaluator(*artifact, *executor, p);
      std::vector<int64_t> ids =
          std::holds_alternative<std::string>(text)
              ? tokenizer().encode(std::get<std::string>(text))
              : std::get<std::vector<int64_t>>(text);
      tokens = ids.size();
      r = evaluator.evaluate(ids);
      if (r.predicted == 0)
        throw std::runtime_error("perplexity: too little text (" +
                                 std::to_string(tokens) + " tokens)");
      return 0;
    });
    nb::dict d;
    d["perplexity"] = r.perplexity;
    d["predicted"] = r.predicted;
    d["tokens"] = tokens;
    return d;
  }

  std::vector<int64_t> tokenize(const std::string &text, bool special) {
    return withoutGil([&] {
      std::lock_guard<std::mutex> lock(mutex);
      return tokenizer().encode(text, special);
    });
  }

  std::string detokenize(const std::vector<int64_t> &ids) {
    return withoutGil([&] {
      std::lock_guard<std::mutex> lock(mutex);
      const Tokenizer &tok = tokenizer();
      for (int64_t id : ids)
        if (id < 0 || id >= tok.vocabSize())
          throw std::runtime_error("detokenize: token id " +
                                   std::to_string(id) + " is not in [0, " +
                                   std::to_string(tok.vocabSize()) + ")");
      return tok.decode(ids);
    });
  }

  std::shared_ptr<const Artifact> artifact;
  std::string backendName, backendLine;

private:
  /// The artifact's tokenizer, loaded on first use (under `mutex`).
  const Tokenizer &tokenizer() {
    if (!tok)
      tok.emplace(artifactTokenizer(*artifact));
    return *tok;
  }

  std::unique_ptr<Executor> executor;
  std::optional<Tokenizer> tok;
  std::mutex mutex;
};

} // namespace

NB_MODULE(_runtime, m) {
  m.doc() = "qcc's runtime: artifacts, sessions, generation (qcc.Session)";
  m.attr("FORMAT_VERSION") = kFormatVersion;
  // Process-wide, as qrun's --cpu-precision: sessions made after it pack
  // their float linears in that precision (runtime/cpu/CpuF32Gemm.h).
  m.def(
      "set_cpu_precision",
      [](const std::string &name) {
        std::optional<CpuFloatPrecision> p = parseCpuFloatPrecision(name);
        if (!p)
          throw nb::value_error(
              ("cpu precision '" + name + "' is not f32 or bf16").c_str());
        if (*p == CpuFloatPrecision::Bf16 && !cpuHasAvx512Bf16())
          raiseError("cpu precision bf16 needs a CPU with bf16 dot products "
                     "(AVX512_BF16); this one has none");
        setCpuFloatPrecision(*p);
      },
      nb::arg("precision"));

  nb::class_<PyArtifact>(m, "Artifact")
      .def(nb::init<const std::string &>(), nb::arg("path"))
      .def_prop_ro("path",
                   [](const PyArtifact &a) { return a.artifact->path(); })
      .def_prop_ro("functions",
                   [](const PyArtifact &a) {
                     std::vector<std::string> names;
                     for (const Function &f : a.artifact->functions())
                       names.push_back(f.name);
                     return names;
                   })
      .def(
          "input_ports",
          [](const PyArtifact &a, const std::string &function) {
            return a.ports(a.function(function).inputs);
          },
          nb::arg("function") = "main")
      .def(
          "output_ports",
          [](const PyArtifact &a, const std::string &function) {
            return a.ports(a.function(function).outputs);
          },
          nb::arg("function") = "main")
      .def_prop_ro("has_tokenizer",
                   [](const PyArtifact &a) {
                     return a.artifact->section("tokenizer").has_value();
                   })
      .def_prop_ro("kv_cache",
                   [](const PyArtifact &a) -> std::optional<std::string> {
                     if (const KvCacheConfig *c = a.artifact->kvCache())
                       return c->layout;
                     return std::nullopt;
                   })
      .def_prop_ro("gpu_kernels", [](const PyArtifact &a) {
        return a.artifact->kernels().size();
      });

  nb::class_<PySession>(m, "Session")
      .def(nb::init<const PyArtifact &, const std::string &, int,
                    const std::string &>(),
           nb::arg("artifact"), nb::arg("backend") = "auto",
           nb::arg("threads") = 0, nb::arg("plan") = "ops")
      .def_ro("backend", &PySession::backendName)
      .def_ro("backend_line", &PySession::backendLine)
      .def("run", &PySession::run, nb::arg("inputs"),
           nb::arg("function") = "main")
      .def(
          "generate",
          [](PySession &s, std::vector<std::string> prompts,
             int64_t maxNewTokens, double temperature, int64_t topK,
             double topP, uint64_t seed, double repeatPenalty,
             int64_t repeatLastN, std::vector<std::string> stop,
             std::optional<std::string> eosToken, bool noCache,
             int64_t context, nb::object onText,
             std::optional<std::string> lora) {
            GenerationRequest r;
            r.prompts = std::move(prompts);
            try {
              r.options.adapter = s.loraAdapterIndex(lora.value_or(""));
            } catch (const std::runtime_error &e) {
              throw nb::value_error(e.what());
            }
            r.options.maxNewTokens = maxNewTokens;
            r.options.sampler.temperature = temperature;
            r.options.sampler.topK = topK;
            r.options.sampler.topP = topP;
            r.options.sampler.seed = seed;
            r.options.sampler.repeatPenalty = repeatPenalty;
            r.options.sampler.repeatLastN = repeatLastN;
            r.stop = std::move(stop);
            r.eosToken = std::move(eosToken);
            r.mode.noCache = noCache;
            r.mode.context = context;
            r.onText = std::move(onText);
            return s.generate(r);
          },
          nb::arg("prompts"), nb::arg("max_new_tokens"),
          nb::arg("temperature"), nb::arg("top_k"), nb::arg("top_p"),
          nb::arg("seed"), nb::arg("repeat_penalty"), nb::arg("repeat_last_n"),
          nb::arg("stop"), nb::arg("eos_token").none(), nb::arg("no_cache"),
          nb::arg("context"), nb::arg("on_text").none(),
          nb::arg("lora").none())
      .def("perplexity", &PySession::perplexity, nb::arg("text"),
           nb::arg("context") = 128, nb::arg("no_cache") = false,
           nb::arg("function") = "main")
      .def("tokenize", &PySession::tokenize, nb::arg("text"),
           nb::arg("add_special_tokens") = true)
      .def("detokenize", &PySession::detokenize, nb::arg("ids"));
}
