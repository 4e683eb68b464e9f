// Theoretical occupancy (see compile.hpp). The rules, for compute capability 7.0 and later:
//  - a block takes ceil(threads / warp size) warp slots of max_threads_per_sm / warp size;
//  - registers are allocated per warp in units of 256 (regs x 32 rounded up), from 4 sub-partitions
//    of registers_per_sm / 4 each; a block must fit max_registers_per_block even when its warps are
//    rounded up to a multiple of 4 (the hardware's launch check), and a thread may use at most 255;
//  - a block's shared memory is static + dynamic + the driver's reserve, rounded up to 128 bytes
//    (256 before compute capability 8.0), from shared_per_sm (the default carveout); the block must fit
//    shared_per_block_optin plus the reserve;
//  - at most max_blocks_per_sm blocks; from compute capability 9.0 on, blocks that use barriers share
//    2 x max_blocks_per_sm barrier slots (1 x on 10.1, 11.0 and 12.x).
#include <algorithm>
#include <climits>
#include <cstdint>

#include "kforge/evaluators/compile.hpp"

namespace kf {
namespace {

std::int64_t ceil_div(std::int64_t x, std::int64_t y) {
  return (x + y - 1) / y;
}
std::int64_t round_up(std::int64_t x, std::int64_t y) {
  return ceil_div(x, y) * y;
}

constexpr int register_unit = 256;
constexpr int sub_partitions = 4;
constexpr int max_registers_per_thread = 255;

int barrier_slots_per_block_slot(const device_limits& d) {
  if (d.cc_major == 10 && d.cc_minor == 1) return 1;
  if (d.cc_major == 11 && d.cc_minor == 0) return 1;
  if (d.cc_major >= 12) return 1;
  return 2;
}

}  // namespace

occupancy theoretical_occupancy(const static_metrics& m, int block_threads, int dynamic_shared,
                                const device_limits& d) {
  occupancy o;
  auto cannot_run = [&o](const char* limit) {
    o.blocks_per_sm = 0;
    o.fraction = 0;
    o.limited_by = limit;
    return o;
  };
  if (block_threads <= 0 || block_threads > d.max_threads_per_block ||
      (m.max_threads_per_block > 0 && block_threads > m.max_threads_per_block))
    return cannot_run("threads");
  const std::int64_t max_warps = d.max_threads_per_sm / d.warp_size;
  const std::int64_t warps = ceil_div(block_threads, d.warp_size);

  // Registers.
  const std::int64_t regs_per_warp = round_up(std::int64_t{m.registers} * d.warp_size, register_unit);
  if (m.registers > max_registers_per_thread || regs_per_warp * warps > d.max_registers_per_block ||
      regs_per_warp * round_up(warps, sub_partitions) > d.max_registers_per_block)
    return cannot_run("registers");
  const std::int64_t by_registers =
      regs_per_warp > 0 ? (d.registers_per_sm / sub_partitions / regs_per_warp) * sub_partitions / warps
                        : INT_MAX;

  // Shared memory.
  if (dynamic_shared < 0) return cannot_run("shared_memory");
  const std::int64_t granularity = d.cc_major >= 8 ? 128 : 256;
  const std::int64_t smem = round_up(
      std::int64_t{m.shared_static_bytes} + dynamic_shared + d.shared_reserved_per_block, granularity);
  if (smem > std::int64_t{d.shared_per_block_optin} + d.shared_reserved_per_block)
    return cannot_run("shared_memory");
  const std::int64_t by_shared = smem > 0 ? d.shared_per_sm / smem : INT_MAX;

  const std::int64_t by_threads = max_warps / warps;
  const std::int64_t by_blocks = d.max_blocks_per_sm;
  std::int64_t by_barriers = INT_MAX;
  if (d.cc_major >= 9 && m.barriers > 0)
    by_barriers = std::int64_t{d.max_blocks_per_sm} * barrier_slots_per_block_slot(d) / m.barriers;

  const std::int64_t blocks = std::min({by_registers, by_shared, by_threads, by_blocks, by_barriers});
  o.blocks_per_sm = static_cast<int>(blocks);
  o.fraction = max_warps > 0 ? static_cast<double>(blocks * warps) / static_cast<double>(max_warps) : 0.0;
  // Ties: the block shape's own limits first. When registers give as many blocks as the warp slots do,
  // fewer registers would not raise occupancy; the block size would.
  if (blocks * warps >= max_warps)
    o.limited_by = "none";
  else if (blocks == by_threads)
    o.limited_by = "threads";
  else if (blocks == by_blocks)
    o.limited_by = "blocks";
  else if (blocks == by_registers)
    o.limited_by = "registers";
  else if (blocks == by_shared)
    o.limited_by = "shared_memory";
  else
    o.limited_by = "barriers";
  return o;
}

}  // namespace kf
