// A kforge plug-in: a strategy (a seeded walk over neighbours of the best so far) and an evaluator (a
// synthetic cost, no GPU), both plain structs held by value. Build against the installed package
// (CMakeLists.txt beside this file), then: kforge run config.yaml --plugin build/example_plugin.so
#include <algorithm>
#include <kforge/plugin.hpp>
#include <kforge/problem.hpp>
#include <kforge/strategies/common.hpp>

struct example_walk {
  std::size_t restarts;  // an option: random proposals before the walk starts
  kf::rng rng{0};
  void initialize(const kf::search_space&, std::uint64_t seed) { rng.reseed(seed); }
  std::vector<kf::config> propose(const kf::search_state& s, std::size_t n) {
    std::vector<kf::config> out;
    const kf::trial* best = s.history().best();
    if (best && s.history().size() >= restarts)
      for (auto& c : s.space().neighbours(best->cfg, kf::neighbourhood::strictly_adjacent))
        if (out.size() < n && !s.seen(c) && std::find(out.begin(), out.end(), c) == out.end())
          out.push_back(std::move(c));
    while (out.size() < n) {  // no unseen neighbour left: a random unseen configuration
      auto c = kf::strategies::draw_unseen(s, rng, out);
      if (!c) break;
      out.push_back(std::move(*c));
    }
    return out;
  }
  void observe(const kf::search_state&, std::span<const kf::trial>) {}
};

// Time = 1 ms + the squared distance of the encoded configuration from 0.3 in every coordinate.
struct example_synthetic {
  kf::search_space space;
  std::vector<kf::trial> evaluate(std::span<const kf::evaluation_request> batch) const {
    std::vector<kf::trial> out;
    for (const auto& r : batch) {
      kf::trial t{.sequence = r.sequence, .cfg = r.cfg, .st = kf::status::ok};
      t.time_ms = 1;
      for (double x : space.encode(r.cfg))
        t.time_ms += (x - 0.3) * (x - 0.3);
      t.cost.benchmark = t.time_ms / 1000;
      out.push_back(std::move(t));
    }
    return out;
  }
  bool simulated_clock() const { return true; }
};

KFORGE_PLUGIN(host) {
  auto walk = [](const kf::options& o) {
    return kf::strategy(example_walk{static_cast<std::size_t>(o.integer("restarts"))}, "example_walk");
  };
  auto synthetic = [](const kf::options&, const kf::evaluator_context& ctx) {
    return kf::evaluator(example_synthetic{ctx.prob.space});
  };
  kf::option_spec restarts = kf::int_option("restarts", 4, "random proposals before the walk starts", 1);
  host.strategies().add({"example_walk", "a seeded walk over neighbours of the best", {restarts}, walk});
  host.evaluators().add({"example_synthetic", "a synthetic cost (no GPU)", {}, synthetic});
}
