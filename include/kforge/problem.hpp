// kf::problem: what is being tuned — a search space and, for real evaluation, the kernel.
//
// Sources:
//   {t1: file}     a T1 input file (the community format: TuningParameters with Python-expression value
//                  lists, Conditions as Python expressions, KernelSpecification)
//   {cache: file}  the parameters of a recorded Kernel Tuner cache (tune_params); the valid set is
//                  the set of recorded configurations (for spaces published without a T1 file)
//   {kernel: file} a kforge kernel description (see docs/kernel.md)
//   {program: file.py, call: wrapper, inputs: file.py:function, parameters: [...]} a Triton program reached
//                  through a Python wrapper (include/kforge/program.hpp; docs/triton.md)
#pragma once

#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "kforge/document.hpp"
#include "kforge/kernel.hpp"
#include "kforge/program.hpp"
#include "kforge/space.hpp"

namespace kf {

struct problem {
  std::string name;
  search_space space;
  std::string source_kind;         ///< "t1", "cache", "kernel" or "program"
  std::string source_file;         ///< resolved path (or embedded:...)
  nlohmann::json kernel;           ///< T1 KernelSpecification or kforge kernel description; null when absent
  std::filesystem::path base_dir;  ///< folder of source_file, for the kernel's relative paths
  /// The kernel to evaluate: a kforge kernel description ({kernel: file}), or a T1 file's CUDA kernel.
  std::shared_ptr<const kernel_spec> kernel_desc;
  /// Why a T1 file's kernel cannot be evaluated (a config_error naming the file and key), when it cannot;
  /// raised only by an evaluator that needs the kernel, so that replay runs of the same T1 file work.
  std::exception_ptr kernel_error;
  /// A program-level problem ({program: ...}): the program, its wrapper, inputs and knobs.
  std::shared_ptr<const program_spec> program_desc;
  /// The problem size as Kernel Tuner records it (a T1 file's ProblemSize, a recording's problem_size,
  /// the values of a kernel description's first timed shape); null when unknown.
  nlohmann::json problem_size;
};

/// Loads a kforge kernel description as a problem (its parameters and constraints are the space).
problem load_kernel_problem(const std::string& path);

/// Builds a search space from a T1 document's ConfigurationSpace. Errors are config_errors at the
/// offending key (e.g. ConfigurationSpace.TuningParameters[3].Values).
search_space t1_space(const document& doc);

/// Loads a T1 file.
problem load_t1(const std::string& path);

/// A space from a Kernel Tuner cache's tune_params_keys/tune_params, restricted to the recorded
/// configurations (expressed as a constraint-free space; the replay evaluator marks unrecorded
/// configurations invalid, and kf::recorded_space builds the exact valid set).
problem load_cache_problem(const std::string& path);

/// What enumerating a space's constraints found that a user must hear about.
struct space_check {
  bool enumerated = false;           ///< false: too large to enumerate (nothing below is known)
  std::size_t valid = 0;             ///< valid configurations
  double combinations = 0;           ///< the cartesian size
  double raised_configurations = 0;  ///< removed because a constraint raised on them
  std::string first_raise;           ///< the first raise (expression, values, reason), one line
  /// "warning: ..." lines (raising constraints; an empty space), each ending in a newline; empty when
  /// there is nothing to say.
  std::string warnings() const;
};
/// Enumerates the space when it can be enumerated and reports its raising constraints.
space_check check_space(const search_space& space);

/// Reads the `problem` mapping of an experiment config.
problem load_problem(const document& doc, const std::string& key_path);

/// The configuration the problem states as its own: a kernel description's or a program's `default`s
/// (each parameter's first value where it gives none; for a program imported from its source, the values
/// the original runs with), a T1 file's `Default`s (the nearest valid configuration where they violate
/// its conditions). nullopt for a problem that states none (a cache recording).
std::optional<config> default_configuration(const problem& p);

}  // namespace kf
