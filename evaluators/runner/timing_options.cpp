#include "evaluators/runner/timing_options.hpp"

namespace kf {

std::vector<option_spec> timing_option_specs(const std::string& one, const std::string& many,
                                             const std::string& flush_buffer) {
  return {
      int_option("warmup", 3, "untimed " + many + " before timing", 0, 1000),
      int_option("min_repeats", 15, "timed " + many + " at least", 3, 100000),
      int_option("max_repeats", 200, "timed " + many + " at most", 3, 100000),
      real_option("target_rel_ci", 0.01, "stop when the 95% CI of the median is within this fraction", 0, 1),
      real_option("max_timing_seconds", 3.0, "time budget of the timing of one shape", 0.001, 3600),
      bool_option("flush_l2", true, "rewrite " + flush_buffer + " before each timed " + one),
  };
}

void check_timing_options(const options& o) {
  if (o.integer("min_repeats") > o.integer("max_repeats"))
    o.fail("min_repeats", "must not exceed max_repeats");
}

std::vector<option_spec> join_option_specs(std::initializer_list<std::vector<option_spec>> parts) {
  std::vector<option_spec> out;
  for (const auto& part : parts)
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

}  // namespace kf
