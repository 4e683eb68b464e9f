// read_only: `const` and `__restrict__` on the entry's buffer parameters, and optionally __ldg loads.
//
// Parameter `<instance>` (strings from the option `modes`, default [none, restrict, ldg]):
//   none      the source is unchanged (default)
//   restrict  every buffer parameter that is a plain pointer `T* name` gets `__restrict__` after its '*';
//             the buffers the kernel only reads (role in: transform_context::read_only) also get `const`
//             in front (`const T* __restrict__ name`). Qualifiers already present are kept, not doubled.
//   ldg       restrict, and in the entry's body every read `x[expr]` of a read-only buffer x whose element
//             type __ldg supports (float, double, the integer types, their 2/4-vectors) becomes
//             `__ldg(&x[expr])`; `expr` is rewritten too (nested reads), and writes, `&x[...]`, members
//             named x and uses inside macros are left alone.
// Buffers are matched to the entry's parameters by name, or by position among the pointer parameters when
// no name matches and the counts agree. Takes no site. Errors: no __global__ definition of the entry; a
// buffer that is not a parameter, or not a plain pointer; a local declaration that shadows a read-only
// buffer (ldg). Guarantee: `__restrict__` is sound because kforge allocates every buffer separately (the
// entry's buffers never alias); `const` on a buffer the kernel writes fails to compile (an invalid trial,
// never wrong results); __ldg reads through the read-only cache and returns the same value as long as the
// buffer is not written during the kernel (role in).
#include <algorithm>
#include <set>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

bool ldg_type(const std::string& t) {
  static const std::set<std::string> types = {"float",
                                              "double",
                                              "int",
                                              "unsigned int",
                                              "unsigned",
                                              "long long",
                                              "long long int",
                                              "unsigned long long",
                                              "unsigned long long int",
                                              "char",
                                              "signed char",
                                              "unsigned char",
                                              "short",
                                              "unsigned short",
                                              "float2",
                                              "float4",
                                              "double2",
                                              "int2",
                                              "int4",
                                              "uint2",
                                              "uint4",
                                              "char2",
                                              "char4",
                                              "uchar2",
                                              "uchar4",
                                              "short2",
                                              "short4",
                                              "ushort2",
                                              "ushort4",
                                              "longlong2",
                                              "ulonglong2",
                                              "int64_t",
                                              "uint64_t",
                                              "int32_t",
                                              "uint32_t"};
  return types.count(t) > 0;
}

bool operand_end(const token& t) {
  if (t.kind == token_kind::identifier)
    return !(t.is("return") || t.is("case") || t.is("sizeof") || t.is("throw") || t.is("else") || t.is("do"));
  return t.kind == token_kind::number || t.kind == token_kind::literal || t.is(")") || t.is("]");
}

bool declaring_keyword(const token& t) {
  return t.is("return") || t.is("case") || t.is("else") || t.is("do") || t.is("sizeof") || t.is("new") ||
         t.is("delete") || t.is("throw") || t.is("goto") || t.is("typename");
}

// The text of tokens [first, last) with reads of `arrays` wrapped in __ldg, copied from offset `from` to
// `to`.
std::string with_ldg(const lexed& lx, std::size_t first, std::size_t last, std::size_t from, std::size_t to,
                     const std::set<std::string, std::less<>>& arrays) {
  const auto src = lx.source();
  std::string out;
  std::size_t pos = from;
  for (std::size_t k = first; k < last; ++k) {
    const auto& t = lx[k];
    if (t.kind != token_kind::identifier || !arrays.count(t.text) || k + 1 >= last || !lx[k + 1].is("["))
      continue;
    if (k > 0) {
      const auto& p = lx[k - 1];
      if (p.is(".") || p.is("->") || p.is("::") || p.is("++") || p.is("--")) continue;
      if (p.is("&") && !(k > 1 && operand_end(lx[k - 2]))) continue;  // &x[...]: an address, not a read
    }
    const std::size_t close = lx.match(k + 1);
    if (close + 1 < lx.size() &&
        (is_assignment(lx[close + 1].text) || lx[close + 1].is("++") || lx[close + 1].is("--")))
      continue;  // a write (refused by the compiler for a const buffer anyway)
    out.append(src.substr(pos, t.begin - pos));
    out += "__ldg(&";
    out += t.text;
    out += "[";
    out += with_ldg(lx, k + 2, close, lx[k + 1].end, lx[close].begin, arrays);
    out += "])";
    pos = lx[close].end;
    k = close;
  }
  out.append(src.substr(pos, to - pos));
  return out;
}

struct read_only_op {
  std::vector<std::string> modes;

  std::vector<transform_param> parameters() const { return {{"value", to_values(modes), value("none")}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context& ctx) const {
    return guarded("read_only", "", [&] {
      const auto mode = string_value(v, "value");
      if (mode != "none" && mode != "restrict" && mode != "ldg")
        fail("unknown mode '" + mode + "' (expected none, restrict or ldg)");
      const lexed lx(source);
      const auto f = find_entry(lx, ctx.entry);
      if (mode == "none") return transform_result{source, {}, {}};
      const auto params = parse_parameters(lx, f);
      // Buffers -> parameters: by name, else by position among the pointer parameters.
      std::vector<const parameter*> pointers;
      for (const auto& p : params)
        if (p.pointer_depth != 0) pointers.push_back(&p);
      std::vector<const parameter*> bound(ctx.buffer_names.size(), nullptr);
      std::size_t by_name = 0;
      for (std::size_t b = 0; b < ctx.buffer_names.size(); ++b)
        for (const auto& p : params)
          if (p.name == ctx.buffer_names[b]) bound[b] = &p, ++by_name;
      if (by_name == 0 && pointers.size() == ctx.buffer_names.size()) {
        for (std::size_t b = 0; b < bound.size(); ++b)
          bound[b] = pointers[b];
      } else {
        for (std::size_t b = 0; b < bound.size(); ++b)
          if (!bound[b])
            fail("the buffer '" + ctx.buffer_names[b] + "' is not a parameter of the entry '" + ctx.entry +
                 "'");
      }
      text_edits edits;
      std::set<std::string, std::less<>> ldg_arrays;
      for (std::size_t b = 0; b < bound.size(); ++b) {
        const auto& p = *bound[b];
        if (p.pointer_depth != 1)
          fail("the parameter '" + p.name + "' of buffer '" + ctx.buffer_names[b] +
               "' is not a plain pointer (T* name)");
        const bool ro =
            std::find(ctx.read_only.begin(), ctx.read_only.end(), ctx.buffer_names[b]) != ctx.read_only.end();
        if (ro && !p.const_pointee) edits.insert(lx[p.first].begin, "const ");
        if (!p.restricted) edits.insert(lx[p.star + 1].begin, "__restrict__ ");
        if (ro && mode == "ldg" && ldg_type(p.element_type) && !p.name.empty()) ldg_arrays.insert(p.name);
      }
      if (!ldg_arrays.empty()) {
        for (std::size_t k = f.body_open + 1; k < f.body_close; ++k)
          if (lx[k].kind == token_kind::identifier && ldg_arrays.count(lx[k].text) && k > 0 &&
              lx[k - 1].kind == token_kind::identifier && !declaring_keyword(lx[k - 1]))
            fail("the entry's body declares its own '" + std::string(lx[k].text) + "', shadowing the buffer");
        edits.replace(lx[f.body_open].end, lx[f.body_close].begin,
                      with_ldg(lx, f.body_open + 1, f.body_close, lx[f.body_open].end, lx[f.body_close].begin,
                               ldg_arrays));
      }
      return transform_result{edits.apply(source), {}, {}};
    });
  }
};

}  // namespace

void register_read_only() {
  transform_registry().add(
      {"read_only",
       "const/__restrict__ on the entry's buffer parameters, optionally __ldg reads of read-only buffers "
       "(none | restrict | ldg)",
       {list_option("modes", nlohmann::json::array({"none", "restrict", "ldg"}),
                    "modes searched, from none, restrict, ldg (must include none, the unchanged source)")},
       [](const options& o, const transform_site& s) -> transform {
         if (!s.site.empty()) o.where().fail("read_only acts on the entry kernel and takes no site");
         auto modes = string_list(o, "modes");
         bool has_none = false;
         for (const auto& m : modes) {
           if (m != "none" && m != "restrict" && m != "ldg")
             o.fail("modes", "unknown mode '" + m + "' (expected none, restrict or ldg)");
           has_none |= m == "none";
         }
         if (!has_none) o.fail("modes", "must include none (the unchanged source)");
         return read_only_op{std::move(modes)};
       }});
}

}  // namespace kf::transforms
