"""qcc for Python: compile ONNX transformers to quantized artifacts, run them,
generate text.

    import qcc
    qcc.compile("model.onnx", "model.qpkg", quant="w8a8", calib="train.txt")
    session = qcc.Session("model.qpkg")
    print(session.generate("It is a truth", max_new_tokens=20).text)

The compiler and the runtime are the C++ libraries the qcc and qrun tools use
(no subprocess); docs/PYTHON.md has the whole API.
"""
import os as _os
import queue as _queue
import threading as _threading
from dataclasses import dataclass as _dataclass
from typing import Callable, Iterator, List, Optional, Sequence, Union

# The CPU backend's OpenMP workers wait passively unless the user says
# otherwise (qrun does the same; libgomp reads this once, when it loads).
if "OMP_WAIT_POLICY" not in _os.environ and "GOMP_SPINCOUNT" not in _os.environ:
    _os.environ["OMP_WAIT_POLICY"] = "passive"

from ._errors import Error
from . import _compiler, _runtime

__version__ = _compiler.VERSION
FORMAT_VERSION = _runtime.FORMAT_VERSION
_CALIB_TOOL = _os.path.join(_os.path.dirname(__file__), "bin", "qcc-calib")

__all__ = ["Error", "compile", "Artifact", "Session", "Generation",
           "set_cpu_precision", "__version__", "FORMAT_VERSION"]


def set_cpu_precision(precision: str) -> None:
    """The CPU backend's float linears: "f32" (the default) or "bf16" (weights and
    activations rounded to bf16, float32 sums; CPUs with AVX512_BF16, else qcc.Error),
    as `qrun --cpu-precision`. Process-wide; sessions made after the call use it."""
    _runtime.set_cpu_precision(precision)


def compile(model: Union[str, _os.PathLike], output: Union[str, _os.PathLike],
            **options) -> str:
    """Compiles an ONNX model to a deployment artifact; returns `output`.

    The keyword options are the qcc tool's flags with '_' for '-', taking the
    same values: quant ("none", "w8a8", "fp8", "w4a16", "w4a8"), rotate (bool:
    QuaRot's rotations, docs/QUANTIZATION.md section 10), calib (a text file or a
    folder of .npy inputs), calib_samples, calib_seq_len, calib_stats,
    act_quant, smoothquant (bool), smoothquant_alpha (a float or "auto"),
    int8_fallback, asymmetric, group_size, act_order, w4_method, w4_asym,
    w4_lm_head, sparsity ("none", "2:4"), prune, sparsity_exclude (a list), kv_cache
    ("paged", "contiguous", "none"), kv_block_tokens, kv_dtype, kv_scales,
    tokenizer (default: tokenizer.json or tokenizer.model beside the model),
    lora (a list of "DIR[:SCALE]": PEFT adapters merged), lora_adapters (a
    list of "NAME=DIR[:SCALE]": adapters chosen at run time, docs/LORA.md),
    cuda (False: qcc --no-cuda) and quiet (default True: errors and warnings
    only). An invalid value or combination raises ValueError with qcc's line;
    a model or file qcc refuses raises qcc.Error.
    """
    paths = {k: _os.fspath(v) if isinstance(v, _os.PathLike) else v
             for k, v in options.items()}
    return _compiler.compile(_os.fspath(model), _os.fspath(output),
                             calib_tool=_CALIB_TOOL, **paths)


class Artifact(_runtime.Artifact):
    """A loaded .qpkg (validated as qrun validates it; qcc.Error if not).

    functions: the entry points ("main", and "prefill"/"decode", usually
    "prefill_last" too, with a KV cache: docs/KV_CACHE.md); input_ports(fn) / output_ports(fn): name, dtype and shape (None
    or a name for a dynamic dimension); has_tokenizer; kv_cache (the layout,
    or None); gpu_kernels (how many)."""

    def __init__(self, path: Union[str, _os.PathLike]):
        super().__init__(_os.fspath(path))


@_dataclass
class Generation:
    """One prompt's continuation."""
    text: str               # the generated text (a stop string left out)
    token_ids: List[int]    # the generated tokens (EOS left out)
    prompt_tokens: int      # tokens of the prompt
    finish_reason: str      # "stop" (EOS or a stop string) or "length"


class Session(_runtime.Session):
    """Runs an artifact on the CPU or CUDA backend.

    backend: "auto" (CUDA when a GPU, its driver and the artifact's kernels
    are there, else the CPU), "cpu" or "cuda" (qcc.Error when it cannot run);
    session.backend says which, session.backend_line why. threads: the CPU
    backend's pool size (0: OMP_NUM_THREADS, else the affinity mask); the pool
    is the process's, so the last session made sets it. plan: "ops" or
    "kernels" (the GPU plan run on the CPU; qrun --plan).

    A session runs one call at a time: calls from several threads wait for
    each other (the GIL is released while one runs), so a session may be
    shared; separate sessions run in parallel.
    """

    def __init__(self, artifact: Union["Artifact", str, _os.PathLike],
                 backend: str = "auto", threads: int = 0, plan: str = "ops"):
        if not isinstance(artifact, _runtime.Artifact):
            artifact = Artifact(artifact)
        self.artifact = artifact
        super().__init__(artifact, backend, threads, plan)

    def run(self, inputs, function: str = "main"):
        """{input name: numpy array} -> {output name: numpy array}.

        Arrays must be C-contiguous numpy arrays of the ports' types
        (float32, float16, int64, int32, int8, bool; a bfloat16 port takes
        float32); they are read in place, and outputs own their memory
        without a copy (bfloat16 outputs come as float32)."""
        return super().run(inputs, function)

    def generate(self, prompts: Union[str, Sequence[str]],
                 max_new_tokens: int = 32, *, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64,
                 stop: Union[None, str, Sequence[str]] = None,
                 eos_token: Optional[str] = None, no_cache: bool = False,
                 context: int = 128,
                 on_text: Optional[Callable[[int, str], Optional[bool]]] = None,
                 lora: Optional[str] = None
                 ) -> Union[Generation, List[Generation]]:
        """Continues each prompt, as `qrun --prompt` does (same defaults:
        greedy; the same tokens for the same options). One prompt gives one
        Generation, a list a list (one batch). stop: strings that end a
        continuation (left out of its text). on_text(index, piece) is called
        with text as it becomes final; returning False ends that
        continuation. no_cache / context: qrun --no-cache / --context.
        lora: a runtime LoRA adapter of the artifact by name (qrun --lora)."""
        single = isinstance(prompts, str)
        batch = [prompts] if single else list(prompts)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        results = super().generate(
            batch, max_new_tokens, temperature, top_k, top_p, seed,
            repeat_penalty, repeat_last_n, stops, eos_token, no_cache, context,
            on_text, lora)
        out = [Generation(**r) for r in results]
        return out[0] if single else out

    def stream(self, prompt: str, max_new_tokens: int = 32,
               **options) -> Iterator[str]:
        """Yields the continuation of one prompt piece by piece (generate's
        options). Leaving the loop early ends the generation."""
        pieces: "_queue.Queue" = _queue.Queue()
        done = object()
        stopped = _threading.Event()
        failure = []

        def on_text(_index, piece):
            pieces.put(piece)
            return not stopped.is_set()

        def work():
            try:
                self.generate(prompt, max_new_tokens, on_text=on_text,
                              **options)
            except BaseException as e:  # handed to the consumer
                failure.append(e)
            finally:
                pieces.put(done)

        worker = _threading.Thread(target=work, daemon=True)
        worker.start()
        try:
            while True:
                piece = pieces.get()
                if piece is done:
                    break
                yield piece
        finally:
            stopped.set()
            worker.join()
        if failure:
            raise failure[0]

    def perplexity(self, text: Union[str, Sequence[int]], context: int = 128,
                   no_cache: bool = False, function: str = "main") -> dict:
        """qrun --perplexity: {"perplexity", "predicted", "tokens"} over
        non-overlapping windows of `context` tokens of `text` (tokenized
        with the artifact's tokenizer) or of token ids."""
        if not isinstance(text, str):
            text = list(text)
        return super().perplexity(text, context, no_cache, function)

    def tokenize(self, text: str, add_special_tokens: bool = True) -> List[int]:
        """The artifact's tokenizer: text to ids."""
        return super().tokenize(text, add_special_tokens)

    def detokenize(self, ids: Sequence[int]) -> str:
        """Ids to text (special tokens left out)."""
        return super().detokenize(list(ids))
