#include "kforge/evaluators/replay.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/problem.hpp"

namespace kf {

replay_evaluator::replay_evaluator(std::shared_ptr<const recorded_file> file, const search_space& space,
                                   std::size_t parallelism, double latency_ms)
    : file_(std::move(file)),
      bound_(std::make_shared<const bound_records>(bind_records(*file_, space))),
      parallelism_(parallelism == 0 ? 1 : parallelism),
      latency_ms_(latency_ms),
      device_("replay:" + (file_->device_name.empty() ? std::string("recorded") : file_->device_name)) {
  if (bound_->entries.empty())
    throw error("the recording " + file_->path + " has no configuration of the problem's space" +
                (bound_->first_unmatched.empty() ? std::string()
                                                 : " (first mismatch: " + bound_->first_unmatched + ")"));
  if (space.cartesian_size() <= 1e9) {
    const auto& vs = space.valid();
    std::size_t recorded = 0;
    for (const auto& [c, i] : bound_->entries)
      recorded += space.is_valid(c);
    unrecorded_valid_ = vs.size() - recorded;
  }
  // The recording's optimum within the space: the correct record with the lowest time.
  const trial* best = nullptr;
  const config* best_cfg = nullptr;
  for (const auto& [c, i] : bound_->entries) {
    const auto& t = file_->records[i].result;
    if (t.ok() && (!best || t.time_ms < best->time_ms) && space.is_valid(c)) {
      best = &t;
      best_cfg = &c;
    }
  }
  if (best) optimum_ = {{"time_ms", best->time_ms}, {"configuration", space.to_json(*best_cfg)}};
}

std::vector<trial> replay_evaluator::evaluate(std::span<const evaluation_request> batch) const {
  std::vector<trial> out;
  out.reserve(batch.size());
  for (const auto& r : batch) {
    if (latency_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(latency_ms_));
    const long i = bound_->find(r.cfg);
    trial t;
    if (i < 0) {
      t.st = status::invalid;
      t.error = "configuration not in the recording " + file_->path;
    } else {
      t = file_->records[static_cast<std::size_t>(i)].result;
    }
    t.sequence = r.sequence;
    t.cfg = r.cfg;
    t.batch = r.batch;
    t.device = device_;
    out.push_back(std::move(t));
  }
  return out;
}

nlohmann::json replay_evaluator::describe() const {
  nlohmann::json d = {{"type", "replay"},
                      {"file", file_->path},
                      {"format", file_->format},
                      {"device", file_->device_name},
                      {"kernel", file_->kernel_name},
                      {"records", file_->records.size()},
                      {"records_outside_space", bound_->unmatched},
                      {"valid_configurations_unrecorded", unrecorded_valid_},
                      {"parallelism", parallelism_},
                      {"latency_ms", latency_ms_}};
  if (!file_->problem_size.is_null()) d["problem_size"] = file_->problem_size;
  if (!optimum_.is_null()) d["recorded_optimum"] = optimum_;
  return d;
}

void register_replay_evaluator() {
  evaluator_registry().add({
      "replay",
      "replays a recorded space (Kernel Tuner cache, T4 or KTT output, optionally .gz) on a simulated clock",
      {
          required_option("file", option_type::string, "the recording to replay"),
          int_option("parallelism", 1, "configurations proposed per batch", 1, 4096),
          real_option("latency_ms", 0.0, "real time each evaluation takes (a sleep; 0: none)", 0, 60000),
      },
      [](const options& o, const evaluator_context& ctx) -> evaluator {
        const auto path = resolve_path(o.string("file"), ctx.base_dir);
        std::shared_ptr<const recorded_file> f;
        try {
          f = load_recorded_cached(path);
        } catch (const error& e) {
          o.fail("file", e.what());
        }
        try {
          return evaluator(replay_evaluator(
              f, ctx.prob.space, static_cast<std::size_t>(o.integer("parallelism")), o.real("latency_ms")));
        } catch (const config_error&) {
          throw;
        } catch (const error& e) {
          o.fail("file", e.what());
        }
      },
  });
}

}  // namespace kf
