// kf::compiler, compile_pool and theoretical_occupancy on real NVRTC compilations (no GPU needed).
// Each static metric is checked twice: against the ptxas -v log and against the CUBIN's own records
// (evaluators/cuda/nvrtc/cubin_reader.hpp), so a test failing here says which source moved.
//
// Ground truth, measured once on the H200 (driver 580.159.04, 2026-12-02) by loading these same CUBINs
// with cuModuleLoadData: cuFuncGetAttribute's NUM_REGS, LOCAL_SIZE_BYTES, SHARED_SIZE_BYTES,
// CONST_SIZE_BYTES and (for `bounded`) MAX_THREADS_PER_BLOCK equalled kforge's registers,
// stack_frame_bytes, shared_static_bytes (the .nv.shared size less 1 KiB), constant_bytes (4096 for
// both kernels of the __constant__ module) and max_threads_per_block for every kernel below; and
// cuOccupancyMaxActiveBlocksPerMultiprocessor equalled theoretical_occupancy in 910 of 910 launch
// configurations (11 block sizes x 5 dynamic shared sizes over these kernels). The device attributes
// equalled device_limits' defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "evaluators/cuda/nvrtc/compile_cache.hpp"
#include "evaluators/cuda/nvrtc/cubin_reader.hpp"
#include "evaluators/cuda/nvrtc/occupancy_reference.hpp"
#include "evaluators/cuda/nvrtc/ptxas_log.hpp"
#include "kforge/error.hpp"
#include "kforge/evaluators/compile.hpp"
#include "support/test_support.hpp"

namespace kf {
namespace {

using namespace kf::cuda::detail;

compile_request request(std::string source, std::vector<std::string> names,
                        std::vector<std::string> options = {}, std::string arch = "sm_90") {
  compile_request r;
  r.source = std::move(source);
  r.name = "test.cu";
  r.name_expressions = std::move(names);
  r.options = std::move(options);
  r.arch = std::move(arch);
  return r;
}

cubin_info elf_of(const compile_result& r) {
  return read_cubin(std::span<const std::uint8_t>(r.cubin.data(), r.cubin.size()));
}

/// Compiles `r` without a cache and checks that it worked.
compile_result compile_ok(const compile_request& r) {
  compiler c;
  compile_result res = c.compile(r);
  EXPECT_TRUE(res.ok) << res.log;
  EXPECT_FALSE(res.cubin.empty());
  EXPECT_EQ(res.kernels.size(), r.name_expressions.size());
  return res;
}

/// The log's and the CUBIN's figures for one kernel, and the checks every kernel must pass: both
/// sources agree on registers, stack frame, barriers and static shared memory (ELF less the reserve),
/// and the reported metrics equal them.
struct both_sources {
  ptxas_function log;
  cubin_function elf;
  int elf_shared = -1;
};
both_sources check_sources_agree(const compile_result& res, const compiled_kernel& k) {
  both_sources out;
  const auto report = parse_ptxas_log(res.log);
  const auto info = elf_of(res);
  const ptxas_function* lf = report.find(k.lowered_name);
  const cubin_function* ef = info.find(k.lowered_name);
  EXPECT_NE(lf, nullptr) << "no ptxas lines for " << k.lowered_name << "\n" << res.log;
  EXPECT_NE(ef, nullptr) << "no CUBIN records for " << k.lowered_name;
  if (!lf || !ef) return out;
  out.log = *lf;
  out.elf = *ef;
  out.elf_shared = info.static_shared_bytes(k.lowered_name).value_or(-1);
  EXPECT_TRUE(lf->entry);
  EXPECT_TRUE(ef->has_text && ef->has_info);
  EXPECT_EQ(lf->registers, ef->registers) << k.lowered_name;
  EXPECT_EQ(lf->stack_frame_bytes, ef->frame_bytes) << k.lowered_name;
  EXPECT_EQ(lf->barriers.value_or(-1), ef->barriers.value_or(0)) << k.lowered_name;
  EXPECT_EQ(lf->shared_bytes.value_or(0), out.elf_shared) << k.lowered_name;
  EXPECT_EQ(k.metrics.registers, ef->registers.value_or(-1));
  EXPECT_EQ(k.metrics.stack_frame_bytes, ef->frame_bytes.value_or(-1));
  EXPECT_EQ(k.metrics.spill_stores_bytes, lf->spill_stores_bytes.value_or(-1));
  EXPECT_EQ(k.metrics.spill_loads_bytes, lf->spill_loads_bytes.value_or(-1));
  EXPECT_EQ(k.metrics.shared_static_bytes, lf->shared_bytes.value_or(0));
  EXPECT_EQ(k.metrics.barriers, lf->barriers.value_or(-1));
  EXPECT_EQ(res.log.find("kforge:"), std::string::npos) << "a disagreement note: " << res.log;
  return out;
}

// --- kernels -------------------------------------------------------------------------------------

constexpr const char* trivial_src = R"(
extern "C" __global__ void trivial(float* x) { x[threadIdx.x] = 1.0f; }
)";

constexpr const char* shared_src = R"(
extern "C" __global__ void staged(float* x) {
  __shared__ float tile[2048];  // 8192 bytes
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[2047 - threadIdx.x];
}
)";

constexpr const char* unrolled_src = R"(
extern "C" __global__ void fma_unrolled(const float* __restrict__ a, float* __restrict__ out, int n) {
  float acc[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = a[i * n + threadIdx.x];
  for (int k = 0; k < n; ++k) {
    const float x = a[k];
#pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = fmaf(acc[i], x, 1.0f + i);
  }
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i] * acc[47 - i];
  out[threadIdx.x] = s;
}
)";

constexpr const char* bounds_src = R"(
extern "C" __global__ void __launch_bounds__(256) bounded(float* x) { x[blockIdx.x * 256 + threadIdx.x] *= 2.0f; }
)";

constexpr const char* spill_src = R"(
extern "C" __global__ void spilly(float* x, int n) {
  float a[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) a[i] = x[i * n + threadIdx.x];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += a[i] * a[63 - i] + a[(i * 7) & 63];
  x[threadIdx.x] = s;
}
)";

constexpr const char* constant_src = R"(
__constant__ float coeffs[1024];
extern "C" __global__ void weighted(float* x) { x[threadIdx.x] *= coeffs[threadIdx.x & 1023]; }
extern "C" __global__ void unweighted(float* x) { x[threadIdx.x] += 1.0f; }
)";

constexpr const char* template_src = R"(
template <int N>
__global__ void k(float* x) {
  float a[N];
#pragma unroll
  for (int i = 0; i < N; ++i) a[i] = x[i * blockDim.x + threadIdx.x];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) s += a[i] * a[(i * 7) % N];
  x[threadIdx.x] = s;
}
)";

// Several static shared sizes and barrier counts in one module (the reserve rule and barrier records).
constexpr const char* shared_sizes_src = R"(
extern "C" __global__ void s100(float* x) { __shared__ char s[100]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = s[99 - threadIdx.x]; }
extern "C" __global__ void s4(float* x) { __shared__ float s; if (threadIdx.x == 0) s = x[0]; __syncthreads(); x[threadIdx.x] = s; }
extern "C" __global__ void dyn(float* x) { extern __shared__ float d[]; d[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = d[threadIdx.x ^ 1]; }
extern "C" __global__ void two(float* x) { __shared__ float a[1000]; __shared__ double b[3]; a[threadIdx.x] = x[threadIdx.x]; b[threadIdx.x % 3] = x[1]; __syncthreads(); x[threadIdx.x] = a[999 - threadIdx.x] + b[threadIdx.x % 3]; }
extern "C" __global__ void big(float* x) { __shared__ float a[12288]; a[threadIdx.x] = x[threadIdx.x]; __syncthreads(); x[threadIdx.x] = a[12287 - threadIdx.x]; }
extern "C" __global__ void named_bars(float* x) { __shared__ float a[64]; a[threadIdx.x] = x[threadIdx.x]; asm volatile("bar.sync 1, 64;"); asm volatile("bar.sync 2, 64;"); x[threadIdx.x] = a[63 - threadIdx.x]; }
extern "C" __global__ void none(double* x, int i) { x[threadIdx.x] = sin(x[i]) * 3.14159265358979; }
)";

// --- compilation and metrics ---------------------------------------------------------------------

TEST(compile, nvrtc_version_and_architectures) {
  EXPECT_EQ(compiler::nvrtc_version().substr(0, 3), "13.");
  const auto archs = compiler::supported_architectures();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
}

TEST(compile, trivial_extern_c_kernel) {
  const auto res = compile_ok(request(trivial_src, {"trivial"}));
  ASSERT_EQ(res.kernels.size(), 1u);
  const auto& k = res.kernels[0];
  EXPECT_EQ(k.name_expression, "trivial");
  EXPECT_EQ(k.lowered_name, "trivial");
  check_sources_agree(res, k);
  EXPECT_GT(k.metrics.registers, 0);
  EXPECT_LE(k.metrics.registers, 16);
  EXPECT_EQ(k.metrics.shared_static_bytes, 0);
  EXPECT_EQ(k.metrics.spill_stores_bytes, 0);
  EXPECT_EQ(k.metrics.stack_frame_bytes, 0);
  EXPECT_EQ(k.metrics.constant_bytes, 0);
  EXPECT_EQ(k.metrics.max_threads_per_block, 0);
  EXPECT_EQ(k.metrics.barriers, 0);
  EXPECT_FALSE(res.cache_hit);
  EXPECT_GT(res.seconds, 0.0);
  EXPECT_EQ(res.key.size(), 32u);
  const auto info = elf_of(res);
  EXPECT_EQ(info.machine, 190);  // EM_CUDA
  EXPECT_EQ(info.sm, 90);
  EXPECT_NE(res.log.find("Compiling entry function 'trivial' for 'sm_90'"), std::string::npos) << res.log;
}

TEST(compile, static_shared_memory_excludes_the_reserve) {
  const auto res = compile_ok(request(shared_src, {"staged"}));
  const auto& k = res.kernels[0];
  const auto s = check_sources_agree(res, k);
  EXPECT_EQ(k.metrics.shared_static_bytes, 8192);
  EXPECT_EQ(s.log.shared_bytes, 8192);
  EXPECT_EQ(s.elf.shared_section_bytes, 8192 + 1024);  // the CUBIN's section includes the 1 KiB reserve
  EXPECT_TRUE(elf_of(res).shared_includes_reserve);
  EXPECT_EQ(k.metrics.barriers, 1);
}

TEST(compile, reserve_rule_holds_for_many_shared_sizes_on_sm90_and_sm80) {
  const std::vector<std::string> names{"s100", "s4", "dyn", "two", "big", "named_bars", "none"};
  const std::map<std::string, int> shared{{"s100", 112},  {"s4", 16},          {"dyn", 0}, {"two", 4032},
                                          {"big", 49152}, {"named_bars", 256}, {"none", 0}};
  for (const std::string arch : {"sm_90", "sm_80"}) {
    SCOPED_TRACE(arch);
    const auto res = compile_ok(request(shared_sizes_src, names, {}, arch));
    const auto info = elf_of(res);
    EXPECT_EQ(info.shared_includes_reserve, arch == "sm_90");
    for (const auto& k : res.kernels) {
      SCOPED_TRACE(k.lowered_name);
      const auto s = check_sources_agree(res, k);
      EXPECT_EQ(k.metrics.shared_static_bytes, shared.at(k.lowered_name));
      if (s.elf.shared_section_bytes && arch == "sm_90") {
        EXPECT_EQ(*s.elf.shared_section_bytes, shared.at(k.lowered_name) + 1024);
      }
    }
    auto barriers = [&](const char* name) {
      for (const auto& k : res.kernels)
        if (k.lowered_name == name) return k.metrics.barriers;
      return -1;
    };
    EXPECT_EQ(barriers("named_bars"), 3);  // bar.sync 1 and 2: barrier ids 0..2
    EXPECT_EQ(barriers("s100"), 1);
    EXPECT_EQ(barriers("none"), 0);
  }
}

TEST(compile, register_heavy_kernel_log_and_cubin_agree) {
  const auto res = compile_ok(request(unrolled_src, {"fma_unrolled"}));
  const auto& k = res.kernels[0];
  const auto s = check_sources_agree(res, k);
  EXPECT_GE(k.metrics.registers, 48);
  EXPECT_EQ(s.log.registers, k.metrics.registers);
  EXPECT_EQ(s.elf.registers, k.metrics.registers);
  EXPECT_EQ(k.metrics.spill_stores_bytes, 0);
}

TEST(compile, launch_bounds_give_max_threads_per_block) {
  const auto res = compile_ok(request(bounds_src, {"bounded"}));
  const auto& k = res.kernels[0];
  check_sources_agree(res, k);
  EXPECT_EQ(k.metrics.max_threads_per_block, 256);
  const auto o = theoretical_occupancy(k.metrics, 512, 0);
  EXPECT_EQ(o.blocks_per_sm, 0);
  EXPECT_EQ(o.limited_by, "threads");
}

TEST(compile, maxrregcount_forces_spills) {
  const auto res = compile_ok(request(spill_src, {"spilly"}, {"--maxrregcount=16"}));
  const auto& k = res.kernels[0];
  const auto s = check_sources_agree(res, k);
  // ptxas raises 16 to its sm_90 floor of 24 and says so.
  EXPECT_NE(res.log.find("adjusting per thread register count of 16 to lower bound of 24"), std::string::npos)
      << res.log;
  EXPECT_EQ(k.metrics.registers, 24);
  EXPECT_GT(k.metrics.spill_stores_bytes, 0);
  EXPECT_GT(k.metrics.spill_loads_bytes, 0);
  EXPECT_GE(k.metrics.stack_frame_bytes, k.metrics.spill_stores_bytes / 2);
  EXPECT_EQ(s.elf.frame_bytes, k.metrics.stack_frame_bytes);
  // Without the cap the same kernel does not spill.
  const auto free = compile_ok(request(spill_src, {"spilly"}));
  EXPECT_EQ(free.kernels[0].metrics.spill_stores_bytes, 0);
  EXPECT_GT(free.kernels[0].metrics.registers, 24);
}

TEST(compile, user_constant_memory_is_bank_3) {
  const auto res = compile_ok(request(constant_src, {"weighted", "unweighted"}));
  for (const auto& k : res.kernels) {
    check_sources_agree(res, k);
    EXPECT_EQ(k.metrics.constant_bytes, 4096) << k.lowered_name;  // module-wide
  }
  const auto info = elf_of(res);
  bool found = false;
  for (const auto& b : info.constant_banks)
    if (std::find(b.symbols.begin(), b.symbols.end(), "coeffs") != b.symbols.end()) {
      found = true;
      EXPECT_EQ(b.bank, user_constant_bank);
      EXPECT_EQ(b.bytes, 4096);
    }
  EXPECT_TRUE(found) << "no constant bank holds the symbol 'coeffs'";
  // sm_90's ptxas log has no cmem figures; sm_80's names the same bank and size on its module line.
  EXPECT_TRUE(parse_ptxas_log(res.log).module_cmem_bytes.empty()) << res.log;
  const auto sm80 = compile_ok(request(constant_src, {"weighted"}, {}, "sm_80"));
  EXPECT_EQ(parse_ptxas_log(sm80.log).module_cmem_bytes[3], 4096) << sm80.log;
  EXPECT_EQ(sm80.kernels[0].metrics.constant_bytes, 4096);
}

TEST(compile, template_instances_by_name_expression) {
  const auto res = compile_ok(request(template_src, {"k<64>", "k<128>"}));
  ASSERT_EQ(res.kernels.size(), 2u);
  EXPECT_EQ(res.kernels[0].name_expression, "k<64>");
  EXPECT_EQ(res.kernels[0].lowered_name, "_Z1kILi64EEvPf");
  EXPECT_EQ(res.kernels[1].name_expression, "k<128>");
  EXPECT_EQ(res.kernels[1].lowered_name, "_Z1kILi128EEvPf");
  const auto a = check_sources_agree(res, res.kernels[0]);
  const auto b = check_sources_agree(res, res.kernels[1]);
  EXPECT_GT(res.kernels[1].metrics.registers, res.kernels[0].metrics.registers);
  EXPECT_EQ(a.log.registers, res.kernels[0].metrics.registers);
  EXPECT_EQ(b.elf.registers, res.kernels[1].metrics.registers);
}

TEST(compile, syntax_error_is_a_result_not_an_exception) {
  compiler c;
  compile_result res;
  ASSERT_NO_THROW(res = c.compile(request(
                      "extern \"C\" __global__ void broken(float* x) {\n  x[0] = 1.0f\n}\n", {"broken"})));
  EXPECT_FALSE(res.ok);
  EXPECT_TRUE(res.cubin.empty());
  EXPECT_TRUE(res.kernels.empty());
  EXPECT_NE(res.log.find("test.cu(3): error: expected a \";\""), std::string::npos) << res.log;  // at the }
  EXPECT_NE(res.log.find("error"), std::string::npos) << res.log;
}

TEST(compile, bad_requests_are_results) {
  compiler c;
  const auto arch = c.compile(request(trivial_src, {"trivial"}, {"-arch=sm_80"}));
  EXPECT_FALSE(arch.ok);
  EXPECT_NE(arch.log.find("compile_request::arch"), std::string::npos) << arch.log;
  const auto virt = c.compile(request(trivial_src, {"trivial"}, {}, "compute_90"));
  EXPECT_FALSE(virt.ok);
  EXPECT_NE(virt.log.find("no CUBIN"), std::string::npos) << virt.log;
  const auto option = c.compile(request(trivial_src, {"trivial"}, {"--no-such-option"}));
  EXPECT_FALSE(option.ok);
  EXPECT_NE(option.log.find("nvrtcCompileProgram failed"), std::string::npos) << option.log;
  // A name expression must name a __global__ function that exists.
  const auto device_fn =
      c.compile(request("__device__ float helper(float x) { return 2 * x; }\n" + std::string(trivial_src),
                        {"trivial", "helper"}));
  EXPECT_FALSE(device_fn.ok);
  EXPECT_NE(device_fn.log.find("non-__global__ function"), std::string::npos) << device_fn.log;
  const auto missing = c.compile(request(trivial_src, {"nonexistent"}));
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(missing.log.find("\"nonexistent\" is undefined"), std::string::npos) << missing.log;
}

TEST(compile, headers_are_visible_to_the_program) {
  auto r =
      request("#include \"scale.cuh\"\nextern \"C\" __global__ void scaled(float* x) { x[0] *= SCALE; }\n",
              {"scaled"});
  r.headers["scale.cuh"] = "#define SCALE 3.0f\n";
  const auto res = compile_ok(r);
  check_sources_agree(res, res.kernels[0]);
}

// --- the cache -----------------------------------------------------------------------------------

TEST(compile_cache, key_covers_the_request_and_sorts_options) {
  auto base = request(trivial_src, {"trivial"}, {"-DA=1", "--use_fast_math"});
  const auto key = compile_cache_key(base, "13.0");
  auto permuted = base;
  permuted.options = {"--use_fast_math", "-DA=1"};
  EXPECT_EQ(compile_cache_key(permuted, "13.0"), key);
  auto renamed = base;
  renamed.name = "other.cu";
  EXPECT_EQ(compile_cache_key(renamed, "13.0"), key);
  EXPECT_NE(compile_cache_key(base, "13.1"), key);
  auto changed = base;
  changed.options[0] = "-DA=2";
  EXPECT_NE(compile_cache_key(changed, "13.0"), key);
  changed = base;
  changed.arch = "sm_80";
  EXPECT_NE(compile_cache_key(changed, "13.0"), key);
  changed = base;
  changed.source += " ";
  EXPECT_NE(compile_cache_key(changed, "13.0"), key);
  changed = base;
  changed.headers["h.cuh"] = "";
  EXPECT_NE(compile_cache_key(changed, "13.0"), key);
  auto changed_header = changed;
  changed_header.headers["h.cuh"] = "x";
  EXPECT_NE(compile_cache_key(changed_header, "13.0"), compile_cache_key(changed, "13.0"));
  changed = base;
  changed.name_expressions.push_back("other");
  EXPECT_NE(compile_cache_key(changed, "13.0"), key);
  // Length prefixes keep field boundaries: moving a character between two options changes the key.
  auto a = base, b = base;
  a.options = {"-DA", "B"};
  b.options = {"-DAB", ""};
  EXPECT_NE(compile_cache_key(a, "13.0"), compile_cache_key(b, "13.0"));
}

TEST(compile_cache, entries_round_trip_and_reject_damage) {
  const auto res = compile_ok(request(template_src, {"k<64>", "k<128>"}));
  const std::string bytes = encode_cache_entry(res);
  const auto back = decode_cache_entry(bytes, res.key);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->cubin, res.cubin);
  EXPECT_EQ(back->log, res.log);
  ASSERT_EQ(back->kernels.size(), 2u);
  EXPECT_EQ(back->kernels[1].lowered_name, res.kernels[1].lowered_name);
  EXPECT_EQ(back->kernels[1].metrics.registers, res.kernels[1].metrics.registers);
  EXPECT_FALSE(decode_cache_entry(bytes, "another key"));
  EXPECT_FALSE(decode_cache_entry(bytes.substr(0, bytes.size() - 1), res.key));
  EXPECT_FALSE(decode_cache_entry(bytes.substr(0, 20), res.key));
  EXPECT_FALSE(decode_cache_entry("", res.key));
  for (std::size_t at : {std::size_t{3}, bytes.size() / 2, bytes.size() - 3}) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x5a);
    EXPECT_FALSE(decode_cache_entry(damaged, res.key)) << "byte " << at;
  }
}

TEST(compile_cache, hits_misses_and_corrupt_entries) {
  test::temp_dir dir;
  compiler c(dir.path() / "cache");
  const auto r = request(shared_src, {"staged"}, {"-DUNUSED=1", "--use_fast_math"});

  const auto first = c.compile(r);
  ASSERT_TRUE(first.ok) << first.log;
  EXPECT_FALSE(first.cache_hit);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "cache" / (first.key + ".kfc")));

  const auto second = c.compile(r);
  EXPECT_TRUE(second.cache_hit);
  EXPECT_EQ(second.seconds, 0.0);
  EXPECT_EQ(second.key, first.key);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.log, first.log);
  ASSERT_EQ(second.kernels.size(), 1u);
  EXPECT_EQ(second.kernels[0].lowered_name, "staged");
  EXPECT_EQ(second.kernels[0].metrics.shared_static_bytes, 8192);
  EXPECT_EQ(second.kernels[0].metrics.registers, first.kernels[0].metrics.registers);

  auto permuted = r;
  std::reverse(permuted.options.begin(), permuted.options.end());
  const auto third = c.compile(permuted);
  EXPECT_TRUE(third.cache_hit);
  EXPECT_EQ(third.cubin, first.cubin);

  auto other = r;
  other.options[0] = "-DUNUSED=2";
  const auto fourth = c.compile(other);
  EXPECT_FALSE(fourth.cache_hit);
  EXPECT_NE(fourth.key, first.key);

  // A second compiler on the same directory (another process, in effect) sees the entries.
  compiler again(dir.path() / "cache");
  EXPECT_TRUE(again.compile(r).cache_hit);

  // Damage the entry: it is a miss, recompiled and rewritten.
  const auto path = dir.path() / "cache" / (first.key + ".kfc");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(path) / 2));
    f.put('\x7f');
  }
  const auto fifth = c.compile(r);
  EXPECT_FALSE(fifth.cache_hit);
  EXPECT_TRUE(fifth.ok);
  EXPECT_EQ(fifth.cubin, first.cubin);  // NVRTC output is deterministic
  EXPECT_TRUE(c.compile(r).cache_hit);
  std::filesystem::resize_file(path, 10);
  EXPECT_FALSE(c.compile(r).cache_hit);
  EXPECT_TRUE(c.compile(r).cache_hit);

  // Compilation errors are cached too (they depend only on the request).
  const auto bad = request("extern \"C\" __global__ void b() { nope; }", {"b"});
  EXPECT_FALSE(c.compile(bad).cache_hit);
  const auto bad_again = c.compile(bad);
  EXPECT_TRUE(bad_again.cache_hit);
  EXPECT_FALSE(bad_again.ok);
  EXPECT_NE(bad_again.log.find("nope"), std::string::npos);

  // No temporary files are left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "cache"))
    EXPECT_EQ(e.path().extension(), ".kfc") << e.path();
}

TEST(compile_cache, unusable_directory_throws) {
  test::temp_dir dir;
  const auto file = test::write_file(dir.path() / "plain-file", "x");
  EXPECT_THROW(compiler{file}, kf::error);
}

// --- the pool ------------------------------------------------------------------------------------

TEST(compile_pool, results_follow_their_tickets) {
  compiler c;
  compile_pool pool(c, 2, 2);
  auto make = [](int n) {
    return request(
        "extern \"C\" __global__ void k(float* x) { __shared__ float s[N]; s[threadIdx.x] = x[0];"
        " __syncthreads(); x[threadIdx.x] = s[N - 1 - threadIdx.x]; }",
        {"k"}, {"-DN=" + std::to_string(n)});
  };
  std::map<compile_pool::ticket, int> submitted;  // ticket -> floats of shared memory requested
  std::map<compile_pool::ticket, compile_result> results;
  std::size_t max_seen = 0;
  for (int i = 0; i < 8; ++i) {
    if (pool.in_flight() == 2) {  // full: take one before submitting again (submit would block)
      if (auto ready = pool.try_take_any()) {
        results.emplace(ready->first, std::move(ready->second));
      } else {
        for (const auto& entry : submitted)
          if (!results.count(entry.first)) {
            results.emplace(entry.first, pool.take(entry.first));
            break;
          }
      }
    }
    const auto t = pool.submit(make(64 * (i + 1)));
    EXPECT_EQ(t, static_cast<compile_pool::ticket>(i + 1));
    submitted[t] = 64 * (i + 1);
    max_seen = std::max(max_seen, pool.in_flight());
  }
  EXPECT_EQ(max_seen, 2u);
  // Take the rest by ticket, newest first: completion order does not matter.
  for (auto it = submitted.rbegin(); it != submitted.rend(); ++it)
    if (!results.count(it->first)) results.emplace(it->first, pool.take(it->first));
  EXPECT_EQ(pool.in_flight(), 0u);
  EXPECT_FALSE(pool.try_take_any());
  ASSERT_EQ(results.size(), 8u);
  std::set<std::string> keys;
  for (const auto& [t, res] : results) {
    ASSERT_TRUE(res.ok) << res.log;
    const int n = submitted.at(t);
    EXPECT_EQ(res.kernels[0].metrics.shared_static_bytes, 4 * n) << "ticket " << t;
    EXPECT_EQ(res.key, compile_cache_key(make(n), compiler::nvrtc_version()));
    keys.insert(res.key);
  }
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_THROW(pool.take(1), kf::error);    // already taken
  EXPECT_THROW(pool.take(999), kf::error);  // never issued
}

TEST(compile_pool, submit_blocks_until_a_result_is_taken) {
  compiler c;
  compile_pool pool(c, 1, 1);
  const auto first = pool.submit(request(trivial_src, {"trivial"}));
  std::atomic<bool> submitted{false};
  std::thread producer([&] {
    pool.submit(request(trivial_src, {"trivial"}, {"-DSECOND"}));
    submitted = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the first compile is done by now
  EXPECT_FALSE(submitted.load());
  EXPECT_EQ(pool.in_flight(), 1u);
  EXPECT_TRUE(pool.take(first).ok);
  producer.join();
  EXPECT_TRUE(submitted.load());
  EXPECT_TRUE(pool.take(first + 1).ok);
}

TEST(compile_pool, destructor_waits_for_work_in_flight) {
  compiler c;
  auto pool = std::make_unique<compile_pool>(c, 1, 3);
  for (int i = 0; i < 3; ++i)
    pool->submit(request(trivial_src, {"trivial"}, {"-DI=" + std::to_string(i)}));
  pool.reset();  // must neither hang nor crash
  SUCCEED();
}

// --- occupancy -----------------------------------------------------------------------------------

std::string limit_name(unsigned bit) {
  switch (bit) {
    case occ_limit_registers:
      return "registers";
    case occ_limit_shared_memory:
      return "shared_memory";
    case occ_limit_warps:
      return "threads";
    case occ_limit_blocks:
      return "blocks";
    case occ_limit_barriers:
      return "barriers";
  }
  return "?";
}

TEST(occupancy, sgemm_like_kernel_is_register_limited) {
  static_metrics m;
  m.registers = 112;
  m.shared_static_bytes = 8192;
  m.barriers = 1;
  const auto o = theoretical_occupancy(m, 256, 0);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_DOUBLE_EQ(o.fraction, 0.25);
  EXPECT_EQ(o.limited_by, "registers");
  const auto ref = cuda_occupancy_reference(m, 256, 0);
  ASSERT_TRUE(ref.ok);
  EXPECT_EQ(ref.blocks_per_sm, 2);
  EXPECT_EQ(ref.limiting_factors, occ_limit_registers);
}

TEST(occupancy, named_limits) {
  static_metrics m;
  m.registers = 32;
  auto o = theoretical_occupancy(m, 256, 0);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  EXPECT_EQ(o.limited_by, "none");
  o = theoretical_occupancy(m, 640, 0);  // 20 warps: 3 blocks use 60 of 64 warp slots (registers tie)
  EXPECT_EQ(o.blocks_per_sm, 3);
  EXPECT_EQ(o.limited_by, "threads");
  m.registers = 40;  // 40 x 32 = 1280 per warp: 12 warps per sub-partition, 48 per SM
  o = theoretical_occupancy(m, 256, 0);
  EXPECT_EQ(o.blocks_per_sm, 6);
  EXPECT_DOUBLE_EQ(o.fraction, 0.75);
  EXPECT_EQ(o.limited_by, "registers");
  m.registers = 32;
  o = theoretical_occupancy(m, 32, 0);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limited_by, "blocks");
  o = theoretical_occupancy(m, 256, 100 * 1024);  // 100 KiB + 1 KiB reserve: 2 blocks in 228 KiB
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_EQ(o.limited_by, "shared_memory");
  o = theoretical_occupancy(m, 128, 232448 + 1);  // above the opt-in maximum
  EXPECT_EQ(o.blocks_per_sm, 0);
  EXPECT_EQ(o.limited_by, "shared_memory");
  o = theoretical_occupancy(m, 1025, 0);
  EXPECT_EQ(o.blocks_per_sm, 0);
  EXPECT_EQ(o.limited_by, "threads");
  m.registers = 255;
  o = theoretical_occupancy(m, 1024, 0);  // 255 x 32 -> 8192 per warp x 32 warps > 65536
  EXPECT_EQ(o.blocks_per_sm, 0);
  EXPECT_EQ(o.limited_by, "registers");
  // The register cap on block size (the driver's MAX_THREADS_PER_BLOCK: 896 at 72 registers, 384 at 168).
  m.registers = 72;
  EXPECT_EQ(theoretical_occupancy(m, 896, 0).blocks_per_sm, 1);
  EXPECT_EQ(theoretical_occupancy(m, 897, 0).limited_by, "registers");
  EXPECT_EQ(theoretical_occupancy(m, 897, 0).blocks_per_sm, 0);
  m.registers = 168;
  EXPECT_EQ(theoretical_occupancy(m, 384, 0).blocks_per_sm, 1);
  EXPECT_EQ(theoretical_occupancy(m, 385, 0).blocks_per_sm, 0);
  m.registers = 16;
  m.barriers = 3;  // 64 barrier slots / 3 = 21 blocks of one warp
  o = theoretical_occupancy(m, 32, 0);
  EXPECT_EQ(o.blocks_per_sm, 21);
  EXPECT_EQ(o.limited_by, "barriers");
}

TEST(occupancy, matches_cuda_occupancy_h) {
  int compared = 0;
  for (int regs : {0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 104, 112, 128, 168, 200, 232, 255})
    for (int threads : {1, 32, 33, 64, 96, 128, 160, 192, 256, 288, 384, 512, 640, 768, 1024})
      for (int smem : {0, 100, 8192, 49152})
        for (int dyn : {0, 1000, 16384, 65536, 180000})
          for (int barriers : {0, 1, 3}) {
            static_metrics m;
            m.registers = regs;
            m.shared_static_bytes = smem;
            m.barriers = barriers;
            const auto mine = theoretical_occupancy(m, threads, dyn);
            const auto ref = cuda_occupancy_reference(m, threads, dyn);
            ASSERT_TRUE(ref.ok);
            ASSERT_EQ(mine.blocks_per_sm, ref.blocks_per_sm)
                << regs << " regs, " << threads << " threads, " << smem << "+" << dyn << " B smem, "
                << barriers << " barriers";
            if (mine.blocks_per_sm > 0 && mine.limited_by != "none") {
              // limited_by is one of the limits cuda_occupancy.h reports as binding.
              bool named = false;
              for (unsigned bit = 1; bit <= occ_limit_barriers; bit <<= 1)
                if ((ref.limiting_factors & bit) && limit_name(bit) == mine.limited_by) named = true;
              EXPECT_TRUE(named) << mine.limited_by << " vs factors " << ref.limiting_factors << " for "
                                 << regs << " regs, " << threads << " threads";
            }
            ++compared;
          }
  EXPECT_EQ(compared, 19 * 15 * 4 * 5 * 3);
}

TEST(occupancy, from_compiled_kernels) {
  const auto res = compile_ok(request(template_src, {"k<64>", "k<128>"}));
  for (const auto& k : res.kernels)
    for (int threads : {128, 256, 512}) {
      const auto mine = theoretical_occupancy(k.metrics, threads, 0);
      const auto ref = cuda_occupancy_reference(k.metrics, threads, 0);
      EXPECT_EQ(mine.blocks_per_sm, ref.blocks_per_sm) << k.lowered_name << " " << threads;
    }
}

// --- the readers on their own --------------------------------------------------------------------

TEST(ptxas_log, parses_sm80_and_sm90_lines) {
  const auto r = parse_ptxas_log(
      "ptxas info    : 272 bytes gmem, 4096 bytes cmem[3]\n"
      "ptxas info    : Compiling entry function 'two' for 'sm_80'\n"
      "ptxas info    : Function properties for two\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 17 registers, used 1 barriers, 4032 bytes smem, 360 bytes cmem[0], 8 bytes "
      "cmem[2]\n"
      "ptxas info    : Compile time = 1.5 ms\n"
      "ptxas warning : something\n"
      "ptxas info    : Compiling entry function 'dconst' for 'sm_90'\n"
      "ptxas info    : Function properties for dconst\n"
      "ptxas         .     40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 28 registers, used 0 barriers, 40 bytes cumulative stack size\n"
      "ptxas info    : Function properties for __internal_trig_reduction_slowpathd\n"
      "ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n");
  EXPECT_EQ(r.gmem_bytes, 272);
  EXPECT_EQ(r.module_cmem_bytes.at(3), 4096);
  const auto* two = r.find("two");
  ASSERT_NE(two, nullptr);
  EXPECT_TRUE(two->entry);
  EXPECT_EQ(two->registers, 17);
  EXPECT_EQ(two->barriers, 1);
  EXPECT_EQ(two->shared_bytes, 4032);
  EXPECT_EQ(two->stack_frame_bytes, 8);
  EXPECT_EQ(two->spill_stores_bytes, 4);
  EXPECT_EQ(two->spill_loads_bytes, 12);
  EXPECT_EQ(two->cmem_bytes.at(2), 8);
  const auto* d = r.find("dconst");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->registers, 28);
  EXPECT_FALSE(d->shared_bytes);
  EXPECT_EQ(d->cumulative_stack_bytes, 40);
  EXPECT_EQ(d->stack_frame_bytes, 40);
  const auto* helper = r.find("__internal_trig_reduction_slowpathd");
  ASSERT_NE(helper, nullptr);
  EXPECT_FALSE(helper->entry);
  EXPECT_EQ(helper->stack_frame_bytes, 16);
  EXPECT_FALSE(helper->registers);
  EXPECT_TRUE(parse_ptxas_log("").functions.empty());
  EXPECT_TRUE(parse_ptxas_log("garbage\nptxas\nptxas info    : Used x registers\n").functions.empty());
}

TEST(cubin_reader, rejects_malformed_images) {
  const auto res = compile_ok(request(trivial_src, {"trivial"}));
  const std::vector<std::uint8_t>& good = res.cubin;
  EXPECT_NO_THROW(read_cubin(good));
  EXPECT_THROW(read_cubin(std::span<const std::uint8_t>(good.data(), 40)), kf::error);
  EXPECT_THROW(read_cubin(std::span<const std::uint8_t>(good.data(), good.size() / 2)), kf::error);
  std::vector<std::uint8_t> junk(4096, 0xab);
  EXPECT_THROW(read_cubin(junk), kf::error);
  EXPECT_THROW(read_cubin({}), kf::error);
  // Flip bytes all over the image: the reader may throw kf::error but must never crash.
  for (std::size_t at = 0; at < good.size(); at += 7) {
    auto bad = good;
    bad[at] ^= 0xff;
    try {
      (void)read_cubin(bad);
    } catch (const kf::error&) {
    }
  }
}

}  // namespace
}  // namespace kf

namespace kf {
namespace {

std::string worker_program() {
  return (std::filesystem::path(KFORGE_CLI).parent_path() / "kforge-worker").string();
}

// Out of process: kforge-worker --compile compiles into the cache and the pool reads the entry (not a
// hit for the caller: cache_hit false, the child's wall time); the request files are removed; the same
// request again is a hit without a child.
TEST(compile_pool, compilations_in_child_processes_come_back_through_the_cache) {
  test::temp_dir tmp;
  compiler c(tmp.path() / "cache");
  compile_pool pool(c, 2, 4, {worker_program()});
  const auto a = pool.submit(request(trivial_src, {"trivial"}, {"-DA"}));
  const auto b = pool.submit(request(trivial_src, {"trivial"}, {"-DB"}));
  for (const auto t : {a, b}) {
    const auto r = pool.take(t);
    ASSERT_TRUE(r.ok) << r.log;
    EXPECT_FALSE(r.cache_hit);
    EXPECT_GT(r.seconds, 0.0);
    EXPECT_FALSE(r.cubin.empty());
    EXPECT_EQ(r.kernels.at(0).name_expression, "trivial");
  }
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path() / "cache/requests"));
  const auto again = pool.take(pool.submit(request(trivial_src, {"trivial"}, {"-DA"})));
  EXPECT_TRUE(again.cache_hit);
  // A compile error comes back as the child cached it.
  const auto bad = pool.take(pool.submit(request("extern \"C\" __global__ void k( {", {"k"})));
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.log.find("error"), std::string::npos) << bad.log;
}

// A child that leaves no entry (here a program that is not kforge-worker, or none at all) is followed by
// the compilation in this process.
TEST(compile_pool, a_child_that_leaves_no_result_falls_back_to_the_compilation_in_process) {
  test::temp_dir tmp;
  compiler c(tmp.path() / "cache");
  for (const std::string& program : {std::string("/bin/true"), (tmp.path() / "no-such-program").string()}) {
    compile_pool pool(c, 1, 1, {program});
    const auto r =
        pool.take(pool.submit(request(trivial_src, {"trivial"}, {"-DP" + std::to_string(program.size())})));
    ASSERT_TRUE(r.ok) << program << ": " << r.log;
    EXPECT_FALSE(r.cache_hit) << program;
  }
}

}  // namespace
}  // namespace kf
