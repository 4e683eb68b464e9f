#include "evaluators/mpi/coordinator.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <thread>

#include "kforge/error.hpp"
#include "kforge/kforge.hpp"
#include "kforge/run_folder.hpp"

namespace kf::mpi {

namespace {
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts)
    out += (out.empty() ? "" : sep) + p;
  return out;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

// Sleeps between polls that found nothing: 50 us at first, doubling up to 0.5 ms (an idle process wakes
// 2000 times a second, about 3% of a core here), so that a message waits at most half a millisecond. A
// blocking wait would need MPI's blocking calls, which cannot time out.
void idle_wait(double& us) {
  us = us <= 0 ? 50 : std::min(500.0, us * 2);
  std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
}
}  // namespace

coordinator::coordinator(channel& ch, coordinator_options o,
                         const std::function<std::optional<evaluator>()>& make_local)
    : ch_(ch), opt_(std::move(o)) {
  announce_start();
  if (make_local) {
    local_ = make_local();
    if (local_) {
      slot s;
      s.rank = 0;
      s.host = host_name();
      s.pid = static_cast<long>(::getpid());
      s.capacity = std::max<std::size_t>(1, local_->parallelism());
      s.evaluator = local_->describe();
      s.devices = device_names(s.evaluator);
      s.last_heard = clock_type::now();
      simulated_ = local_->simulated_clock();
      slots_.push_back(std::move(s));
    }
  }
  greet();
}

// Every rank waits for this before it builds its evaluator: the run folder (for its logs) and the
// heartbeat period.
void coordinator::announce_start() {
  const json start = {{"run_dir", opt_.run_dir.string()},
                      {"heartbeat_s", opt_.heartbeat_s},
                      {"rank_timeout_s", opt_.rank_timeout_s}};
  for (int r = 1; r < ch_.size(); ++r)
    ch_.send(r, tag::start, start.dump());
}

// Waits for every rank's greeting (its evaluator built, or why it could not be), then checks them.
void coordinator::greet() {
  std::map<int, json> hellos;
  const auto t0 = clock_type::now();
  const std::size_t expected = static_cast<std::size_t>(std::max(0, ch_.size() - 1));
  while (hellos.size() < expected && seconds_since(t0) < opt_.startup_timeout_s) {
    auto m = ch_.poll();
    if (!m) {
      idle_wait(idle_us_);
      continue;
    }
    idle_us_ = 0;
    if (m->kind == tag::hello) hellos[m->source] = parse_body(m->body, m->kind, m->source);
    // Anything else before every rank greeted (a greeted rank's heartbeats) says nothing new.
  }
  std::vector<int> silent;
  for (int r = 1; r < ch_.size(); ++r)
    if (!hellos.count(r)) silent.push_back(r);
  check_greetings(hellos, silent);
}

void coordinator::check_greetings(const std::map<int, json>& hellos, const std::vector<int>& silent) {
  std::vector<std::string> problems;
  for (int r : silent)
    problems.push_back("rank " + std::to_string(r) + " did not greet within " +
                       format_seconds(opt_.startup_timeout_s) + " s");
  for (const auto& [r, h] : hellos) {
    const std::string who = "rank " + std::to_string(r) + " (" + h.value("host", "?") + ")";
    if (h.contains("error")) {
      problems.push_back(who + " cannot start its evaluator: " + h["error"].get<std::string>());
      continue;
    }
    if (h.value("version", "") != std::string(version())) {
      problems.push_back(who + " runs kforge " + h.value("version", "?") + ", rank 0 runs " +
                         std::string(version()));
      continue;
    }
    if (auto diff = fingerprint_difference(opt_.fingerprint, h.value("fingerprint", json())); !diff.empty()) {
      // fingerprint_difference() speaks of a stored run and this one: here they are rank 0's and rank r's.
      for (const auto& [from, to] : {std::pair<std::string, std::string>{"(stored ", "(rank 0's "},
                                     {", now ", ", rank " + std::to_string(r) + "'s "}})
        for (auto at = diff.find(from); at != std::string::npos; at = diff.find(from, at + to.size()))
          diff.replace(at, from.size(), to);
      problems.push_back(who + " runs another experiment than rank 0: " + diff +
                         " (every rank must read the same config, recordings and kernel files)");
      continue;
    }
    slot s;
    s.rank = r;
    s.host = h.value("host", "?");
    s.pid = h.value("pid", 0L);
    s.capacity = std::max<std::size_t>(1, h.value("parallelism", std::size_t{1}));
    s.evaluator = h.value("evaluator", json::object());
    s.devices = h.value("devices", std::vector<std::string>{});
    s.last_heard = clock_type::now();
    const bool sim = h.value("simulated_clock", false);
    if (slots_.empty()) simulated_ = sim;
    if (sim != simulated_) {
      problems.push_back(who + "'s evaluator " + (sim ? "has" : "has no") + " simulated clock, unlike " +
                         name(slots_.front()) + "'s");
      continue;
    }
    by_rank_[r] = slots_.size();
    slots_.push_back(std::move(s));
  }
  if (!problems.empty()) throw error("cannot start the distributed run: " + join(problems, "; "));
  if (slots_.empty())
    throw error(
        "cannot start the distributed run: no rank evaluates (start more than one process, or give rank 0 "
        "its "
        "own evaluator with --rank0-evaluates)");
  check_devices();
}

// Trials measured on different GPU models are not comparable: refused unless asked for.
void coordinator::check_devices() const {
  std::set<std::string> all;
  std::vector<std::string> per_rank;
  for (const auto& s : slots_) {
    all.insert(s.devices.begin(), s.devices.end());
    per_rank.push_back(name(s) + ": " + (s.devices.empty() ? std::string("?") : join(s.devices, ", ")));
  }
  if (all.size() > 1 && !opt_.allow_mixed_devices)
    throw config_error("command line", "--allow-mixed-gpus",
                       "the ranks' devices differ (" + join(per_rank, "; ") +
                           "): their trials would not be comparable; pass --allow-mixed-gpus to run anyway");
}

void coordinator::submit(std::vector<evaluation_request> requests) {
  if (requests.empty()) return;
  if (simulated_) {
    submissions_.push_back({requests.size(), {}});
    for (const auto& r : requests)
      submission_of_[r.sequence] = submissions_total_;
    ++submissions_total_;
  }
  for (auto& r : requests) {
    queue_.push_back(r.sequence);
    requests_.emplace(r.sequence, std::move(r));
  }
  dispatch();
}

std::vector<trial> coordinator::collect(bool wait) {
  while (true) {
    const bool progressed = pump();
    check_silence();
    dispatch();
    auto out = take_ready();
    if (!out.empty() || !wait || in_flight() == 0) return out;
    if (progressed)
      idle_us_ = 0;
    else
      idle_wait(idle_us_);
  }
}

std::size_t coordinator::in_flight() const {
  return requests_.size() + held_ + ready_.size();
}

std::size_t coordinator::parallelism() const {
  std::size_t n = 0;
  for (const auto& s : slots_)
    if (s.lost.empty()) n += s.capacity;
  return std::max<std::size_t>(1, n);
}

json coordinator::describe() const {
  json d = slots_.empty() ? json::object() : slots_.front().evaluator;
  if (!d.is_object()) d = json::object();
  std::set<std::string> devices;
  json ranks = json::array();
  for (const auto& s : slots_) {
    devices.insert(s.devices.begin(), s.devices.end());
    ranks.push_back({{"rank", s.rank},
                     {"host", s.host},
                     {"pid", s.pid},
                     {"devices", s.devices},
                     {"parallelism", s.capacity},
                     {"trials", s.trials},
                     {"in_flight", s.assigned.size()},
                     {"lost", s.lost.empty() ? json(nullptr) : json(s.lost)},
                     {"evaluator", s.evaluator}});
  }
  if (devices.size() > 1) d["device"] = "mixed: " + join({devices.begin(), devices.end()}, ", ");
  d["distributed"] = {{"transport", "mpi"},
                      {"ranks", std::move(ranks)},
                      {"processes", ch_.size()},
                      {"rank_timeout_s", opt_.rank_timeout_s},
                      {"heartbeat_s", opt_.heartbeat_s},
                      {"whole_submissions", simulated_},
                      {"reissued", reissued_},
                      {"late_messages", late_}};
  return d;
}

// Takes in whatever has arrived: messages from the ranks, and rank 0's own evaluator's trials. Returns
// whether anything did.
bool coordinator::pump() {
  bool any = false;
  while (auto m = ch_.poll()) {
    handle(*m);
    any = true;
  }
  if (local_ && slots_.front().lost.empty() && !slots_.front().assigned.empty()) {
    std::vector<trial> done;
    try {
      done = local_->collect(false);
    } catch (const std::exception& e) {
      lose(0, std::string("its evaluator broke: ") + e.what());
      return true;
    }
    for (auto& t : done) {
      t.device = slots_.front().host + ":" + t.device;
      accept(0, std::move(t));
      any = true;
    }
  }
  return any;
}

void coordinator::handle(const message& m) {
  const auto it = by_rank_.find(m.source);
  if (it == by_rank_.end() || !slots_[it->second].lost.empty()) {
    ++late_;  // a lost rank that spoke again, or a rank that never joined: its work went elsewhere
    return;
  }
  const std::size_t s = it->second;
  slots_[s].last_heard = clock_type::now();
  switch (m.kind) {
    case tag::trials: {
      const auto body = parse_body(m.body, m.kind, m.source);
      if (!body.contains("trials") || !body["trials"].is_array())
        throw error("a trials message from rank " + std::to_string(m.source) + " without \"trials\"");
      for (const auto& j : body["trials"])
        accept(s, trial_from_json(j));
      break;
    }
    case tag::heartbeat: {
      const auto body = parse_body(m.body, m.kind, m.source);
      if (body.contains("evaluator")) {
        slots_[s].evaluator = body["evaluator"];
        slots_[s].devices = device_names(slots_[s].evaluator);
      }
      break;
    }
    case tag::failed: {
      const auto body = parse_body(m.body, m.kind, m.source);
      lose(s, "its evaluator broke: " + body.value("error", std::string("?")));
      break;
    }
    default:
      break;  // a second hello, a bye: nothing to do
  }
}

// A trial from slot `s`: kept when that slot owns its request (a re-issued request answered by the rank
// it was first sent to is a stale answer, dropped).
void coordinator::accept(std::size_t s, trial t) {
  const auto own = owner_.find(t.sequence);
  if (own == owner_.end() || own->second != s) {
    ++late_;
    return;
  }
  const auto req = requests_.find(t.sequence);
  if (t.cfg != req->second.cfg)
    throw error("rank " + std::to_string(slots_[s].rank) + " returned trial " + std::to_string(t.sequence) +
                " with another configuration");
  owner_.erase(own);
  slots_[s].assigned.erase(t.sequence);
  ++slots_[s].trials;
  requests_.erase(req);
  if (!simulated_) {
    ready_.push_back(std::move(t));
    return;
  }
  const auto sub = submission_of_.find(t.sequence);
  submissions_[sub->second - submissions_done_].done.push_back(std::move(t));
  submission_of_.erase(sub);
  ++held_;
}

void coordinator::check_silence() {
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    const auto& sl = slots_[s];
    if (sl.rank == 0 || !sl.lost.empty()) continue;
    const double quiet = seconds_since(sl.last_heard);
    if (quiet > opt_.rank_timeout_s)
      lose(s, "silent for " + format_seconds(quiet) + " s (rank timeout " +
                  format_seconds(opt_.rank_timeout_s) + " s)");
  }
}

// Slot `s` serves no more: its requests in flight go back to the head of the queue, in sequence order,
// for the other ranks.
void coordinator::lose(std::size_t s, const std::string& why) {
  slot& sl = slots_[s];
  sl.lost = why;
  const std::vector<std::uint64_t> back(sl.assigned.begin(), sl.assigned.end());
  for (auto it = back.rbegin(); it != back.rend(); ++it) {
    owner_.erase(*it);
    queue_.push_front(*it);
  }
  reissued_ += back.size();
  sl.assigned.clear();
  if (opt_.lost && sl.rank != 0) opt_.lost->insert(sl.rank);
  if (opt_.log)
    *opt_.log << "kforge: " << name(sl) << " is lost: " << why << "; " << back.size()
              << " variant(s) in flight there go to the other ranks\n";
  if (live_slots() == 0) {
    std::vector<std::string> why_each;
    for (const auto& x : slots_)
      why_each.push_back(name(x) + ": " + x.lost);
    throw error(
        "every rank is lost (" + join(why_each, "; ") +
        "); the run store holds every trial committed so far: `kforge run --resume` continues the run");
  }
}

// Sends queued requests to the live slots with room: one at a time to the slot with the most room (the
// first such slot on ties), then one work message per slot. A rank's room is its capacity plus one: the
// extra request waits on the rank, so that its evaluator starts the next one without a round trip to
// rank 0 (about 1 to 4 ms of polling); rank 0's own evaluator takes its capacity.
void coordinator::dispatch() {
  if (queue_.empty()) return;
  std::map<std::size_t, std::vector<evaluation_request>> out;
  while (!queue_.empty()) {
    std::size_t best = slots_.size();
    std::size_t best_free = 0;
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      const auto& sl = slots_[s];
      const std::size_t room = sl.capacity + (sl.rank == 0 ? 0 : 1);
      if (!sl.lost.empty() || sl.assigned.size() >= room) continue;
      const std::size_t free = room - sl.assigned.size();
      if (free > best_free) best = s, best_free = free;
    }
    if (best == slots_.size()) break;
    const auto seq = queue_.front();
    queue_.pop_front();
    slots_[best].assigned.insert(seq);
    owner_[seq] = best;
    out[best].push_back(requests_.at(seq));
  }
  // The other ranks first: rank 0's own evaluator may evaluate synchronously, in submit().
  for (auto& [s, reqs] : out) {
    if (slots_[s].rank == 0) continue;
    json list = json::array();
    for (const auto& r : reqs)
      list.push_back(to_json(r));
    ch_.send(slots_[s].rank, tag::work, json{{"requests", std::move(list)}}.dump());
  }
  if (auto it = out.find(0); it != out.end() && local_ && slots_.front().rank == 0) {
    try {
      local_->submit(std::move(it->second));
    } catch (const std::exception& e) {
      lose(0, std::string("its evaluator broke: ") + e.what());
    }
  }
}

std::vector<trial> coordinator::take_ready() {
  std::vector<trial> out;
  if (!simulated_) {
    out.swap(ready_);
    return out;
  }
  while (!submissions_.empty() && submissions_.front().done.size() == submissions_.front().expected) {
    auto& done = submissions_.front().done;
    held_ -= done.size();
    std::sort(done.begin(), done.end(),
              [](const trial& a, const trial& b) { return a.sequence < b.sequence; });
    for (auto& t : done)
      out.push_back(std::move(t));
    submissions_.pop_front();
    ++submissions_done_;
  }
  return out;
}

std::size_t coordinator::live_slots() const {
  return static_cast<std::size_t>(
      std::count_if(slots_.begin(), slots_.end(), [](const slot& s) { return s.lost.empty(); }));
}

std::string coordinator::name(const slot& s) const {
  return (s.rank == 0 ? std::string("rank 0's own evaluator") : "rank " + std::to_string(s.rank)) + " (" +
         s.host + ")";
}

}  // namespace kf::mpi
