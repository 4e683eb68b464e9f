// kforge-worker: one process per GPU, driven by the cuda evaluator over stdin/stdout (one JSON message
// per line, evaluators/cuda/protocol.hpp, carried by evaluators/runner). It owns the device's primary
// context; after a fatal response (a fault or a hung kernel) it exits at once, and the driver starts a new
// worker.
//
//   kforge-worker --device N --cache DIR      serve requests on GPU N
//   kforge-worker --compile FILE --cache DIR  compile the request in FILE (JSON) with NVRTC into the
//                                             compile cache DIR and exit (no GPU: compile_pool's child)
//   kforge-worker --fake [--fake-ms T] [--fake-die-after K]
//                                             no GPU: answer every request after T ms (tests of the
//                                             driver); a function named *crash* aborts the process,
//                                             *hang* never answers, *fatal* answers crashed + fatal;
//                                             with K, the process dies unannounced on its (K+1)-th
//                                             request (a worker lost mid-run, for scheduler tests);
//                                             the GPU's name is "fake", or $KFORGE_FAKE_GPU_NAME
//                                             (mixed GPU models across MPI ranks, tests/mpi).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "evaluators/cuda/nvrtc/compile_cache.hpp"
#include "evaluators/cuda/protocol.hpp"
#include "evaluators/cuda/worker/driver_api.hpp"
#include "evaluators/cuda/worker/gpu_worker.hpp"
#include "kforge/error.hpp"

namespace {

void send(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

int serve_fake(double fake_ms, long die_after) {
  std::string line;
  long served = 0;
  while (std::getline(std::cin, line)) {
    const auto j = nlohmann::json::parse(line);
    const auto op = j.value("op", "");
    if (op == "exit") return 0;
    if (op == "hello") {
      kf::gpu::worker_info w;
      const char* name = std::getenv("KFORGE_FAKE_GPU_NAME");
      w.name = name && *name ? name : "fake";
      w.cc_major = 9;
      w.sm_count = 132;
      w.l2_bytes = 60u << 20;
      w.profiling_note = "fake worker";
      send(kf::gpu::to_json(w));
      continue;
    }
    const auto req = kf::gpu::request_from_json(j);
    if (die_after >= 0 && served++ >= die_after) std::_Exit(1);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(fake_ms));
    if (req.candidate.function.find("crash") != std::string::npos) std::abort();
    if (req.candidate.function.find("hang") != std::string::npos)
      std::this_thread::sleep_for(std::chrono::hours(1));
    kf::gpu::evaluate_response r;
    r.id = req.id;
    if (req.candidate.function.find("fatal") != std::string::npos) {
      r.st = kf::status::crashed;
      r.error = "fake fault";
      r.fatal = true;
      send(kf::gpu::to_json(r));
      std::_Exit(0);
    }
    // A deterministic fake time from the module path, so that searches on fake workers make sense.
    double t = 1.0;
    for (char c : req.candidate.path)
      t = std::fmod(t * 31 + static_cast<unsigned char>(c), 997.0);
    r.times_ms = {t / 100 + 0.01, t / 100 + 0.011, t / 100 + 0.012};
    r.sm_clock_mhz = 1980;
    r.benchmark_s = fake_ms / 1e3;
    send(kf::gpu::to_json(r));
  }
  return 0;
}

// --compile: the request compiled into the cache (the parent reads the result from there, and compiles
// in its own process when there is none). 1 when the request could not be read or NVRTC not used.
int compile_request_file(const std::string& file, const std::string& cache) {
  try {
    if (cache.empty()) throw kf::error("--compile needs --cache DIR");
    std::ifstream in(file, std::ios::binary);
    const auto request = kf::cuda::detail::request_from_json(nlohmann::json::parse(in));
    const kf::compiler c(cache);
    (void)c.compile(request);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "kforge-worker --compile: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  std::string cache;
  bool fake = false;
  double fake_ms = 5;
  long die_after = -1;
  std::string compile_file;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc)
      device = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--cache") && i + 1 < argc)
      cache = argv[++i];
    else if (!std::strcmp(argv[i], "--compile") && i + 1 < argc)
      compile_file = argv[++i];
    else if (!std::strcmp(argv[i], "--fake"))
      fake = true;
    else if (!std::strcmp(argv[i], "--count")) {
      // The number of visible devices (the driver cannot ask without loading libcuda itself).
      try {
        const auto& d = kf::cuda::driver();
        int n = 0;
        kf::cuda::check(d.cuInit_(0), "cuInit");
        kf::cuda::check(d.cuDeviceGetCount_(&n), "cuDeviceGetCount");
        std::cout << n << "\n";
        return 0;
      } catch (const std::exception& e) {
        std::cout << "0\n";
        std::cerr << e.what() << "\n";
        return 3;
      }
    } else if (!std::strcmp(argv[i], "--fake-ms") && i + 1 < argc)
      fake_ms = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--fake-die-after") && i + 1 < argc)
      die_after = std::atol(argv[++i]);
    else {
      std::cerr << "kforge-worker: unknown argument " << argv[i] << "\n";
      return 2;
    }
  }
  if (!compile_file.empty()) return compile_request_file(compile_file, cache);
  if (fake) return serve_fake(fake_ms, die_after);
  // Modules load eagerly, so that module loading never falls inside a timed region.
  ::setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  std::unique_ptr<kf::cuda::gpu_worker> worker;
  try {
    worker = std::make_unique<kf::cuda::gpu_worker>(device, cache);
  } catch (const std::exception& e) {
    send({{"op", "hello"}, {"error", e.what()}});
    return 3;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      std::cerr << "kforge-worker: bad message: " << e.what() << "\n";
      return 2;
    }
    const auto op = j.value("op", "");
    if (op == "exit") break;
    if (op == "hello") {
      send(kf::gpu::to_json(worker->info()));
      continue;
    }
    if (op != "evaluate") {
      std::cerr << "kforge-worker: unknown op " << op << "\n";
      return 2;
    }
    kf::gpu::evaluate_response r;
    try {
      r = worker->evaluate(kf::gpu::request_from_json(j));
    } catch (const std::exception& e) {
      r.id = j.value("id", 0ull);
      r.st = kf::status::crashed;
      r.error = std::string("worker error: ") + e.what();
      r.fatal = true;
    }
    send(kf::gpu::to_json(r));
    if (r.fatal) std::_Exit(0);  // the context is unusable; skip destructors that would touch it
  }
  worker.reset();
  return 0;
}
