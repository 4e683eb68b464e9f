#include "kforge/problem.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "kforge/error.hpp"
#include "kforge/expr.hpp"
#include "kforge/recorded.hpp"
#include "config/kernel_parse.hpp"

namespace kf {

namespace {
param_type parse_type(const std::string& t, const config_location& loc) {
  if (t == "int" || t == "uint" || t == "int32" || t == "int64" || t == "uint32" || t == "uint64")
    return param_type::integer;
  if (t == "float" || t == "double" || t == "float32" || t == "float64" || t == "real")
    return param_type::real;
  if (t == "bool" || t == "boolean") return param_type::boolean;
  if (t == "string" || t == "str" || t == "enum") return param_type::string;
  loc.fail("unknown parameter type '" + t + "' (expected int, uint, float, bool or string)");
}

std::vector<value> values_of(const nlohmann::json& j, const config_location& loc) {
  value v;
  if (j.is_string()) {
    try {
      v = expression::parse(j.get<std::string>()).evaluate();
    } catch (const error& e) {
      loc.fail(std::string("cannot evaluate the value list: ") + e.what());
    }
  } else if (j.is_array()) {
    v = from_json(j);
  } else {
    loc.fail("expected a list of values or a Python expression that gives one");
  }
  if (!v.is_list()) loc.fail("the value expression gives " + v.repr() + ", not a list");
  if (v.as_list().empty()) loc.fail("the value list is empty");
  return v.as_list();
}

const nlohmann::json& require(const nlohmann::json& obj, const char* key, const config_location& loc) {
  if (!obj.is_object()) loc.fail("expected a mapping");
  auto it = obj.find(key);
  if (it == obj.end()) loc.fail(std::string("missing key '") + key + "'");
  return *it;
}
}  // namespace

search_space t1_space(const document& doc) {
  const auto& root = doc.root;
  const auto cs_loc = doc.at("ConfigurationSpace");
  const auto& cs = require(root, "ConfigurationSpace", doc.at(""));
  const auto& tps = require(cs, "TuningParameters", cs_loc);
  if (!tps.is_array() || tps.empty())
    doc.at("ConfigurationSpace.TuningParameters").fail("expected a non-empty list");
  std::vector<param> params;
  for (std::size_t i = 0; i < tps.size(); ++i) {
    const std::string base = "ConfigurationSpace.TuningParameters[" + std::to_string(i) + "]";
    const auto& tp = tps[i];
    const auto& name = require(tp, "Name", doc.at(base));
    if (!name.is_string() || name.get<std::string>().empty())
      doc.at(base + ".Name").fail("expected a non-empty string");
    const auto& type = require(tp, "Type", doc.at(base));
    if (!type.is_string()) doc.at(base + ".Type").fail("expected a string");
    const auto t = parse_type(type.get<std::string>(), doc.at(base + ".Type"));
    auto vals = values_of(require(tp, "Values", doc.at(base)), doc.at(base + ".Values"));
    try {
      params.push_back(make_param(name.get<std::string>(), t, std::move(vals)));
    } catch (const config_error&) {
      throw;
    } catch (const error& e) {
      doc.at(base + ".Values").fail(e.what());
    }
  }
  std::vector<std::string> constraints;
  if (cs.contains("Conditions")) {
    const auto& conds = cs.at("Conditions");
    if (!conds.is_array()) doc.at("ConfigurationSpace.Conditions").fail("expected a list");
    for (std::size_t i = 0; i < conds.size(); ++i) {
      const std::string base = "ConfigurationSpace.Conditions[" + std::to_string(i) + "]";
      const auto& e = require(conds[i], "Expression", doc.at(base));
      if (!e.is_string()) doc.at(base + ".Expression").fail("expected a string");
      constraints.push_back(e.get<std::string>());
      if (conds[i].contains("Parameters")) {
        const auto& ps = conds[i].at("Parameters");
        if (!ps.is_array()) doc.at(base + ".Parameters").fail("expected a list of parameter names");
        for (std::size_t k = 0; k < ps.size(); ++k) {
          bool known = false;
          for (const auto& p : params)
            known |= ps[k].is_string() && p.name == ps[k].get<std::string>();
          if (!known)
            doc.at(base + ".Parameters[" + std::to_string(k) + "]")
                .fail("not a tuning parameter: " + describe_json(ps[k]));
        }
      }
    }
  }
  try {
    return search_space(std::move(params), std::move(constraints));
  } catch (const config_error&) {
    throw;
  } catch (const error& e) {
    doc.at("ConfigurationSpace.Conditions").fail(e.what());
  }
}

problem load_t1(const std::string& path) {
  const auto doc = load_document(path);
  problem p;
  p.space = t1_space(doc);
  p.source_kind = "t1";
  p.source_file = path;
  p.base_dir = doc.base_dir;
  if (doc.root.contains("KernelSpecification")) {
    p.kernel = doc.root.at("KernelSpecification");
    if (p.kernel.is_object() && p.kernel.contains("ProblemSize")) p.problem_size = p.kernel["ProblemSize"];
  }
  if (doc.root.contains("General") && doc.root["General"].is_object() &&
      doc.root["General"].contains("BenchmarkName") && doc.root["General"]["BenchmarkName"].is_string())
    p.name = doc.root["General"]["BenchmarkName"].get<std::string>();
  return p;
}

problem load_cache_problem(const std::string& path) {
  const auto f = load_recorded_cached(path);
  problem p;
  p.space = recorded_space(*f);
  p.source_kind = "cache";
  p.source_file = path;
  p.base_dir = std::filesystem::path(path).parent_path();
  p.name = f->kernel_name;
  p.problem_size = f->problem_size;
  return p;
}

problem load_kernel_problem(const std::string& path) {
  auto spec = std::make_shared<const kernel_spec>(load_kernel_spec(path));
  problem p;
  p.name = spec->name;
  p.space = spec->space;
  p.source_kind = "kernel";
  p.source_file = path;
  p.base_dir = spec->base_dir;
  if (!spec->time_shapes.empty()) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& [name, v] : spec->time_shapes.front())
      sizes.push_back(to_json(v));
    p.problem_size = std::move(sizes);
  }
  p.kernel_desc = std::move(spec);
  return p;
}

space_check check_space(const search_space& space) {
  space_check c;
  try {
    c.valid = space.valid().size();  // immediate without constraints; pruned otherwise
  } catch (const error&) {
    return c;  // too large to enumerate: strategies sample it
  }
  c.enumerated = true;
  const auto st = space.stats();
  c.combinations = st.cartesian_size;
  c.raised_configurations = st.raised_configurations;
  c.first_raise = st.first_error;
  return c;
}

std::string space_check::warnings() const {
  if (!enumerated) return "";
  std::string out;
  char buf[160];
  if (raised_configurations > 0) {
    std::snprintf(buf, sizeof buf, "%.0f of %.0f configurations (%.3g%%)", raised_configurations,
                  combinations, 100.0 * raised_configurations / std::max(1.0, combinations));
    out += "warning: a constraint raised on " + std::string(buf) +
           ", which count as invalid; first: " + first_raise + "\n";
  }
  if (valid == 0) {
    std::snprintf(buf, sizeof buf, "%.0f", combinations);
    out +=
        "warning: no configuration of the " + std::string(buf) + " combinations satisfies the constraints\n";
  }
  return out;
}

namespace {
// The CUDA kernel of a T1 problem, for the evaluators that run kernels. When the experiment corrects the
// kernel (kernel_keys) its errors are raised now; otherwise they are kept for an evaluator that needs the
// kernel, so that the same T1 file still serves replay runs and spaces of kernels kforge cannot run.
void attach_t1_kernel(problem& p, const std::string& file, const document& cfg, const std::string& key_path,
                      bool kernel_keys) {
  try {
    const auto t1 = load_document(file);
    if (!t1.root.contains("KernelSpecification") && !kernel_keys) return;
    p.kernel_desc = std::make_shared<const kernel_spec>(t1_kernel_spec(t1, p.space, &cfg, key_path));
  } catch (const config_error&) {
    if (kernel_keys) throw;
    p.kernel_error = std::current_exception();
  } catch (const error& e) {
    if (kernel_keys) cfg.at(key_path + ".t1").fail(e.what());
    p.kernel_error = std::current_exception();
  }
}
}  // namespace

problem load_problem(const document& doc, const std::string& key_path) {
  const auto loc = doc.at(key_path);
  const nlohmann::json* node = &doc.root;
  // Walk the dotted key path (only plain keys are used here).
  std::string k;
  for (std::size_t i = 0; i <= key_path.size(); ++i) {
    if (i == key_path.size() || key_path[i] == '.') {
      if (!node->is_object() || !node->contains(k)) loc.fail("missing");
      node = &node->at(k);
      k.clear();
    } else {
      k += key_path[i];
    }
  }
  if (!node->is_object()) loc.fail("expected a mapping with one of t1, cache, kernel, program");
  if (node->contains("program")) {
    auto spec = std::make_shared<const program_spec>(parse_program_spec(doc, *node, key_path));
    problem p;
    p.name = spec->name;
    p.space = spec->space;
    p.source_kind = "program";
    p.source_file = spec->program.string();
    p.base_dir = spec->program.parent_path();
    p.program_desc = std::move(spec);
    return p;
  }
  // Keys that correct the kernel a T1 file names (src/config/t1_kernel.cpp).
  static const std::set<std::string> t1_kernel_keys = {"kernel_file",      "prelude",   "include_dirs",
                                                       "compiler_options", "reference", "tolerance",
                                                       "check_shapes",     "arguments"};
  std::string kind, file;
  bool kernel_keys = false;
  for (const auto& [key, v] : node->items()) {
    if (t1_kernel_keys.count(key)) {
      kernel_keys = true;
      continue;
    }
    if (key != "t1" && key != "cache" && key != "kernel" && key != "name")
      doc.at(key_path + "." + key)
          .fail(
              "unknown key (expected one of t1, cache, kernel, program, name; with t1 also kernel_file, prelude, "
              "include_dirs, compiler_options, reference, tolerance, check_shapes, arguments)");
    if (key == "name") continue;
    if (!kind.empty()) loc.fail("give exactly one of t1, cache, kernel");
    if (!v.is_string()) doc.at(key_path + "." + key).fail("expected a file path");
    kind = key;
    file = resolve_path(v.get<std::string>(), doc.base_dir);
  }
  if (kind.empty())
    loc.fail(
        "give one of t1 (a T1 file), cache (a Kernel Tuner cache file), kernel (a kforge kernel "
        "description), program (a Triton program's .py, with call, inputs and parameters)");
  problem p;
  try {
    if (kind == "t1")
      p = load_t1(file);
    else if (kind == "cache")
      p = load_cache_problem(file);
    else
      p = load_kernel_problem(file);
  } catch (const config_error& e) {
    // Name the key of this config that led to the file, then what is wrong inside it.
    doc.at(key_path + "." + kind).fail(std::string("in ") + e.what());
  } catch (const error& e) {
    doc.at(key_path + "." + kind).fail(e.what());
  }
  if (kernel_keys && kind != "t1")
    for (const auto& tk : t1_kernel_keys)
      if (node->contains(tk))
        doc.at(key_path + "." + tk)
            .fail("only a T1 problem takes this key (a kernel description says it itself)");
  if (kind == "t1") attach_t1_kernel(p, file, doc, key_path, kernel_keys);
  if (node->contains("name") && node->at("name").is_string()) p.name = node->at("name").get<std::string>();
  return p;
}

std::optional<config> default_configuration(const problem& p) {
  if (p.program_desc) return p.program_desc->defaults;
  if (p.kernel_desc) return p.kernel_desc->defaults;
  // A T1 file whose kernel is not attached (none, or one kforge cannot build) still states Defaults.
  if (p.source_kind == "t1") return kernel_parse::t1_defaults(load_document(p.source_file), p.space);
  return std::nullopt;
}

}  // namespace kf
