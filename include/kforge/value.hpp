// kf::value: the dynamic value of a tuning parameter or of an expression.
//
// Python semantics where the two meet (T1 files are written in Python's expression language):
// bool < int < float form one numeric tower (True == 1 == 1.0), strings and lists compare
// lexicographically, and the repr of a value is what Python's repr() prints.
// Values are immutable and cheap to copy: numbers are held inline, strings and lists are shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kf {

class value;
using value_list = std::vector<value>;

class value {
 public:
  enum class kind : std::uint8_t { none, boolean, integer, real, string, list };

  value() noexcept = default;
  value(bool b) noexcept : v_(b) {}  // NOLINT(google-explicit-constructor): values are literals
  value(int i) noexcept : v_(static_cast<std::int64_t>(i)) {}
  value(long i) noexcept : v_(static_cast<std::int64_t>(i)) {}
  value(long long i) noexcept : v_(static_cast<std::int64_t>(i)) {}
  value(unsigned i) noexcept : v_(static_cast<std::int64_t>(i)) {}
  value(double d) noexcept : v_(d) {}
  value(std::string s) : v_(std::make_shared<const std::string>(std::move(s))) {}
  value(std::string_view s) : value(std::string(s)) {}
  value(const char* s) : value(std::string(s)) {}
  value(value_list l) : v_(std::make_shared<const value_list>(std::move(l))) {}

  kind type() const noexcept { return static_cast<kind>(v_.index()); }
  bool is_none() const noexcept { return type() == kind::none; }
  bool is_bool() const noexcept { return type() == kind::boolean; }
  bool is_int() const noexcept { return type() == kind::integer; }
  bool is_real() const noexcept { return type() == kind::real; }
  bool is_string() const noexcept { return type() == kind::string; }
  bool is_list() const noexcept { return type() == kind::list; }
  /// bool, int or float.
  bool is_number() const noexcept { return type() == kind::boolean || is_int() || is_real(); }
  /// bool or int (Python's int includes bool).
  bool is_integral() const noexcept { return is_bool() || is_int(); }

  /// Accessors. Each throws kf::error when the value is of another kind, except that as_int accepts
  /// bool and as_real accepts bool and int (numeric widening, never narrowing).
  bool as_bool() const;
  std::int64_t as_int() const;
  double as_real() const;
  const std::string& as_string() const;
  const value_list& as_list() const;

  /// Python truthiness: None, False, 0, 0.0, "" and [] are false.
  bool truthy() const noexcept;

  /// Python repr(): 'abc', True, 3, 1.5, 1e+20 -> 1e+20, [1, 'a'].
  std::string repr() const;
  /// Python str(): like repr() but strings are unquoted.
  std::string str() const;
  /// Python type name: NoneType, bool, int, float, str, list.
  std::string_view type_name() const noexcept;

  /// Python ==: numbers compare by value across kinds; other kinds are equal only to their own kind.
  friend bool operator==(const value& a, const value& b) noexcept;
  friend bool operator!=(const value& a, const value& b) noexcept { return !(a == b); }

  /// Python ordering (<). Returns <0, 0, >0. Throws kf::error for kinds Python cannot order
  /// (e.g. str < int, None < None).
  static int compare(const value& a, const value& b);

  /// Hash consistent with ==: hash(1) == hash(1.0) == hash(True).
  std::size_t hash() const noexcept;

 private:
  std::variant<std::monostate, bool, std::int64_t, double, std::shared_ptr<const std::string>,
               std::shared_ptr<const value_list>>
      v_;
};

/// Formats a double the way Python's repr(float) does (shortest round-trip, ".0" for integers).
std::string python_float_repr(double d);

struct value_hash {
  std::size_t operator()(const value& v) const noexcept { return v.hash(); }
};

}  // namespace kf
