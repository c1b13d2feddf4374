# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "qcc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "models", "unit", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.qcc_obj_root, "test")

config.substitutions.append(("%models", os.path.join(config.qcc_src_root, "test", "models")))
config.substitutions.append(("%PATH%", config.environment["PATH"]))
# The libcuda stand-in that checks how the CUDA backend drives a GPU.
config.substitutions.append(("%fakecuda", os.path.join(config.qcc_obj_root, "lib", "libqcc-fake-cuda.so")))

# Debian's ONNX backend node tests (libonnx-testdata), for small models.
onnx_node_data = "/usr/share/libonnx-testdata/data/node"
config.substitutions.append(("%onnxnode", onnx_node_data))
if os.path.isdir(onnx_node_data):
    config.available_features.add("onnx-testdata")

# qcc -o compiles GPU kernels with NVRTC only when built with the CUDA toolkit.
if getattr(config, "qcc_have_nvrtc", "").upper() in ("TRUE", "ON", "1", "YES"):
    config.available_features.add("nvrtc")

# CPUs with bf16 dot products (AVX512_BF16): qrun --cpu-precision=bf16.
try:
    with open("/proc/cpuinfo") as cpuinfo:
        if " avx512_bf16" in cpuinfo.read():
            config.available_features.add("cpu-bf16")
except OSError:
    pass

# The sanitizer build (QCC_FUZZ: clang ASan+UBSan at -O1, scripts/sanitize.sh):
# tests too slow there say UNSUPPORTED: sanitizers.
if getattr(config, "qcc_fuzz_build", "").upper() in ("TRUE", "ON", "1", "YES"):
    config.available_features.add("sanitizers")

llvm_config.with_system_environment(["QCC_CACHE_DIR", "XDG_CACHE_HOME"])
llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.qcc_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["qcc-opt", "qcc", "qrun", "qcc-calib"], [config.qcc_tools_dir])
