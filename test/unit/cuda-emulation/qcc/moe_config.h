// Host stand-in: the real configuration header (CudaEmulation.h).
#include "codegen/kernels/moe_config.h"
