// The Triton builder: variants of a Triton kernel description compiled by Triton's own compiler in a pool
// of Python processes (python/kforge/triton/compile_server.py, driven through the runner's line protocol),
// cached by content hash on disk; the CUBINs they return are launched by the same runner and kforge-worker
// as NVRTC's. See builder.hpp.
//
// One variant can be several images: Triton vectorises memory accesses only for integers known to be
// multiples of 16 (as its own JIT specialises per call), so each shape is compiled with the pointers and
// the integer arguments that are multiples of 16 *on that shape*; shapes that agree share an image. The
// trailing global- and profile-scratch pointers of a Triton entry are appended to every shape's arguments
// (a null pointer, or a zeroed buffer of size x programs when the metadata asks for one).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>

#include "evaluators/cuda/builder.hpp"
#include "evaluators/runner/runner.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"

namespace kf {

namespace {
using json = nlohmann::json;

const std::set<std::string>& option_names() {
  static const std::set<std::string> names = {"num_warps", "num_stages", "num_ctas", "maxnreg"};
  return names;
}

// A Triton type for an argument: "*fp32" for a buffer of f32, "i32" for an i32 scalar.
std::string triton_type(const kernel_arg& a) {
  static const std::map<dtype, std::string> names = {
      {dtype::f32, "fp32"}, {dtype::f64, "fp64"}, {dtype::f16, "fp16"}, {dtype::bf16, "bf16"},
      {dtype::i8, "i8"},    {dtype::u8, "u8"},    {dtype::i16, "i16"},  {dtype::u16, "u16"},
      {dtype::i32, "i32"},  {dtype::u32, "u32"},  {dtype::i64, "i64"},  {dtype::u64, "u64"}};
  return (a.buffer ? "*" : "") + names.at(a.type);
}

// One compile request's part that depends on the configuration and the shape.
struct compile_key {
  json constexprs, options;
  std::vector<std::size_t> divisible;  // argument positions
  bool operator<(const compile_key& o) const {
    return std::tie(constexprs, options, divisible) < std::tie(o.constexprs, o.options, o.divisible);
  }
};

// A build waiting for its compilations.
struct pending_build {
  std::uint64_t id = 0;
  std::vector<gpu::shape_job> shapes;
  std::vector<std::size_t> group_of_shape;  // shape -> compile group
  std::vector<std::optional<json>> answers;  // per group
  std::size_t missing = 0;
  bool reference = false;  // the reference's build (at construction)
};

class triton_builder final : public builder {
 public:
  triton_builder(std::shared_ptr<const kernel_spec> spec, triton_builder_options o, const device_limits& limits)
      : spec_(std::move(spec)), opt_(std::move(o)), limits_(limits) {
    for (std::size_t i = 0; i < spec_->space.dimension(); ++i)
      if (!option_names().count(spec_->space.params()[i].name)) constexpr_params_.push_back(i);
    std::filesystem::create_directories(opt_.cache_dir);
    runner_options r;
    // The repository's python/ folder first on the servers' PYTHONPATH (kforge.triton lives there).
    r.command = {"/usr/bin/env"};
    if (!opt_.python_path.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      r.command.push_back("PYTHONPATH=" + opt_.python_path.string() + (old && *old ? ":" + std::string(old) : ""));
    }
    r.command.insert(r.command.end(), {opt_.python, "-m", "kforge.triton.compile_server"});
    r.devices = {0};
    r.workers_per_device = static_cast<int>(std::max<std::size_t>(1, opt_.processes));
    r.log_dir = opt_.log_dir;
    r.request_timeout_s = 600;  // a compile of a large kernel; the server answers errors itself
    r.retry_lost = 1;
    try {
      servers_ = std::make_unique<runner>(
          r, runner::callbacks{[this](run_outcome out) { on_answer(std::move(out)); }, [this] { on_failure(); }});
    } catch (const error& e) {
      throw error("the Triton compile servers (" + opt_.python + " -m kforge.triton.compile_server) do not start: " +
                  e.what() + " (is triton installed for that Python? scripts/install-deps makes <repo>/.venv)");
    }
    triton_version_ = servers_->greeting().value("triton", "?");
    build_reference();
  }

  ~triton_builder() override { servers_.reset(); }

  void submit(std::uint64_t id, const config& c, std::uint64_t seed) override {
    pending_build pb;
    pb.id = id;
    std::vector<std::pair<std::uint64_t, json>> requests;
    try {
      pb.shapes = launch_jobs(*spec_, c, seed);
      std::lock_guard lk(mu_);
      plan(pb, c, requests);
    } catch (const error& e) {
      std::lock_guard lk(mu_);
      done_.push_back(invalid_build(id, e.what()));
      cv_.notify_all();
      return;
    }
    {
      std::lock_guard lk(mu_);
      for (std::size_t g = 0; g < requests.size(); ++g)
        job_build_[requests[g].first] = {id, g};
      builds_.emplace(id, std::move(pb));
      ++pending_;
    }
    for (auto& [job, req] : requests)
      servers_->submit(job, std::move(req));
  }

  std::optional<build_result> take(std::chrono::milliseconds wait) override {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, wait, [&] { return !done_.empty() || failed_; });
    if (done_.empty()) {
      if (failed_) throw error(servers_failure_);
      return std::nullopt;
    }
    build_result r = std::move(done_.front());
    done_.pop_front();
    return r;
  }

  std::size_t pending() const override {
    std::lock_guard lk(mu_);
    return pending_ + done_.size();
  }
  std::size_t parallelism() const override { return std::max<std::size_t>(1, opt_.processes); }
  std::optional<gpu::module_ref> reference() const override { return reference_main_; }
  nlohmann::json describe() const override {
    return {{"builder", "triton"},
            {"triton", triton_version_},
            {"arch", "sm_" + std::to_string(opt_.arch)},
            {"compile_processes", opt_.processes},
            {"python", opt_.python},
            {"cache_dir", opt_.cache_dir.string()}};
  }

 private:
  // The compile request of configuration `c` on shape `s`: source, entry, the signature from the
  // arguments, constexprs (tuned and fixed), options, and what is divisible by 16 there.
  std::pair<compile_key, json> request_for(const config& c, const gpu::shape_job& s, std::size_t si,
                                           bool hints) const {
    compile_key key;
    key.constexprs = json::object();
    key.options = json::object();
    const auto params = spec_->space.params();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& v = spec_->space.value_of(c, i);
      json jv = to_json(v);
      if (v.is_bool()) jv = v.as_bool();
      if (option_names().count(params[i].name))
        key.options[params[i].name] = jv;
      else
        key.constexprs[params[i].name] = jv;
    }
    const auto& shp = si < spec_->check_shapes.size() ? spec_->check_shapes[si]
                                                      : spec_->time_shapes[si - spec_->check_shapes.size()];
    for (const auto& [name, e] : spec_->constexprs) {
      std::vector<const value*> slots;
      for (const auto& n : e.free_names()) {
        auto it = shp.find(n);
        if (it == shp.end()) throw error("constexprs." + name + ": unknown name '" + n + "' (not a problem size)");
        slots.push_back(&it->second);
      }
      key.constexprs[name] = to_json(e.evaluate(slots));
    }
    // Positional: the arguments are the entry's non-constexpr parameters in order (their names in the
    // description need not be the Python ones).
    json signature = json::array();
    for (std::size_t i = 0; i < spec_->args.size(); ++i) {
      const auto& a = spec_->args[i];
      if (!a.param) throw error("argument " + a.name + ": a Triton kernel has no __constant__ symbols");
      signature.push_back(triton_type(a));
      if (!hints) continue;
      // Buffers are 256-byte aligned; integers count where their value on this shape is a multiple of 16.
      const auto& r = s.args[i];
      if (a.buffer || (!is_floating(a.type) && r.scalar_int % 16 == 0 && r.scalar_int != 0))
        key.divisible.push_back(i);
    }
    json req = {{"op", "compile"},
                {"source", spec_->source},
                {"file_name", std::filesystem::path(spec_->source_file).filename().string()},
                {"entry", spec_->entry},
                {"signature", signature},
                {"constexprs", key.constexprs},
                {"divisible_by_16", key.divisible},
                {"options", key.options},
                {"arch", opt_.arch},
                {"cache_dir", opt_.cache_dir.string()}};
    return {key, req};
  }

  // Groups the shapes of `pb` by their compile request and makes one request per group. Caller holds mu_.
  void plan(pending_build& pb, const config& c, std::vector<std::pair<std::uint64_t, json>>& requests,
            const std::string& entry = {}) {
    std::map<compile_key, std::size_t> groups;
    for (std::size_t si = 0; si < pb.shapes.size(); ++si) {
      auto [key, req] = request_for(c, pb.shapes[si], si, /*hints=*/entry.empty());
      if (!entry.empty()) req["entry"] = entry;
      auto [it, fresh] = groups.emplace(key, groups.size());
      pb.group_of_shape.push_back(it->second);
      if (fresh) requests.emplace_back(next_job_++, std::move(req));
    }
    pb.answers.assign(groups.size(), std::nullopt);
    pb.missing = groups.size();
  }

  void build_reference() {
    const auto& k = *spec_;
    if (k.reference.k == reference_spec::kind::none) return;
    if (k.reference.k == reference_spec::kind::kernel && k.reference.source_file != k.source_file)
      throw error("the reference of Triton kernel " + k.name + " must be an entry of the same .py file");
    pending_build pb;
    pb.id = reference_id;
    pb.reference = true;
    pb.shapes = launch_jobs(k, k.defaults, 1);
    std::vector<std::pair<std::uint64_t, json>> requests;
    {
      std::lock_guard lk(mu_);
      // The reference: no divisibility hints (one generic image per distinct constexpr set).
      plan(pb, k.defaults, requests, k.reference.k == reference_spec::kind::kernel ? k.reference.entry : k.entry);
      for (std::size_t g = 0; g < requests.size(); ++g)
        job_build_[requests[g].first] = {reference_id, g};
      builds_.emplace(reference_id, std::move(pb));
    }
    for (auto& [job, req] : requests)
      servers_->submit(job, std::move(req));
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return reference_ready_ || failed_; });
    if (failed_) throw error(servers_failure_);
    if (!reference_error_.empty())
      throw error("the reference of Triton kernel " + k.name + " does not compile:\n" + reference_error_);
  }

  // A compile server's answer: stored with its build; a build whose answers are all in becomes a result.
  void on_answer(run_outcome out) {
    std::lock_guard lk(mu_);
    auto jb = job_build_.find(out.id);
    if (jb == job_build_.end()) return;
    const auto [build_id, group] = jb->second;
    job_build_.erase(jb);
    auto it = builds_.find(build_id);
    if (it == builds_.end()) return;
    auto& pb = it->second;
    if (out.answer.is_null())
      pb.answers[group] = json{{"ok", false}, {"log", "the Triton compile server was lost: " + out.error}};
    else
      pb.answers[group] = std::move(out.answer);
    if (--pb.missing > 0) return;
    if (pb.reference)
      finish_reference(pb);
    else
      done_.push_back(finish(pb)), --pending_;
    builds_.erase(it);
    cv_.notify_all();
  }

  void on_failure() {
    std::lock_guard lk(mu_);
    failed_ = true;
    servers_failure_ = "every Triton compile server failed";
    cv_.notify_all();
  }

  // The shapes' images, shared memory and scratch arguments from the answers.
  std::string apply_answers(pending_build& pb, bool reference) {
    for (const auto& a : pb.answers)
      if (!a->value("ok", false))
        return a->contains("error") ? a->value("error", "") : a->value("log", "(no message)");
    for (std::size_t si = 0; si < pb.shapes.size(); ++si) {
      auto& s = pb.shapes[si];
      const auto& a = *pb.answers[pb.group_of_shape[si]];
      const auto& md = a.at("metadata");
      gpu::module_ref m{a.at("cubin_path").get<std::string>(), a.at("name").get<std::string>()};
      auto& geom = reference ? *s.reference : s.candidate;
      geom.shared_bytes = md.value("shared", 0u);
      if (md.value("num_ctas", 1) != 1)
        throw error("num_ctas > 1 needs a thread-block-cluster launch, which kforge-worker does not make yet");
      (reference ? s.reference_module : s.candidate_module) = m;
      add_scratch(s, md, geom);
    }
    return {};
  }

  // Appends (or widens) the two scratch pointers a Triton entry takes after its own parameters.
  static void add_scratch(gpu::shape_job& s, const json& md, const gpu::launch_geometry& g) {
    const std::uint64_t programs = std::uint64_t{g.grid[0]} * g.grid[1] * g.grid[2];
    const std::size_t own = s.args.size() >= 2 && s.args[s.args.size() - 1].name == "triton.profile_scratch"
                                ? s.args.size() - 2
                                : s.args.size();
    if (own == s.args.size()) {
      for (const char* name : {"triton.global_scratch", "triton.profile_scratch"}) {
        resolved_arg a;
        a.name = name;
        a.buffer = false;  // a null pointer until the metadata asks for memory
        a.type = dtype::u64;
        a.scalar_int = 0;
        a.compare = false;
        s.args.push_back(a);
      }
    }
    const std::uint64_t sizes[2] = {md.value("global_scratch_size", std::uint64_t{0}),
                                    md.value("profile_scratch_size", std::uint64_t{0})};
    for (int i = 0; i < 2; ++i) {
      if (sizes[i] == 0) continue;
      auto& a = s.args[own + static_cast<std::size_t>(i)];
      const std::uint64_t bytes = sizes[i] * programs;
      a.count = a.buffer ? std::max(a.count, bytes) : bytes;
      a.buffer = true;
      a.type = dtype::u8;
      a.role = arg_role::in;
      a.fill = {fill_spec::kind::constant, 0, 0};
    }
  }

  void finish_reference(pending_build& pb) {
    // Caller holds mu_.
    try {
      reference_error_ = apply_answers(pb, true);
    } catch (const error& e) {
      reference_error_ = e.what();
    }
    if (reference_error_.empty()) {
      reference_shapes_ = pb.shapes;
      reference_main_ = pb.shapes.back().reference_module;
    }
    reference_ready_ = true;
  }

  build_result finish(pending_build& pb) {
    // Caller holds mu_.
    build_result r;
    r.id = pb.id;
    double seconds = 0;
    bool hit = true;
    for (const auto& a : pb.answers) {
      seconds += a->value("seconds", 0.0);
      hit &= a->value("cache_hit", false);
    }
    r.seconds = seconds;
    std::string failure;
    try {
      failure = apply_answers(pb, false);
    } catch (const error& e) {
      r.st = status::invalid;
      r.error = e.what();
      return r;
    }
    if (!failure.empty()) {
      r.st = status::compile_failed;
      r.error = failure;
      return r;
    }
    // The reference's images and launches, shape by shape (computed once at construction).
    for (std::size_t si = 0; si < pb.shapes.size() && si < reference_shapes_.size(); ++si) {
      auto& s = pb.shapes[si];
      const auto& rs = reference_shapes_[si];
      s.reference = rs.reference;
      s.reference_module = rs.reference_module;
      // The reference's scratch needs: the larger of the two (they share the argument list).
      for (std::size_t i = s.args.size() - 2; i < s.args.size() && i < rs.args.size(); ++i)
        if (rs.args[i].buffer && (!s.args[i].buffer || rs.args[i].count > s.args[i].count)) s.args[i] = rs.args[i];
    }
    // The image of the first timed shape is the variant's image; static metrics are its.
    std::size_t main = 0;
    for (std::size_t si = 0; si < pb.shapes.size(); ++si)
      if (pb.shapes[si].time) {
        main = si;
        break;
      }
    const auto& a = *pb.answers[pb.group_of_shape[main]];
    const auto& md = a.at("metadata");
    r.image = *pb.shapes[main].candidate_module;
    static_metrics m;
    m.registers = md.value("registers", 0);
    m.spill_stores_bytes = md.value("spills", 0);
    m.shared_static_bytes = 0;
    r.metrics["static.registers"] = m.registers;
    r.metrics["static.spill_stores_bytes"] = m.spill_stores_bytes;
    r.metrics["static.shared_bytes"] = md.value("shared", 0);
    r.metrics["static.compile_cache_hit"] = hit ? 1 : 0;
    r.metrics["static.images"] = static_cast<double>(pb.answers.size());
    const auto& g = pb.shapes[main].candidate;
    const int threads = static_cast<int>(g.block[0] * g.block[1] * g.block[2]);
    const auto occ = theoretical_occupancy(m, threads, static_cast<int>(g.shared_bytes), limits_);
    r.metrics["static.occupancy"] = occ.fraction;
    r.metrics["static.blocks_per_sm"] = occ.blocks_per_sm;
    if (opt_.static_filter && occ.blocks_per_sm == 0) {
      r.st = status::invalid;
      r.error = "cannot launch: " + std::to_string(threads) + " threads x " + std::to_string(m.registers) +
                " registers, " + std::to_string(g.shared_bytes) + " bytes of shared memory exceed an SM (limited by " +
                occ.limited_by + ")";
      return r;
    }
    r.shapes = std::move(pb.shapes);
    return r;
  }

  static constexpr std::uint64_t reference_id = ~std::uint64_t{0};

  std::shared_ptr<const kernel_spec> spec_;
  triton_builder_options opt_;
  device_limits limits_;
  std::vector<std::size_t> constexpr_params_;
  std::unique_ptr<runner> servers_;
  std::string triton_version_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t next_job_ = 1;  // compile jobs, one per (build, group)
  std::map<std::uint64_t, std::pair<std::uint64_t, std::size_t>> job_build_;  // job -> (build, group)
  std::map<std::uint64_t, pending_build> builds_;
  std::deque<build_result> done_;
  std::size_t pending_ = 0;
  bool failed_ = false;
  std::string servers_failure_;
  bool reference_ready_ = false;
  std::string reference_error_;
  std::vector<gpu::shape_job> reference_shapes_;
  std::optional<gpu::module_ref> reference_main_;
};

}  // namespace

std::unique_ptr<builder> make_triton_builder(std::shared_ptr<const kernel_spec> spec, triton_builder_options o,
                                             const device_limits& limits) {
  return std::make_unique<triton_builder>(std::move(spec), std::move(o), limits);
}

}  // namespace kf
