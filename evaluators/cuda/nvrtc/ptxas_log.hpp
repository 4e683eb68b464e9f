// Parser for the resource lines that `--ptxas-options=-v` adds to NVRTC's log. No CUDA headers.
//
// Lines recognised (NVRTC 13.0; sm_75/sm_80 logs also carry cmem[] figures, sm_90 logs do not):
//   ptxas info    : 0 bytes gmem, 4096 bytes cmem[3]                          (module line)
//   ptxas info    : Compiling entry function '_Z1kILi64EEvPf' for 'sm_90'
//   ptxas info    : Function properties for _Z1kILi64EEvPf
//   ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//   ptxas info    : Used 24 registers, used 1 barriers, 8192 bytes smem, 360 bytes cmem[0], 40 bytes
//                   cumulative stack size                                     (one line in the log)
// "Function properties for F" names the function of the next stack-frame line (entries and
// separately compiled device functions); "Used ..." belongs to the last "Compiling entry function".
// A field the log omits ("N bytes smem" when a kernel has no static shared memory) stays empty.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kf::cuda::detail {

struct ptxas_function {
  bool entry = false;  ///< named by "Compiling entry function"
  std::optional<int> registers, barriers, shared_bytes, cumulative_stack_bytes;
  std::optional<int> stack_frame_bytes, spill_stores_bytes, spill_loads_bytes;
  std::map<int, int> cmem_bytes;  ///< bank -> bytes ("N bytes cmem[B]")
};

struct ptxas_report {
  std::map<std::string, ptxas_function> functions;
  std::optional<int> gmem_bytes;
  std::map<int, int> module_cmem_bytes;  ///< bank -> bytes from the module line

  const ptxas_function* find(const std::string& name) const;
};

/// Parses every ptxas resource line of `log`; other lines (warnings, errors, timing) are ignored.
/// Never throws on odd input: unparsable fields are skipped.
ptxas_report parse_ptxas_log(std::string_view log);

}  // namespace kf::cuda::detail
