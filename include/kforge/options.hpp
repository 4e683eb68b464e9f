// kf::options: the validated parameters of a plug-in ({type, params} in a config).
//
// Contract: every plug-in declares its options (name, type, default, range, documentation); params
// given in a config are checked against the declaration when the plug-in is created. An unknown key,
// a wrong type or an out-of-range value is a kf::config_error naming the file, the key path and what
// was expected. Nothing is silently defaulted except options the user did not give.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kf {

/// Where a piece of configuration came from, for error messages: a file and a dotted key path
/// ("strategy.params.population_size").
struct config_location {
  std::string file;
  std::string key_path;
  config_location child(std::string_view key) const;
  config_location index(std::size_t i) const;
  [[noreturn]] void fail(const std::string& reason) const;
};

enum class option_type { integer, real, boolean, string, list, object, any };
std::string_view to_string(option_type t) noexcept;

struct option_spec {
  std::string name;
  option_type type = option_type::integer;
  nlohmann::json default_value;  ///< null with required == false means "no value" (optional option)
  std::string doc;
  std::optional<double> min;         ///< inclusive, numbers only
  std::optional<double> max;         ///< inclusive, numbers only
  std::vector<std::string> choices;  ///< allowed strings, when not empty
  bool required = false;
};

/// Declaration helpers (the usual way to write an option list).
option_spec int_option(std::string name, std::int64_t def, std::string doc, std::optional<double> min = {},
                       std::optional<double> max = {});
option_spec real_option(std::string name, double def, std::string doc, std::optional<double> min = {},
                        std::optional<double> max = {});
option_spec bool_option(std::string name, bool def, std::string doc);
option_spec string_option(std::string name, std::string def, std::string doc,
                          std::vector<std::string> choices = {});
option_spec required_option(std::string name, option_type type, std::string doc);
/// An option of any type whose absence means "not set" (json null).
option_spec optional_option(std::string name, option_type type, std::string doc);

class options {
 public:
  options() = default;
  /// Validates `params` (an object, or null for "none given") against `specs`, fills defaults.
  options(std::span<const option_spec> specs, const nlohmann::json& params, config_location where);

  bool has(std::string_view name) const;  ///< given or defaulted to a non-null value
  std::int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  bool boolean(std::string_view name) const;
  const std::string& string(std::string_view name) const;
  const nlohmann::json& json(std::string_view name) const;
  /// Every option with its resolved value (defaults included): what a run records.
  const nlohmann::json& resolved() const noexcept { return values_; }
  const config_location& where() const noexcept { return where_; }
  /// Throws a config_error for option `name` (for checks that involve several options).
  [[noreturn]] void fail(std::string_view name, const std::string& reason) const;

 private:
  const nlohmann::json& at(std::string_view name) const;
  nlohmann::json values_ = nlohmann::json::object();
  config_location where_;
};

/// A JSON value as echoed in a message: JSON text, except that non-finite numbers read nan, inf and -inf
/// (JSON has no spelling for them) and the text stops after about `max` characters ("...").
std::string describe_json(const nlohmann::json& v, std::size_t max = 300);

/// A seed from a config value: an integer from 0 to 2^64 - 1; else a config_error at `where`.
std::uint64_t seed_value(const nlohmann::json& v, const config_location& where);

/// A name that becomes part of a file name (a run's name): one path component of 1 to 64 characters
/// from letters, digits and . _ + -, starting with a letter or digit; else a config_error at `where`.
void check_name(const std::string& name, const config_location& where);
/// `text` made into such a name (other characters become '_', cut to 64; "run" when nothing is left).
std::string sanitized_name(const std::string& text);

/// One line per option: name, type, default, range/choices, documentation.
std::string describe_options(std::span<const option_spec> specs);

}  // namespace kf
