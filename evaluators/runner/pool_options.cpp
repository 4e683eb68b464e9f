#include "evaluators/runner/pool_options.hpp"

#include "kforge/error.hpp"

namespace kf {

std::vector<option_spec> pool_option_specs(double timeout_s, const std::string& timeout_doc) {
  return {
      optional_option("devices", option_type::list, "GPU indices to use (default: every visible GPU)"),
      int_option("workers_per_device", 1, "worker processes per GPU", 1, 64),
      real_option("request_timeout_s", timeout_s, timeout_doc, 1, 86400),
      int_option("retry_lost", 1,
                 "times a variant whose worker died unannounced is dispatched again before it is crashed", 0,
                 10),
  };
}

bool read_pool_options(const options& o, runner_options& run) {
  run.workers_per_device = static_cast<int>(o.integer("workers_per_device"));
  run.request_timeout_s = o.real("request_timeout_s");
  run.retry_lost = static_cast<int>(o.integer("retry_lost"));
  if (!o.has("devices")) return true;
  run.devices = o.json("devices").get<std::vector<int>>();
  if (run.devices.empty()) o.fail("devices", "give at least one device index");
  return false;
}

void use_every_visible_device(runner_options& run, const std::string& count_command,
                              const std::string& none_visible) {
  const int n = count_worker_devices(count_command);
  if (n <= 0) throw error(none_visible);
  run.devices.clear();
  for (int d = 0; d < n; ++d)
    run.devices.push_back(d);
}

}  // namespace kf
