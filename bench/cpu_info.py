"""What the benchmarks say about the machine they ran on (stdlib only, so that
bench_serve.py needs nothing else)."""
import os


def machine():
    """The CPU (model, the vector extensions that matter here), cores and load."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            have = next(ln for ln in f if ln.startswith("flags")).split()
        flags = " ".join(x for x in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16") if x in have)
    except (OSError, StopIteration):
        pass
    return (f"{model} ({flags}), {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.2f}")


def cpu_has_amx():
    """Whether the CPU has AMX-INT8, where llama-cpp-python 0.3.36's AMX matmul
    (ggml_backend_amx_mul_mat) segfaults on quantized GGUFs."""
    try:
        with open("/proc/cpuinfo") as f:
            return " amx_int8" in f.read()
    except OSError:
        return False


def cpu_has_bf16():
    """Whether the CPU has bf16 dot products (AVX512_BF16): qrun --cpu-precision=bf16."""
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512_bf16" in f.read()
    except OSError:
        return False
