// experiments/kernels/conv2d/conv2d.cu for the host emulation (conv2d_rows_emulation_test.cpp includes it
// once per configuration, inside a namespace of its own, with the configuration's macros defined). Marked
// a system header so that the host compiler passes over the kernel's `#pragma unroll` lines.
#pragma GCC system_header
#include "../../experiments/kernels/conv2d/conv2d.cu"
