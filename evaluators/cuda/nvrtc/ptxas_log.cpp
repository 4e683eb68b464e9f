#include "evaluators/cuda/nvrtc/ptxas_log.hpp"

#include <charconv>
#include <vector>

namespace kf::cuda::detail {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string_view> split_fields(std::string_view s) {
  std::vector<std::string_view> out;
  while (true) {
    const auto comma = s.find(',');
    out.push_back(trim(s.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    s.remove_prefix(comma + 1);
  }
}

/// A field "[Used|used] <number> <unit>" split into number and unit ("registers", "bytes smem",
/// "bytes cmem[3]", ...). nullopt when the field does not have that shape.
struct field {
  int number = 0;
  std::string_view unit;
};
std::optional<field> parse_field(std::string_view s) {
  if (starts_with(s, "Used ") || starts_with(s, "used ")) s.remove_prefix(5);
  field f;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), f.number);
  if (ec != std::errc{}) return std::nullopt;
  f.unit = trim(s.substr(static_cast<std::size_t>(end - s.data())));
  return f;
}

/// "bytes cmem[3]" -> 3.
std::optional<int> cmem_bank(std::string_view unit) {
  if (!starts_with(unit, "bytes cmem[") || unit.back() != ']') return std::nullopt;
  unit.remove_prefix(11);
  unit.remove_suffix(1);
  int bank = 0;
  const auto [end, ec] = std::from_chars(unit.data(), unit.data() + unit.size(), bank);
  if (ec != std::errc{} || end != unit.data() + unit.size()) return std::nullopt;
  return bank;
}

/// The text between the first pair of single quotes.
std::optional<std::string> quoted(std::string_view s) {
  const auto open = s.find('\'');
  if (open == std::string_view::npos) return std::nullopt;
  const auto close = s.find('\'', open + 1);
  if (close == std::string_view::npos) return std::nullopt;
  return std::string(s.substr(open + 1, close - open - 1));
}

}  // namespace

const ptxas_function* ptxas_report::find(const std::string& name) const {
  auto it = functions.find(name);
  return it == functions.end() ? nullptr : &it->second;
}

ptxas_report parse_ptxas_log(std::string_view log) {
  ptxas_report report;
  std::string entry;       // last "Compiling entry function"
  std::string properties;  // last "Function properties for"
  while (!log.empty()) {
    const auto nl = log.find('\n');
    std::string_view line = log.substr(0, nl);
    log.remove_prefix(nl == std::string_view::npos ? log.size() : nl + 1);
    if (!starts_with(line, "ptxas")) continue;
    line.remove_prefix(5);
    // Body after "ptxas info    :" or "ptxas         .".
    const auto mark = line.find_first_of(":.");
    if (mark == std::string_view::npos) continue;
    const std::string_view head = trim(line.substr(0, mark));
    if (!head.empty() && head != "info") continue;  // warnings, errors, fatal
    const std::string_view body = trim(line.substr(mark + 1));

    if (starts_with(body, "Compiling entry function ")) {
      if (auto name = quoted(body)) {
        entry = *name;
        report.functions[entry].entry = true;
      }
      continue;
    }
    if (starts_with(body, "Function properties for ")) {
      properties = std::string(trim(body.substr(24)));
      report.functions[properties];
      continue;
    }
    if (starts_with(body, "Compile time")) continue;

    const auto fields = split_fields(body);
    if (starts_with(body, "Used ")) {
      if (entry.empty()) continue;
      ptxas_function& f = report.functions[entry];
      for (auto text : fields) {
        const auto fl = parse_field(text);
        if (!fl) continue;
        if (fl->unit == "registers")
          f.registers = fl->number;
        else if (fl->unit == "barriers")
          f.barriers = fl->number;
        else if (fl->unit == "bytes smem")
          f.shared_bytes = fl->number;
        else if (fl->unit == "bytes cumulative stack size")
          f.cumulative_stack_bytes = fl->number;
        else if (auto bank = cmem_bank(fl->unit))
          f.cmem_bytes[*bank] = fl->number;
      }
    } else if (body.find("bytes stack frame") != std::string_view::npos) {
      if (properties.empty()) continue;
      ptxas_function& f = report.functions[properties];
      for (auto text : fields) {
        const auto fl = parse_field(text);
        if (!fl) continue;
        if (fl->unit == "bytes stack frame")
          f.stack_frame_bytes = fl->number;
        else if (fl->unit == "bytes spill stores")
          f.spill_stores_bytes = fl->number;
        else if (fl->unit == "bytes spill loads")
          f.spill_loads_bytes = fl->number;
      }
    } else if (body.find("bytes gmem") != std::string_view::npos) {
      for (auto text : fields) {
        const auto fl = parse_field(text);
        if (!fl) continue;
        if (fl->unit == "bytes gmem")
          report.gmem_bytes = fl->number;
        else if (auto bank = cmem_bank(fl->unit))
          report.module_cmem_bytes[*bank] = fl->number;
      }
    }
  }
  return report;
}

}  // namespace kf::cuda::detail
