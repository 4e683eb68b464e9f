// compiler_flags: compiler options as tuning parameters; the source is unchanged. Takes no site.
//
// Parameters (each declared only when the options ask for it to be searched):
//   <instance>_fast_math           [false, true], default false: true adds --use_fast_math
//   <instance>_extra_vectorization [false, true], default false: true adds --extra-device-vectorization
//   <instance>_ptxas               the strings of the option `ptxas`, default its first ("default": no
//   option);
//                                  each other value is one or more ptxas options separated by spaces, each
//                                  added as --ptxas-options=<option>
// ptxas options accepted (a fixed list, checked when the description is loaded): -O0 -O1 -O2 -O3 (ptxas
// optimisation level; -O3 is the default), -dlcm=ca|cg|cs|lu|cv (default load cache operator),
// -dscm=wb|cg|cs|wt (default store cache operator), --allow-expensive-optimizations=true|false.
// --use_fast_math changes floating-point results (approximate division, square root and transcendentals,
// denormals flushed): a description that searches it needs tolerances that allow it. The others change
// code generation only.
#include <set>
#include <sstream>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

bool known_ptxas_option(const std::string& o) {
  static const std::set<std::string> known = {"-O0",
                                              "-O1",
                                              "-O2",
                                              "-O3",
                                              "-dlcm=ca",
                                              "-dlcm=cg",
                                              "-dlcm=cs",
                                              "-dlcm=lu",
                                              "-dlcm=cv",
                                              "-dscm=wb",
                                              "-dscm=cg",
                                              "-dscm=cs",
                                              "-dscm=wt",
                                              "--allow-expensive-optimizations=true",
                                              "--allow-expensive-optimizations=false"};
  return known.count(o) > 0;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w)
    out.push_back(w);
  return out;
}

struct compiler_flags_op {
  bool fast_math = false, extra_vectorization = false;
  std::vector<std::string> ptxas;  // empty or one value: not searched

  std::vector<transform_param> parameters() const {
    std::vector<transform_param> out;
    if (fast_math) out.push_back({"fast_math", {value(false), value(true)}, value(false)});
    if (extra_vectorization)
      out.push_back({"extra_vectorization", {value(false), value(true)}, value(false)});
    if (ptxas.size() > 1) out.push_back({"ptxas", to_values(ptxas), value(ptxas.front())});
    return out;
  }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context&) const {
    return guarded("compiler_flags", "", [&] {
      transform_result r{source, {}, {}};
      if (fast_math && bool_value(v, "fast_math")) r.options.push_back("--use_fast_math");
      if (extra_vectorization && bool_value(v, "extra_vectorization"))
        r.options.push_back("--extra-device-vectorization");
      if (ptxas.size() > 1) {
        const auto choice = string_value(v, "ptxas");
        if (choice != "default")
          for (const auto& w : words(choice)) {
            if (!known_ptxas_option(w)) fail("unknown ptxas option '" + w + "'");
            r.options.push_back("--ptxas-options=" + w);
          }
      }
      return r;
    });
  }
};

}  // namespace

void register_compiler_flags() {
  transform_registry().add(
      {"compiler_flags",
       "compiler options as parameters: --use_fast_math, --extra-device-vectorization, ptxas options; source "
       "unchanged",
       {bool_option("fast_math", true,
                    "search --use_fast_math (parameter <instance>_fast_math, default false)"),
        bool_option("extra_vectorization", false,
                    "search --extra-device-vectorization (parameter <instance>_extra_vectorization)"),
        list_option(
            "ptxas", nlohmann::json::array({"default", "-O1", "-dlcm=ca"}),
            "ptxas option sets searched (parameter <instance>_ptxas; the first is the default and must be "
            "'default', no option): each entry is ptxas options separated by spaces, from -O0..-O3, "
            "-dlcm=ca|cg|cs|lu|cv, -dscm=wb|cg|cs|wt, --allow-expensive-optimizations=true|false")},
       [](const options& o, const transform_site& s) -> transform {
         if (!s.site.empty()) o.where().fail("compiler_flags acts on the compilation and takes no site");
         compiler_flags_op op;
         op.fast_math = o.boolean("fast_math");
         op.extra_vectorization = o.boolean("extra_vectorization");
         op.ptxas = string_list(o, "ptxas");
         if (op.ptxas.front() != "default")
           o.fail("ptxas", "the first entry must be 'default' (no ptxas option: the unchanged compilation)");
         for (std::size_t i = 1; i < op.ptxas.size(); ++i) {
           const auto ws = words(op.ptxas[i]);
           if (ws.empty()) o.fail("ptxas", "an empty entry (write 'default' for no option)");
           for (const auto& w : ws)
             if (!known_ptxas_option(w))
               o.fail("ptxas", "unknown ptxas option '" + w +
                                   "' (accepted: -O0..-O3, -dlcm=ca|cg|cs|lu|cv, -dscm=wb|cg|cs|wt, "
                                   "--allow-expensive-optimizations=true|false)");
         }
         return op;
       }});
}

}  // namespace kf::transforms
