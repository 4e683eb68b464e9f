#include "kforge/kernel.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "config/kernel_parse.hpp"
#include "kforge/error.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

struct dtype_info {
  dtype t;
  const char* name;
  std::size_t size;
  bool floating;
};
constexpr std::array<dtype_info, 12> dtypes = {{{dtype::f32, "f32", 4, true},
                                                {dtype::f64, "f64", 8, true},
                                                {dtype::f16, "f16", 2, true},
                                                {dtype::bf16, "bf16", 2, true},
                                                {dtype::i8, "i8", 1, false},
                                                {dtype::u8, "u8", 1, false},
                                                {dtype::i16, "i16", 2, false},
                                                {dtype::u16, "u16", 2, false},
                                                {dtype::i32, "i32", 4, false},
                                                {dtype::u32, "u32", 4, false},
                                                {dtype::i64, "i64", 8, false},
                                                {dtype::u64, "u64", 8, false}}};
}  // namespace

std::size_t size_of(dtype t) noexcept {
  return dtypes[static_cast<std::size_t>(t)].size;
}
std::string_view to_string(dtype t) noexcept {
  return dtypes[static_cast<std::size_t>(t)].name;
}
bool is_floating(dtype t) noexcept {
  return dtypes[static_cast<std::size_t>(t)].floating;
}

std::optional<dtype> dtype_from_string(std::string_view s) noexcept {
  static const std::map<std::string_view, dtype> aliases = {
      {"float", dtype::f32},  {"float32", dtype::f32}, {"double", dtype::f64},    {"float64", dtype::f64},
      {"half", dtype::f16},   {"float16", dtype::f16}, {"bfloat16", dtype::bf16}, {"int", dtype::i32},
      {"int32", dtype::i32},  {"uint", dtype::u32},    {"uint32", dtype::u32},    {"int64", dtype::i64},
      {"uint64", dtype::u64}, {"int8", dtype::i8},     {"uint8", dtype::u8},      {"char", dtype::i8},
      {"int16", dtype::i16},  {"uint16", dtype::u16},  {"long", dtype::i64},      {"size_t", dtype::u64}};
  for (const auto& d : dtypes)
    if (s == d.name) return d.t;
  if (auto it = aliases.find(s); it != aliases.end()) return it->second;
  return std::nullopt;
}

namespace kernel_parse {
expression parse_expr(const document& doc, const json& v, const std::string& key) {
  std::string text;
  if (v.is_string())
    text = v.get<std::string>();
  else if (v.is_number() || v.is_boolean())
    text = v.dump();
  else
    doc.at(key).fail("expected an expression (a string or a number), got " + describe_json(v));
  try {
    return expression::parse(text);
  } catch (const error& e) {
    doc.at(key).fail(e.what());
  }
}

const json& child(const json& node, const char* k) {
  static const json null;
  if (!node.is_object()) return null;
  auto it = node.find(k);
  return it == node.end() ? null : *it;
}

std::string join_key(const std::string& base, const std::string& k) {
  return base.empty() ? k : base + "." + k;
}

const json& req_or(const json& node, const char* k, const document& doc, const std::string& key) {
  const auto& v = child(node, k);
  if (v.is_null()) doc.at(key).fail(std::string("missing key '") + k + "'");
  return v;
}

fill_spec parse_fill(const document& doc, const json& v, const std::string& key) {
  fill_spec f;
  auto kind_of = [&](const std::string& s) {
    if (s == "normal") return fill_spec::kind::normal;
    if (s == "uniform") return fill_spec::kind::uniform;
    if (s == "iota") return fill_spec::kind::iota;
    if (s == "constant") return fill_spec::kind::constant;
    doc.at(key).fail("unknown fill '" + s + "' (expected normal, uniform, iota or constant)");
  };
  if (v.is_null()) return f;
  if (v.is_string()) {
    f.k = kind_of(v.get<std::string>());
    if (f.k == fill_spec::kind::uniform) f.a = -1, f.b = 1;
    if (f.k == fill_spec::kind::iota) f.a = 0, f.b = 1;
    if (f.k == fill_spec::kind::constant) doc.at(key).fail("constant needs its value: {constant: 1.5}");
    return f;
  }
  if (!v.is_object() || v.size() != 1)
    doc.at(key).fail(
        "expected a fill: normal, uniform, iota, {normal: [mean, std]}, {uniform: [lo, hi]}, {iota: [start, "
        "step]} or {constant: x}");
  const std::string name = v.begin().key();
  const json& args = v.begin().value();
  f.k = kind_of(name);
  if (f.k == fill_spec::kind::constant) {
    if (!args.is_number()) doc.at(key + "." + name).fail("expected a number");
    f.a = args.get<double>();
    return f;
  }
  if (!args.is_array() || args.size() != 2 || !args[0].is_number() || !args[1].is_number())
    doc.at(key + "." + name).fail("expected two numbers");
  f.a = args[0].get<double>();
  f.b = args[1].get<double>();
  if (f.k == fill_spec::kind::normal && !(f.b > 0))
    doc.at(key + "." + name).fail("the standard deviation must be positive");
  if (f.k == fill_spec::kind::uniform && !(f.b > f.a)) doc.at(key + "." + name).fail("expected low < high");
  return f;
}

shape parse_shape(const document& doc, const json& v, const std::string& key) {
  if (!v.is_object() || v.empty()) doc.at(key).fail("expected a mapping of problem sizes, e.g. {n: 1048576}");
  shape s;
  for (const auto& [k, x] : v.items()) {
    if (!x.is_number() && !x.is_array()) doc.at(key + "." + k).fail("expected a number (or a list)");
    s.emplace(k, from_json(x));
  }
  return s;
}

void check_keys(const document& doc, const json& node, const std::string& key,
                const std::set<std::string>& allowed) {
  for (const auto& [k, v] : node.items()) {
    if (allowed.count(k)) continue;
    std::string list;
    for (const auto& a : allowed)
      list += (list.empty() ? "" : ", ") + a;
    doc.at(join_key(key, k)).fail("unknown key (expected one of " + list + ")");
  }
}
reference_spec parse_reference(const document& doc, const json& r, const std::string& rkey,
                               const std::string& own_file, const std::string& own_source) {
  reference_spec ref;
  if (r.is_string() && (r == "baseline" || r == "none")) {
    ref.k = r == "baseline" ? reference_spec::kind::baseline : reference_spec::kind::none;
  } else if (r.is_object()) {
    check_keys(doc, r, rkey, {"entry", "source", "compiler_options"});
    ref.k = reference_spec::kind::kernel;
    if (!child(r, "entry").is_string()) doc.at(rkey + ".entry").fail("expected the reference kernel's name");
    ref.entry = r["entry"].get<std::string>();
    if (child(r, "source").is_string()) {
      ref.source_file = resolve_path(r["source"].get<std::string>(), doc.base_dir);
      try {
        ref.source = read_file(ref.source_file);
      } catch (const error& e) {
        doc.at(rkey + ".source").fail(e.what());
      }
    } else {
      ref.source_file = own_file;
      ref.source = own_source;
    }
    if (const auto& o = child(r, "compiler_options"); !o.is_null()) {
      if (!o.is_array()) doc.at(rkey + ".compiler_options").fail("expected a list of options");
      for (const auto& x : o) {
        if (!x.is_string()) doc.at(rkey + ".compiler_options").fail("expected a list of strings");
        ref.options.push_back(x.get<std::string>());
      }
    }
  } else {
    doc.at(rkey).fail("expected baseline, none or {entry, source?}");
  }
  return ref;
}

std::map<dtype, tolerance> default_tolerances() {
  return {{dtype::f32, {1e-5, 1e-6}},
          {dtype::f64, {1e-12, 1e-14}},
          {dtype::f16, {1e-2, 1e-3}},
          {dtype::bf16, {2e-2, 1e-2}}};
}

void parse_tolerances(const document& doc, const json& t, const std::string& tkey,
                      std::map<dtype, tolerance>& out) {
  if (!t.is_object()) doc.at(tkey).fail("expected {dtype: {rel, abs}}");
  for (const auto& [name, v] : t.items()) {
    auto dt = dtype_from_string(name);
    if (!dt) doc.at(tkey + "." + name).fail("not a dtype");
    if (!v.is_object()) doc.at(tkey + "." + name).fail("expected {rel, abs}");
    check_keys(doc, v, tkey + "." + name, {"rel", "abs"});
    tolerance tol = out.count(*dt) ? out[*dt] : tolerance{0, 0};
    for (const char* part : {"rel", "abs"})
      if (v.contains(part) && !v[part].is_number())
        doc.at(tkey + "." + name + "." + part).fail("expected a number");
    if (v.contains("rel")) tol.rel = v["rel"].get<double>();
    if (v.contains("abs")) tol.abs = v["abs"].get<double>();
    if (!(tol.rel >= 0) || !(tol.abs >= 0)) doc.at(tkey + "." + name).fail("tolerances must be non-negative");
    out[*dt] = tol;
  }
}

std::pair<param, std::optional<value>> parse_parameter(const document& doc, const json& p, const std::string& key,
                                                       const std::set<std::string>& extra_keys) {
  if (!p.is_object()) doc.at(key).fail("expected {name, values, type?, default?}");
  std::set<std::string> allowed = {"name", "values", "type", "default"};
  allowed.insert(extra_keys.begin(), extra_keys.end());
  check_keys(doc, p, key, allowed);
  if (!child(p, "name").is_string()) doc.at(key + ".name").fail("expected a name");
  const auto pname = p["name"].get<std::string>();
  value vals;
  const auto& vs = child(p, "values");
  try {
    vals = vs.is_string() ? expression::parse(vs.get<std::string>()).evaluate() : from_json(vs);
  } catch (const error& e) {
    doc.at(key + ".values").fail(e.what());
  }
  if (!vals.is_list() || vals.as_list().empty())
    doc.at(key + ".values").fail("expected a non-empty list (or an expression giving one)");
  param_type t = param_type::integer;
  if (const auto& ty = child(p, "type"); ty.is_string()) {
    const auto s = ty.get<std::string>();
    if (s == "int")
      t = param_type::integer;
    else if (s == "float")
      t = param_type::real;
    else if (s == "bool")
      t = param_type::boolean;
    else if (s == "string" || s == "enum")
      t = param_type::string;
    else
      doc.at(key + ".type").fail("expected int, float, bool or string");
  } else {
    for (const auto& v : vals.as_list()) {
      if (v.is_string())
        t = param_type::string;
      else if (v.is_real() && t == param_type::integer)
        t = param_type::real;
      else if (v.is_bool() && t == param_type::integer)
        t = param_type::boolean;
    }
  }
  std::optional<param> made;
  try {
    made = make_param(pname, t, vals.as_list());
  } catch (const error& e) {
    doc.at(key + ".values").fail(e.what());
  }
  return {std::move(*made),
          child(p, "default").is_null() ? std::nullopt : std::optional<value>(from_json(p["default"]))};
}

config resolve_defaults(const document& doc, const search_space& space,
                                          const std::vector<std::optional<value>>& defaults,
                                          const std::string& params_key) {
  config out(space.dimension(), 0);
  for (std::size_t i = 0; i < space.dimension() && i < defaults.size(); ++i) {
    if (!defaults[i]) continue;
    auto idx = space.value_index(i, *defaults[i]);
    if (!idx) doc.at(params_key + "[" + std::to_string(i) + "].default").fail("not one of the values");
    out[i] = static_cast<std::uint32_t>(*idx);
  }
  if (space.dimension() > 0 && !space.is_valid(out))
    doc.at(params_key).fail("the default configuration " + space.describe(out) + " violates the constraints");
  return out;
}

}  // namespace kernel_parse

namespace {
// A tensor map that cannot be resolved or breaks the driver's rules: names the argument (its index in
// kernel_spec::args), so that the description's reader can point at its key.
class tensor_map_error : public error {
 public:
  tensor_map_error(std::size_t a, const std::string& what) : error(what), arg(a) {}
  std::size_t arg;
};

std::vector<expression> parse_expr_list(const document& doc, const json& v, const std::string& key,
                                        const char* expected) {
  if (!v.is_array()) doc.at(key).fail(std::string("expected ") + expected);
  std::vector<expression> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    out.push_back(kernel_parse::parse_expr(doc, v[i], key + "[" + std::to_string(i) + "]"));
  return out;
}

// {buffer, dims, box, strides?, swizzle?, l2_promotion?, oob_fill?, when?}: the checks that need no shape.
tensor_map_spec parse_tensor_map(const document& doc, const json& t, const std::string& key) {
  using kernel_parse::child;
  if (!t.is_object())
    doc.at(key).fail("expected {buffer, dims, box, strides?, swizzle?, l2_promotion?, oob_fill?, when?}");
  kernel_parse::check_keys(
      doc, t, key, {"buffer", "dims", "box", "strides", "swizzle", "l2_promotion", "oob_fill", "when"});
  tensor_map_spec m;
  if (!child(t, "buffer").is_string()) doc.at(key + ".buffer").fail("expected the name of a buffer argument");
  m.buffer = t["buffer"].get<std::string>();
  m.dims = parse_expr_list(doc, kernel_parse::req_or(t, "dims", doc, key), key + ".dims",
                           "a list of 1 to 5 sizes in elements, innermost first");
  if (m.dims.empty() || m.dims.size() > 5)
    doc.at(key + ".dims").fail("a tensor map has 1 to 5 dimensions, got " + std::to_string(m.dims.size()));
  m.box = parse_expr_list(doc, kernel_parse::req_or(t, "box", doc, key), key + ".box",
                          "a list of box sizes in elements, innermost first");
  if (m.box.size() != m.dims.size())
    doc.at(key + ".box")
        .fail("expected " + std::to_string(m.dims.size()) + " entries (one per dimension), got " +
              std::to_string(m.box.size()));
  if (const auto& st = child(t, "strides"); !st.is_null()) {
    m.strides = parse_expr_list(doc, st, key + ".strides",
                                "a list of strides in elements, one per dimension after the innermost");
    if (m.strides.size() + 1 != m.dims.size())
      doc.at(key + ".strides")
          .fail("expected " + std::to_string(m.dims.size() - 1) +
                " entries (the strides of dimensions 1 .. rank-1; the innermost is contiguous), got " +
                std::to_string(m.strides.size()));
  }
  auto one_of = [&](const char* name, std::initializer_list<std::uint32_t> allowed, const char* what) {
    const auto& v = child(t, name);
    if (v.is_null()) return 0u;
    std::string list;
    for (auto x : allowed)
      list += (list.empty() ? "" : ", ") + std::to_string(x);
    if (v.is_number_integer())
      for (auto x : allowed)
        if (v.get<std::int64_t>() == static_cast<std::int64_t>(x)) return x;
    doc.at(key + "." + name).fail(std::string("expected ") + what + ": one of " + list + ", got " + v.dump());
  };
  m.swizzle = one_of("swizzle", {0, 32, 64, 128}, "the swizzle span in bytes (0: none)");
  m.l2_promotion = one_of("l2_promotion", {0, 64, 128, 256}, "the L2 promotion in bytes (0: none)");
  if (const auto& f = child(t, "oob_fill"); !f.is_null()) {
    if (f != "zero" && f != "nan") doc.at(key + ".oob_fill").fail("expected zero or nan, got " + f.dump());
    m.oob_nan = f == "nan";
  }
  if (const auto& w = child(t, "when"); !w.is_null())
    m.when = kernel_parse::parse_expr(doc, w, key + ".when");
  return m;
}
}  // namespace

std::string tensor_map_problem(const tensor_map_layout& t, dtype type, std::uint64_t buffer_bytes) {
  if (!t.enabled) return {};
  const std::uint64_t es = size_of(type);
  if (t.rank < 1 || t.rank > 5) return "rank " + std::to_string(t.rank) + " is not in [1, 5]";
  for (std::uint32_t d = 0; d < t.rank; ++d) {
    const auto i = std::to_string(d);
    if (t.dims[d] < 1 || t.dims[d] > (std::uint64_t{1} << 32))
      return "dims[" + i + "] = " + std::to_string(t.dims[d]) + " is not in [1, 2^32]";
    if (t.box[d] < 1 || t.box[d] > 256)
      return "box[" + i + "] = " + std::to_string(t.box[d]) + " is not in [1, 256]";
    if (d > 0) {
      const auto s = t.strides[d - 1];
      if (s % 16 != 0 || s >= (std::uint64_t{1} << 40))
        return "the stride of dimension " + i + " is " + std::to_string(s) +
               " bytes: not a multiple of 16 below 2^40 (rows must start 16-byte aligned)";
    }
  }
  const std::uint64_t inner = t.box[0] * es;
  if (inner % 16 != 0)
    return "box[0] is " + std::to_string(inner) + " bytes (" + std::to_string(t.box[0]) + " " +
           std::string(to_string(type)) + "): not a multiple of 16";
  if (t.swizzle != 0 && inner > t.swizzle)
    return "box[0] is " + std::to_string(inner) + " bytes (" + std::to_string(t.box[0]) + " " +
           std::string(to_string(type)) + "), more than the " + std::to_string(t.swizzle) +
           "-byte swizzle span";
  if (t.swizzle != 0 && t.swizzle != 32 && t.swizzle != 64 && t.swizzle != 128)
    return "swizzle " + std::to_string(t.swizzle) + " is not 0, 32, 64 or 128";
  if (t.l2_promotion != 0 && t.l2_promotion != 64 && t.l2_promotion != 128 && t.l2_promotion != 256)
    return "l2_promotion " + std::to_string(t.l2_promotion) + " is not 0, 64, 128 or 256";
  if (t.oob_nan && !is_floating(type))
    return "nan fill needs a floating type, not " + std::string(to_string(type));
  // The end of the last element the map can reach (every index at its maximum); an overflow is past any
  // buffer.
  std::uint64_t last = t.dims[0] * es;
  bool overflow = false;
  for (std::uint32_t d = 1; d < t.rank; ++d) {
    std::uint64_t step = 0;
    overflow |= __builtin_mul_overflow(t.dims[d] - 1, t.strides[d - 1], &step);
    overflow |= __builtin_add_overflow(last, step, &last);
  }
  if (overflow || last > buffer_bytes)
    return "the dims and strides reach " + (overflow ? std::string("beyond 2^64") : std::to_string(last)) +
           " bytes, past the buffer's " + std::to_string(buffer_bytes);
  return {};
}

namespace {

// include_packages: header packages found on this machine at run time, so that a description names no
// machine path. Each resolves to include folders, in search order; nullopt when the package is absent.
bool is_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

std::string env_or_empty(const char* name) {
  const char* e = std::getenv(name);
  return e && *e ? std::string(e) : std::string();
}

// cutlass: the C++ headers (include/cute, include/cutlass) of PyPI's nvidia-cutlass, which installs
// them as site-packages/cutlass_library/source/include. $KFORGE_CUTLASS_INCLUDE when set (only it);
// else the first <dir>/.venv/lib/python*/site-packages holding them, for <dir> the description's
// folder and each folder above it, then $KFORGE_SOURCE_DIR.
std::optional<std::vector<std::filesystem::path>> cutlass_include(const std::filesystem::path& base,
                                                                  std::string& looked) {
  const auto holds = [](const std::filesystem::path& d) { return is_file(d / "cute/tensor.hpp"); };
  if (const auto env = env_or_empty("KFORGE_CUTLASS_INCLUDE"); !env.empty()) {
    looked = "$KFORGE_CUTLASS_INCLUDE=" + env + " (no cute/tensor.hpp there)";
    if (holds(env)) return std::vector<std::filesystem::path>{env};
    return std::nullopt;
  }
  std::vector<std::filesystem::path> roots;
  for (auto d = std::filesystem::absolute(base); !d.empty(); d = d.parent_path()) {
    roots.push_back(d);
    if (d == d.parent_path()) break;
  }
  if (const auto env = env_or_empty("KFORGE_SOURCE_DIR"); !env.empty()) roots.emplace_back(env);
  for (const auto& r : roots) {
    std::error_code ec;
    const auto lib = r / ".venv" / "lib";
    if (!std::filesystem::is_directory(lib, ec)) continue;
    std::vector<std::filesystem::path> pythons;  // sorted: the same choice on every run
    for (const auto& e : std::filesystem::directory_iterator(lib, ec))
      if (e.path().filename().string().rfind("python", 0) == 0) pythons.push_back(e.path());
    std::sort(pythons.begin(), pythons.end());
    for (const auto& py : pythons) {
      const auto d = py / "site-packages" / "cutlass_library" / "source" / "include";
      if (holds(d)) return std::vector<std::filesystem::path>{d};
    }
  }
  looked =
      "<dir>/.venv/lib/python*/site-packages/cutlass_library/source/include for the description's folder "
      "and those above it (install it with scripts/install-deps, or set KFORGE_CUTLASS_INCLUDE)";
  return std::nullopt;
}

// cuda: the CUDA Toolkit's headers, for code that includes CUDA or CCCL (libcu++) headers under NVRTC,
// which has none built in here: <root>/include/cccl (cuda/std/...) then <root>/include (cuda_runtime_api.h,
// which CuTe includes), for <root> $KFORGE_CUDA_HOME, else $CUDA_HOME, else /usr/local/cuda.
std::optional<std::vector<std::filesystem::path>> cuda_include(std::string& looked) {
  std::filesystem::path root = "/usr/local/cuda";
  if (auto e = env_or_empty("KFORGE_CUDA_HOME"); !e.empty())
    root = e;
  else if (auto h = env_or_empty("CUDA_HOME"); !h.empty())
    root = h;
  const auto inc = root / "include";
  looked = inc.string() + " (needs cuda_runtime_api.h and cccl/cuda/std/cstdint; set KFORGE_CUDA_HOME)";
  if (!is_file(inc / "cuda_runtime_api.h") || !is_file(inc / "cccl/cuda/std/cstdint")) return std::nullopt;
  return std::vector<std::filesystem::path>{inc / "cccl", inc};
}

}  // namespace

using namespace kernel_parse;

namespace {
value eval_in(const expression& e, const kernel_spec& k, const config& c, const shape& s, const char* what);
}  // namespace

kernel_spec parse_kernel_spec(const document& doc, const json& node, const std::string& kp) {
  if (!node.is_object()) doc.at(kp).fail("expected a kernel description (a mapping)");
  check_keys(doc, node, kp,
             {"name", "source", "entry", "injection", "compiler_options", "parameters", "constraints",
              "arguments", "grid", "block", "shared_memory", "shapes", "reference", "tolerance", "roofline",
              "transforms", "include_dirs", "include_packages", "language", "constexprs", "arch", "defines"});
  kernel_spec k;
  k.base_dir = doc.base_dir;
  auto req = [&](const char* key) -> const json& {
    const auto& v = child(node, key);
    if (v.is_null()) doc.at(kp).fail(std::string("missing key '") + key + "'");
    return v;
  };
  const auto& src = req("source");
  if (!src.is_string()) doc.at(join_key(kp, "source")).fail("expected a file path");
  k.source_file = resolve_path(src.get<std::string>(), doc.base_dir);
  try {
    k.source = read_file(k.source_file);
  } catch (const error& e) {
    doc.at(join_key(kp, "source")).fail(e.what());
  }
  if (const auto& lang = child(node, "language"); !lang.is_null()) {
    if (lang != "cuda" && lang != "triton") doc.at(join_key(kp, "language")).fail("expected cuda or triton");
    k.language = lang.get<std::string>();
  }
  k.include_dirs.push_back(std::filesystem::path(k.source_file).parent_path());
  if (const auto& dirs = child(node, "include_dirs"); !dirs.is_null()) {
    const auto dkey = join_key(kp, "include_dirs");
    if (!dirs.is_array()) doc.at(dkey).fail("expected a list of folders (relative to this file)");
    for (std::size_t i = 0; i < dirs.size(); ++i) {
      const auto ikey = dkey + "[" + std::to_string(i) + "]";
      if (!dirs[i].is_string()) doc.at(ikey).fail("expected a folder path");
      const std::filesystem::path d = resolve_path(dirs[i].get<std::string>(), doc.base_dir);
      std::error_code ec;
      if (!std::filesystem::is_directory(d, ec)) doc.at(ikey).fail("no such folder: " + d.string());
      k.include_dirs.push_back(d);
    }
  }
  if (const auto& pkgs = child(node, "include_packages"); !pkgs.is_null()) {
    const auto pkey = join_key(kp, "include_packages");
    if (!pkgs.is_array()) doc.at(pkey).fail("expected a list of header packages (cutlass, cuda)");
    for (std::size_t i = 0; i < pkgs.size(); ++i) {
      const auto ikey = pkey + "[" + std::to_string(i) + "]";
      if (!pkgs[i].is_string() || (pkgs[i] != "cutlass" && pkgs[i] != "cuda"))
        doc.at(ikey).fail("expected cutlass or cuda");
      std::string looked;
      const auto dirs = pkgs[i] == "cutlass" ? cutlass_include(doc.base_dir, looked) : cuda_include(looked);
      if (!dirs)
        doc.at(ikey).fail("the " + pkgs[i].get<std::string>() + " headers were not found: looked in " +
                          looked);
      k.include_dirs.insert(k.include_dirs.end(), dirs->begin(), dirs->end());
    }
  }
  const auto& entry = req("entry");
  if (!entry.is_string() || entry.get<std::string>().empty())
    doc.at(join_key(kp, "entry")).fail("expected the kernel's name");
  k.entry = entry.get<std::string>();
  k.name = child(node, "name").is_string() ? child(node, "name").get<std::string>() : k.entry;
  if (const auto& inj = child(node, "injection"); !inj.is_null()) {
    if (!inj.is_string() || (inj != "defines" && inj != "template"))
      doc.at(join_key(kp, "injection")).fail("expected defines or template");
    k.injection = inj.get<std::string>();
  }
  if (const auto& arch = child(node, "arch"); !arch.is_null()) {
    // A real architecture, optionally architecture-specific (sm_90a) or family-specific (sm_100f).
    static const std::regex real_arch(R"(sm_[0-9]+[af]?)");
    if (!arch.is_string() || !std::regex_match(arch.get<std::string>(), real_arch))
      doc.at(join_key(kp, "arch")).fail("expected a real architecture such as sm_90 or sm_90a");
    if (k.language == "triton")
      doc.at(join_key(kp, "arch"))
          .fail("a Triton kernel's target is the evaluator's (Triton picks sm_90a itself)");
    k.arch = arch.get<std::string>();
  }
  if (const auto& opts = child(node, "compiler_options"); !opts.is_null()) {
    if (!opts.is_array()) doc.at(join_key(kp, "compiler_options")).fail("expected a list of NVRTC options");
    for (std::size_t i = 0; i < opts.size(); ++i) {
      if (!opts[i].is_string())
        doc.at(join_key(kp, "compiler_options") + "[" + std::to_string(i) + "]").fail("expected a string");
      k.compiler_options.push_back(opts[i].get<std::string>());
    }
  }
  // Parameters: a list, in declaration order.
  std::vector<param> params;
  std::vector<std::optional<value>> defaults;
  if (const auto& ps = child(node, "parameters"); !ps.is_null()) {
    if (!ps.is_array())
      doc.at(join_key(kp, "parameters")).fail("expected a list of {name, values, type?, default?}");
    for (std::size_t i = 0; i < ps.size(); ++i) {
      auto [p, d] = parse_parameter(doc, ps[i], join_key(kp, "parameters") + "[" + std::to_string(i) + "]", {});
      params.push_back(std::move(p));
      defaults.push_back(std::move(d));
    }
  }
  k.own_params = params.size();
  // Transform instances: each adds its parameters to the space, after the kernel's own.
  std::vector<std::vector<std::pair<std::string, std::size_t>>> instance_params;
  if (const auto& ts = child(node, "transforms"); !ts.is_null()) {
    const auto tkey = join_key(kp, "transforms");
    if (!ts.is_array()) doc.at(tkey).fail("expected a list of {type, site?, name?, params?}");
    std::set<std::string> names;
    for (const auto& p : params)
      names.insert(p.name);
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto key = tkey + "[" + std::to_string(i) + "]";
      const auto& t = ts[i];
      if (!t.is_object()) doc.at(key).fail("expected {type, site?, name?, params?}");
      check_keys(doc, t, key, {"type", "site", "name", "params"});
      if (!child(t, "type").is_string())
        doc.at(key + ".type").fail("expected the name of a registered transform");
      transform_instance inst;
      inst.type = t["type"].get<std::string>();
      const std::string site = child(t, "site").is_string() ? t["site"].get<std::string>() : "";
      inst.name = child(t, "name").is_string() ? t["name"].get<std::string>()
                                               : (site.empty() ? inst.type : inst.type + "_" + site);
      if (!names.insert(inst.name).second)
        doc.at(key + ".name").fail("the name '" + inst.name + "' is taken (give this instance a name: key)");
      plugin_spec ps{inst.type, t.contains("params") ? t["params"] : json::object(), doc.at(key)};
      inst.op = transform_registry().create(ps, transform_site{site});
      for (const auto& tp : inst.op.parameters()) {
        const std::string pname = tp.name == "value" ? inst.name : inst.name + "_" + tp.name;
        if (!names.insert(pname).second && tp.name != "value")
          doc.at(key).fail("parameter '" + pname + "' collides with another parameter");
        try {
          param p =
              make_param(pname, tp.values.empty() ? param_type::integer : param_type::string, tp.values);
          // Keep the declared kind: numbers stay numbers.
          bool numeric = true;
          for (const auto& v : tp.values)
            numeric &= v.is_number();
          if (numeric) {
            bool real = false, boolean = true;
            for (const auto& v : tp.values)
              real |= v.is_real(), boolean &= v.is_bool();
            p = make_param(pname,
                           boolean ? param_type::boolean
                           : real  ? param_type::real
                                   : param_type::integer,
                           tp.values);
          }
          params.push_back(std::move(p));
        } catch (const error& e) {
          doc.at(key).fail(e.what());
        }
        defaults.push_back(tp.default_value);
        inst.params.emplace_back(tp.name, params.size() - 1);
      }
      k.transforms.push_back(std::move(inst));
    }
  }
  std::vector<std::string> constraints;
  if (const auto& cs = child(node, "constraints"); !cs.is_null()) {
    if (!cs.is_array()) doc.at(join_key(kp, "constraints")).fail("expected a list of expressions");
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (!cs[i].is_string())
        doc.at(join_key(kp, "constraints") + "[" + std::to_string(i) + "]").fail("expected an expression");
      constraints.push_back(cs[i].get<std::string>());
    }
  }
  try {
    k.space = search_space(std::move(params), constraints);
  } catch (const error& e) {
    doc.at(join_key(kp, "constraints")).fail(e.what());
  }
  k.defaults = resolve_defaults(doc, k.space, defaults, join_key(kp, "parameters"));
  // Arguments, in the kernel's parameter order.
  const auto& as = req("arguments");
  if (!as.is_array() || as.empty())
    doc.at(join_key(kp, "arguments")).fail("expected the list of the kernel's arguments");
  for (std::size_t i = 0; i < as.size(); ++i) {
    const auto key = join_key(kp, "arguments") + "[" + std::to_string(i) + "]";
    const auto& a = as[i];
    if (!a.is_object())
      doc.at(key).fail(
          "expected {name, buffer: dtype, size, fill?, role?}, {name, scalar: dtype, value} or {name, "
          "constant: "
          "dtype, size, fill?}");
    check_keys(
        doc, a, key,
        {"name", "buffer", "scalar", "constant", "tensor_map", "size", "value", "fill", "role", "compare"});
    kernel_arg arg;
    arg.name = child(a, "name").is_string() ? a["name"].get<std::string>() : "arg" + std::to_string(i);
    const char* kinds[] = {"buffer", "scalar", "constant", "tensor_map"};
    const char* kind = nullptr;
    for (const char* kd : kinds)
      if (!child(a, kd).is_null()) {
        if (kind)
          doc.at(key).fail(
              "give exactly one of buffer: <dtype>, scalar: <dtype>, constant: <dtype> or tensor_map: {...}");
        kind = kd;
      }
    if (!kind)
      doc.at(key).fail(
          "give one of buffer: <dtype>, scalar: <dtype>, constant: <dtype> or tensor_map: {...}");
    const std::string skind = kind;
    if (skind == "tensor_map") {
      // The element type comes from the viewed buffer, resolved once every argument is known.
      for (const char* other : {"size", "value", "fill", "role", "compare"})
        if (!child(a, other).is_null())
          doc.at(key + "." + other)
              .fail("a tensor map takes only name and tensor_map: {buffer, dims, box, ...}");
      arg.buffer = false;
      arg.tensor_map = parse_tensor_map(doc, a["tensor_map"], key + ".tensor_map");
      k.args.push_back(std::move(arg));
      continue;
    }
    const auto& ty = a[kind];
    const auto tkey = key + "." + skind;
    if (!ty.is_string() || !dtype_from_string(ty.get<std::string>()))
      doc.at(tkey).fail("expected a dtype (f32, f64, f16, bf16, i8, u8, i16, u16, i32, u32, i64, u64)");
    arg.type = *dtype_from_string(ty.get<std::string>());
    arg.buffer = skind != "scalar";
    if (skind == "constant") {
      // A __constant__ array of the module, filled before each launch; not a kernel parameter.
      arg.param = false;
      arg.constant = true;
      if (!child(a, "role").is_null() || !child(a, "compare").is_null())
        doc.at(key).fail("a constant is read-only: it takes no role or compare");
      if (arg.name.empty() || !std::isalpha(static_cast<unsigned char>(arg.name[0])))
        doc.at(key + ".name").fail("expected the name of the __constant__ symbol");
    }
    if (arg.buffer) {
      arg.size = parse_expr(doc, req_or(a, "size", doc, key), key + ".size");
      arg.fill = parse_fill(doc, child(a, "fill"), key + ".fill");
      const auto& role = child(a, "role");
      if (!role.is_null()) {
        if (role == "in")
          arg.role = arg_role::in;
        else if (role == "out")
          arg.role = arg_role::out;
        else if (role == "inout")
          arg.role = arg_role::inout;
        else
          doc.at(key + ".role").fail("expected in, out or inout");
      }
      if (const auto& cmp = child(a, "compare"); !cmp.is_null()) {
        if (!cmp.is_boolean()) doc.at(key + ".compare").fail("expected true or false");
        if (arg.role == arg_role::in)
          doc.at(key + ".compare").fail("only written buffers (role out, inout) are compared");
        arg.compare = cmp.get<bool>();
      }
    } else {
      arg.value = parse_expr(doc, req_or(a, "value", doc, key), key + ".value");
      if (!child(a, "fill").is_null() || !child(a, "role").is_null() || !child(a, "size").is_null() ||
          !child(a, "compare").is_null())
        doc.at(key).fail("a scalar takes only name, scalar and value");
    }
    k.args.push_back(std::move(arg));
  }
  // A tensor map views a buffer argument (any position) and takes its element type.
  for (std::size_t i = 0; i < k.args.size(); ++i) {
    auto& a = k.args[i];
    if (!a.tensor_map) continue;
    const auto key = join_key(kp, "arguments") + "[" + std::to_string(i) + "].tensor_map";
    if (k.language != "cuda") doc.at(key).fail("only CUDA kernels take tensor maps (Triton makes its own)");
    const auto it = std::find_if(k.args.begin(), k.args.end(), [&](const kernel_arg& b) {
      return b.name == a.tensor_map->buffer && b.buffer && !b.constant;
    });
    if (it == k.args.end())
      doc.at(key + ".buffer").fail("no buffer argument named '" + a.tensor_map->buffer + "'");
    a.tensor_map->buffer_arg = static_cast<std::size_t>(it - k.args.begin());
    a.type = it->type;
    if (a.tensor_map->oob_nan && !is_floating(a.type))
      doc.at(key + ".oob_fill")
          .fail("nan fills floating types only; buffer '" + it->name + "' is " +
                std::string(to_string(a.type)));
  }
  bool any_out = false;
  for (const auto& a : k.args)
    any_out |= a.buffer && a.role != arg_role::in && a.compare;
  if (!any_out)
    doc.at(join_key(kp, "arguments"))
        .fail("no buffer has role out or inout (and is compared): nothing could be checked");
  auto geometry = [&](const char* name, std::array<expression, 3>& out) {
    const auto& g = req(name);
    const auto key = join_key(kp, name);
    if (!g.is_array() || g.empty() || g.size() > 3)
      doc.at(key).fail("expected a list of 1 to 3 expressions (x, y, z)");
    for (std::size_t d = 0; d < 3; ++d)
      out[d] =
          d < g.size() ? parse_expr(doc, g[d], key + "[" + std::to_string(d) + "]") : expression::parse("1");
  };
  geometry("grid", k.grid);
  if (k.language == "triton") {
    // The block of a Triton kernel is 32 * num_warps (Triton's default num_warps is 4).
    if (!child(node, "block").is_null())
      doc.at(join_key(kp, "block")).fail("a Triton kernel's block is 32 * num_warps: tune num_warps instead");
    k.block = {expression::parse(k.space.param_index("num_warps") ? "32 * num_warps" : "128"),
               expression::parse("1"), expression::parse("1")};
    if (!child(node, "transforms").is_null())
      doc.at(join_key(kp, "transforms")).fail("the CUDA source operators do not apply to a Triton kernel");
    if (!child(node, "injection").is_null() || !child(node, "shared_memory").is_null())
      doc.at(kp).fail("a Triton kernel takes no injection or shared_memory (Triton decides its shared memory)");
    if (const auto& ce = child(node, "constexprs"); !ce.is_null()) {
      if (!ce.is_object()) doc.at(join_key(kp, "constexprs")).fail("expected {name: expression of the shape}");
      for (const auto& [name, v] : ce.items()) {
        if (k.space.param_index(name))
          doc.at(join_key(kp, "constexprs." + name)).fail("also a tuning parameter: give it in one place");
        k.constexprs.emplace_back(name, parse_expr(doc, v, join_key(kp, "constexprs." + name)));
      }
    }
  } else {
    geometry("block", k.block);
    if (!child(node, "constexprs").is_null())
      doc.at(join_key(kp, "constexprs")).fail("only a Triton kernel (language: triton) takes constexprs");
  }
  // defines: extra macros of every variant, expressions over the parameters and the first time shape (a
  // specialisation on the timed problem; the check shapes run the same binary).
  if (const auto& ds = child(node, "defines"); !ds.is_null()) {
    const auto dkey = join_key(kp, "defines");
    if (k.language != "cuda" || k.injection != "defines")
      doc.at(dkey).fail("only a CUDA kernel with injection: defines takes defines (Triton: constexprs)");
    if (!ds.is_object()) doc.at(dkey).fail("expected {MACRO: expression of the parameters and the time shape}");
    static const std::regex macro_name("[A-Za-z_][A-Za-z0-9_]*");
    for (const auto& [name, v] : ds.items()) {
      const auto ikey = dkey + "." + name;
      if (!std::regex_match(name, macro_name)) doc.at(ikey).fail("expected a C identifier as the macro's name");
      if (k.space.param_index(name)) doc.at(ikey).fail("also a tuning parameter, which is #defined already");
      k.defines.emplace_back(name, parse_expr(doc, v, ikey));
    }
  }
  k.shared_memory = child(node, "shared_memory").is_null()
                        ? expression::parse("0")
                        : parse_expr(doc, node["shared_memory"], join_key(kp, "shared_memory"));
  const auto& shapes = req("shapes");
  const auto skey = join_key(kp, "shapes");
  if (!shapes.is_object()) doc.at(skey).fail("expected {time: [...], check: [...]}");
  check_keys(doc, shapes, skey, {"time", "check"});
  for (const char* which : {"time", "check"}) {
    const auto& list = child(shapes, which);
    if (list.is_null()) continue;
    if (!list.is_array()) doc.at(skey + "." + which).fail("expected a list of shapes");
    for (std::size_t i = 0; i < list.size(); ++i)
      (std::string(which) == "time" ? k.time_shapes : k.check_shapes)
          .push_back(parse_shape(doc, list[i], skey + "." + which + "[" + std::to_string(i) + "]"));
  }
  if (k.time_shapes.empty()) doc.at(skey + ".time").fail("at least one shape to time is needed");
  if (const auto& r = child(node, "reference"); !r.is_null())
    k.reference = parse_reference(doc, r, join_key(kp, "reference"), k.source_file, k.source);
  k.tolerances = default_tolerances();
  if (const auto& t = child(node, "tolerance"); !t.is_null())
    parse_tolerances(doc, t, join_key(kp, "tolerance"), k.tolerances);
  if (const auto& rf = child(node, "roofline"); !rf.is_null()) {
    const auto rkey = join_key(kp, "roofline");
    if (!rf.is_object()) doc.at(rkey).fail("expected {bytes: expr, flops: expr, compute: fp32|tensor_bf16}");
    check_keys(doc, rf, rkey, {"bytes", "flops", "compute"});
    if (rf.contains("bytes")) k.bytes = parse_expr(doc, rf["bytes"], rkey + ".bytes");
    if (rf.contains("flops")) k.flops = parse_expr(doc, rf["flops"], rkey + ".flops");
    if (rf.contains("compute")) {
      const auto& c = rf["compute"];
      if (!c.is_string() || (c.get<std::string>() != "fp32" && c.get<std::string>() != "tensor_bf16"))
        doc.at(rkey + ".compute")
            .fail("expected fp32 or tensor_bf16 (the units whose peak bounds the flops)");
      k.flops_unit = c.get<std::string>();
    }
  }
  // Every expression must only use known names: check on the first time shape at the defaults. A tensor
  // map that breaks the driver's rules there is reported at its own key.
  for (const auto& [name, e] : k.defines) {
    try {
      eval_in(e, k, k.defaults, k.time_shapes.front(), ("#define " + name).c_str());
    } catch (const error& ex) {
      doc.at(join_key(kp, "defines." + name)).fail(ex.what());
    }
  }
  try {
    check_default_launches(k);
  } catch (const tensor_map_error& e) {
    doc.at(join_key(kp, "arguments") + "[" + std::to_string(e.arg) + "].tensor_map")
        .fail(std::string("at the default configuration: ") + e.what());
  } catch (const error& e) {
    doc.at(kp).fail(std::string("the default configuration cannot be launched: ") + e.what());
  }
  return k;
}

kernel_spec load_kernel_spec(const std::string& path) {
  const auto doc = load_document(path);
  return parse_kernel_spec(doc, doc.root, "");
}

namespace {
// Binds an expression's free names to the configuration's parameters, then the shape's sizes.
value eval_in(const expression& e, const kernel_spec& k, const config& c, const shape& s, const char* what) {
  std::vector<const value*> slots;
  for (const auto& n : e.free_names()) {
    if (auto pi = k.space.param_index(n)) {
      slots.push_back(&k.space.value_of(c, *pi));
    } else if (auto it = s.find(n); it != s.end()) {
      slots.push_back(&it->second);
    } else {
      throw error(std::string(what) + " '" + e.source() + "': unknown name '" + n +
                  "' (not a parameter or a problem size)");
    }
  }
  try {
    return e.evaluate(slots);
  } catch (const error& ex) {
    throw error(std::string(what) + ": " + ex.what());
  }
}

std::int64_t as_count(const value& v, const std::string& what) {
  if (v.is_integral()) return v.as_int();
  if (v.is_real() && std::floor(v.as_real()) == v.as_real() && std::fabs(v.as_real()) < 9e18)
    return static_cast<std::int64_t>(v.as_real());
  throw error(what + " is " + v.repr() + ", not a whole number");
}
}  // namespace

namespace {
// Argument `i`'s tensor map at configuration c on shape s, checked by tensor_map_problem; throws
// tensor_map_error naming the argument.
tensor_map_layout resolve_tensor_map(const kernel_spec& k, std::size_t i, const launch_plan& p,
                                     const config& c, const shape& s) {
  const auto& a = k.args[i];
  const auto& m = *a.tensor_map;
  const std::string what = "tensor map " + a.name;
  tensor_map_layout t;
  try {
    if (m.when) {
      const auto w = eval_in(*m.when, k, c, s, (what + ": when").c_str());
      if (!w.is_bool() && !w.is_number()) throw error(what + ": when is " + w.repr() + ", not a truth value");
      if (!(w.is_bool() ? w.as_bool() : w.as_real() != 0)) {
        t.enabled = false;
        return t;
      }
    }
    // p.args holds one resolved argument per k.args entry, in order.
    const auto* b = &p.args[m.buffer_arg];
    t.buffer = m.buffer_arg;
    t.rank = static_cast<std::uint32_t>(m.dims.size());
    auto count = [&](const expression& e, const std::string& key, std::int64_t lo, std::int64_t hi) {
      const auto v = as_count(eval_in(e, k, c, s, (what + ": " + key).c_str()), what + ": " + key);
      if (v < lo || v > hi)
        throw error(what + ": " + key + " = " + std::to_string(v) + " is not in [" + std::to_string(lo) +
                    ", " + std::to_string(hi) + "]");
      return v;
    };
    const auto es = static_cast<std::int64_t>(size_of(b->type));
    std::int64_t packed = es;
    for (std::uint32_t d = 0; d < t.rank; ++d) {
      const auto ds = "[" + std::to_string(d) + "]";
      t.dims[d] = static_cast<std::uint64_t>(count(m.dims[d], "dims" + ds, 1, std::int64_t{1} << 32));
      t.box[d] = static_cast<std::uint32_t>(count(m.box[d], "box" + ds, 1, 1 << 30));
      if (d > 0)
        t.strides[d - 1] = static_cast<std::uint64_t>(
            m.strides.empty() ? packed
                              : es * count(m.strides[d - 1], "strides[" + std::to_string(d - 1) + "]", 1,
                                           (std::int64_t{1} << 40) / es));
      if (packed <= (std::int64_t{1} << 50)) packed *= static_cast<std::int64_t>(t.dims[d]);
    }
    t.swizzle = m.swizzle;
    t.l2_promotion = m.l2_promotion;
    t.oob_nan = m.oob_nan;
    const auto why = tensor_map_problem(t, b->type, b->count * size_of(b->type));
    if (!why.empty()) throw error(what + " over " + b->name + ": " + why);
  } catch (const tensor_map_error&) {
    throw;
  } catch (const error& e) {
    throw tensor_map_error(i, e.what());
  }
  return t;
}
}  // namespace

void check_default_launches(const kernel_spec& k) {
  for (const auto& s : k.time_shapes)
    resolve_launch(k, k.defaults, s);
  for (const auto& s : k.check_shapes)
    resolve_launch(k, k.defaults, s);
}

launch_plan resolve_launch(const kernel_spec& k, const config& c, const shape& s) {
  launch_plan p;
  p.problem = s;
  static const char* axis[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; ++d) {
    const auto g = as_count(eval_in(k.grid[d], k, c, s, "grid"), std::string("grid.") + axis[d]);
    const auto b = as_count(eval_in(k.block[d], k, c, s, "block"), std::string("block.") + axis[d]);
    const std::int64_t gmax = d == 0 ? 2147483647 : 65535;
    if (g < 1 || g > gmax)
      throw error(std::string("grid.") + axis[d] + " = " + std::to_string(g) + " is out of range [1, " +
                  std::to_string(gmax) + "]");
    if (b < 1 || b > 1024)
      throw error(std::string("block.") + axis[d] + " = " + std::to_string(b) + " is out of range [1, 1024]");
    p.grid[d] = static_cast<std::uint32_t>(g);
    p.block[d] = static_cast<std::uint32_t>(b);
  }
  if (p.threads() > 1024) throw error("a block of " + std::to_string(p.threads()) + " threads exceeds 1024");
  const auto smem = as_count(eval_in(k.shared_memory, k, c, s, "shared_memory"), "shared_memory");
  if (smem < 0 || smem > (1 << 30))
    throw error("shared_memory = " + std::to_string(smem) + " bytes is out of range");
  p.shared_bytes = static_cast<std::uint32_t>(smem);
  for (const auto& a : k.args) {
    resolved_arg r;
    r.buffer = a.buffer;
    r.type = a.type;
    r.fill = a.fill;
    r.role = a.role;
    r.name = a.name;
    r.param = a.param;
    r.constant = a.constant;
    r.compare = a.compare;
    if (a.tensor_map) {
      // Resolved after the loop: its buffer may come later.
    } else if (a.buffer) {
      const auto n = as_count(eval_in(a.size, k, c, s, ("size of " + a.name).c_str()), "size of " + a.name);
      if (n < 1) throw error("buffer " + a.name + " has " + std::to_string(n) + " elements");
      r.count = static_cast<std::uint64_t>(n);
    } else {
      const auto v = eval_in(a.value, k, c, s, ("value of " + a.name).c_str());
      if (!v.is_number()) throw error("scalar " + a.name + " is " + v.repr() + ", not a number");
      r.scalar = v.as_real();
      r.scalar_int = v.is_integral() ? v.as_int() : static_cast<std::int64_t>(v.as_real());
      if (!is_floating(a.type) && v.is_real() && std::floor(v.as_real()) != v.as_real())
        throw error("scalar " + a.name + " of integer type is " + v.repr());
    }
    p.args.push_back(r);
  }
  for (std::size_t i = 0; i < k.args.size(); ++i)
    if (k.args[i].tensor_map) p.args[i].tensor_map = resolve_tensor_map(k, i, p, c, s);
  return p;
}

rendered_variant render_variant(const kernel_spec& k, const config& c) {
  rendered_variant v;
  v.options = k.compiler_options;
  v.entry = k.entry;
  const auto params = k.space.params();
  std::string source = k.source;
  if (!k.transforms.empty()) {
    transform_context ctx;
    ctx.entry = k.entry.substr(0, k.entry.find('<'));
    for (const auto& a : k.args) {
      if (!a.buffer) continue;
      ctx.buffer_names.push_back(a.name);
      if (a.role == arg_role::in) ctx.read_only.push_back(a.name);
    }
    for (const auto& t : k.transforms) {
      transform_values vals;
      for (const auto& [local, idx] : t.params)
        vals.emplace(local, k.space.value_of(c, idx));
      auto r = t.op.apply(source, vals, ctx);
      if (!r.ok()) throw error("transform " + t.name + " does not apply: " + r.error);
      source = std::move(r.source);
      v.options.insert(v.options.end(), r.options.begin(), r.options.end());
    }
  }
  if (k.injection == "template") {
    for (std::size_t i = 0; i < k.own_params; ++i) {
      const std::string ph = "{" + params[i].name + "}";
      for (auto pos = v.entry.find(ph); pos != std::string::npos; pos = v.entry.find(ph))
        v.entry.replace(pos, ph.size(), k.space.value_of(c, i).str());
    }
    v.source = std::move(source);
  } else {
    v.source = with_defines(k, c, source, k.source_file);
  }
  return v;
}

std::string with_defines(const kernel_spec& k, const config& c, const std::string& source,
                         const std::string& file) {
  std::string defs;
  const auto params = k.space.params();
  auto define = [&](const std::string& name, const value& val) {
    const std::string text = val.is_bool() ? (val.as_bool() ? "1" : "0") : val.str();
    defs += "#define " + name + " " + text + "\n";
  };
  for (std::size_t i = 0; i < k.own_params; ++i)
    define(params[i].name, k.space.value_of(c, i));
  for (const auto& [name, e] : k.defines)
    define(name, eval_in(e, k, c, k.time_shapes.front(), ("#define " + name).c_str()));
  std::string body = source;
  if (k.kernel_tuner_conventions)
    for (std::size_t i = 0; i < k.own_params; ++i) {
      const auto& name = params[i].name;
      const auto& val = k.space.value_of(c, i);
      if (name.rfind("loop_unroll_factor", 0) != 0 || !val.is_integral() || val.as_int() != 0) continue;
      const std::regex pragma("(^|\n)[ \t]*#[ \t]*pragma[ \t]+unroll[ \t]+" + name + "[ \t]*(?=\n)");
      body = std::regex_replace(body, pragma, "$1");
    }
  return defs + "#line 1 \"" + std::filesystem::path(file).filename().string() + "\"\n" + body;
}

double roofline_floor_ms(const kernel_spec& k, const roofline_bound& b, const device_peaks& p) {
  const double flop_rate = k.flops_unit == "tensor_bf16" ? p.tensor_bf16_flops_per_s : p.fp32_flops_per_s;
  return std::max(b.bytes.value_or(0) / p.dram_bytes_per_s, b.flops.value_or(0) / flop_rate) * 1e3;
}

roofline_bound roofline(const kernel_spec& k, const config& c, const shape& s) {
  roofline_bound r;
  if (k.bytes) r.bytes = eval_in(*k.bytes, k, c, s, "roofline.bytes").as_real();
  if (k.flops) r.flops = eval_in(*k.flops, k, c, s, "roofline.flops").as_real();
  return r;
}

}  // namespace kf
