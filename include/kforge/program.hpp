// kf::program_spec: a program-level problem (issue 11, item 3): Triton code reached only through a Python
// wrapper, tuned by rewriting the program's source (python/kforge/triton/source_ops.py) and measured by
// the program worker (python/kforge/triton/program_worker.py), a Python process the runner drives.
//
//   problem:
//     program: add_example.py          # the module (relative to the config)
//     call: add_wrapper                # the wrapper function that is called and timed
//     inputs: inputs.py:add_inputs     # a function returning one argument tuple per shape
//     adapter: harness.py:bind         # optional: bind(module) returns the callable to call with each
//                                      #   shape's arguments (default: the module's `call` function)
//     end_marker: "#####"              # optional: the program ends before the first line starting so
//     parameters:                      # each bound to a knob of the source
//       - {name: BLOCK_SIZE, values: [256, 1024], default: 256, knob: {literal: add_wrapper}}
//       - {name: num_warps, values: [2, 4, 8], knob: {launch: add_wrapper}}
//       - {name: BLOCK_M, values: [64, 128], knob: {autotune: matmul_kernel}}
//     constraints: [...]
//     time_shapes: [-1]                # which calls are timed (indices; default the last); all are checked
//     tolerance: {f32: {rel: 1e-5, abs: 1e-6}}
//     seed: 0
//
// Knobs (the source operators): literal SITE (the integer literal assigned to the name at SITE),
// launch SITE (num_warps/num_stages/num_ctas/maxnreg keyword, or a tl.constexpr argument, at the launch at
// SITE), autotune KERNEL (the kernel's @triton.autotune list replaced by the values), heuristic KERNEL (an
// output of its @triton.heuristics pinned). `target:` names the program's name when it differs from the
// parameter's. SITE is "function" or "function:line" (python -m kforge.triton.program_worker --knobs FILE
// lists them).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kforge/document.hpp"
#include "kforge/kernel.hpp"
#include "kforge/space.hpp"

namespace kf {

struct program_knob {
  std::string kind;    ///< literal, launch, autotune, heuristic
  std::string site;    ///< literal and launch: "function" or "function:line"
  std::string kernel;  ///< autotune and heuristic: the @triton.jit kernel
  std::string target;  ///< the name in the program (default: the parameter's name)
};

struct program_spec {
  std::string name;
  std::filesystem::path program;  ///< absolute
  std::string call;
  std::filesystem::path inputs_file;  ///< absolute
  std::string inputs_function;
  std::filesystem::path adapter_file;  ///< absolute; empty: call the module's `call` function
  std::string adapter_function;
  std::string end_marker;
  search_space space;
  config defaults;                  ///< the default configuration (each parameter's default or first value)
  std::vector<program_knob> knobs;  ///< one per parameter of `space`, in order
  std::vector<int> time_shapes{-1};
  std::map<dtype, tolerance> tolerances;
  std::uint64_t seed = 0;
};

/// Reads the problem mapping at `key` of `doc` (the keys above); errors are config_errors at the key.
program_spec parse_program_spec(const document& doc, const nlohmann::json& node, const std::string& key);

/// The knobs of configuration `c` as the worker's "knobs" list ({kind, site|kernel, target, value}).
nlohmann::json program_knobs(const program_spec& p, const config& c);

}  // namespace kf
