// The cuda evaluator: variants of a kforge kernel description compiled with NVRTC (a bounded pool, an
// on-disk cache) and evaluated on GPUs by worker processes (kforge-worker), one or more per device, fed
// from one queue.
//
// For each configuration: resolve the launches (an impossible launch is an invalid trial), render the
// source, compile (a compiler error is compile_failed with the log; a variant that cannot launch by its
// static resources is invalid), then on a worker: check every check shape against the reference (fresh
// seeded inputs, poisoned outputs; wrong_result on any mismatch or NaN), time the time shapes (warm-up,
// L2 flushed before every launch, median of adaptively many repeats), profile with CUPTI. A worker that
// faults, hangs past its watchdog or dies is restarted, and its trial is crashed or timeout.
//
// Options: see register_cuda_evaluator() or `kforge plugins`.
#pragma once

#include <filesystem>
#include <string>

#include "kforge/evaluator.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/kernel.hpp"

namespace kf {

void register_cuda_evaluator();

/// The default 1-pass metric set on Hopper (cupti-nvrtc.md): DRAM throughput and bytes, SM clock,
/// achieved occupancy, instructions, L1 hit rate, L2 lookups, tensor pipe.
const std::vector<std::string>& default_metrics();
/// A deeper set for the best variants (several passes).
const std::vector<std::string>& deep_metrics();

/// The cuda evaluator's default compile cache (its option `cache_dir` overrides it): $KFORGE_CACHE, else
/// $XDG_CACHE_HOME/kforge, else ~/.cache/kforge, else kforge-cache in the temporary folder. NVRTC's results
/// are kept under <it>/nvrtc.
std::filesystem::path cuda_cache_dir();

/// The NVRTC request the cuda evaluator makes for a rendered variant `v` of `k` whose source is `file`:
/// v's source, options and entry, -I for each of the kernel's include folders, every header the source
/// includes passed by content, the architecture k.arch or else `arch`. Compiled by a kf::compiler whose
/// cache is <cache_dir>/nvrtc, it is a cache hit on the CUBIN a search with that cache ran (same key), so
/// `kforge render` hands out exactly the binary that was timed.
compile_request variant_compile_request(const kernel_spec& k, rendered_variant v, const std::string& file,
                                        const std::string& arch);

}  // namespace kf
