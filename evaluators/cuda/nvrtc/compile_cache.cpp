#include "evaluators/cuda/nvrtc/compile_cache.hpp"

#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <functional>
#include <iterator>
#include <system_error>
#include <thread>
#include <vector>

#include "kforge/error.hpp"

namespace kf::cuda::detail {
namespace {

constexpr std::string_view entry_magic = "KFCUBIN\n";

// --- little-endian encoding ------------------------------------------------------------------------

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
void put_bytes(std::string& out, std::string_view bytes) {
  put_u64(out, bytes.size());
  out.append(bytes);
}

/// Sequential reader over an entry; every read is bounds-checked and a failure sticks.
class reader {
 public:
  explicit reader(std::string_view bytes) : bytes_(bytes) {}
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == bytes_.size(); }
  std::size_t position() const { return pos_; }

  std::uint64_t u64() { return unsigned_le(8); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(unsigned_le(4)); }
  std::string_view bytes() {
    const std::uint64_t n = u64();
    if (!ok_ || n > bytes_.size() - pos_) return fail();
    auto s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view raw(std::size_t n) {
    if (!ok_ || n > bytes_.size() - pos_) return fail();
    auto s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  std::uint64_t unsigned_le(std::size_t n) {
    if (!ok_ || n > bytes_.size() - pos_) {
      fail();
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  std::string_view fail() {
    ok_ = false;
    return {};
  }

  std::string_view bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

std::array<int*, 8> metric_fields(static_metrics& m) {
  return {&m.registers,           &m.spill_stores_bytes, &m.spill_loads_bytes,     &m.stack_frame_bytes,
          &m.shared_static_bytes, &m.constant_bytes,     &m.max_threads_per_block, &m.barriers};
}

std::string hex(const unsigned char* bytes, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 0xf]);
  }
  return out;
}

}  // namespace

std::string compile_cache_key(const compile_request& r, std::string_view nvrtc_version) {
  std::string buf;
  buf.reserve(r.source.size() + 256);
  put_bytes(buf, "kforge.compile");
  put_u32(buf, compile_cache_format);
  put_bytes(buf, nvrtc_version);
  put_bytes(buf, r.arch);
  put_bytes(buf, r.source);
  put_u64(buf, r.headers.size());
  for (const auto& [name, content] : r.headers) {  // std::map: ordered by name
    put_bytes(buf, name);
    put_bytes(buf, content);
  }
  std::vector<std::string> options = r.options;
  std::sort(options.begin(), options.end());
  put_u64(buf, options.size());
  for (const auto& o : options)
    put_bytes(buf, o);
  put_u64(buf, r.name_expressions.size());
  for (const auto& e : r.name_expressions)
    put_bytes(buf, e);

  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits(buf.data(), buf.size()));
  return hex(canonical.digest, sizeof(canonical.digest));
}

std::string encode_cache_entry(const compile_result& r) {
  std::string out;
  out.reserve(r.cubin.size() + r.log.size() + 256);
  out.append(entry_magic);
  put_u32(out, compile_cache_format);
  put_bytes(out, r.key);
  put_u32(out, r.ok ? 1 : 0);
  put_bytes(out, r.log);
  put_bytes(out, std::string_view(reinterpret_cast<const char*>(r.cubin.data()), r.cubin.size()));
  put_u64(out, r.kernels.size());
  for (const auto& k : r.kernels) {
    put_bytes(out, k.name_expression);
    put_bytes(out, k.lowered_name);
    static_metrics m = k.metrics;
    for (int* f : metric_fields(m))
      put_u32(out, static_cast<std::uint32_t>(*f));
  }
  put_u64(out, XXH3_64bits(out.data(), out.size()));
  return out;
}

std::optional<compile_result> decode_cache_entry(std::string_view bytes, const std::string& key) {
  if (bytes.size() < entry_magic.size() + 8) return std::nullopt;
  const std::size_t body = bytes.size() - 8;
  reader tail(bytes.substr(body));
  if (tail.u64() != XXH3_64bits(bytes.data(), body)) return std::nullopt;

  reader in(bytes.substr(0, body));
  if (in.raw(entry_magic.size()) != entry_magic || in.u32() != compile_cache_format) return std::nullopt;
  compile_result r;
  r.key = std::string(in.bytes());
  if (!in.ok() || r.key != key) return std::nullopt;
  r.ok = in.u32() == 1;
  r.log = std::string(in.bytes());
  const auto cubin = in.bytes();
  r.cubin.assign(cubin.begin(), cubin.end());
  const std::uint64_t n = in.u64();
  if (!in.ok() || n > body) return std::nullopt;
  r.kernels.resize(static_cast<std::size_t>(n));
  for (auto& k : r.kernels) {
    k.name_expression = std::string(in.bytes());
    k.lowered_name = std::string(in.bytes());
    for (int* f : metric_fields(k.metrics))
      *f = static_cast<int>(in.u32());
  }
  if (!in.ok() || !in.at_end()) return std::nullopt;
  return r;
}

nlohmann::json request_to_json(const compile_request& r) {
  return {{"source", r.source},        {"name", r.name}, {"options", r.options},
          {"name_expressions", r.name_expressions}, {"arch", r.arch}, {"headers", r.headers}};
}

compile_request request_from_json(const nlohmann::json& j) {
  try {
    compile_request r;
    r.source = j.at("source").get<std::string>();
    r.name = j.at("name").get<std::string>();
    r.options = j.at("options").get<std::vector<std::string>>();
    r.name_expressions = j.at("name_expressions").get<std::vector<std::string>>();
    r.arch = j.at("arch").get<std::string>();
    r.headers = j.at("headers").get<std::map<std::string, std::string>>();
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw kf::error(std::string("a compile request: ") + e.what());
  }
}

disk_cache::disk_cache(std::filesystem::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw kf::error("cannot use compile cache directory " + dir_.string() + ": " +
                    (ec ? ec.message() : std::string("not a directory")));
}

std::optional<compile_result> disk_cache::load(const std::string& key) const {
  std::ifstream in(entry_path(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return decode_cache_entry(bytes, key);
}

bool disk_cache::store(const compile_result& r) const {
  static std::atomic<std::uint64_t> counter{0};
  const std::string bytes = encode_cache_entry(r);
  const auto tmp =
      dir_ / (r.key + ".tmp." + std::to_string(::getpid()) + "." +
              std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) & 0xffffffu) + "." +
              std::to_string(counter.fetch_add(1)));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, entry_path(r.key), ec);  // atomic replacement on POSIX
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace kf::cuda::detail
