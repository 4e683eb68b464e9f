// experiments/kernels/conv2d/conv2d.cu for the host emulation: conv2d_rows_emulation_test.cpp includes
// this once per configuration, inside a namespace of its own, with block_size_x, block_size_y, tile_x,
// tile_y and FILTER_R defined and `conv2d` defined as the copy's own C name. It defines the copy's shared
// memory and `this_variant`, then undefines those macros. Marked a system header so that the host
// compiler passes over the kernel's `#pragma unroll` lines.
#pragma GCC system_header
alignas(16) float4 smem4[1 << 14];
alignas(16) float tile[1 << 16];
#include "../../experiments/kernels/conv2d/conv2d.cu"
const variant this_variant{&conv2d, block_size_x, block_size_y, tile_x, tile_y, FILTER_R,
                           smem4,   1 << 14,      tile,         1 << 16};
#undef block_size_x
#undef block_size_y
#undef tile_x
#undef tile_y
#undef FILTER_R
#undef conv2d
