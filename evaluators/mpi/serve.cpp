#include "evaluators/mpi/serve.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <ostream>
#include <thread>

#include "kforge/error.hpp"
#include "kforge/experiment.hpp"
#include "kforge/kforge.hpp"

namespace kf::mpi {

namespace {
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

class server {
 public:
  server(channel& ch, const experiment_spec& spec, const serve_options& o)
      : ch_(ch), spec_(spec), opt_(o), host_(o.host.empty() ? host_name() : o.host) {}

  int run() {
    if (!wait_for_start()) return finish(0);  // rank 0 stopped before the run started
    if (!start_evaluator()) {
      wait_for_stop();
      return finish(1);
    }
    while (!stopping_) {
      bool busy = receive();
      if (stopping_) break;
      busy |= feed_one();
      busy |= send_finished();
      heartbeat();
      if (busy)
        idle_us_ = 0;
      else
        idle_wait();
    }
    return finish(broken_ ? 1 : 0);
  }

 private:
  // The start message: the run folder and the heartbeat period. False when rank 0 says stop first.
  bool wait_for_start() {
    while (true) {
      auto m = ch_.poll();
      if (!m) {
        idle_wait();
        continue;
      }
      if (m->source != 0) continue;
      if (m->kind == tag::stop) return false;
      if (m->kind != tag::start) continue;
      const auto body = parse_body(m->body, m->kind, m->source);
      heartbeat_s_ = body.value("heartbeat_s", 1.0);
      rank_timeout_s_ = body.value("rank_timeout_s", rank_timeout_s_);
      const std::filesystem::path run_dir = body.value("run_dir", std::string());
      if (!run_dir.empty())
        rank_dir_ = run_dir / "ranks" / ("rank" + std::to_string(ch_.rank()) + "-" + host_);
      return true;
    }
  }

  void wait_for_stop() {
    while (!stopping_) {
      if (!receive()) idle_wait();
    }
  }

  // Goodbye (the evaluator stopped: what was in flight is dropped), then rank 0's end: whether to take
  // part in MPI_Finalize. Rank 0 sends it once every rank said goodbye or was given up, within a rank
  // timeout; a rank that hears nothing for twice that does not finalise.
  int finish(int status) {
    ch_.send(0, tag::bye, "{}");
    eval_.reset();
    bool finalize = false;
    const auto t0 = clock_type::now();
    while (std::chrono::duration<double>(clock_type::now() - t0).count() < 2 * rank_timeout_s_ + 10) {
      auto m = ch_.poll();
      if (!m) {
        idle_wait();
        continue;
      }
      if (m->source == 0 && m->kind == tag::end) {
        finalize = parse_body(m->body, m->kind, m->source).value("finalize", false);
        break;
      }
    }
    if (opt_.finalize) *opt_.finalize = finalize;
    return status;
  }

  // Builds this rank's evaluator from the experiment's config and greets rank 0 with its description, or
  // with why it could not be built.
  bool start_evaluator() {
    json hello = {{"rank", ch_.rank()}, {"host", host_}, {"pid", static_cast<long>(::getpid())}};
    try {
      const evaluator_context ctx{spec_.prob, spec_.base_dir, rank_dir_};
      eval_.emplace(opt_.make_evaluator ? opt_.make_evaluator(ctx)
                                        : evaluator_registry().create(spec_.evaluator, ctx));
    } catch (const std::exception& e) {
      hello["error"] = e.what();
      ch_.send(0, tag::hello, hello.dump());
      if (opt_.log) *opt_.log << "kforge: rank " << ch_.rank() << " (" << host_ << "): " << e.what() << "\n";
      return false;
    }
    capacity_ = std::max<std::size_t>(1, eval_->parallelism());
    const json d = eval_->describe();
    last_description_ = d.dump();
    hello.update({{"version", std::string(version())},
                  {"fingerprint", experiment_fingerprint(spec_)},
                  {"evaluator", d},
                  {"devices", device_names(d)},
                  {"parallelism", capacity_},
                  {"simulated_clock", eval_->simulated_clock()}});
    ch_.send(0, tag::hello, hello.dump());
    last_beat_ = clock_type::now();
    return true;
  }

  // Work and stop from rank 0. Returns whether anything came.
  bool receive() {
    bool any = false;
    while (auto m = ch_.poll()) {
      any = true;
      if (m->source != 0) continue;
      if (m->kind == tag::stop) {
        stopping_ = true;
        return true;
      }
      if (m->kind != tag::work || broken_) continue;
      const auto body = parse_body(m->body, m->kind, m->source);
      if (!body.contains("requests") || !body["requests"].is_array())
        throw error("a work message from rank 0 without \"requests\"");
      for (const auto& r : body["requests"])
        pending_.push_back(request_from_json(r));
    }
    return any;
  }

  // One request to the evaluator when it has room: a synchronous evaluator evaluates it here, so the
  // loop sends its trial and a heartbeat before the next.
  bool feed_one() {
    if (broken_ || pending_.empty() || eval_->in_flight() >= capacity_) return false;
    std::vector<evaluation_request> one{std::move(pending_.front())};
    pending_.pop_front();
    try {
      eval_->submit(std::move(one));
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return true;
  }

  bool send_finished() {
    if (broken_) return false;
    std::vector<trial> done;
    try {
      done = eval_->collect(false);
    } catch (const std::exception& e) {
      fail(e.what());
      return true;
    }
    if (done.empty()) return false;
    json list = json::array();
    for (auto& t : done) {
      t.device = host_ + ":" + t.device;
      list.push_back(to_json(t));
    }
    ch_.send(0, tag::trials, json{{"trials", std::move(list)}}.dump());
    last_beat_ = clock_type::now();  // any message is a sign of life
    return true;
  }

  // Every heartbeat_s: alive, with the evaluator's description when it changed (worker restarts).
  void heartbeat() {
    if (std::chrono::duration<double>(clock_type::now() - last_beat_).count() < heartbeat_s_) return;
    json beat = {{"in_flight", pending_.size() + (broken_ ? 0 : eval_->in_flight())}};
    if (!broken_) {
      auto d = eval_->describe();
      auto text = d.dump();
      if (text != last_description_) {
        beat["evaluator"] = std::move(d);
        last_description_ = std::move(text);
      }
    }
    ch_.send(0, tag::heartbeat, beat.dump());
    last_beat_ = clock_type::now();
  }

  // This rank's evaluator broke: rank 0 is told (it re-issues what was here) and the rank waits for stop.
  void fail(const std::string& why) {
    broken_ = true;
    pending_.clear();
    ch_.send(0, tag::failed, json{{"error", why}}.dump());
    if (opt_.log)
      *opt_.log << "kforge: rank " << ch_.rank() << " (" << host_ << "): evaluator broke: " << why << "\n";
  }

  // 50 us at first, doubling up to 0.5 ms while nothing happens (as the coordinator's).
  void idle_wait() {
    idle_us_ = idle_us_ <= 0 ? 50 : std::min(500.0, idle_us_ * 2);
    std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(idle_us_));
  }

  channel& ch_;
  const experiment_spec& spec_;
  const serve_options& opt_;
  const std::string host_;
  std::filesystem::path rank_dir_;
  double heartbeat_s_ = 1;
  double rank_timeout_s_ = 60;
  std::optional<evaluator> eval_;
  std::size_t capacity_ = 1;
  std::deque<evaluation_request> pending_;
  std::string last_description_;
  clock_type::time_point last_beat_ = clock_type::now();
  bool stopping_ = false;
  bool broken_ = false;
  double idle_us_ = 0;
};
}  // namespace

int serve(channel& ch, const experiment_spec& spec, const serve_options& o) {
  return server(ch, spec, o).run();
}

}  // namespace kf::mpi
