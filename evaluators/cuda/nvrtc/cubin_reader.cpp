#include "evaluators/cuda/nvrtc/cubin_reader.hpp"

#include <elf.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>

#include "kforge/error.hpp"

namespace kf::cuda::detail {
namespace {

[[noreturn]] void malformed(const std::string& what) {
  throw kf::error("malformed CUBIN: " + what);
}

/// Copies a trivially copyable T from image[offset, offset + sizeof(T)), bounds-checked.
template <class T>
T load(std::span<const std::uint8_t> image, std::uint64_t offset, const char* what) {
  if (offset > image.size() || image.size() - offset < sizeof(T))
    malformed(std::string(what) + " out of bounds");
  T value;
  std::memcpy(&value, image.data() + offset, sizeof(T));
  return value;
}

/// The NUL-terminated string at `offset` of a string table section.
std::string_view table_string(std::span<const std::uint8_t> image, const Elf64_Shdr& table,
                              std::uint64_t offset) {
  if (table.sh_offset > image.size() || image.size() - table.sh_offset < table.sh_size ||
      offset >= table.sh_size)
    malformed("string table index out of bounds");
  const char* begin = reinterpret_cast<const char*>(image.data() + table.sh_offset + offset);
  const std::size_t max = table.sh_size - offset;
  const void* nul = std::memchr(begin, 0, max);
  if (!nul) malformed("unterminated string");
  return {begin, static_cast<std::size_t>(static_cast<const char*>(nul) - begin)};
}

/// The bytes of a section with contents (not NOBITS), bounds-checked.
std::span<const std::uint8_t> section_bytes(std::span<const std::uint8_t> image, const Elf64_Shdr& s) {
  if (s.sh_type == SHT_NOBITS) return {};
  if (s.sh_offset > image.size() || image.size() - s.sh_offset < s.sh_size)
    malformed("section out of bounds");
  return image.subspan(s.sh_offset, s.sh_size);
}

/// One EIATTR record: the attribute code, its format and its payload (sized records) or the 16-bit
/// value that follows the header (byte/half records).
struct eiattr_record {
  std::uint8_t format = 0;
  std::uint8_t attribute = 0;
  std::uint16_t value = 0;
  std::span<const std::uint8_t> payload;
};

constexpr std::uint8_t eifmt_nval = 0x01, eifmt_bval = 0x02, eifmt_hval = 0x03, eifmt_sval = 0x04;

/// Calls f(record) for each record of an `.nv.info*` section.
template <class F>
void for_each_record(std::span<const std::uint8_t> bytes, F&& f) {
  std::size_t p = 0;
  while (p < bytes.size()) {
    if (bytes.size() - p < 4) malformed("truncated .nv.info record");
    eiattr_record r;
    r.format = bytes[p];
    r.attribute = bytes[p + 1];
    const auto u16 = static_cast<std::uint16_t>(bytes[p + 2] | (bytes[p + 3] << 8));
    switch (r.format) {
      case eifmt_nval:
      case eifmt_hval:
        r.value = u16;
        p += 4;
        break;
      case eifmt_bval:
        r.value = bytes[p + 2];
        p += 4;
        break;
      case eifmt_sval:
        if (bytes.size() - p - 4 < u16) malformed(".nv.info record runs past its section");
        r.payload = bytes.subspan(p + 4, u16);
        p += 4 + static_cast<std::size_t>(u16);
        break;
      default:
        malformed("unknown .nv.info record format " + std::to_string(r.format));
    }
    f(r);
  }
}

std::uint32_t u32_at(std::span<const std::uint8_t> payload, std::size_t index) {
  std::uint32_t v = 0;
  std::memcpy(&v, payload.data() + 4 * index, 4);
  return v;
}

int to_int(std::uint64_t v) {
  return v > 0x7fffffffu ? 0x7fffffff : static_cast<int>(v);
}

/// x*y*z of a 3 x u32 payload, or nullopt when the payload is not 12 bytes.
std::optional<int> threads_product(std::span<const std::uint8_t> payload) {
  if (payload.size() != 12) return std::nullopt;
  std::uint64_t n = 1;
  for (std::size_t i = 0; i < 3; ++i)
    n *= std::max<std::uint32_t>(u32_at(payload, i), 1);
  return to_int(n);
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

const cubin_function* cubin_info::find(const std::string& name) const {
  auto it = functions.find(name);
  return it == functions.end() ? nullptr : &it->second;
}

int cubin_info::user_constant_bytes() const {
  for (const auto& b : constant_banks)
    if (b.bank == user_constant_bank) return to_int(static_cast<std::uint64_t>(b.bytes));
  return 0;
}

std::optional<int> cubin_info::static_shared_bytes(const std::string& name) const {
  const cubin_function* f = find(name);
  if (!f) return std::nullopt;
  if (!f->shared_section_bytes) return 0;
  std::int64_t bytes = *f->shared_section_bytes;
  if (shared_includes_reserve) bytes -= reserved_shared_bytes;
  return bytes < 0 ? 0 : to_int(static_cast<std::uint64_t>(bytes));
}

cubin_info read_cubin(std::span<const std::uint8_t> image) {
  const auto eh = load<Elf64_Ehdr>(image, 0, "ELF header");
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) malformed("no ELF magic");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    malformed("not a 64-bit little-endian ELF file");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) malformed("unexpected section header size");
  if (eh.e_shstrndx >= eh.e_shnum) malformed("bad section name table index");

  cubin_info info;
  info.machine = eh.e_machine;
  info.sm = static_cast<int>((eh.e_flags >> 8) & 0xffu);

  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  for (std::size_t i = 0; i < sections.size(); ++i)
    sections[i] = load<Elf64_Shdr>(image, eh.e_shoff + i * sizeof(Elf64_Shdr), "section header");
  const Elf64_Shdr& names = sections[eh.e_shstrndx];
  std::vector<std::string> section_names(sections.size());
  for (std::size_t i = 0; i < sections.size(); ++i)
    section_names[i] = std::string(table_string(image, names, sections[i].sh_name));

  // Symbols: names by index (for the module-wide .nv.info records) and object symbols per section
  // (to name what a constant bank holds).
  std::vector<std::string> symbol_names;
  std::map<std::size_t, std::vector<std::string>> objects_in_section;
  for (const Elf64_Shdr& s : sections) {
    if (s.sh_type != SHT_SYMTAB) continue;
    if (s.sh_link >= sections.size()) malformed("symbol table without a string table");
    const auto bytes = section_bytes(image, s);
    const std::size_t count = bytes.size() / sizeof(Elf64_Sym);
    symbol_names.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      const auto sym = load<Elf64_Sym>(image, s.sh_offset + i * sizeof(Elf64_Sym), "symbol");
      symbol_names[i] = std::string(table_string(image, sections[s.sh_link], sym.st_name));
      if (ELF64_ST_TYPE(sym.st_info) == STT_OBJECT && sym.st_shndx != SHN_UNDEF &&
          sym.st_shndx < sections.size())
        objects_in_section[sym.st_shndx].push_back(symbol_names[i]);
      if (symbol_names[i] == ".nv.reservedSmem.offset0") info.shared_includes_reserve = true;
    }
    break;  // a CUBIN has one symbol table
  }
  auto symbol = [&](std::uint32_t index) -> const std::string& {
    if (index >= symbol_names.size())
      malformed(".nv.info names symbol " + std::to_string(index) + " that does not exist");
    return symbol_names[index];
  };

  for (std::size_t i = 0; i < sections.size(); ++i) {
    const std::string_view name = section_names[i];
    const Elf64_Shdr& s = sections[i];
    if (starts_with(name, ".nv.shared.reserved.")) {
      info.shared_includes_reserve = true;
    } else if (starts_with(name, ".nv.shared.")) {
      info.functions[std::string(name.substr(11))].shared_section_bytes =
          static_cast<std::int64_t>(s.sh_size);
    } else if (starts_with(name, ".text.")) {
      info.functions[std::string(name.substr(6))].has_text = true;
    } else if (name == ".nv.info") {
      for_each_record(section_bytes(image, s), [&](const eiattr_record& r) {
        if (r.format != eifmt_sval || r.payload.size() != 8) return;
        if (r.attribute != eiattr_regcount && r.attribute != eiattr_frame_size &&
            r.attribute != eiattr_min_stack_size)
          return;
        cubin_function& f = info.functions[symbol(u32_at(r.payload, 0))];
        const int v = to_int(u32_at(r.payload, 1));
        if (r.attribute == eiattr_regcount) f.registers = v;
        if (r.attribute == eiattr_frame_size) f.frame_bytes = v;
        if (r.attribute == eiattr_min_stack_size) f.min_stack_bytes = v;
      });
    } else if (starts_with(name, ".nv.info.")) {
      cubin_function& f = info.functions[std::string(name.substr(9))];
      f.has_info = true;
      for_each_record(section_bytes(image, s), [&](const eiattr_record& r) {
        if (r.attribute == eiattr_max_threads && r.format == eifmt_sval)
          f.max_threads = threads_product(r.payload);
        if (r.attribute == eiattr_reqntid && r.format == eifmt_sval)
          f.required_threads = threads_product(r.payload);
        if (r.attribute == eiattr_num_barriers && r.format != eifmt_sval) f.barriers = r.value;
      });
    } else if (starts_with(name, ".nv.constant")) {
      // Module-wide banks are named `.nv.constant<N>`; per-function ones `.nv.constant<N>.<fn>`.
      const std::string_view rest = name.substr(12);
      int bank = -1;
      const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), bank);
      if (ec != std::errc{} || end != rest.data() + rest.size()) continue;
      cubin_constant_bank b;
      b.bank = bank;
      b.bytes = static_cast<std::int64_t>(s.sh_size);
      if (auto it = objects_in_section.find(i); it != objects_in_section.end()) b.symbols = it->second;
      info.constant_banks.push_back(std::move(b));
    }
  }
  return info;
}

}  // namespace kf::cuda::detail
