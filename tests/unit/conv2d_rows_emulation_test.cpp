// conv2d's register-row path (experiments/kernels/conv2d/conv2d.cu, impl rows) run on the CPU: the
// kernel is compiled here as host C++ for a few configurations (the CUDA built-ins it uses replaced by the
// stand-ins below), every CUDA thread of a block an OS thread, __syncthreads a std::barrier. Checked against
// a double-precision convolution on shapes with edges (images smaller than a tile, widths that are and are
// not multiples of 4, so both store paths run): every output written and within the description's
// tolerance; shared memory is poisoned with NaN before every block, so a read of staged data that was
// never written shows up as NaN. Also the fallback: an R other than FILTER_R takes the direct path.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace conv2d_host {
struct uint3_like {
  unsigned x = 0, y = 0, z = 0;
};
thread_local uint3_like threadIdx;
uint3_like blockIdx;
std::barrier<>* block_barrier = nullptr;
inline void __syncthreads() {
  block_barrier->arrive_and_wait();
}
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return float4{x, y, z, w};
}
using entry_fn = void (*)(int, int, int, const float*, const float*, float*);
// One configuration compiled from the kernel's source: its entry, launch geometry and dynamic shared memory
// (the register-row path's float4 view and the direct path's float view of it).
struct variant {
  entry_fn entry;
  int block_x, block_y, tile_x, tile_y, filter_r;
  float4* smem4;
  std::size_t smem4_count;
  float* tile;
  std::size_t tile_count;
};
}  // namespace conv2d_host

#define __global__
#define __shared__
#define use_shared 1
// One copy of the kernel per configuration, each in namespace conv2d_host::<name> (conv2d_rows_host.hpp).
#define block_size_x 32
#define block_size_y 8
#define tile_x 4
#define tile_y 4
#define FILTER_R 15
#define conv2d conv2d_a
namespace conv2d_host::a {
#include "conv2d_rows_host.hpp"
}  // namespace conv2d_host::a

#define block_size_x 16
#define block_size_y 8
#define tile_x 8
#define tile_y 4
#define FILTER_R 15
#define conv2d conv2d_b
namespace conv2d_host::b {
#include "conv2d_rows_host.hpp"
}  // namespace conv2d_host::b

#define block_size_x 64
#define block_size_y 2
#define tile_x 4
#define tile_y 1
#define FILTER_R 7
#define conv2d conv2d_c
namespace conv2d_host::c {
#include "conv2d_rows_host.hpp"
}  // namespace conv2d_host::c

#undef use_shared
#undef __global__
#undef __shared__

namespace kf {
namespace {

using conv2d_host::variant;

// Runs variant v over an H x W image with an R x R filter, block by block, every thread an OS thread;
// returns the output (NaN where nothing was written).
std::vector<float> launch(const variant& v, int H, int W, int R, const std::vector<float>& in,
                          const std::vector<float>& filt) {
  std::vector<float> out(static_cast<std::size_t>(H) * W, std::nanf(""));
  const int tw = v.block_x * v.tile_x, th = v.block_y * v.tile_y;
  const int threads = v.block_x * v.block_y;
  for (int by = 0; by < (H + th - 1) / th; ++by)
    for (int bx = 0; bx < (W + tw - 1) / tw; ++bx) {
      conv2d_host::blockIdx = {static_cast<unsigned>(bx), static_cast<unsigned>(by), 0};
      const float nan = std::nanf("");
      for (std::size_t i = 0; i < v.smem4_count; ++i)
        v.smem4[i] = {nan, nan, nan, nan};
      for (std::size_t i = 0; i < v.tile_count; ++i)
        v.tile[i] = nan;
      std::barrier<> bar(threads);
      conv2d_host::block_barrier = &bar;
      std::vector<std::jthread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          conv2d_host::threadIdx = {static_cast<unsigned>(t % v.block_x),
                                    static_cast<unsigned>(t / v.block_x), 0};
          v.entry(H, W, R, in.data(), filt.data(), out.data());
        });
    }
  return out;
}

// Outputs outside |out - ref| <= 1e-4 + 1e-4 |ref| (kernel.yaml's f32 tolerance), NaN included.
int wrong_outputs(const std::vector<float>& out, int H, int W, int R, const std::vector<float>& in,
                  const std::vector<float>& filt) {
  int wrong = 0;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      double ref = 0;
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) {
          const int yy = y + i - R / 2, xx = x + j - R / 2;
          if (yy >= 0 && yy < H && xx >= 0 && xx < W)
            ref += static_cast<double>(filt[static_cast<std::size_t>(i) * R + j]) *
                   in[static_cast<std::size_t>(yy) * W + xx];
        }
      const double err = std::fabs(out[static_cast<std::size_t>(y) * W + x] - ref);
      if (!(err <= 1e-4 + 1e-4 * std::fabs(ref))) ++wrong;
    }
  return wrong;
}

void check(const variant& v, int H, int W, int R) {
  std::mt19937 rng(static_cast<unsigned>(H * 131 + W * 7 + R));
  std::uniform_real_distribution<float> u(-1, 1);
  std::normal_distribution<float> n;
  std::vector<float> in(static_cast<std::size_t>(H) * W), filt(static_cast<std::size_t>(R) * R);
  for (auto& x : in)
    x = u(rng);
  for (auto& x : filt)
    x = n(rng);
  const auto out = launch(v, H, W, R, in, filt);
  EXPECT_EQ(wrong_outputs(out, H, W, R, in, filt), 0)
      << "block " << v.block_x << "x" << v.block_y << ", tile " << v.tile_x << "x" << v.tile_y
      << ", FILTER_R " << v.filter_r << ", shape " << H << "x" << W << " R " << R;
}

TEST(conv2d_rows, register_row_path_matches_a_double_convolution_at_edges) {
  for (const variant* v : {&conv2d_host::a::this_variant, &conv2d_host::b::this_variant})
    for (auto [H, W] : {std::pair{33, 65}, std::pair{40, 36}, std::pair{131, 260}, std::pair{5, 3}})
      check(*v, H, W, v->filter_r);
  check(conv2d_host::c::this_variant, 70, 129, 7);
  check(conv2d_host::c::this_variant, 9, 8, 7);
}

TEST(conv2d_rows, another_filter_size_takes_the_direct_path) {
  check(conv2d_host::a::this_variant, 100, 77, 7);
  check(conv2d_host::c::this_variant, 17, 40, 1);
  check(conv2d_host::b::this_variant, 5, 3, 3);
}

}  // namespace
}  // namespace kf
