// kf::kernel_spec: a CUDA kernel to tune — its source, tuning parameters, arguments, launch geometry,
// the shapes it is timed and checked on, its reference and tolerances — and how one configuration of it
// becomes a concrete launch (kf::launch_plan).
//
// A kernel description is a YAML/JSON file (docs/kernel.md has the schema with an example); expressions
// (sizes, grid, block, shared memory, scalar values, roofline bounds) are Python expressions over the
// shape's problem sizes and the configuration's parameters.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/document.hpp"
#include "kforge/expr.hpp"
#include "kforge/space.hpp"
#include "kforge/transform.hpp"

namespace kf {

enum class dtype : std::uint8_t { f32, f64, f16, bf16, i8, u8, i16, u16, i32, u32, i64, u64 };
std::size_t size_of(dtype t) noexcept;
std::string_view to_string(dtype t) noexcept;
std::optional<dtype> dtype_from_string(std::string_view s) noexcept;
bool is_floating(dtype t) noexcept;

/// How a buffer is filled before a launch. Random fills are seeded per check/timing run, never zeros
/// unless asked for explicitly with `constant`.
struct fill_spec {
  enum class kind : std::uint8_t { normal, uniform, iota, constant } k = kind::normal;
  double a = 0;  ///< normal: mean; uniform: low; iota: start; constant: the value
  double b = 1;  ///< normal: standard deviation; uniform: high; iota: step
};

enum class arg_role : std::uint8_t { in, out, inout };

/// A TMA tensor map argument (`tensor_map:` in a kernel description, docs/kernel.md): a tiled view of a
/// buffer argument that the GPU worker encodes (cuTensorMapEncodeTiled) over that buffer's device memory
/// for every launch and passes by value, 128 bytes (kernel side: `const __grid_constant__` struct of 128
/// bytes aligned to 64). Expressions over the shape's problem sizes and the configuration's parameters.
struct tensor_map_spec {
  std::string buffer;               ///< the buffer argument it views; its dtype is the map's element type
  std::size_t buffer_arg = 0;       ///< that argument's index in kernel_spec::args (set when it is read)
  std::vector<expression> dims;     ///< elements per dimension, innermost first (rank 1 to 5)
  std::vector<expression> strides;  ///< elements between consecutive indices of dims 1..rank-1; empty: packed
  std::vector<expression> box;  ///< elements per dimension of one copy (shared-memory tile), innermost first
  std::uint32_t swizzle = 0;    ///< shared-memory swizzle span in bytes: 0 (none), 32, 64 or 128
  std::uint32_t l2_promotion = 0;  ///< L2 fetch granularity in bytes: 0 (none), 64, 128 or 256
  bool oob_nan = false;            ///< out-of-bounds elements read as NaN (floating types) instead of zero
  std::optional<expression> when;  ///< false: no map is made; the kernel gets 128 zero bytes
};

/// A tensor map resolved for one launch: what cuTensorMapEncodeTiled takes, less the device address.
struct tensor_map_layout {
  std::size_t buffer = 0;                  ///< index of the viewed buffer in the launch's arguments
  std::uint32_t rank = 0;                  ///< 1 to 5
  std::array<std::uint64_t, 5> dims{};     ///< elements, innermost first
  std::array<std::uint64_t, 4> strides{};  ///< bytes between indices of dims 1..rank-1
  std::array<std::uint32_t, 5> box{};      ///< elements per copy, innermost first
  std::uint32_t swizzle = 0;               ///< bytes: 0, 32, 64, 128
  std::uint32_t l2_promotion = 0;          ///< bytes: 0, 64, 128, 256
  bool oob_nan = false;
  bool enabled = true;  ///< false (`when` was false): 128 zero bytes are passed, nothing is encoded
};

/// Why `t` (element type `type`, over a buffer of `buffer_bytes` bytes at a 256-byte aligned address) breaks
/// the rules cuTensorMapEncodeTiled states for a non-interleaved tiled map (CUDA driver API reference), or
/// empty when it keeps them: rank 1-5; every dim in [1, 2^32]; strides multiples of 16 bytes below 2^40;
/// every box entry in [1, 256], the inner one a multiple of 16 bytes and, with a swizzle, at most the
/// swizzle span; NaN fill for floating types only. Also (kforge's rule, so that no copy can leave the
/// buffer): the highest element the dims and strides reach lies inside the buffer. Disabled maps have none.
std::string tensor_map_problem(const tensor_map_layout& t, dtype type, std::uint64_t buffer_bytes);

/// One argument of a kernel: a buffer (device memory, passed as a pointer), a scalar (passed by value),
/// a `__constant__` array of the module (filled like a buffer, passed as no parameter), or a TMA tensor map
/// over a buffer argument (passed by value, 128 bytes). A buffer can also be copied into a `__constant__`
/// symbol of its name (T1's "MemType": "Constant").
struct kernel_arg {
  std::string name;
  bool buffer = true;
  dtype type = dtype::f32;
  expression size;   ///< element count (buffers)
  expression value;  ///< the value (scalars)
  fill_spec fill;    ///< buffers read by the kernel
  arg_role role = arg_role::in;
  bool param = true;     ///< passed as a kernel parameter (false: only a __constant__ symbol)
  bool constant = false;  ///< copied into the module's __constant__ symbol `name` before each launch
  bool compare = true;   ///< a written buffer compared with the reference's (role out or inout)
  /// A tensor map argument (buffer = false, type = the viewed buffer's dtype).
  std::optional<tensor_map_spec> tensor_map;
};

struct tolerance {
  double rel = 1e-5;  ///< an element passes when |out - ref| <= abs + rel * |ref|
  double abs = 1e-6;
};

/// What outputs are compared with. `kernel`: a reference kernel with the same signature (in the kernel's
/// own source unless another is given); `baseline`: the kernel itself at its default configuration;
/// `none`: no check (a trial can then never be wrong_result; avoid).
struct reference_spec {
  enum class kind : std::uint8_t { kernel, baseline, none } k = kind::baseline;
  std::string source;  ///< the reference's source (defaults to the kernel's own)
  std::string source_file;
  std::string entry;  ///< extern "C" name or name expression, same signature as the kernel
  std::vector<std::string> options;
};

/// A transform instance of a kernel description: which operator, at which site, and which of the space's
/// parameters carry its values.
struct transform_instance {
  std::string name;  ///< unique within the kernel, e.g. "unroll_k_loop"
  std::string type;
  transform op;
  std::vector<std::pair<std::string, std::size_t>> params;  ///< (local name, index in the space)
};

/// One problem shape: problem-size names -> values (e.g. {n: 1<<28}).
using shape = std::map<std::string, value, std::less<>>;

struct kernel_spec {
  std::string name;
  std::string source_file;  ///< resolved path of the source
  std::string source;       ///< its text
  std::string entry;        ///< extern "C" name, or a template instantiation with {param} placeholders
  std::string injection = "defines";  ///< how parameters reach the source: "defines" or "template"
  /// "cuda" (CUDA C++, compiled by NVRTC) or "triton" (a @triton.jit function in a .py file, compiled by
  /// Triton: parameters named like a tl.constexpr parameter of the entry are passed as that constexpr;
  /// num_warps, num_stages, num_ctas and maxnreg are compile options; the block is 32 * num_warps).
  std::string language = "cuda";
  /// Triton: constexpr parameters of the entry that are not tuned, as expressions of the shape.
  std::vector<std::pair<std::string, expression>> constexprs;
  std::vector<std::string> compiler_options;
  /// The architecture every variant and the reference are compiled for (e.g. "sm_90a", which wgmma and
  /// setmaxnreg need; its CUBINs load only on devices of that compute capability). Empty: the
  /// evaluator's (the cuda evaluator's option `arch`, default sm_90). CUDA kernels only.
  std::string arch;
  search_space space;          ///< the kernel's own parameters first, then every transform instance's
  std::size_t own_params = 0;  ///< how many of the space's parameters are the kernel's own (#defined)
  std::vector<transform_instance> transforms;  ///< applied in this order when a variant is rendered
  config defaults;  ///< the default configuration (each parameter's `default`, else its first value)
  std::vector<kernel_arg> args;
  std::array<expression, 3> grid, block;
  expression shared_memory;  ///< dynamic shared memory in bytes
  std::vector<shape> time_shapes, check_shapes;
  reference_spec reference;
  std::map<dtype, tolerance> tolerances;
  std::optional<expression> bytes, flops;  ///< roofline bounds (issue 4); null when not given
  std::string flops_unit = "fp32";         ///< whose peak bounds the flops: fp32 or tensor_bf16
  std::filesystem::path base_dir;
  /// Folders searched for #include'd files: the source's folder first, then the description's
  /// include_dirs. Every header found there is part of the compile cache key.
  std::vector<std::filesystem::path> include_dirs;
  /// Extra #defines of every variant, as expressions over the parameters and the first timed shape: a
  /// description's `defines:` (e.g. a filter size fixed at compile time for the timed problem), a T1
  /// kernel's block_size_x/y/z and grid_size_x/y/z (as Kernel Tuner defines them).
  std::vector<std::pair<std::string, expression>> defines;
  /// Kernel Tuner's source conventions (T1 kernels): a parameter loop_unroll_factor_<x> of value 0 removes
  /// its `#pragma unroll loop_unroll_factor_<x>` line (the compiler then decides).
  bool kernel_tuner_conventions = false;
};

/// Reads a kernel description (file or the `kernel` key of a T1 file is not this format; see t1 below).
kernel_spec load_kernel_spec(const std::string& path);
/// The kernel a T1 file's KernelSpecification names, over the T1 file's space (src/config/t1_kernel.cpp has
/// the rules). `cfg` and `problem_key`: the experiment config whose problem mapping may correct it
/// (kernel_file, prelude, reference, tolerance, arguments, ...); cfg may be null.
kernel_spec t1_kernel_spec(const document& t1, const search_space& space, const document* cfg,
                           const std::string& problem_key);
/// From a parsed document node at `key_path` ("" for the root).
kernel_spec parse_kernel_spec(const document& doc, const nlohmann::json& node, const std::string& key_path);

/// A buffer or scalar argument, resolved for one launch.
struct resolved_arg {
  std::string name;
  bool buffer = true;
  bool param = true;      ///< see kernel_arg
  bool constant = false;  ///< see kernel_arg
  bool compare = true;    ///< see kernel_arg
  dtype type = dtype::f32;
  std::uint64_t count = 0;  ///< elements (buffers)
  fill_spec fill;
  arg_role role = arg_role::in;
  double scalar = 0;            ///< scalars: the value (integers exactly representable up to 2^53)
  std::int64_t scalar_int = 0;  ///< scalars of integer type
  /// A tensor map argument (buffer = false): what the worker encodes over args[tensor_map->buffer].
  std::optional<tensor_map_layout> tensor_map;
};

/// One launch of one configuration on one shape.
struct launch_plan {
  std::array<std::uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1};
  std::uint32_t shared_bytes = 0;
  std::vector<resolved_arg> args;
  shape problem;
  std::uint64_t threads() const noexcept { return std::uint64_t{block[0]} * block[1] * block[2]; }
};

/// Resolves the launch of configuration `c` on shape `s`. Throws kf::error (with the failing expression)
/// when an expression cannot be evaluated or gives an impossible launch (zero or negative sizes, more than
/// 2^31-1 blocks in x, 65535 in y/z, a tensor map that breaks tensor_map_problem's rules): the caller turns
/// that into an invalid trial.
launch_plan resolve_launch(const kernel_spec& k, const config& c, const shape& s);
/// resolve_launch of the default configuration on every shape (timed, then checked): that every expression
/// knows its names and the default can launch. Throws kf::error as resolve_launch does.
void check_default_launches(const kernel_spec& k);

/// The source, options and entry of configuration `c`: the transform instances applied in order, then the
/// kernel's own parameters injected as #defines at the top (followed by a #line directive so that
/// diagnostics keep the file's line numbers), or substituted into the entry's {param} placeholders
/// ("template" injection). Throws kf::error when a transform does not apply (an invalid variant).
struct rendered_variant {
  std::string source;
  std::vector<std::string> options;
  std::string entry;
};
rendered_variant render_variant(const kernel_spec& k, const config& c);
/// `source` (from `file`) with configuration c's parameters as #defines in front of it.
std::string with_defines(const kernel_spec& k, const config& c, const std::string& source,
                         const std::string& file);

/// Roofline bound of configuration `c` on shape `s`: bytes and flops from the description's expressions.
struct roofline_bound {
  std::optional<double> bytes, flops;
};
roofline_bound roofline(const kernel_spec& k, const config& c, const shape& s);

/// Peak rates of a device for roofline floors: bytes/s of DRAM, flop/s of each compute unit.
struct device_peaks {
  double dram_bytes_per_s;
  double fp32_flops_per_s;
  double tensor_bf16_flops_per_s;
};
/// NVIDIA H200 SXM datasheet: HBM3e 4.8 TB/s, FP32 67 TFLOP/s, BF16 tensor 989 TFLOP/s dense.
constexpr device_peaks h200_peaks{4.8e12, 67e12, 989e12};
/// The roofline floor in milliseconds: max(bytes / DRAM rate, flops / the peak of k.flops_unit).
double roofline_floor_ms(const kernel_spec& k, const roofline_bound& b, const device_peaks& p);

}  // namespace kf
