#include "kforge/options.hpp"

#include <cctype>
#include <cmath>

#include "kforge/error.hpp"

namespace kf {

config_location config_location::child(std::string_view key) const {
  return {file, key_path.empty() ? std::string(key) : key_path + "." + std::string(key)};
}

config_location config_location::index(std::size_t i) const {
  return {file, key_path + "[" + std::to_string(i) + "]"};
}

void config_location::fail(const std::string& reason) const {
  throw config_error(file, key_path, reason);
}

std::string_view to_string(option_type t) noexcept {
  switch (t) {
    case option_type::integer:
      return "integer";
    case option_type::real:
      return "number";
    case option_type::boolean:
      return "boolean";
    case option_type::string:
      return "string";
    case option_type::list:
      return "list";
    case option_type::object:
      return "mapping";
    case option_type::any:
      return "any";
  }
  return "?";
}

option_spec int_option(std::string name, std::int64_t def, std::string doc, std::optional<double> min,
                       std::optional<double> max) {
  option_spec o;
  o.name = std::move(name);
  o.type = option_type::integer;
  o.default_value = def;
  o.doc = std::move(doc);
  o.min = min;
  o.max = max;
  return o;
}

option_spec real_option(std::string name, double def, std::string doc, std::optional<double> min,
                        std::optional<double> max) {
  option_spec o = int_option(std::move(name), 0, std::move(doc), min, max);
  o.type = option_type::real;
  o.default_value = def;
  return o;
}

option_spec bool_option(std::string name, bool def, std::string doc) {
  option_spec o;
  o.name = std::move(name);
  o.type = option_type::boolean;
  o.default_value = def;
  o.doc = std::move(doc);
  return o;
}

option_spec string_option(std::string name, std::string def, std::string doc,
                          std::vector<std::string> choices) {
  option_spec o;
  o.name = std::move(name);
  o.type = option_type::string;
  o.default_value = std::move(def);
  o.doc = std::move(doc);
  o.choices = std::move(choices);
  return o;
}

option_spec required_option(std::string name, option_type type, std::string doc) {
  option_spec o;
  o.name = std::move(name);
  o.type = type;
  o.doc = std::move(doc);
  o.required = true;
  return o;
}

option_spec optional_option(std::string name, option_type type, std::string doc) {
  option_spec o;
  o.name = std::move(name);
  o.type = type;
  o.doc = std::move(doc);
  return o;
}

namespace {
std::string known_names(std::span<const option_spec> specs) {
  std::string s;
  for (const auto& o : specs)
    s += (s.empty() ? "" : ", ") + o.name;
  return s.empty() ? "(none)" : s;
}

std::string json_kind(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return "nothing";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return "an integer";
    case nlohmann::json::value_t::number_float:
      return "a number";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::array:
      return "a list";
    case nlohmann::json::value_t::object:
      return "a mapping";
    default:
      return "an unsupported value";
  }
}
}  // namespace

options::options(std::span<const option_spec> specs, const nlohmann::json& params, config_location where)
    : where_(std::move(where)) {
  if (!params.is_null() && !params.is_object())
    where_.fail("expected a mapping of options, got " + json_kind(params));
  if (params.is_object()) {
    for (const auto& [key, v] : params.items()) {
      bool known = false;
      for (const auto& o : specs)
        known |= o.name == key;
      if (!known) where_.child(key).fail("unknown option (known: " + known_names(specs) + ")");
    }
  }
  for (const auto& o : specs) {
    const auto loc = where_.child(o.name);
    nlohmann::json v = params.is_object() && params.contains(o.name) ? params.at(o.name) : nlohmann::json();
    if (v.is_null()) {
      if (o.required) loc.fail("required option is missing (" + o.doc + ")");
      values_[o.name] = o.default_value;
      continue;
    }
    auto expect = [&](const std::string& what) {
      loc.fail("expected " + what + ", got " + json_kind(v) + " " + describe_json(v));
    };
    switch (o.type) {
      case option_type::integer:
        if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
            std::fabs(v.get<double>()) < 9e15)
          v = static_cast<std::int64_t>(v.get<double>());
        if (!v.is_number_integer()) expect("an integer");
        break;
      case option_type::real:
        if (!v.is_number()) expect("a number");
        if (!std::isfinite(v.get<double>())) expect("a finite number");
        break;
      case option_type::boolean:
        if (!v.is_boolean()) expect("true or false");
        break;
      case option_type::string:
        if (!v.is_string()) expect("a string");
        break;
      case option_type::list:
        if (!v.is_array()) expect("a list");
        break;
      case option_type::object:
        if (!v.is_object()) expect("a mapping");
        break;
      case option_type::any:
        break;
    }
    if (v.is_number()) {
      const double x = v.get<double>();
      // An integer option's bounds read as integers ("must be >= 1", not "1.0").
      auto bound = [&](double b) {
        return o.type == option_type::integer ? describe_json(static_cast<std::int64_t>(b))
                                              : describe_json(b);
      };
      if (o.min && !(x >= *o.min)) loc.fail("must be >= " + bound(*o.min) + ", got " + describe_json(v));
      if (o.max && !(x <= *o.max)) loc.fail("must be <= " + bound(*o.max) + ", got " + describe_json(v));
    }
    if (!o.choices.empty() && v.is_string()) {
      bool ok = false;
      std::string list;
      for (const auto& c : o.choices) {
        ok |= c == v.get<std::string>();
        list += (list.empty() ? "" : ", ") + c;
      }
      if (!ok) loc.fail("expected one of " + list + ", got " + describe_json(v));
    }
    values_[o.name] = std::move(v);
  }
}

const nlohmann::json& options::at(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) throw error("internal: option '" + std::string(name) + "' is not declared");
  return *it;
}

bool options::has(std::string_view name) const {
  auto it = values_.find(std::string(name));
  return it != values_.end() && !it->is_null();
}

std::int64_t options::integer(std::string_view name) const {
  return at(name).get<std::int64_t>();
}
double options::real(std::string_view name) const {
  return at(name).get<double>();
}
bool options::boolean(std::string_view name) const {
  return at(name).get<bool>();
}
const std::string& options::string(std::string_view name) const {
  return at(name).get_ref<const std::string&>();
}
const nlohmann::json& options::json(std::string_view name) const {
  return at(name);
}

void options::fail(std::string_view name, const std::string& reason) const {
  where_.child(name).fail(reason);
}

namespace {
// Appends v to out; returns false once out is longer than max (the caller stops).
bool append_json(const nlohmann::json& v, std::string& out, std::size_t max) {
  if (out.size() > max) return false;
  switch (v.type()) {
    case nlohmann::json::value_t::number_float: {
      const double x = v.get<double>();
      if (std::isnan(x))
        out += "nan";
      else if (std::isinf(x))
        out += x > 0 ? "inf" : "-inf";
      else
        out += v.dump();
      break;
    }
    case nlohmann::json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += ", ";
        first = false;
        if (!append_json(e, out, max)) return false;
      }
      out += ']';
      break;
    }
    case nlohmann::json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += nlohmann::json(k).dump() + ": ";
        if (!append_json(e, out, max)) return false;
      }
      out += '}';
      break;
    }
    case nlohmann::json::value_t::string:
      if (v.get_ref<const std::string&>().size() > max) {
        out += nlohmann::json(excerpt(v.get_ref<const std::string&>(), max)).dump();
        return false;
      }
      out += v.dump();
      break;
    default:
      out += v.dump();
  }
  return out.size() <= max;
}
}  // namespace

std::string describe_json(const nlohmann::json& v, std::size_t max) {
  std::string out;
  if (!append_json(v, out, max)) return excerpt(out, max) + (out.size() <= max ? " ..." : "");
  return out;
}

std::uint64_t seed_value(const nlohmann::json& v, const config_location& where) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  where.fail("expected a non-negative integer (0 to 18446744073709551615), got " + describe_json(v));
}

namespace {
bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' || c == '-';
}
}  // namespace

void check_name(const std::string& name, const config_location& where) {
  constexpr std::size_t max_length = 64;
  if (name.empty()) where.fail("expected a non-empty name");
  if (name.size() > max_length)
    where.fail("a name is at most " + std::to_string(max_length) +
               " characters (it names the run's folder), got " + std::to_string(name.size()) + ": " +
               describe_json(name, 80));
  for (char c : name)
    if (!name_char(c))
      where.fail(
          "a name is one folder name: letters, digits and . _ + - only (it names the run's folder), got " +
          describe_json(name, 80));
  if (!std::isalnum(static_cast<unsigned char>(name[0])))
    where.fail("a name starts with a letter or a digit, got " + describe_json(name, 80));
}

std::string sanitized_name(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (out.size() == 64) break;
    out += name_char(c) ? c : '_';
  }
  while (!out.empty() && !std::isalnum(static_cast<unsigned char>(out[0])))
    out.erase(0, 1);
  return out.empty() ? "run" : out;
}

std::string describe_options(std::span<const option_spec> specs) {
  std::string out;
  for (const auto& o : specs) {
    out += "  " + o.name + " (" + std::string(to_string(o.type));
    if (o.required)
      out += ", required";
    else if (!o.default_value.is_null())
      out += ", default " + o.default_value.dump();
    if (o.min || o.max) {
      // An integer option's bounds read as integers (2, not 2.0).
      const auto bound = [&](double x) {
        return o.type == option_type::integer ? std::to_string(static_cast<std::int64_t>(x))
                                              : describe_json(x);
      };
      out += ", range [" + (o.min ? bound(*o.min) : std::string("-inf")) + ", " +
             (o.max ? bound(*o.max) : std::string("inf")) + "]";
    }
    if (!o.choices.empty()) {
      out += ", one of";
      for (const auto& c : o.choices)
        out += " " + c;
    }
    out += "): " + o.doc + "\n";
  }
  return out;
}

}  // namespace kf
