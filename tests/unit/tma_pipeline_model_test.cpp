// A model of the mbarrier protocol of gemm_bf16's TMA path (experiments/kernels/gemm_bf16/gemm_bf16.cu,
// wgmma_tma = 1; README.md states the protocol), run under many random interleavings without a GPU. It
// checks the protocol, not the kernel's code: the agents below mirror the kernel's control flow step by
// step (the issuing thread's `produce`, each consumer warp's main loop), and the mbarriers, the TMA copies
// and the wgmma groups follow the PTX ISA's rules as the kernel relies on them:
//   - an mbarrier phase completes when its pending arrivals reach 0 and its transaction count is 0; then
//     the next phase starts with the init count; try_wait.parity(p) succeeds once the current phase's
//     parity differs from p (the phase of parity p, the current or the one before it, has completed);
//   - arrive.expect_tx adds the bytes to the transaction count and arrives; each copy's complete_tx
//     subtracts its bytes when its data has landed, at any later time;
//   - a committed wgmma group keeps reading its slot until it retires, at any later time, oldest first;
//     wait_group(n) blocks while more than n groups of the warp are in flight.
// Properties, for 2-5 stages, 1-12 k-tiles, 1-2 consumer warpgroups, with or without a producer
// warpgroup, 1-4 B panels: no deadlock; a consumer issues the MMAs of tile t only when every copy of
// tile t has landed in its slot; a copy into a slot is issued only when no warp will read the tile it
// replaces again; every tile is consumed by every warp exactly once, in order. Planted protocol errors
// (too small an empty count, the wrong empty parity, too few expected bytes, no wait before a refill)
// fail, so that the model is known to see them.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

struct mbarrier {
  int init = 1, pending = 1, phase = 0;  // phase: index of the current (incomplete) phase
  long long tx = 0;
  explicit mbarrier(int count) : init(count), pending(count) {}
  void maybe_complete() {
    if (pending == 0 && tx == 0) {
      ++phase;
      pending = init;
    }
  }
  void arrive() {
    --pending;
    maybe_complete();
  }
  void arrive_expect_tx(long long bytes) {
    tx += bytes;  // the expect-tx part comes first, then the arrival
    --pending;
    maybe_complete();
  }
  void complete_tx(long long bytes) {
    tx -= bytes;
    maybe_complete();
  }
  bool try_wait_parity(int parity) const { return (phase & 1) != parity; }
};

// A planted protocol error, to show that the model catches it.
enum class fault { none, empty_count_too_small, wrong_empty_parity, too_few_expected_bytes, no_release_wait };

struct config {
  int stages, k_tiles, warps, panels;
  bool producer_warpgroup;
  fault f = fault::none;
};

// One run under the interleaving that `seed` draws; an empty string when every property held.
std::string run(const config& c, std::uint64_t seed) {
  const int S = c.stages, T = c.k_tiles, P = S >= 3 ? 1 : 0;
  const long long a_bytes = 1000, b_bytes = 300;  // any positive sizes; the slot's sum is expected
  const long long slot_bytes = a_bytes + c.panels * b_bytes;
  std::vector<mbarrier> full(S, mbarrier(1));
  std::vector<mbarrier> empty(S, mbarrier(c.f == fault::empty_count_too_small ? c.warps / 2 : c.warps));
  // What each part of each slot holds (-1: nothing yet): part 0 is A, 1.. the B panels.
  std::vector<std::vector<int>> slot(S, std::vector<int>(1 + c.panels, -1));
  struct copy {
    int slot, part, tile;
    long long bytes;
  };
  std::vector<copy> copies_in_flight;
  struct warp_state {
    int kt = 0;                // next tile of the main loop
    int step = 0;              // 0 wait full, 1 wait_group, 2 release, 4 produce (warp 0), 3 done
    std::deque<int> inflight;  // committed wgmma groups (tiles), oldest first
    int prologue = 0;          // tiles issued by warp 0's thread 0 before the loop (no producer warpgroup)
    int consumed = 0;
    int issued = 0;  // tiles whose MMAs this warp has issued
  };
  std::vector<warp_state> w(c.warps);
  int produced = 0;  // the producer warpgroup's next tile
  std::mt19937_64 rng(seed);
  std::string failure;

  // `produce(t)`'s wait (true when it may go on) and its body.
  auto may_produce = [&](int t) {
    if (t < S || c.f == fault::no_release_wait) return true;
    return empty[t % S].try_wait_parity(((c.f == fault::wrong_empty_parity ? t / S : t / S - 1)) & 1);
  };
  auto produce = [&](int t) {
    const int s = t % S;
    // Nobody reads the tile this one replaces again: every warp is past it and has retired its MMAs.
    if (t >= S)
      for (int i = 0; i < c.warps; ++i) {
        if (w[i].issued <= t - S)
          failure =
              "tile " + std::to_string(t) + " overwrites a tile warp " + std::to_string(i) + " has not read";
        for (int g : w[i].inflight)
          if (g == t - S)
            failure =
                "tile " + std::to_string(t) + " overwrites a slot still read by warp " + std::to_string(i);
      }
    full[s].arrive_expect_tx(c.f == fault::too_few_expected_bytes ? slot_bytes - b_bytes : slot_bytes);
    copies_in_flight.push_back({s, 0, t, a_bytes});
    for (int p = 0; p < c.panels; ++p)
      copies_in_flight.push_back({s, 1 + p, t, b_bytes});
  };

  for (long long steps = 0; failure.empty(); ++steps) {
    if (steps > 1000000) return "no end after 10^6 steps";
    // Every agent that can move now: warps, the producer warpgroup, landing copies, retiring groups.
    std::vector<int>
        ready;  // 0..W-1 warps, W producer, W+1 a copy lands, W+2+i warp i's oldest group retires
    bool all_done = true;
    for (int i = 0; i < c.warps; ++i) {
      auto& x = w[i];
      if (x.step != 3 || !x.inflight.empty()) all_done = false;
      if (!x.inflight.empty()) ready.push_back(c.warps + 2 + i);
      if (x.step == 3) continue;
      const bool in_prologue = !c.producer_warpgroup && i == 0 && x.prologue < std::min(S, T);
      if (in_prologue) {
        if (may_produce(x.prologue)) ready.push_back(i);
        continue;
      }
      if (x.step == 0 && (x.kt >= T || full[x.kt % S].try_wait_parity((x.kt / S) & 1))) ready.push_back(i);
      if (x.step == 1 && static_cast<int>(x.inflight.size()) <= P) ready.push_back(i);
      if (x.step == 2) ready.push_back(i);
      if (x.step == 4) {
        const int t = x.kt - P + S;
        const bool issues = !c.producer_warpgroup && i == 0 && x.kt >= P && t < T;
        if (!issues || may_produce(t)) ready.push_back(i);
      }
    }
    if (c.producer_warpgroup && produced < T) {
      all_done = false;
      if (may_produce(produced)) ready.push_back(c.warps);
    }
    if (!copies_in_flight.empty()) {
      all_done = false;
      ready.push_back(c.warps + 1);
    }
    if (all_done) break;
    if (ready.empty()) {
      std::string st = "deadlock:";
      for (int i = 0; i < c.warps; ++i)
        st += " warp " + std::to_string(i) + " kt " + std::to_string(w[i].kt) + " step " +
              std::to_string(w[i].step) + " inflight " + std::to_string(w[i].inflight.size()) + ";";
      for (int s2 = 0; s2 < S; ++s2)
        st += " full[" + std::to_string(s2) + "] phase " + std::to_string(full[s2].phase) + " pending " +
              std::to_string(full[s2].pending) + " tx " + std::to_string(full[s2].tx) + ", empty phase " +
              std::to_string(empty[s2].phase) + " pending " + std::to_string(empty[s2].pending) + ";";
      return st;
    }
    const int who = ready[rng() % ready.size()];
    if (who == c.warps) {
      produce(produced++);
    } else if (who == c.warps + 1) {
      const auto k = rng() % copies_in_flight.size();
      const auto cp = copies_in_flight[k];
      copies_in_flight.erase(copies_in_flight.begin() + static_cast<long>(k));
      slot[cp.slot][cp.part] = cp.tile;
      full[cp.slot].complete_tx(cp.bytes);
    } else if (who >= c.warps + 2) {
      w[who - c.warps - 2].inflight.pop_front();
    } else {
      auto& x = w[who];
      if (!c.producer_warpgroup && who == 0 && x.prologue < std::min(S, T)) {
        produce(x.prologue++);
        continue;
      }
      if (x.step == 0) {
        if (x.kt >= T) {  // after the loop: wgmma.wait_group 0
          if (x.inflight.empty()) x.step = 3;
          continue;
        }
        for (int part : slot[x.kt % S])
          if (part != x.kt)
            return "warp " + std::to_string(who) + " reads tile " + std::to_string(x.kt) +
                   " before it landed";
        x.inflight.push_back(x.kt);  // MMAs issued and committed
        ++x.issued;
        x.step = 1;
      } else if (x.step == 1) {
        x.step = 2;  // wait_group P passed
      } else if (x.step == 2) {
        if (x.kt >= P) empty[(x.kt - P) % S].arrive();  // lane 0 of every consumer warp
        x.step = 4;
      } else {
        // Thread 0 (warp 0) refills the slot just released; its wait on `empty` is in may_produce.
        if (!c.producer_warpgroup && who == 0 && x.kt >= P && x.kt - P + S < T) produce(x.kt - P + S);
        ++x.consumed;
        ++x.kt;
        x.step = 0;
      }
    }
  }
  if (!failure.empty()) return failure;
  for (int i = 0; i < c.warps; ++i)
    if (w[i].consumed != T) return "warp " + std::to_string(i) + " consumed " + std::to_string(w[i].consumed);
  return {};
}

TEST(tma_pipeline_model, no_deadlock_no_early_read_no_early_overwrite_under_random_interleavings) {
  int runs = 0;
  for (int stages = 2; stages <= 5; ++stages)
    for (int k_tiles = 1; k_tiles <= 12; ++k_tiles)
      for (int warps : {4, 8})
        for (int panels : {1, 4})
          for (bool producer : {false, true})
            for (std::uint64_t seed = 1; seed <= 20; ++seed) {
              const config c{stages, k_tiles, warps, panels, producer};
              const auto why = run(c, seed * 7919 + static_cast<std::uint64_t>(stages * 100 + k_tiles));
              ASSERT_EQ(why, "") << "stages " << stages << ", k_tiles " << k_tiles << ", warps " << warps
                                 << ", panels " << panels << ", producer warpgroup " << producer << ", seed "
                                 << seed;
              ++runs;
            }
  EXPECT_EQ(runs, 4 * 12 * 2 * 2 * 2 * 20);
}

// The model is not vacuous: each planted protocol error fails some interleaving (an overwrite of a slot
// still to be read, a read before the data landed, or a deadlock).
TEST(tma_pipeline_model, planted_protocol_errors_are_caught) {
  for (auto f : {fault::empty_count_too_small, fault::wrong_empty_parity, fault::too_few_expected_bytes,
                 fault::no_release_wait}) {
    int caught = 0;
    for (std::uint64_t seed = 1; seed <= 200; ++seed)
      if (!run(config{3, 10, 8, 2, true, f}, seed).empty()) ++caught;
    EXPECT_GT(caught, 0) << "fault " << static_cast<int>(f) << " never caught";
  }
  // The parity rule itself: before phase 0 completes, parity 1 (the phase before) counts as complete.
  mbarrier b(1);
  EXPECT_TRUE(b.try_wait_parity(1));
  EXPECT_FALSE(b.try_wait_parity(0));
  b.arrive_expect_tx(16);
  EXPECT_FALSE(b.try_wait_parity(0));  // arrived, but the bytes have not come
  b.complete_tx(16);
  EXPECT_TRUE(b.try_wait_parity(0));
  EXPECT_FALSE(b.try_wait_parity(1));
}

}  // namespace
