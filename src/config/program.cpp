// Program-level problems (include/kforge/program.hpp): the problem mapping read into a program_spec.
#include "kforge/program.hpp"

#include <set>
#include <tuple>
#include <utility>

#include "config/kernel_parse.hpp"
#include "kforge/error.hpp"

namespace kf {

using namespace kernel_parse;

namespace {

std::string require_string(const document& doc, const json& node, const std::string& key, const char* name,
                           const char* what) {
  const auto& v = child(node, name);
  if (v.is_null()) doc.at(key).fail(std::string("missing key '") + name + "' (" + what + ")");
  if (!v.is_string() || v.get<std::string>().empty())
    doc.at(join_key(key, name)).fail(std::string("expected ") + what);
  return v.get<std::string>();
}

std::filesystem::path existing_file(const document& doc, const std::string& path, const std::string& key) {
  const std::filesystem::path p = resolve_path(path, doc.base_dir);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) doc.at(key).fail("no such file: " + p.string());
  return p;
}

// "FILE.py:FUNCTION" -> (the existing file, FUNCTION).
std::pair<std::filesystem::path, std::string> file_function(const document& doc, const std::string& text,
                                                            const std::string& key, const char* what) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    doc.at(key).fail(std::string("expected FILE.py:FUNCTION (") + what + ")");
  return {existing_file(doc, text.substr(0, colon), key), text.substr(colon + 1)};
}

program_knob parse_knob(const document& doc, const json& k, const std::string& key,
                        const std::string& param) {
  if (!k.is_object())
    doc.at(key).fail("expected {literal: SITE}, {launch: SITE}, {autotune: KERNEL} or {heuristic: KERNEL}");
  check_keys(doc, k, key, {"literal", "launch", "autotune", "heuristic", "target"});
  program_knob out;
  for (const char* kind : {"literal", "launch", "autotune", "heuristic"}) {
    const auto& v = child(k, kind);
    if (v.is_null()) continue;
    if (!out.kind.empty()) doc.at(key).fail("give exactly one of literal, launch, autotune, heuristic");
    const bool by_kernel = std::string(kind) == "autotune" || std::string(kind) == "heuristic";
    if (!v.is_string() || v.get<std::string>().empty())
      doc.at(join_key(key, kind))
          .fail(by_kernel ? "expected the @triton.jit kernel's name"
                          : "expected a site: function or function:line");
    out.kind = kind;
    (by_kernel ? out.kernel : out.site) = v.get<std::string>();
  }
  if (out.kind.empty())
    doc.at(key).fail("give one of literal: SITE, launch: SITE, autotune: KERNEL, heuristic: KERNEL");
  out.target = param;
  if (const auto& t = child(k, "target"); !t.is_null()) {
    if (!t.is_string() || t.get<std::string>().empty())
      doc.at(join_key(key, "target")).fail("expected the name in the program");
    out.target = t.get<std::string>();
  }
  return out;
}

}  // namespace

program_spec parse_program_spec(const document& doc, const json& node, const std::string& key) {
  check_keys(doc, node, key,
             {"program", "call", "inputs", "adapter", "end_marker", "parameters", "constraints",
              "time_shapes", "tolerance", "seed", "name"});
  program_spec p;
  p.program = existing_file(doc, require_string(doc, node, key, "program", "the program's .py file"),
                            join_key(key, "program"));
  p.call = require_string(doc, node, key, "call", "the wrapper function to call");
  std::tie(p.inputs_file, p.inputs_function) = file_function(
      doc, require_string(doc, node, key, "inputs", "FILE.py:FUNCTION returning the calls' arguments"),
      join_key(key, "inputs"), "a function returning one argument tuple per shape");
  if (const auto& a = child(node, "adapter"); !a.is_null()) {
    if (!a.is_string()) doc.at(join_key(key, "adapter")).fail("expected FILE.py:FUNCTION");
    std::tie(p.adapter_file, p.adapter_function) =
        file_function(doc, a.get<std::string>(), join_key(key, "adapter"),
                      "a function taking the program's module and returning the callable to call");
  }
  if (const auto& m = child(node, "end_marker"); !m.is_null()) {
    if (!m.is_string() || m.get<std::string>().empty())
      doc.at(join_key(key, "end_marker"))
          .fail("expected the text that starts the first line after the program");
    p.end_marker = m.get<std::string>();
  }
  p.name = child(node, "name").is_string() ? child(node, "name").get<std::string>()
                                           : p.program.stem().string() + "." + p.call;
  // Parameters, each bound to a knob.
  const auto pkey = join_key(key, "parameters");
  const auto& ps = child(node, "parameters");
  if (!ps.is_array() || ps.empty())
    doc.at(ps.is_null() ? key : pkey).fail("expected parameters: a list of {name, values, default?, knob}");
  std::vector<param> params;
  std::vector<std::optional<value>> defaults;
  std::set<std::string> names;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const auto ikey = pkey + "[" + std::to_string(i) + "]";
    auto [prm, d] = parse_parameter(doc, ps[i], ikey, {"knob"});
    if (!names.insert(prm.name).second) doc.at(ikey + ".name").fail("a second parameter of this name");
    if (child(ps[i], "knob").is_null())
      doc.at(ikey).fail(
          "missing key 'knob' ({literal: SITE}, {launch: SITE}, {autotune: KERNEL}, {heuristic: KERNEL})");
    p.knobs.push_back(parse_knob(doc, ps[i]["knob"], ikey + ".knob", prm.name));
    params.push_back(std::move(prm));
    defaults.push_back(std::move(d));
  }
  std::set<std::pair<std::string, std::string>> bound;
  for (std::size_t i = 0; i < p.knobs.size(); ++i) {
    const auto& k = p.knobs[i];
    if (!bound.insert({k.kind + " " + k.site + k.kernel, k.target}).second)
      doc.at(pkey + "[" + std::to_string(i) + "].knob")
          .fail("another parameter sets the same knob (" + k.target + ")");
  }
  std::vector<std::string> constraints;
  if (const auto& cs = child(node, "constraints"); !cs.is_null()) {
    if (!cs.is_array()) doc.at(join_key(key, "constraints")).fail("expected a list of expressions");
    for (std::size_t i = 0; i < cs.size(); ++i) {
      if (!cs[i].is_string())
        doc.at(join_key(key, "constraints") + "[" + std::to_string(i) + "]").fail("expected an expression");
      constraints.push_back(cs[i].get<std::string>());
    }
  }
  try {
    p.space = search_space(std::move(params), constraints);
  } catch (const error& e) {
    doc.at(join_key(key, "constraints")).fail(e.what());
  }
  p.defaults = resolve_defaults(doc, p.space, defaults, pkey);
  if (const auto& ts = child(node, "time_shapes"); !ts.is_null()) {
    if (!ts.is_array() || ts.empty())
      doc.at(join_key(key, "time_shapes")).fail("expected a list of call indices");
    p.time_shapes.clear();
    for (std::size_t i = 0; i < ts.size(); ++i) {
      if (!ts[i].is_number_integer())
        doc.at(join_key(key, "time_shapes") + "[" + std::to_string(i) + "]")
            .fail("expected an index into the inputs' calls (negative: from the end)");
      p.time_shapes.push_back(ts[i].get<int>());
    }
  }
  p.tolerances = default_tolerances();
  if (const auto& t = child(node, "tolerance"); !t.is_null())
    parse_tolerances(doc, t, join_key(key, "tolerance"), p.tolerances);
  if (const auto& s = child(node, "seed"); !s.is_null()) {
    if (!s.is_number_unsigned()) doc.at(join_key(key, "seed")).fail("expected a non-negative integer");
    p.seed = s.get<std::uint64_t>();
  }
  return p;
}

nlohmann::json program_knobs(const program_spec& p, const config& c) {
  auto out = nlohmann::json::array();
  for (std::size_t i = 0; i < p.knobs.size(); ++i) {
    const auto& k = p.knobs[i];
    nlohmann::json j = {{"kind", k.kind}, {"target", k.target}, {"value", to_json(p.space.value_of(c, i))}};
    if (!k.site.empty()) j["site"] = k.site;
    if (!k.kernel.empty()) j["kernel"] = k.kernel;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace kf
