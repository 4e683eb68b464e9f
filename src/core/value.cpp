#include "kforge/value.hpp"

#include <charconv>
#include <cmath>
#include <functional>

#include "kforge/error.hpp"

namespace kf {

namespace {
[[noreturn]] void wrong_kind(const value& v, const char* wanted) {
  throw error(std::string("expected a value of type ") + wanted + ", got " + std::string(v.type_name()) +
              " " + v.repr());
}

std::string quote(const std::string& s) {
  // Python prefers single quotes unless the string contains one and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c == q) out += '\\';
        out += c;
    }
  }
  out += q;
  return out;
}
}  // namespace

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest representation that round-trips, as Python does.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, end);
  // Python switches to exponent notation for exponents < -4 or >= 16; to_chars shortest picks
  // whichever is shorter. Normalise to Python's rule.
  const int exp10 = d == 0.0 ? 0 : static_cast<int>(std::floor(std::log10(std::fabs(d))));
  if (exp10 < -4 || exp10 >= 16) {
    auto [e2, ec2] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    s.assign(buf, e2);
    // to_chars writes e+20 / e-05; Python writes e+20 / e-05 as well.
    return s;
  }
  auto [e3, ec3] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  s.assign(buf, e3);
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

bool value::as_bool() const {
  if (is_bool()) return std::get<bool>(v_);
  wrong_kind(*this, "bool");
}

std::int64_t value::as_int() const {
  if (is_int()) return std::get<std::int64_t>(v_);
  if (is_bool()) return std::get<bool>(v_) ? 1 : 0;
  wrong_kind(*this, "int");
}

double value::as_real() const {
  if (is_real()) return std::get<double>(v_);
  if (is_int()) return static_cast<double>(std::get<std::int64_t>(v_));
  if (is_bool()) return std::get<bool>(v_) ? 1.0 : 0.0;
  wrong_kind(*this, "float");
}

const std::string& value::as_string() const {
  if (is_string()) return *std::get<std::shared_ptr<const std::string>>(v_);
  wrong_kind(*this, "str");
}

const value_list& value::as_list() const {
  if (is_list()) return *std::get<std::shared_ptr<const value_list>>(v_);
  wrong_kind(*this, "list");
}

bool value::truthy() const noexcept {
  switch (type()) {
    case kind::none:
      return false;
    case kind::boolean:
      return std::get<bool>(v_);
    case kind::integer:
      return std::get<std::int64_t>(v_) != 0;
    case kind::real:
      return std::get<double>(v_) != 0.0;
    case kind::string:
      return !std::get<std::shared_ptr<const std::string>>(v_)->empty();
    case kind::list:
      return !std::get<std::shared_ptr<const value_list>>(v_)->empty();
  }
  return false;
}

std::string_view value::type_name() const noexcept {
  switch (type()) {
    case kind::none:
      return "NoneType";
    case kind::boolean:
      return "bool";
    case kind::integer:
      return "int";
    case kind::real:
      return "float";
    case kind::string:
      return "str";
    case kind::list:
      return "list";
  }
  return "?";
}

std::string value::repr() const {
  switch (type()) {
    case kind::none:
      return "None";
    case kind::boolean:
      return std::get<bool>(v_) ? "True" : "False";
    case kind::integer:
      return std::to_string(std::get<std::int64_t>(v_));
    case kind::real:
      return python_float_repr(std::get<double>(v_));
    case kind::string:
      return quote(as_string());
    case kind::list: {
      std::string out = "[";
      bool first = true;
      for (const auto& e : as_list()) {
        if (!first) out += ", ";
        first = false;
        out += e.repr();
      }
      return out + "]";
    }
  }
  return "?";
}

std::string value::str() const {
  return is_string() ? as_string() : repr();
}

bool operator==(const value& a, const value& b) noexcept {
  if (a.is_number() && b.is_number()) {
    if (a.is_real() || b.is_real()) return a.as_real() == b.as_real();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case value::kind::none:
      return true;
    case value::kind::string:
      return a.as_string() == b.as_string();
    case value::kind::list:
      return a.as_list() == b.as_list();
    default:
      return false;  // numbers handled above
  }
}

int value::compare(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_real() || b.is_real()) {
      const double x = a.as_real(), y = b.as_real();
      if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every comparison except != is false
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const auto x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i] == y[i]) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw error("'<' not supported between instances of '" + std::string(a.type_name()) + "' and '" +
              std::string(b.type_name()) + "'");
}

std::size_t value::hash() const noexcept {
  switch (type()) {
    case kind::none:
      return 0x9e3779b97f4a7c15ULL;
    case kind::boolean:
    case kind::integer:
      return std::hash<std::int64_t>{}(as_int());
    case kind::real: {
      const double d = std::get<double>(v_);
      if (std::floor(d) == d && std::fabs(d) < 9.2e18)
        return std::hash<std::int64_t>{}(static_cast<std::int64_t>(d));
      return std::hash<double>{}(d);
    }
    case kind::string:
      return std::hash<std::string>{}(as_string());
    case kind::list: {
      std::size_t h = 0xcbf29ce484222325ULL;
      for (const auto& e : as_list())
        h = (h ^ e.hash()) * 0x100000001b3ULL;
      return h;
    }
  }
  return 0;
}

}  // namespace kf
