// The program evaluator: variants of a program-level problem (problem: {program: ...}; a Triton program
// reached through a Python wrapper, include/kforge/program.hpp) measured by the program worker
// (python/kforge/triton/program_worker.py), Python processes per GPU driven by the same runner as
// kforge-worker (evaluators/runner): restarted when they die, hang or report a broken device.
//
// For each configuration the worker rewrites the program's source with the knobs' values (Triton source
// operators), imports it, calls the wrapper on every shape of the inputs (seeded, the same for the
// original program), compares every returned tensor and every tensor argument with the original's
// (outputs poisoned first), times the call with CUDA events (L2 flushed, median of adaptive repeats) and
// reads the kernels' own time from CUPTI activity records (torch.profiler).
//
// Options: see register_program_evaluator() or `kforge plugins`.
#pragma once

#include "kforge/evaluator.hpp"

namespace kf {

void register_program_evaluator();

}  // namespace kf
