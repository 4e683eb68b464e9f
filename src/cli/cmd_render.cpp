// kforge render: one configuration of a CUDA kernel as the cuda evaluator compiles and launches it, written
// out so that another harness (python/suite_expert.py) can load and time exactly that binary.
#include <boost/program_options.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/cli.hpp"
#include "kforge/document.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"
#include "kforge/evaluators/cuda.hpp"
#include "kforge/kernel.hpp"
#include "kforge/problem.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace kf::cli {

namespace {

const char* const where = "kforge render";

// The kernel of FILE: a kforge kernel description or a T1 file's CUDA kernel. A usage error (exit 2) when
// the file has no CUDA kernel.
std::shared_ptr<const kernel_spec> load_kernel(const std::string& file) {
  const auto doc = load_document(file);
  const bool t1 = doc.root.is_object() && doc.root.contains("ConfigurationSpace");
  const problem prob = t1 ? load_t1(file) : load_kernel_problem(file);
  if (!prob.kernel_desc) {
    if (prob.kernel_error) std::rethrow_exception(prob.kernel_error);
    throw config_error(file, "", "no kernel to render");
  }
  if (prob.kernel_desc->language != "cuda")
    throw config_error(
        file, "language",
        "render writes CUDA kernels (" + prob.kernel_desc->language + " is compiled by its own tools)");
  return prob.kernel_desc;
}

// --config: a JSON object {parameter: value} as `kforge export` writes configurations, or @FILE holding one.
// Every parameter of the space must be given, no other name, and the configuration must be valid.
config parse_config(const kernel_spec& k, const std::string& text) {
  std::string json_text = text;
  if (!text.empty() && text[0] == '@') {
    std::ifstream in(text.substr(1));
    if (!in) throw config_error(where, "--config", "cannot read '" + text.substr(1) + "'");
    json_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw config_error(where, "--config", std::string("not JSON: ") + e.what());
  }
  const config c = config_from_json(k.space, j, k.name, [](const std::string& key, const std::string& why) {
    throw config_error(where, key.empty() ? "--config" : "--config." + key, why);
  });
  if (!k.space.is_valid(c))
    throw config_error(where, "--config", k.space.describe(c) + " violates a constraint of " + k.name);
  return c;
}

// --shape: time (the first timed shape), time:N, check:N, or a JSON object of problem sizes.
shape parse_shape(const kernel_spec& k, const std::string& text) {
  auto pick = [&](const std::vector<shape>& list, const std::string& kind, const std::string& index) {
    const auto n = index.empty() ? 0 : whole_number("--shape", index, 0, 1'000'000);
    if (n >= list.size())
      throw config_error(where, "--shape",
                         k.name + " has " + std::to_string(list.size()) + " " + kind + " shape(s); index " +
                             std::to_string(n) + " does not exist");
    return list[n];
  };
  if (text == "time") return pick(k.time_shapes, "time", "");
  if (text.rfind("time:", 0) == 0) return pick(k.time_shapes, "time", text.substr(5));
  if (text.rfind("check:", 0) == 0) return pick(k.check_shapes, "check", text.substr(6));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    throw config_error(where, "--shape", "expected time, time:N, check:N or a JSON object of problem sizes");
  }
  if (!j.is_object()) throw config_error(where, "--shape", "expected a JSON object of problem sizes");
  shape s;
  for (const auto& [name, v] : j.items()) {
    try {
      s[name] = from_json(v);
    } catch (const error& e) {
      throw config_error(where, "--shape." + name, e.what());
    }
  }
  return s;
}

nlohmann::json shape_json(const shape& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, v] : s)
    j[name] = to_json(v);
  return j;
}

std::string role_name(arg_role r) {
  return r == arg_role::out ? "out" : r == arg_role::inout ? "inout" : "in";
}

// The resolved arguments in the kernel's order: what a launcher binds (param ones as kernel parameters in
// this order; constant ones copied into the module's __constant__ symbol of their name).
nlohmann::json arguments_json(const launch_plan& plan) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : plan.args) {
    nlohmann::json e = {{"name", r.name},
                        {"kind", r.constant && !r.param ? "constant"
                                 : r.tensor_map         ? "tensor_map"
                                 : r.buffer             ? "buffer"
                                                        : "scalar"},
                        {"type", std::string(to_string(r.type))},
                        {"param", r.param},
                        {"constant", r.constant}};
    if (r.tensor_map) {
      // What cuTensorMapEncodeTiled takes, over the device address of the buffer argument `buffer`.
      const auto& t = *r.tensor_map;
      e["enabled"] = t.enabled;
      if (t.enabled) {
        e["buffer"] = plan.args[t.buffer].name;
        e["dims"] = std::vector<std::uint64_t>(t.dims.begin(), t.dims.begin() + t.rank);
        e["strides_bytes"] = std::vector<std::uint64_t>(t.strides.begin(), t.strides.begin() + t.rank - 1);
        e["box"] = std::vector<std::uint32_t>(t.box.begin(), t.box.begin() + t.rank);
        e["swizzle"] = t.swizzle;
        e["l2_promotion"] = t.l2_promotion;
        e["oob_fill"] = t.oob_nan ? "nan" : "zero";
      }
    } else if (r.buffer) {
      e["count"] = r.count;
      e["role"] = role_name(r.role);
    } else if (is_floating(r.type)) {
      e["value"] = r.scalar;
    } else {
      e["value"] = r.scalar_int;
    }
    a.push_back(std::move(e));
  }
  return a;
}

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw error("cannot write " + p.string());
}

}  // namespace

int cmd_render(const std::vector<std::string>& args) {
  po::options_description desc(
      "usage: kforge render KERNEL --config JSON --out DIR [options]\n\n"
      "Writes one configuration of a CUDA kernel (a kforge kernel description or a T1 file) as the cuda\n"
      "evaluator compiles and launches it: DIR/variant.cu (the rendered source), DIR/variant.cubin "
      "(compiled\n"
      "with NVRTC in the evaluator's compile cache, so a configuration a search ran is a cache hit on the "
      "very\n"
      "binary it timed), headers it includes under DIR/include/, and DIR/variant.json: the symbol to "
      "launch,\n"
      "options, architecture, static resources, the launch (grid, block, dynamic shared memory) and the\n"
      "resolved arguments on one shape, the tolerances and the roofline bound with the H200 "
      "floor.\n\noptions");
  desc.add_options()("help,h", "show this help")(
      "config", po::value<std::string>(),
      "the configuration: a JSON object {parameter: value} with every parameter (as `kforge export` writes\n"
      "configurations), or @FILE holding one")("out,o", po::value<std::string>(),
                                               "the folder to write (created)")(
      "shape", po::value<std::string>()->default_value("time"),
      "the launch's shape: time (the first timed shape), time:N, check:N, or a JSON object of sizes")(
      "arch", po::value<std::string>()->default_value("sm_90"),
      "the architecture when the kernel names none (the cuda evaluator's default)")(
      "cache", po::value<std::string>(),
      "the compile cache folder (default: the cuda evaluator's, $KFORGE_CACHE or ~/.cache/kforge)")(
      "no-compile", "write the source and manifest only")("kernel", po::value<std::string>(),
                                                          "the kernel file");
  po::positional_options_description pos;
  pos.add("kernel", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!vm.count("kernel"))
    throw config_error(where, "KERNEL", "missing: give a kernel description or T1 file");
  if (!vm.count("config")) throw config_error(where, "--config", "missing: give the configuration as JSON");
  if (!vm.count("out")) throw config_error(where, "--out", "missing: give the folder to write");
  const auto file = vm["kernel"].as<std::string>();
  const auto spec = load_kernel(file);
  const auto& k = *spec;
  const config c = parse_config(k, vm["config"].as<std::string>());
  const shape s = parse_shape(k, vm["shape"].as<std::string>());
  const launch_plan plan = resolve_launch(k, c, s);
  rendered_variant v = render_variant(k, c);
  const fs::path out = vm["out"].as<std::string>();
  fs::create_directories(out);

  nlohmann::json m;
  m["kernel"] = k.name;
  m["description"] = fs::absolute(file).lexically_normal().string();
  m["configuration"] = k.space.to_json(c);
  m["describe"] = k.space.describe(c);
  m["defaults"] = k.space.to_json(k.defaults);
  m["entry"] = v.entry;
  m["shape"] = shape_json(s);
  m["launch"] = {{"grid", plan.grid}, {"block", plan.block}, {"shared_bytes", plan.shared_bytes}};
  m["arguments"] = arguments_json(plan);
  nlohmann::json tol = nlohmann::json::object();
  for (const auto& [t, x] : k.tolerances)
    tol[std::string(to_string(t))] = {{"rel", x.rel}, {"abs", x.abs}};
  m["tolerance"] = tol;
  const auto rb = roofline(k, c, s);
  m["roofline"] = {{"bytes", rb.bytes ? nlohmann::json(*rb.bytes) : nlohmann::json()},
                   {"flops", rb.flops ? nlohmann::json(*rb.flops) : nlohmann::json()},
                   {"compute", k.flops_unit},
                   {"floor_ms", rb.bytes || rb.flops ? nlohmann::json(roofline_floor_ms(k, rb, h200_peaks))
                                                     : nlohmann::json()},
                   {"peaks",
                    {{"device", "NVIDIA H200 SXM datasheet (kf::h200_peaks, include/kforge/kernel.hpp)"},
                     {"dram_bytes_per_s", h200_peaks.dram_bytes_per_s},
                     {"fp32_flops_per_s", h200_peaks.fp32_flops_per_s},
                     {"tensor_bf16_flops_per_s", h200_peaks.tensor_bf16_flops_per_s}}}};

  const auto source_file = k.source_file;
  compile_request req = variant_compile_request(k, std::move(v), source_file, vm["arch"].as<std::string>());
  write_text(out / "variant.cu", req.source);
  nlohmann::json headers = nlohmann::json::array();
  for (const auto& [name, text] : req.headers) {
    write_text(out / "include" / name, text);
    headers.push_back(name);
  }
  m["source_file"] = "variant.cu";
  m["source_name"] = req.name;
  m["headers"] = headers;
  m["options"] = req.options;
  m["arch"] = req.arch;
  m["nvrtc"] = compiler::nvrtc_version();

  std::string summary = "rendered " + k.name + " " + k.space.describe(c);
  if (!vm.count("no-compile")) {
    const fs::path cache = vm.count("cache") ? fs::path(vm["cache"].as<std::string>()) : cuda_cache_dir();
    const compiler comp(cache / "nvrtc");
    const auto r = comp.compile(req);
    if (!r.ok) {
      write_text(out / "compile.log", r.log);
      throw error("configuration " + k.space.describe(c) + " of " + k.name + " does not compile (log in " +
                  (out / "compile.log").string() + "):\n" + r.log.substr(0, 2000));
    }
    {
      std::ofstream bin(out / "variant.cubin", std::ios::binary);
      bin.write(reinterpret_cast<const char*>(r.cubin.data()), static_cast<std::streamsize>(r.cubin.size()));
      if (!bin) throw error("cannot write " + (out / "variant.cubin").string());
    }
    const auto& km = r.kernels.at(0);
    const auto& sm = km.metrics;
    const auto occ =
        theoretical_occupancy(sm, static_cast<int>(plan.threads()), static_cast<int>(plan.shared_bytes));
    m["cubin_file"] = "variant.cubin";
    m["lowered_name"] = km.lowered_name;
    m["cache_key"] = r.key;
    m["cache_hit"] = r.cache_hit;
    m["compile_seconds"] = r.seconds;
    m["static"] = {{"registers", sm.registers},
                   {"spill_stores_bytes", sm.spill_stores_bytes},
                   {"spill_loads_bytes", sm.spill_loads_bytes},
                   {"stack_frame_bytes", sm.stack_frame_bytes},
                   {"shared_static_bytes", sm.shared_static_bytes},
                   {"constant_bytes", sm.constant_bytes},
                   {"max_threads_per_block", sm.max_threads_per_block},
                   {"blocks_per_sm", occ.blocks_per_sm},
                   {"occupancy", occ.fraction},
                   {"limited_by", occ.limited_by}};
    std::ostringstream line;
    line << ": " << sm.registers << " registers, " << sm.spill_stores_bytes << " bytes spilled, "
         << occ.blocks_per_sm << " blocks per SM" << (r.cache_hit ? " (cache hit)" : "");
    summary += line.str();
  }
  write_text(out / "variant.json", m.dump(1) + "\n");
  std::cout << summary << " -> " << out.string() << "\n";
  return 0;
}

}  // namespace kf::cli
