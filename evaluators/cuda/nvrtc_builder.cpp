// The NVRTC builder: CUDA C++ variants of a kernel description compiled in a bounded pool with a disk
// cache, their static metrics read from the CUBIN, and the occupancy filter. See builder.hpp.
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "evaluators/cuda/builder.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/cuda.hpp"

namespace kf {

namespace {

// A build waiting for its compilation: the id, the launches, the cost so far.
struct pending_build {
  std::uint64_t id = 0;
  std::vector<gpu::shape_job> shapes;
};

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::vector<gpu::shape_job> launch_jobs(const kernel_spec& k, const config& c, std::uint64_t seed) {
  std::vector<gpu::shape_job> out;
  const bool checked = k.reference.k != reference_spec::kind::none;
  auto add = [&](const shape& s, bool time) {
    const auto plan = resolve_launch(k, c, s);
    gpu::shape_job j;
    j.args = plan.args;
    j.candidate = {plan.grid, plan.block, plan.shared_bytes};
    if (checked) {
      const auto ref_plan = resolve_launch(k, k.defaults, s);
      j.reference = gpu::launch_geometry{ref_plan.grid, ref_plan.block, ref_plan.shared_bytes};
    }
    j.check = checked;
    j.time = time;
    j.seed = seed * 131 + out.size();
    out.push_back(std::move(j));
  };
  for (const auto& s : k.check_shapes)
    add(s, false);
  for (const auto& s : k.time_shapes)
    add(s, true);
  return out;
}

compile_request variant_compile_request(const kernel_spec& k, rendered_variant v, const std::string& file,
                                        const std::string& arch) {
  compile_request cr;
  cr.name = std::filesystem::path(file).filename().string();
  cr.options = std::move(v.options);
  for (const auto& d : k.include_dirs)
    cr.options.push_back("-I" + d.string());
  cr.name_expressions = {v.entry};
  cr.arch = k.arch.empty() ? arch : k.arch;
  cr.headers = collect_headers(v.source, std::filesystem::path(file).parent_path(), k.include_dirs);
  cr.source = std::move(v.source);
  return cr;
}

std::map<std::string, std::string> collect_headers(const std::string& source,
                                                   const std::filesystem::path& source_dir,
                                                   const std::vector<std::filesystem::path>& include_dirs) {
  static const std::regex include_line(R"(^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"])");
  std::map<std::string, std::string> found;
  // Depth-first over the include graph; a file is read once per include name.
  std::function<void(const std::string&, const std::filesystem::path&, int)> scan =
      [&](const std::string& text, const std::filesystem::path& dir, int depth) {
        if (depth > 64) return;  // an include cycle guarded by #pragma once or include guards
        std::istringstream lines(text);
        for (std::string line; std::getline(lines, line);) {
          std::smatch m;
          if (!std::regex_search(line, m, include_line)) continue;
          const std::string name = m[2].str();
          if (found.count(name)) continue;
          std::vector<std::filesystem::path> where;
          if (m[1].str() == "\"") where.push_back(dir);
          where.insert(where.end(), include_dirs.begin(), include_dirs.end());
          for (const auto& d : where) {
            const auto p = d / name;
            std::error_code ec;
            if (!std::filesystem::is_regular_file(p, ec)) continue;
            found.emplace(name, file_text(p));
            scan(found[name], p.parent_path(), depth + 1);
            break;
          }
        }
      };
  scan(source, source_dir, 0);
  return found;
}

namespace {

class nvrtc_builder final : public builder {
 public:
  nvrtc_builder(std::shared_ptr<const kernel_spec> spec, nvrtc_builder_options o, const device_limits& limits)
      : spec_(std::move(spec)), opt_(std::move(o)), limits_(limits) {
    std::filesystem::create_directories(opt_.cache_dir / "cubin");
    compiler_ = std::make_unique<compiler>(opt_.cache_dir / "nvrtc");
    opt_.threads = std::max<std::size_t>(1, opt_.threads);
    pool_ = std::make_unique<compile_pool>(*compiler_, opt_.threads, 2 * opt_.threads + 4, opt_.compile_process);
    build_reference();
  }

  void submit(std::uint64_t id, const config& c, std::uint64_t seed) override {
    pending_build pb;
    pb.id = id;
    compile_request cr;
    try {
      pb.shapes = launch_jobs(*spec_, c, seed);
      cr = request_for(render_variant(*spec_, c), spec_->source_file);
    } catch (const error& e) {
      std::lock_guard lk(mu_);
      done_.push_back(invalid_build(id, e.what()));
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard lk(mu_);
      ++pending_;
    }
    const auto ticket = pool_->submit(std::move(cr));  // blocks while the pool is full
    std::lock_guard lk(mu_);
    if (auto o = orphans_.find(ticket); o != orphans_.end()) {
      done_.push_back(finish(pb, o->second));
      orphans_.erase(o);
      cv_.notify_all();
    } else {
      compiling_.emplace(ticket, std::move(pb));
    }
  }

  std::optional<build_result> take(std::chrono::milliseconds wait) override {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (true) {
      {
        std::lock_guard lk(mu_);
        if (!done_.empty()) {
          build_result r = std::move(done_.front());
          done_.pop_front();
          return r;
        }
      }
      auto got = pool_->try_take_any();
      if (got) {
        std::lock_guard lk(mu_);
        auto it = compiling_.find(got->first);
        if (it == compiling_.end()) {
          orphans_.emplace(got->first, std::move(got->second));  // submit() registers it next
          continue;
        }
        build_result r = finish(it->second, got->second);
        compiling_.erase(it);
        return r;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, std::chrono::milliseconds(2));
    }
  }

  std::size_t pending() const override {
    std::lock_guard lk(mu_);
    return pending_ + done_.size();
  }
  std::size_t parallelism() const override { return opt_.threads; }
  std::optional<gpu::module_ref> reference() const override { return reference_; }
  nlohmann::json describe() const override {
    return {{"builder", "nvrtc"},
            {"nvrtc", compiler::nvrtc_version()},
            {"arch", arch()},
            {"compile_threads", opt_.threads},
            {"cache_dir", opt_.cache_dir.string()}};
  }

 private:
  // The architecture compiled for: the kernel's own (kernel_spec::arch, e.g. sm_90a for wgmma) over the
  // evaluator's option.
  const std::string& arch() const { return spec_->arch.empty() ? opt_.arch : spec_->arch; }

  // A compile request for a rendered variant: the kernel's include folders searched by NVRTC, and every
  // header the source includes passed by content, so that the cache key covers them.
  compile_request request_for(rendered_variant v, const std::string& file) const {
    return variant_compile_request(*spec_, std::move(v), file, opt_.arch);
  }

  void build_reference() {
    const auto& k = *spec_;
    compile_request ref;
    if (k.reference.k == reference_spec::kind::kernel) {
      rendered_variant v;
      v.source = k.reference.source;
      v.options = k.compiler_options;
      v.options.insert(v.options.end(), k.reference.options.begin(), k.reference.options.end());
      // The reference sees the default configuration's #defines too (it may share the kernel's source).
      if (k.injection == "defines")
        v.source = with_defines(k, k.defaults, k.reference.source, k.reference.source_file);
      v.entry = k.reference.entry;
      ref = request_for(std::move(v), k.reference.source_file);
    } else if (k.reference.k == reference_spec::kind::baseline) {
      ref = request_for(render_variant(k, k.defaults), k.source_file);
    } else {
      return;
    }
    const auto r = compiler_->compile(ref);
    if (!r.ok) throw error("the reference of kernel " + k.name + " does not compile:\n" + r.log);
    reference_ = gpu::module_ref{write_cubin(r), r.kernels.at(0).lowered_name};
  }

  // The result of a finished compilation: static metrics, the occupancy filter, the CUBIN on disk.
  build_result finish(pending_build& pb, const compile_result& res) {
    // Caller holds mu_.
    if (pending_ > 0) --pending_;
    build_result r;
    r.id = pb.id;
    r.seconds = res.seconds;
    if (!res.ok) {
      r.st = status::compile_failed;
      r.error = res.log;
      return r;
    }
    const auto& km = res.kernels.at(0);
    const auto& m = km.metrics;
    r.metrics["static.registers"] = m.registers;
    r.metrics["static.spill_stores_bytes"] = m.spill_stores_bytes;
    r.metrics["static.spill_loads_bytes"] = m.spill_loads_bytes;
    r.metrics["static.local_bytes"] = m.stack_frame_bytes;
    r.metrics["static.shared_bytes"] = m.shared_static_bytes;
    r.metrics["static.constant_bytes"] = m.constant_bytes;
    r.metrics["static.compile_cache_hit"] = res.cache_hit ? 1 : 0;
    if (const gpu::shape_job* timed = first_timed(pb.shapes)) {
      const auto& g = timed->candidate;
      const int threads = static_cast<int>(g.block[0] * g.block[1] * g.block[2]);
      const auto occ = theoretical_occupancy(m, threads, static_cast<int>(g.shared_bytes), limits_);
      r.metrics["static.occupancy"] = occ.fraction;
      r.metrics["static.blocks_per_sm"] = occ.blocks_per_sm;
      if (opt_.static_filter && occ.blocks_per_sm == 0) {
        r.st = status::invalid;
        r.error = "cannot launch: " + std::to_string(threads) + " threads x " + std::to_string(m.registers) +
                  " registers, " + std::to_string(m.shared_static_bytes + static_cast<int>(g.shared_bytes)) +
                  " bytes of shared memory exceed an SM (limited by " + occ.limited_by + ")";
        return r;
      }
    }
    r.image = {write_cubin(res), km.lowered_name};
    r.shapes = std::move(pb.shapes);
    return r;
  }

  static const gpu::shape_job* first_timed(const std::vector<gpu::shape_job>& shapes) {
    for (const auto& s : shapes)
      if (s.time) return &s;
    return nullptr;
  }

  // The CUBIN as a file named by its cache key (written once, atomically).
  std::string write_cubin(const compile_result& r) const {
    const auto path = opt_.cache_dir / "cubin" / (r.key + ".cubin");
    if (!std::filesystem::exists(path)) {
      const auto tmp = path.string() + ".tmp" + std::to_string(::getpid()) + "-" +
                       std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
      {
        std::ofstream out(tmp, std::ios::binary);
        out.write(reinterpret_cast<const char*>(r.cubin.data()),
                  static_cast<std::streamsize>(r.cubin.size()));
      }
      std::filesystem::rename(tmp, path);
    }
    return path.string();
  }

  std::shared_ptr<const kernel_spec> spec_;
  nvrtc_builder_options opt_;
  device_limits limits_;
  std::unique_ptr<compiler> compiler_;
  std::unique_ptr<compile_pool> pool_;
  std::optional<gpu::module_ref> reference_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<compile_pool::ticket, pending_build> compiling_;
  // Results whose ticket submit() has not registered yet (a fast compile or a cache hit can finish first).
  std::map<compile_pool::ticket, compile_result> orphans_;
  std::deque<build_result> done_;
  std::size_t pending_ = 0;  // submitted to the pool and not yet taken
};

}  // namespace

std::unique_ptr<builder> make_nvrtc_builder(std::shared_ptr<const kernel_spec> spec, nvrtc_builder_options o,
                                            const device_limits& limits) {
  return std::make_unique<nvrtc_builder>(std::move(spec), std::move(o), limits);
}

}  // namespace kf
