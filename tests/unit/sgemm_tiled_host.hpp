// experiments/kernels/sgemm/sgemm.cu for the host emulation (sgemm_tiled_emulation_test.cpp, which
// includes this inside its namespace of CUDA stand-ins). Marked a system header so that the host compiler
// passes over the kernel's `#pragma unroll` lines (GCC 12 cannot silence -Wunknown-pragmas with a
// diagnostic pragma in C++).
#pragma GCC system_header
#include "../../experiments/kernels/sgemm/sgemm.cu"
