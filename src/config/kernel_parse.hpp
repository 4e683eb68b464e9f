// Helpers shared by the readers of kernel descriptions (kernel.cpp) and of T1 files' kernels
// (t1_kernel.cpp): each reports a config_error at the offending key of `doc`.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "kforge/document.hpp"
#include "kforge/expr.hpp"
#include "kforge/kernel.hpp"
#include "kforge/space.hpp"
#include "kforge/value.hpp"

namespace kf::kernel_parse {

using json = nlohmann::json;

/// An expression from a string or a number at `key`.
expression parse_expr(const document& doc, const json& v, const std::string& key);
/// node[k], or a null json when absent or node is not an object.
const json& child(const json& node, const char* k);
std::string join_key(const std::string& base, const std::string& k);
/// node[k]; fails at `key` when missing.
const json& req_or(const json& node, const char* k, const document& doc, const std::string& key);
/// A fill: normal, uniform, iota, {normal: [m, s]}, {uniform: [lo, hi]}, {iota: [a, b]}, {constant: x}.
fill_spec parse_fill(const document& doc, const json& v, const std::string& key);
/// A problem shape: {name: number or list, ...}.
shape parse_shape(const document& doc, const json& v, const std::string& key);
/// Fails at the first key of `node` not in `allowed`, listing the allowed ones.
void check_keys(const document& doc, const json& node, const std::string& key,
                const std::set<std::string>& allowed);
/// baseline, none or {entry, source?, compiler_options?} (source defaults to the kernel's own).
reference_spec parse_reference(const document& doc, const json& r, const std::string& rkey,
                               const std::string& own_file, const std::string& own_source);
/// f32 1e-5/1e-6, f64 1e-12/1e-14, f16 1e-2/1e-3, bf16 2e-2/1e-2 (rel/abs).
std::map<dtype, tolerance> default_tolerances();
/// {dtype: {rel, abs}} over `out` (a partial entry keeps the other value).
void parse_tolerances(const document& doc, const json& t, const std::string& tkey,
                      std::map<dtype, tolerance>& out);
/// A tuning parameter {name, values (a list or an expression), type?, default?} (and `extra_keys`), with
/// its default when given.
std::pair<param, std::optional<value>> parse_parameter(const document& doc, const json& p, const std::string& key,
                                                       const std::set<std::string>& extra_keys);
/// The default configuration: each parameter's `default` (else its first value); fails at the parameter
/// whose default is not one of its values, or at `params_key` when the defaults violate the constraints.
config resolve_defaults(const document& doc, const search_space& space,
                                          const std::vector<std::optional<value>>& defaults,
                                          const std::string& params_key);

/// A T1 file's default configuration: its `Default` values where they are values of the space; when
/// that violates the constraints, the valid configuration that changes the fewest parameters.
config t1_defaults(const document& doc, const search_space& space);

}  // namespace kf::kernel_parse
