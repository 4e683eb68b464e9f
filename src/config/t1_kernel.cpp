// The kernel a T1 file names, read as a kforge kernel description, with Kernel Tuner's meaning where the
// format leaves it open (kernel_tuner.interface.tune_kernel_T1, Kernel Tuner 1.x):
//
//   KernelFile        relative to the T1 file; `kernel_file:` in the experiment replaces it (a list is
//                     concatenated in order; an OpenCL kernel needs `prelude:`, a header that maps OpenCL
//                     to CUDA, as Kernel Tuner's cl_to_cuda.h does)
//   KernelName        an extern "C" name or a C++ name (an NVRTC name expression)
//   LocalSize         the block, as expressions of the parameters
//   grid              with GridDivX/Y/Z: ceil(ProblemSize[d] / product of the divisors) per axis, the
//                     divisor of an axis without one being its LocalSize (Kernel Tuner's rule); without any:
//                     GlobalSize, in blocks (GlobalSizeType CUDA) or in threads (OpenCL, the default)
//   ProblemSize       the one timed shape, {ProblemSize: [..]}; `check_shapes:` adds checked-only ones
//   Arguments         in order; Size is evaluated with each parameter bound to its whole value list (so
//                     max(filter_width) is the largest value), ProblemSize to the list; Vector -> a buffer,
//                     Scalar -> FillValue, "MemType": "Constant" -> also copied into the __constant__ symbol
//                     of that name, MemoryType Symbol -> only that symbol; AccessType decides what is
//                     written; when any argument has "Output", only those with Output 1 are compared
//   defines           every parameter, block_size_x/y/z and grid_size_x/y/z of the launch, kernel_tuner 1;
//                     a loop_unroll_factor_* parameter of value 0 removes its `#pragma unroll` line
//   defaults          each parameter's Default where it is one of its values; when that configuration
//                     violates the constraints, the nearest valid one (fewest parameters changed)
//
// The experiment's problem mapping may also give: reference (a kernel, `baseline` or `none`; default
// baseline), tolerance, include_dirs, compiler_options, and `arguments: {name: {type, size, fill,
// constant, compare}}` to correct what a T1 file says of an argument. Whatever the T1 file says that kforge
// cannot honour is a config_error naming the file and the key.
#include <algorithm>
#include <cmath>

#include "config/kernel_parse.hpp"
#include "kforge/error.hpp"
#include "kforge/problem.hpp"

namespace kf {

using namespace kernel_parse;

namespace {

const std::string ks = "KernelSpecification";

// A T1 Type as a dtype and the number of scalars per element (float4 -> f32 x 4).
std::pair<dtype, std::uint64_t> t1_type(const document& doc, const json& ty, const std::string& key) {
  if (!ty.is_string()) doc.at(key).fail("expected a type name");
  std::string t = ty.get<std::string>();
  std::uint64_t lanes = 1;
  for (const char* base : {"half", "float", "double"}) {
    const std::string b = base;
    if (t.size() > b.size() && t.rfind(b, 0) == 0 &&
        std::all_of(t.begin() + static_cast<long>(b.size()), t.end(), ::isdigit)) {
      lanes = std::stoull(t.substr(b.size()));
      t = b;
    }
  }
  if (t == "bool") return {dtype::u8, lanes};
  if (t == "custom") doc.at(key).fail("custom argument types are not supported by the cuda evaluator");
  const auto d = dtype_from_string(t);
  if (!d) doc.at(key).fail("unknown T1 type '" + ty.get<std::string>() + "'");
  return {*d, lanes};
}

// Evaluates a T1 Size: parameters bound to their value lists, ProblemSize to the list of sizes.
std::uint64_t t1_size(const document& doc, const json& v, const std::string& key, const search_space& space,
                      const value& problem_size) {
  if (v.is_number_integer()) {
    if (v.get<std::int64_t>() < 1) doc.at(key).fail("expected a positive size");
    return v.get<std::uint64_t>();
  }
  const auto e = parse_expr(doc, v, key);
  std::vector<value> lists;
  lists.reserve(e.free_names().size());
  for (const auto& n : e.free_names()) {
    if (n == "ProblemSize") {
      lists.push_back(problem_size);
    } else if (auto i = space.param_index(n)) {
      lists.emplace_back(space.params()[*i].values);
    } else {
      doc.at(key).fail("unknown name '" + n + "' (not a parameter or ProblemSize)");
    }
  }
  std::vector<const value*> slots;
  for (const auto& l : lists)
    slots.push_back(&l);
  value r;
  try {
    r = e.evaluate(slots);
  } catch (const error& ex) {
    doc.at(key).fail(
        std::string("cannot evaluate the size (parameters stand for their value lists, as in Kernel "
                    "Tuner): ") +
        ex.what());
  }
  if (!r.is_integral() || r.as_int() < 1)
    doc.at(key).fail("the size is " + r.repr() + ", not a positive whole number");
  return static_cast<std::uint64_t>(r.as_int());
}

expression constant_expr(std::uint64_t n) {
  return expression::parse(std::to_string(n));
}

// A T1 fill: Constant (FillValue), Random (uniform in [0, FillValue), FillValue defaulting to 1).
fill_spec t1_fill(const document& doc, const json& a, const std::string& key) {
  fill_spec f;
  const auto& ft = child(a, "FillType");
  const double v = child(a, "FillValue").is_number() ? a["FillValue"].get<double>() : 1.0;
  if (ft.is_null() || ft == "Random") {
    f.k = fill_spec::kind::uniform;
    f.a = std::min(0.0, v);
    f.b = std::max(0.0, v) > f.a ? std::max(0.0, v) : f.a + 1;
  } else if (ft == "Constant") {
    f.k = fill_spec::kind::constant;
    f.a = v;
  } else {
    doc.at(key + ".FillType")
        .fail("FillType " + ft.dump() +
              " is not supported by the cuda evaluator (Constant and Random are); give a fill for this "
              "argument in "
              "the experiment's problem.arguments");
  }
  return f;
}

// The experiment's corrections of one argument: {type, size, fill, constant, compare}.
void apply_argument_override(const document& cfg, const json& o, const std::string& key, kernel_arg& arg,
                             std::uint64_t& count, std::uint64_t lanes) {
  if (!o.is_object()) cfg.at(key).fail("expected {type?, size?, fill?, constant?, compare?}");
  check_keys(cfg, o, key, {"type", "size", "fill", "constant", "compare"});
  if (const auto& t = child(o, "type"); !t.is_null()) {
    if (!t.is_string() || !dtype_from_string(t.get<std::string>()))
      cfg.at(key + ".type")
          .fail("expected a dtype (f32, f64, f16, bf16, i8, u8, i16, u16, i32, u32, i64, u64)");
    arg.type = *dtype_from_string(t.get<std::string>());
  }
  if (const auto& sz = child(o, "size"); !sz.is_null()) {
    if (!arg.buffer) cfg.at(key + ".size").fail("a scalar has no size");
    const auto e = parse_expr(cfg, sz, key + ".size");
    if (!e.free_names().empty()) cfg.at(key + ".size").fail("expected a constant size (elements)");
    const auto v = e.evaluate();
    if (!v.is_integral() || v.as_int() < 1) cfg.at(key + ".size").fail("expected a positive whole number");
    count = static_cast<std::uint64_t>(v.as_int()) * lanes;
  }
  if (const auto& f = child(o, "fill"); !f.is_null()) {
    if (!arg.buffer) cfg.at(key + ".fill").fail("a scalar has no fill");
    arg.fill = parse_fill(cfg, f, key + ".fill");
  }
  if (const auto& c = child(o, "constant"); !c.is_null()) {
    if (!c.is_boolean()) cfg.at(key + ".constant").fail("expected true or false");
    if (!arg.buffer) cfg.at(key + ".constant").fail("a scalar cannot be a __constant__ array");
    arg.constant = c.get<bool>();
    if (!arg.constant && !arg.param)
      cfg.at(key + ".constant").fail("this argument is only a __constant__ symbol (MemoryType Symbol)");
  }
  if (const auto& c = child(o, "compare"); !c.is_null()) {
    if (!c.is_boolean()) cfg.at(key + ".compare").fail("expected true or false");
    if (arg.role == arg_role::in) cfg.at(key + ".compare").fail("only written arguments are compared");
    arg.compare = c.get<bool>();
  }
}

// The source: the kernel file(s), after an optional prelude include.
void read_sources(const document& t1, const document* cfg, const json* over, const std::string& pk,
                  kernel_spec& k, bool opencl) {
  std::vector<std::string> files;
  std::string files_key;
  const document* files_doc = &t1;
  if (over && !child(*over, "kernel_file").is_null()) {
    const auto& kf = (*over)["kernel_file"];
    files_key = join_key(pk, "kernel_file");
    files_doc = cfg;
    if (kf.is_string()) {
      files.push_back(resolve_path(kf.get<std::string>(), cfg->base_dir));
    } else if (kf.is_array() && !kf.empty()) {
      for (const auto& f : kf) {
        if (!f.is_string()) cfg->at(files_key).fail("expected a file or a list of files");
        files.push_back(resolve_path(f.get<std::string>(), cfg->base_dir));
      }
    } else {
      cfg->at(files_key).fail("expected a file or a list of files");
    }
  } else {
    const auto& kf = child(t1.root.at(ks), "KernelFile");
    files_key = ks + ".KernelFile";
    if (!kf.is_string()) t1.at(files_key).fail("expected the kernel's file");
    // Kernel Tuner looks beside the T1 file, then one folder up.
    std::filesystem::path p = resolve_path(kf.get<std::string>(), t1.base_dir);
    if (!std::filesystem::exists(p) &&
        std::filesystem::exists(t1.base_dir.parent_path() / kf.get<std::string>()))
      p = t1.base_dir.parent_path() / kf.get<std::string>();
    files.push_back(p.string());
  }
  std::string prelude;
  if (over && !child(*over, "prelude").is_null()) {
    const auto& pr = (*over)["prelude"];
    if (!pr.is_string()) cfg->at(join_key(pk, "prelude")).fail("expected a header file");
    const std::filesystem::path h = resolve_path(pr.get<std::string>(), cfg->base_dir);
    if (!std::filesystem::exists(h)) cfg->at(join_key(pk, "prelude")).fail("no such file: " + h.string());
    k.include_dirs.push_back(h.parent_path());
    prelude = "#include \"" + h.filename().string() + "\"\n";
  } else if (opencl) {
    t1.at(ks + ".Language")
        .fail(
            "OpenCL kernels are not supported by the cuda evaluator, unless compiled as CUDA through a "
            "prelude "
            "header that maps OpenCL to CUDA: give prelude: <header> (e.g. benchmark_hub's "
            "gemm/cl_to_cuda.h) "
            "and the kernel's files as kernel_file: [...] in the experiment's problem");
  }
  for (const auto& f : files) {
    const auto ext = std::filesystem::path(f).extension().string();
    std::string text;
    try {
      text = read_file(f);
    } catch (const error& e) {
      files_doc->at(files_key).fail(e.what());
    }
    if (ext == ".hip" || text.find("hip/hip_runtime.h") != std::string::npos)
      files_doc->at(files_key).fail(
          f +
          " is a HIP source; the cuda evaluator compiles CUDA: name the CUDA twin with "
          "kernel_file: in the experiment's problem");
    if (k.source_file.empty()) k.source_file = f;
    k.include_dirs.push_back(std::filesystem::path(f).parent_path());
    k.source += text;
    if (!k.source.empty() && k.source.back() != '\n') k.source += '\n';
  }
  k.source = prelude + k.source;
}

// LocalSize, and the grid per Kernel Tuner's rules (see the top of this file).
void read_geometry(const document& t1, const json& spec, kernel_spec& k, std::size_t problem_dims) {
  static const char* axes[3] = {"X", "Y", "Z"};
  const auto& local = child(spec, "LocalSize");
  if (!local.is_object()) t1.at(ks + ".LocalSize").fail("expected {X, Y?, Z?}");
  std::array<std::string, 3> block_text{"1", "1", "1"};
  for (int d = 0; d < 3; ++d)
    if (const auto& v = child(local, axes[d]); !v.is_null()) {
      const auto key = ks + ".LocalSize." + axes[d];
      k.block[d] = parse_expr(t1, v, key);
      block_text[d] = v.is_string() ? v.get<std::string>() : v.dump();
    } else {
      k.block[d] = expression::parse("1");
    }
  bool any_div = false;
  for (int d = 0; d < 3; ++d)
    any_div |= !child(spec, (std::string("GridDiv") + axes[d]).c_str()).is_null();
  if (any_div) {
    for (int d = 0; d < 3; ++d) {
      const std::string dkey = std::string("GridDiv") + axes[d];
      const auto& div = child(spec, dkey.c_str());
      std::string product;
      if (div.is_null()) {
        product = "(" + block_text[d] + ")";
      } else {
        if (!div.is_array())
          t1.at(ks + "." + dkey).fail("expected a list of divisors (parameter names or expressions)");
        for (std::size_t i = 0; i < div.size(); ++i) {
          if (!div[i].is_string())
            t1.at(ks + "." + dkey + "[" + std::to_string(i) + "]").fail("expected a string");
          product += (product.empty() ? "(" : " * (") + div[i].get<std::string>() + ")";
        }
        if (product.empty()) product = "1";
      }
      const std::string size = static_cast<std::size_t>(d) < problem_dims
                                   ? "ProblemSize[" + std::to_string(d) + "]"
                                   : std::string("1");
      const std::string grid = "(" + size + " + (" + product + ") - 1) // (" + product + ")";
      try {
        k.grid[d] = expression::parse(grid);
      } catch (const error& e) {
        t1.at(ks + "." + dkey).fail(e.what());
      }
    }
    return;
  }
  const auto& global = child(spec, "GlobalSize");
  if (!global.is_object())
    t1.at(ks).fail("give GlobalSize {X, Y?, Z?} or GridDivX/Y/Z (the grid cannot be formed otherwise)");
  const bool in_blocks = child(spec, "GlobalSizeType") == "CUDA";
  for (int d = 0; d < 3; ++d) {
    const auto& v = child(global, axes[d]);
    const std::string g = v.is_null() ? "1" : v.is_string() ? v.get<std::string>() : v.dump();
    const std::string grid =
        in_blocks ? g : "((" + g + ") + (" + block_text[d] + ") - 1) // (" + block_text[d] + ")";
    try {
      k.grid[d] = expression::parse(grid);
    } catch (const error& e) {
      t1.at(ks + ".GlobalSize." + axes[d]).fail(e.what());
    }
  }
}

void read_arguments(const document& t1, const json& spec, const document* cfg, const json* over,
                    const std::string& pk, const value& problem_size, kernel_spec& k) {
  const auto& args = child(spec, "Arguments");
  if (!args.is_array() || args.empty())
    t1.at(ks + ".Arguments").fail("expected the list of the kernel's arguments");
  bool any_output_flag = false;
  for (const auto& a : args)
    any_output_flag |= a.is_object() && a.contains("Output");
  std::set<std::string> used_overrides;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto key = ks + ".Arguments[" + std::to_string(i) + "]";
    const auto& a = args[i];
    if (!a.is_object()) t1.at(key).fail("expected an argument {Name, Type, MemoryType, ...}");
    kernel_arg arg;
    arg.name = child(a, "Name").is_string() ? a["Name"].get<std::string>() : "arg" + std::to_string(i);
    const auto [type, lanes] = t1_type(t1, child(a, "Type"), key + ".Type");
    arg.type = type;
    const auto& mt = child(a, "MemoryType");
    std::uint64_t count = 0;
    if (mt == "Scalar") {
      arg.buffer = false;
      if (lanes != 1) t1.at(key + ".Type").fail("a vector type cannot be a scalar argument");
      if (!child(a, "FillValue").is_number())
        t1.at(key + ".FillValue").fail("a scalar needs its value (a number)");
      arg.value = expression::parse(child(a, "FillValue").dump());
    } else if (mt == "Vector" || mt == "Symbol") {
      arg.buffer = true;
      arg.param = mt == "Vector";
      arg.constant = mt == "Symbol" || child(a, "MemType") == "Constant";
      const auto& sz = child(a, "Size");
      if (sz.is_null()) t1.at(key).fail("missing key 'Size'");
      count = t1_size(t1, sz, key + ".Size", k.space, problem_size) * lanes;
      arg.fill = t1_fill(t1, a, key);
      const auto& acc = child(a, "AccessType");
      arg.role = acc == "WriteOnly" ? arg_role::out : acc == "ReadWrite" ? arg_role::inout : arg_role::in;
      if (!acc.is_null() && acc != "ReadOnly" && acc != "WriteOnly" && acc != "ReadWrite")
        t1.at(key + ".AccessType").fail("expected ReadOnly, WriteOnly or ReadWrite");
      if (arg.constant && arg.role != arg_role::in)
        t1.at(key).fail("a __constant__ argument cannot be written");
      if (any_output_flag) arg.compare = child(a, "Output") == 1 || child(a, "Output") == true;
    } else if (mt == "Local") {
      t1.at(key + ".MemoryType")
          .fail("Local (OpenCL local memory) arguments are not supported by the cuda evaluator");
    } else {
      t1.at(key + ".MemoryType").fail("expected Scalar, Vector, Local or Symbol");
    }
    if (over && !child(*over, "arguments").is_null() &&
        child((*over)["arguments"], arg.name.c_str()).is_object()) {
      apply_argument_override(*cfg, (*over)["arguments"][arg.name], join_key(pk, "arguments." + arg.name),
                              arg, count, lanes);
      used_overrides.insert(arg.name);
    }
    if (arg.buffer) arg.size = constant_expr(count);
    k.args.push_back(std::move(arg));
  }
  if (over && !child(*over, "arguments").is_null()) {
    const auto& o = (*over)["arguments"];
    if (!o.is_object())
      cfg->at(join_key(pk, "arguments")).fail("expected {argument name: {type?, size?, fill?, ...}}");
    for (const auto& [name, v] : o.items())
      if (!used_overrides.count(name))
        cfg->at(join_key(pk, "arguments." + name)).fail("the T1 file has no argument named '" + name + "'");
  }
  bool any_out = false;
  for (const auto& a : k.args)
    any_out |= a.buffer && a.role != arg_role::in && a.compare;
  if (!any_out)
    t1.at(ks + ".Arguments")
        .fail("no argument is written (AccessType WriteOnly or ReadWrite): nothing to check");
}

}  // namespace

// The default configuration: T1 Defaults where they are values; when that violates the constraints,
// the valid configuration that changes the fewest parameters (the first such in the valid order).
config kernel_parse::t1_defaults(const document& doc, const search_space& space) {
  config c(space.dimension(), 0);
  const auto& tps = doc.root.at("ConfigurationSpace").at("TuningParameters");
  for (std::size_t i = 0; i < space.dimension() && i < tps.size(); ++i)
    if (tps[i].contains("Default")) try {
        if (auto idx = space.value_index(i, from_json(tps[i]["Default"]))) c[i] = *idx;
      } catch (const error&) {
      }
  if (space.is_valid(c)) return c;
  const auto& valid = space.valid();
  if (valid.size() == 0) doc.at("ConfigurationSpace").fail("no configuration satisfies the conditions");
  std::size_t best_i = 0, best_d = space.dimension() + 1;
  for (std::size_t i = 0; i < valid.size() && best_d > 1; ++i) {
    const auto v = valid.at(i);
    std::size_t d = 0;
    for (std::size_t p = 0; p < v.size(); ++p)
      d += v[p] != c[p];
    if (d < best_d) best_d = d, best_i = i;
  }
  return valid.at(best_i);
}


kernel_spec t1_kernel_spec(const document& t1, const search_space& space, const document* cfg,
                           const std::string& problem_key) {
  const json* over = nullptr;
  if (cfg) {
    // The problem mapping of the experiment (kernel corrections live there).
    const json* node = &cfg->root;
    std::string part;
    for (std::size_t i = 0; i <= problem_key.size(); ++i)
      if (i == problem_key.size() || problem_key[i] == '.') {
        node = &node->at(part);
        part.clear();
      } else {
        part += problem_key[i];
      }
    over = node;
  }
  if (!t1.root.contains(ks)) t1.at("").fail("no KernelSpecification: this T1 file names no kernel to run");
  const auto& spec = t1.root.at(ks);
  if (!spec.is_object()) t1.at(ks).fail("expected a mapping");
  const auto& lang = child(spec, "Language");
  if (lang != "CUDA" && lang != "OpenCL")
    t1.at(ks + ".Language")
        .fail("the cuda evaluator runs CUDA kernels (and OpenCL ones through a prelude), not " + lang.dump());

  kernel_spec k;
  k.base_dir = t1.base_dir;
  k.space = space;
  k.own_params = space.dimension();
  k.kernel_tuner_conventions = true;
  read_sources(t1, cfg, over, problem_key, k, lang == "OpenCL");
  const auto& name = child(spec, "KernelName");
  if (!name.is_string() || name.get<std::string>().empty())
    t1.at(ks + ".KernelName").fail("expected the kernel's name");
  k.entry = name.get<std::string>();
  k.name = child(spec, "BenchmarkName").is_string() ? spec["BenchmarkName"].get<std::string>() : k.entry;
  if (const auto& opts = child(spec, "CompilerOptions"); !opts.is_null()) {
    if (!opts.is_array()) t1.at(ks + ".CompilerOptions").fail("expected a list of options");
    for (const auto& o : opts) {
      if (!o.is_string()) t1.at(ks + ".CompilerOptions").fail("expected a list of strings");
      k.compiler_options.push_back(o.get<std::string>());
    }
  }
  if (over && !child(*over, "compiler_options").is_null()) {
    const auto& opts = (*over)["compiler_options"];
    if (!opts.is_array())
      cfg->at(join_key(problem_key, "compiler_options")).fail("expected a list of NVRTC options");
    for (const auto& o : opts) {
      if (!o.is_string())
        cfg->at(join_key(problem_key, "compiler_options")).fail("expected a list of strings");
      k.compiler_options.push_back(o.get<std::string>());
    }
  }
  if (over && !child(*over, "include_dirs").is_null()) {
    const auto& dirs = (*over)["include_dirs"];
    if (!dirs.is_array()) cfg->at(join_key(problem_key, "include_dirs")).fail("expected a list of folders");
    for (const auto& d : dirs) {
      if (!d.is_string()) cfg->at(join_key(problem_key, "include_dirs")).fail("expected a list of folders");
      k.include_dirs.push_back(resolve_path(d.get<std::string>(), cfg->base_dir));
    }
  }
  // The problem size: the one timed shape.
  const auto& ps = child(spec, "ProblemSize");
  std::vector<value> sizes;
  if (ps.is_array()) {
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (!ps[i].is_number_integer())
        t1.at(ks + ".ProblemSize[" + std::to_string(i) + "]").fail("expected a whole number");
      sizes.emplace_back(ps[i].get<std::int64_t>());
    }
  } else if (ps.is_number_integer()) {
    sizes.emplace_back(ps.get<std::int64_t>());
  } else if (!ps.is_null()) {
    t1.at(ks + ".ProblemSize").fail("expected a list of whole numbers");
  }
  const value problem_size{sizes};
  k.time_shapes.push_back({{"ProblemSize", problem_size}});
  read_geometry(t1, spec, k, sizes.size());
  if (const auto& sm = child(spec, "SharedMemory"); !sm.is_null())
    k.shared_memory = parse_expr(t1, sm, ks + ".SharedMemory");
  else
    k.shared_memory = expression::parse("0");
  read_arguments(t1, spec, cfg, over, problem_key, problem_size, k);
  if (child(spec, "ReferenceArguments").is_array() && !spec["ReferenceArguments"].empty())
    t1.at(ks + ".ReferenceArguments")
        .fail(
            "reference outputs from files are not supported: name a reference kernel (problem.reference) or "
            "use the "
            "default configuration's output (reference: baseline)");
  // Defines of every variant besides its parameters (Kernel Tuner's).
  static const char* axes[3] = {"x", "y", "z"};
  for (int d = 0; d < 3; ++d) {
    const std::string b = std::string("block_size_") + axes[d];
    if (!space.param_index(b)) k.defines.emplace_back(b, k.block[d]);
    k.defines.emplace_back(std::string("grid_size_") + axes[d], k.grid[d]);
  }
  k.defines.emplace_back("kernel_tuner", expression::parse("1"));
  k.defaults = t1_defaults(t1, space);
  k.tolerances = default_tolerances();
  if (over) {
    if (const auto& r = child(*over, "reference"); !r.is_null())
      k.reference = parse_reference(*cfg, r, join_key(problem_key, "reference"), k.source_file, k.source);
    if (const auto& t = child(*over, "tolerance"); !t.is_null())
      parse_tolerances(*cfg, t, join_key(problem_key, "tolerance"), k.tolerances);
    if (const auto& cs = child(*over, "check_shapes"); !cs.is_null()) {
      if (!cs.is_array()) cfg->at(join_key(problem_key, "check_shapes")).fail("expected a list of shapes");
      for (std::size_t i = 0; i < cs.size(); ++i)
        k.check_shapes.push_back(
            parse_shape(*cfg, cs[i], join_key(problem_key, "check_shapes") + "[" + std::to_string(i) + "]"));
    }
  }
  try {
    check_default_launches(k);
  } catch (const error& e) {
    t1.at(ks).fail(std::string("the default configuration ") + space.describe(k.defaults) +
                   " cannot be launched: " + e.what());
  }
  return k;
}

}  // namespace kf
