// kf::search_space: typed tuning parameters and the constraints between them.
//
// A configuration (kf::config) is the index of each parameter's value, in parameter order. The space
// enumerates every valid configuration (constraints are checked as soon as their parameters are bound,
// in parallel, so pruned subtrees are never expanded), samples valid configurations uniformly, lists
// neighbourhoods and encodes configurations into [0,1]^d.
//
// Thread safety: a constructed search_space is immutable; every const member may be called
// concurrently (enumeration is computed once, on first use).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kforge/expr.hpp"
#include "kforge/random.hpp"
#include "kforge/value.hpp"

namespace kf {

/// One configuration: for each parameter, the index of its value.
using config = std::vector<std::uint32_t>;

struct config_hash {
  std::size_t operator()(const config& c) const noexcept;
};

enum class param_type { integer, real, boolean, string };
std::string_view to_string(param_type t) noexcept;

/// A tuning parameter: a name and the ordered list of values it may take.
struct param {
  std::string name;
  param_type type = param_type::integer;
  std::vector<value> values;
  /// Whether neighbouring indices are neighbouring values (numbers: yes; strings: no). Unordered
  /// parameters are one-hot encoded and have no "adjacent" values.
  bool ordered = true;
};

/// Builds a parameter, converting `values` to `type` (int from float only when integral, bool from
/// 0/1). Throws kf::error naming the parameter when a value does not fit, or when a value repeats.
param make_param(std::string name, param_type type, std::vector<value> values);

enum class neighbourhood {
  hamming,   ///< differs in exactly one parameter, any value
  adjacent,  ///< every parameter within one index step (unordered: any value; Kernel Tuner's "adjacent")
  strictly_adjacent,  ///< exactly one parameter moved by one index step (unordered: to any other value)
};

/// The valid configurations of a space, in lexicographic parameter order (the order of
/// itertools.product over the value lists). Stored as mixed-radix ranks, 8 bytes per configuration; or,
/// for a space without constraints, dense: every rank below the product of the radices, nothing stored
/// (valid_set::all), so an unconstrained space of any size up to 2^63 is "enumerated" at no cost.
class valid_set {
 public:
  valid_set() = default;
  valid_set(std::vector<std::uint64_t> sorted_ranks, std::vector<std::uint32_t> radices);
  /// Every configuration of these radices; throws kf::error when their product reaches 2^63.
  static valid_set all(std::vector<std::uint32_t> radices);

  std::size_t size() const noexcept { return dense_ ? dense_size_ : ranks_.size(); }
  bool empty() const noexcept { return size() == 0; }
  /// The mixed-radix rank of the i-th valid configuration (i < size(), unchecked).
  std::uint64_t rank(std::size_t i) const noexcept { return dense_ ? i : ranks_[i]; }
  /// The i-th valid configuration; throws std::out_of_range when i >= size().
  config at(std::size_t i) const;
  void decode(std::uint64_t rank, std::span<std::uint32_t> out) const noexcept;
  std::uint64_t rank_of(std::span<const std::uint32_t> c) const noexcept;
  /// Position of `c` in the set, or nullopt when `c` is not valid.
  std::optional<std::size_t> index_of(std::span<const std::uint32_t> c) const noexcept;
  /// Whether this is the dense set of every configuration (a space without constraints).
  bool dense() const noexcept { return dense_; }

 private:
  std::vector<std::uint64_t> ranks_;
  std::vector<std::uint32_t> radices_;
  std::vector<std::uint64_t> strides_;
  bool dense_ = false;
  std::size_t dense_size_ = 0;
};

/// Statistics of the last enumeration.
struct enumeration_stats {
  double cartesian_size = 0;        ///< product of the value-list sizes
  std::uint64_t nodes_visited = 0;  ///< partial assignments expanded
  std::uint64_t constraint_evaluations = 0;
  std::uint64_t constraint_errors = 0;  ///< evaluations that raised (counted as violations)
  double raised_configurations = 0;     ///< configurations removed because a constraint raised on them
  /// The first raise in enumeration order, one line: "constraint 'a / b > 1' raised at {a=4, b=0}:
  /// division by zero"; empty when none raised.
  std::string first_error;
  double seconds = 0;
};

class search_space {
 public:
  /// `constraints` are expressions over parameter names and the names in `constants`; a
  /// configuration is valid when every constraint is truthy. Throws kf::error naming the constraint
  /// when one does not parse or uses an unknown name, and when parameter names repeat.
  search_space(std::vector<param> params, std::vector<std::string> constraints,
               std::map<std::string, value> constants = {});
  search_space();
  ~search_space();
  search_space(const search_space&);
  search_space& operator=(const search_space&);
  search_space(search_space&&) noexcept;
  search_space& operator=(search_space&&) noexcept;

  std::span<const param> params() const noexcept;
  std::size_t dimension() const noexcept { return params().size(); }
  std::optional<std::size_t> param_index(std::string_view name) const noexcept;
  std::span<const std::string> constraint_sources() const noexcept;
  const std::map<std::string, value>& constants() const noexcept;

  /// Product of the value-list sizes (a double: it may exceed 2^64).
  double cartesian_size() const noexcept;

  /// Whether every index is in range and every constraint holds. A constraint that raises counts as
  /// violated.
  bool is_valid(std::span<const std::uint32_t> c) const;
  /// Whether the constraints hold; throws kf::eval_error when one cannot be evaluated.
  bool check(std::span<const std::uint32_t> c) const;

  const value& value_of(std::span<const std::uint32_t> c, std::size_t param) const {
    return params()[param].values[c[param]];
  }

  /// Every valid configuration. Computed once (in parallel) on first call and cached; immediate and
  /// dense for a space without constraints. Throws kf::error when the cartesian size exceeds 2^63 or
  /// more than `max_valid_configs()` configurations are valid (constrained spaces).
  const valid_set& valid() const;
  /// The valid set, when it holds at most `max_valid` configurations and can be had without enumerating
  /// a space that is too large: an explicit one, one without constraints (dense), or a constrained one of
  /// at most 1e9 combinations whose valid count, estimated from 1000 unconstrained draws (a fixed seed;
  /// one hit added, an upper estimate), is at most `max_valid`. Otherwise nullptr, and strategies sample
  /// (sample(), is_valid()). A function of the space alone (not of whether it was enumerated before), so
  /// seeded sequences do not change with what ran first. Never throws for a space that is merely large;
  /// the estimate is made once.
  const valid_set* valid_if_enumerable(std::size_t max_valid = max_valid_configs()) const;
  /// Whether valid() has been computed (or would be refused).
  bool enumerated() const noexcept;
  enumeration_stats stats() const;
  static constexpr std::size_t max_valid_configs() noexcept { return 200'000'000; }

  /// A uniformly drawn valid configuration: from valid() when the space can be enumerated, otherwise
  /// by rejection sampling (throws kf::error after `max_tries` invalid draws).
  config sample(rng& r, std::size_t max_tries = 1'000'000) const;
  /// A uniformly drawn configuration ignoring constraints.
  config sample_unconstrained(rng& r) const;

  /// The valid neighbours of `c` (never `c` itself), in a deterministic order.
  std::vector<config> neighbours(std::span<const std::uint32_t> c, neighbourhood kind) const;

  /// Encoding into [0,1]: each ordered parameter by index/(n-1) (0.5 for a single value); each
  /// unordered parameter one-hot. encoded_dimension() is the length of the result.
  std::size_t encoded_dimension() const noexcept;
  void encode(std::span<const std::uint32_t> c, std::span<double> out) const;
  std::vector<double> encode(std::span<const std::uint32_t> c) const;

  /// Kernel Tuner's cache key: the values' Python str(), joined by ",".
  std::string key(std::span<const std::uint32_t> c) const;
  /// {"name": value, ...} in parameter order.
  nlohmann::json to_json(std::span<const std::uint32_t> c) const;
  /// The configuration with these values (by Python equality); throws kf::error when a parameter is
  /// missing or a value is not in its list. Extra names are ignored when `allow_extra`.
  config from_values(const std::map<std::string, value, std::less<>>& values, bool allow_extra = true) const;
  /// The index of `v` in parameter `param`'s values, or nullopt.
  std::optional<std::uint32_t> value_index(std::size_t param, const value& v) const noexcept;

  /// The same parameters with an explicit valid set: exactly the configurations in `valid` (for spaces
  /// known only by their recorded configurations). The constraints of this space are kept as
  /// documentation but no longer decide validity.
  search_space restricted_to(std::vector<config> valid) const;
  /// Whether the valid set was given explicitly (restricted_to) rather than by constraints.
  bool explicit_valid_set() const noexcept;

  /// Human-readable one-line form: {block_size_x=16, use_shmem=1}.
  std::string describe(std::span<const std::uint32_t> c) const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

/// JSON value of a kf::value (None -> null, lists -> arrays).
nlohmann::json to_json(const value& v);
/// kf::value of a JSON scalar or array (objects are refused with kf::error).
value from_json(const nlohmann::json& j);

/// Called with the key at fault ("" for the whole object, else a parameter's name) and the reason; must
/// throw (the caller's error type says where: a file's key, a command-line option).
using json_fault = std::function<void(const std::string& key, const std::string& why)>;

/// The configuration of `s` a JSON object {parameter: value, ...} names, as `kforge export` writes them
/// and experiments' `start:` lists them: every parameter given, no other name (`owner` names the space
/// in that message), each value one of its parameter's. Whether it satisfies the constraints is the
/// caller's check (it says what the configuration is checked against).
config config_from_json(const search_space& s, const nlohmann::json& object, const std::string& owner,
                        const json_fault& fail);

}  // namespace kf
