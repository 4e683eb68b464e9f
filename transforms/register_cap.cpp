// register_cap: a cap on registers per thread, `--maxrregcount=N`.
//
// Parameter `<instance>` (values from the option `max_registers`, default [0, 32, 64, 128, 255]): 0 adds
// nothing (default), N adds the compiler option `--maxrregcount=N` (N >= 24: ptxas raises smaller caps to
// 24 for sm_90). The source is never changed; takes no
// site. ptxas ignores the cap for a kernel with __launch_bounds__ (it derives its own limit from them), so
// combining it with launch_bounds is allowed but the bounds win. A lower cap may add spills, never changes
// results.
#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

struct register_cap_op {
  std::vector<std::int64_t> caps;

  std::vector<transform_param> parameters() const { return {{"value", to_values(caps), value(0)}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context&) const {
    return guarded("register_cap", "", [&] {
      const auto n = int_value(v, "value");
      if (n < 0 || n > 255) fail("the register cap " + std::to_string(n) + " is out of range [0, 255]");
      transform_result r{source, {}, {}};
      if (n > 0) r.options.push_back("--maxrregcount=" + std::to_string(n));
      return r;
    });
  }
};

}  // namespace

void register_register_cap() {
  transform_registry().add(
      {"register_cap",
       "--maxrregcount=N (0: no cap); the source is unchanged",
       {list_option("max_registers", nlohmann::json::array({0, 32, 64, 128, 255}),
                    "register caps searched (0 or 24..255; must include 0, no cap)")},
       [](const options& o, const transform_site& s) -> transform {
         if (!s.site.empty()) o.where().fail("register_cap acts on the compilation and takes no site");
         auto caps = int_list(o, "max_registers", 0, 255, 0);
         for (auto c : caps)
           if (c != 0 && c < 24)
             o.fail("max_registers",
                    "a cap below 24 registers (ptxas raises it to 24 for sm_90) is not allowed");
         return register_cap_op{std::move(caps)};
       }});
}

}  // namespace kf::transforms
