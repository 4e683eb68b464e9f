// A reader for the resource records of an NVIDIA CUBIN (an ELF64 file), written from the layout
// observed in CUBINs that NVRTC 13.0 produces (docs: cupti-nvrtc.md section 5). No CUDA headers.
//
// What a CUBIN carries (verified for sm_75, sm_80 and sm_90 with tests/unit/compile_test.cpp):
//  - `.nv.info` (module-wide) holds EIATTR records keyed by symbol index: REGCOUNT (0x2f),
//    FRAME_SIZE (0x11), MIN_STACK_SIZE (0x12); payload (u32 symbol index, u32 value).
//  - `.nv.info.<fn>` (one per kernel) holds MAX_THREADS (0x05, 3 x u32, from __launch_bounds__),
//    REQNTID (0x10, 3 x u32), NUM_BARRIERS (0x4c, a byte value), among many others.
//  - `.nv.shared.<fn>` (NOBITS) has the kernel's static shared memory as its size. On sm_90 the size
//    includes the 1 KiB the driver reserves per block (9216 for 8192 B of __shared__); the CUBIN then
//    also has a `.nv.shared.reserved.0` section and a `.nv.reservedSmem.offset0` symbol. sm_75/sm_80
//    CUBINs have neither, and their section sizes equal ptxas' "bytes smem".
//  - `.nv.constant3` (module-wide) holds user __constant__ data on sm_75..sm_90; `.nv.constant0.<fn>`
//    is the kernel parameter bank, `.nv.constant2.<fn>` compiler literals, `.nv.constant4` driver
//    addresses.
// Record layout: u8 format, u8 attribute; format 0x01 (no value) and 0x02/0x03 (byte/half value in
// the next u16) take 4 bytes; format 0x04 (sized) is followed by a u16 size and `size` payload bytes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kf::cuda::detail {

/// EIATTR codes that kforge reads.
inline constexpr std::uint8_t eiattr_max_threads = 0x05;
inline constexpr std::uint8_t eiattr_reqntid = 0x10;
inline constexpr std::uint8_t eiattr_frame_size = 0x11;
inline constexpr std::uint8_t eiattr_min_stack_size = 0x12;
inline constexpr std::uint8_t eiattr_regcount = 0x2f;
inline constexpr std::uint8_t eiattr_num_barriers = 0x4c;

/// Shared memory the driver reserves per block on sm_80 and later (included in `.nv.shared.<fn>` only
/// when cubin_info::shared_includes_reserve).
inline constexpr int reserved_shared_bytes = 1024;

/// One function of the CUBIN, by (lowered) name. Absent optionals: the CUBIN has no such record.
struct cubin_function {
  bool has_text = false;  ///< a `.text.<name>` section exists (kernels and separately emitted functions)
  bool has_info = false;  ///< a `.nv.info.<name>` section exists (kernel entries only)
  std::optional<int> registers;         ///< EIATTR_REGCOUNT
  std::optional<int> frame_bytes;       ///< EIATTR_FRAME_SIZE
  std::optional<int> min_stack_bytes;   ///< EIATTR_MIN_STACK_SIZE
  std::optional<int> max_threads;       ///< EIATTR_MAX_THREADS, x*y*z
  std::optional<int> required_threads;  ///< EIATTR_REQNTID, x*y*z
  std::optional<int> barriers;          ///< EIATTR_NUM_BARRIERS (absent when the kernel uses none)
  std::optional<std::int64_t> shared_section_bytes;  ///< size of `.nv.shared.<name>` as stored
};

/// A module-wide constant bank section `.nv.constant<bank>` and the object symbols defined in it.
struct cubin_constant_bank {
  int bank = 0;
  std::int64_t bytes = 0;
  std::vector<std::string> symbols;
};

struct cubin_info {
  std::uint16_t machine = 0;             ///< e_machine, 190 (EM_CUDA)
  int sm = 0;                            ///< e_flags bits 8..15 as written by NVRTC 13.0 (90 for sm_90)
  bool shared_includes_reserve = false;  ///< `.nv.shared.<fn>` sizes include reserved_shared_bytes
  std::map<std::string, cubin_function> functions;
  std::vector<cubin_constant_bank> constant_banks;  ///< module-wide banks, in section order

  const cubin_function* find(const std::string& name) const;
  /// Bytes of user __constant__ data (`.nv.constant3`), 0 when the module has none.
  int user_constant_bytes() const;
  /// Static shared memory of `name` without the driver's reserve; nullopt when the CUBIN lacks it.
  /// A kernel without a `.nv.shared.<fn>` section uses no static shared memory (0).
  std::optional<int> static_shared_bytes(const std::string& name) const;
};

/// The bank that holds user __constant__ variables (verified on sm_75, sm_80, sm_90).
inline constexpr int user_constant_bank = 3;

/// Parses `image`. Throws kf::error when it is not a well-formed 64-bit little-endian ELF file or a
/// record runs past its section (every offset is bounds-checked; nothing is trusted).
cubin_info read_cubin(std::span<const std::uint8_t> image);

}  // namespace kf::cuda::detail
