#include "kforge/document.hpp"

#include <yaml-cpp/yaml.h>
#include <zlib.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "kforge/embedded.hpp"
#include "kforge/error.hpp"

namespace kf {

config_location document::at(const std::string& key_path) const {
  config_location loc{file, key_path};
  if (lines) {
    // Report the line of the deepest known ancestor of the key path.
    std::string k = key_path;
    while (true) {
      auto it = lines->find(k);
      if (it != lines->end()) {
        loc.file = file + ":" + std::to_string(it->second);
        break;
      }
      const auto cut = k.find_last_of(".[");
      if (cut == std::string::npos) break;
      k.resize(cut);
    }
  }
  return loc;
}

std::size_t max_file_bytes() {
  static const std::size_t cap = [] {
    if (const char* env = std::getenv("KFORGE_MAX_FILE_MB"); env && *env) {
      char* end = nullptr;
      const unsigned long long mb = std::strtoull(env, &end, 10);
      if (end && *end == '\0' && mb > 0 && mb < (1ull << 40)) return static_cast<std::size_t>(mb) << 20;
    }
    return std::size_t{1} << 30;
  }();
  return cap;
}

namespace {
[[noreturn]] void too_large(const std::string& path, const char* what) {
  throw error("'" + path + "' " + what + " more than " + std::to_string(max_file_bytes() >> 20) +
              " MiB, the most kforge reads from one file (KFORGE_MAX_FILE_MB raises it)");
}

std::string read_gzip(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw error("cannot open '" + path + "': no such file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw error("cannot open '" + path + "'");
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    if (out.size() + static_cast<std::size_t>(n) > max_file_bytes()) {
      gzclose(f);
      too_large(path, "decompresses to");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  int errnum = 0;
  const char* msg = gzerror(f, &errnum);
  const std::string err = errnum != Z_OK && errnum != Z_STREAM_END ? msg : "";
  gzclose(f);
  if (n < 0 || !err.empty()) throw error("cannot decompress '" + path + "': " + err);
  return out;
}
}  // namespace

std::string read_file(const std::string& path) {
  if (path.rfind(embedded::scheme, 0) == 0) {
    const auto name = std::string_view(path).substr(embedded::scheme.size());
    if (auto d = embedded::find(name)) return std::string(*d);
    throw error("no embedded file '" + std::string(name) + "'");
  }
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0) return read_gzip(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw error("cannot open '" + path +
                "': " + (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file"));
  }
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_file_bytes())
    too_large(path, "holds");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
// Python's json module writes the bare tokens NaN, Infinity and -Infinity for non-finite floats, which
// strict JSON (and nlohmann) rejects. They are swapped for sentinel strings outside string literals,
// parsed, and the sentinels turned back into floats.
constexpr std::string_view nan_sentinel = "\\u0000kforge:NaN", inf_sentinel = "\\u0000kforge:Infinity",
                           ninf_sentinel = "\\u0000kforge:-Infinity";

// The text with non-finite tokens replaced, or nullopt when it has none (the common case: no copy).
std::optional<std::string> replace_non_finite_tokens(const std::string& text) {
  std::optional<std::string> out;
  std::size_t copied = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    std::string_view token, sentinel;
    const std::string_view rest(text.data() + i, text.size() - i);
    if (rest.starts_with("NaN"))
      token = "NaN", sentinel = nan_sentinel;
    else if (rest.starts_with("Infinity"))
      token = "Infinity", sentinel = inf_sentinel;
    else if (rest.starts_with("-Infinity"))
      token = "-Infinity", sentinel = ninf_sentinel;
    else
      continue;
    if (!out) out.emplace();
    out->append(text, copied, i - copied);
    out->append("\"").append(sentinel).append("\"");
    i += token.size() - 1;
    copied = i + 1;
  }
  if (out) out->append(text, copied, std::string::npos);
  return out;
}

// Iterative (a hostile file may nest deeply).
void restore_non_finite(nlohmann::json& root) {
  std::vector<nlohmann::json*> todo{&root};
  while (!todo.empty()) {
    nlohmann::json& j = *todo.back();
    todo.pop_back();
    if (j.is_structured()) {
      for (auto& e : j)
        todo.push_back(&e);
      continue;
    }
    if (!j.is_string()) continue;
    const auto& s = j.get_ref<const std::string&>();
    if (!s.starts_with(std::string_view("\0kforge:", 8))) continue;
    const auto what = s.substr(8);
    if (what == "NaN")
      j = std::numeric_limits<double>::quiet_NaN();
    else if (what == "Infinity")
      j = std::numeric_limits<double>::infinity();
    else if (what == "-Infinity")
      j = -std::numeric_limits<double>::infinity();
  }
}

}  // namespace

nlohmann::json parse_json(const std::string& text) {
  auto replaced = replace_non_finite_tokens(text);
  if (!replaced) return nlohmann::json::parse(text);
  nlohmann::json j = nlohmann::json::parse(*replaced);
  replaced.reset();
  restore_non_finite(j);
  return j;
}

std::string resolve_path(const std::string& path, const std::filesystem::path& base_dir) {
  if (path.rfind(embedded::scheme, 0) == 0) return path;
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return p.lexically_normal().string();
  return (base_dir / p).lexically_normal().string();
}

namespace {
bool all_of_digits(std::string_view s, bool hex) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c))))
      return false;
  return true;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?  (hand-written: std::regex recurses per character
// and overflows the stack on a long scalar)
bool is_float_literal(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  const auto digits = [&] {
    const std::size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
      ++i;
    return i - start;
  };
  const std::size_t whole = digits();
  std::size_t frac = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    frac = digits();
  }
  if (whole == 0 && frac == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// An integer literal as the narrowest JSON integer that holds it; a float when none does (as YAML's
// core schema reads 1e999 as infinity, an integer beyond 64 bits becomes its nearest float).
nlohmann::json integer_literal(const std::string& s, int base) {
  const char* first = s.data() + (base == 16 ? 2 : (s[0] == '+' ? 1 : 0));
  const char* last = s.data() + s.size();
  std::int64_t i = 0;
  if (auto [p, ec] = std::from_chars(first, last, i, base); ec == std::errc() && p == last) return i;
  std::uint64_t u = 0;
  if (auto [p, ec] = std::from_chars(first, last, u, base); ec == std::errc() && p == last) return u;
  return std::strtod(s.c_str(), nullptr);
}

nlohmann::json scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted: always a string
  if (s == "null" || s == "Null" || s == "NULL" || s == "~" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const std::string_view unsigned_part = std::string_view(s).substr(s[0] == '-' || s[0] == '+' ? 1 : 0);
  if (all_of_digits(unsigned_part, false)) return integer_literal(s, 10);
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x' && all_of_digits(std::string_view(s).substr(2), true))
    return integer_literal(s, 16);
  if (is_float_literal(s)) return std::strtod(s.c_str(), nullptr);  // overflow: +-inf, as YAML reads it
  if (s == ".inf" || s == ".Inf" || s == "+.inf") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN") return std::numeric_limits<double>::quiet_NaN();
  return s;
}

// Bounds what a document can make kforge allocate: nodes after alias expansion (a few hundred bytes of
// nested YAML aliases expand to billions), nesting depth, and the bytes of the recorded key paths.
struct conversion_budget {
  const std::string& file;
  std::size_t nodes = 0;
  std::size_t path_bytes = 0;
  void charge(const YAML::Node& n, const std::string& path, std::size_t depth) {
    const auto where = file + ":" + std::to_string(n.Mark().line + 1);
    if (++nodes > document_limits::max_nodes)
      throw config_error(where, excerpt(path, 200),
                         "the document has more than " + std::to_string(document_limits::max_nodes) +
                             " values once its YAML aliases are expanded (an alias bomb?)");
    if (depth > document_limits::max_depth)
      throw config_error(where, excerpt(path, 200),
                         "nested more than " + std::to_string(document_limits::max_depth) + " levels deep");
    path_bytes += path.size();
    if (path_bytes > document_limits::max_key_path_bytes)
      throw config_error(where, excerpt(path, 200),
                         "the document's keys are too many or too long (more than " +
                             std::to_string(document_limits::max_key_path_bytes >> 20) +
                             " MiB of key paths once its YAML aliases are expanded)");
  }
};

nlohmann::json convert(const YAML::Node& n, const std::string& path, std::map<std::string, int>& lines,
                       const std::string& file, conversion_budget& budget, std::size_t depth) {
  budget.charge(n, path, depth);
  lines.emplace(path, n.Mark().line + 1);  // a mapping entry's own line was recorded from its key
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return scalar(n);
    case YAML::NodeType::Sequence: {
      auto a = nlohmann::json::array();
      std::size_t i = 0;
      for (const auto& e : n) {
        a.push_back(convert(e, path + "[" + std::to_string(i) + "]", lines, file, budget, depth + 1));
        ++i;
      }
      return a;
    }
    case YAML::NodeType::Map: {
      auto o = nlohmann::json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar())
          throw config_error(file + ":" + std::to_string(kv.first.Mark().line + 1), path,
                             "mapping keys must be plain names");
        const auto& key = kv.first.Scalar();
        if (o.contains(key))
          throw config_error(file + ":" + std::to_string(kv.first.Mark().line + 1),
                             path.empty() ? key : path + "." + key, "key appears twice");
        const std::string child = path.empty() ? key : path + "." + key;
        lines.emplace(child, kv.first.Mark().line + 1);
        o[key] = convert(kv.second, child, lines, file, budget, depth + 1);
      }
      return o;
    }
  }
  return nullptr;
}
}  // namespace

document parse_document(const std::string& text, const std::string& file,
                        const std::filesystem::path& base_dir) {
  document d;
  d.file = file;
  d.base_dir = base_dir;
  auto lines = std::make_shared<std::map<std::string, int>>();
  try {
    const YAML::Node root = YAML::Load(text);
    conversion_budget budget{file};
    d.root = convert(root, "", *lines, file, budget, 0);
  } catch (const YAML::Exception& e) {
    throw config_error(file + ":" + std::to_string(e.mark.line + 1), "", "not valid YAML/JSON: " + e.msg);
  }
  lines->erase("");
  d.lines = std::move(lines);
  return d;
}

document load_document(const std::string& path) {
  std::string text;
  try {
    text = read_file(path);
  } catch (const error& e) {
    throw config_error(path, "", e.what());
  }
  std::filesystem::path base;
  if (path.rfind(embedded::scheme, 0) == 0) {
    base = "";
  } else {
    base = std::filesystem::absolute(path).parent_path();
  }
  // JSON is valid YAML 1.2, but yaml-cpp is slow on large JSON files and mis-types some numbers: read
  // .json(.gz) with nlohmann instead (no per-key lines; JSON files are machine-written).
  const bool is_json = path.ends_with(".json") || path.ends_with(".json.gz");
  if (is_json) {
    document d;
    d.file = path;
    d.base_dir = base;
    try {
      d.root = parse_json(text);
    } catch (const nlohmann::json::parse_error& e) {
      throw config_error(path, "", std::string("not valid JSON: ") + e.what());
    }
    return d;
  }
  return parse_document(text, path, base);
}

}  // namespace kf
