// vectorize: float2/float4 loads and stores for a simple elementwise loop.
//
//     //@kf vectorize <site> [index=i] [arrays=x,y] [base=<expr>] [type=float]
//     for (<T> i = <start>; i < <n>; ++i | i++ | i += <stride>) <body>
//
// Parameter `<instance>` (values from the option `widths`, default [1, 2, 4]; 1 leaves the source
// unchanged). With width W the loop becomes a block with (1) a scalar prologue up to the first index whose
// elements are W-aligned in every marked array, (2) a vector loop that loads each marked array's W
// elements with one `*reinterpret_cast<const float4*>(x + g)` (float2/float4, int2/int4, uint2/uint4,
// double2), runs the body once per lane in order with `x[i]` replaced by the lane's component and `i` by
// `(g + lane)`, and stores the arrays the body writes, (3) a scalar epilogue for the remaining (n - a) % W
// elements. When the arrays' addresses are not equally aligned (their element offsets differ modulo W)
// the whole range runs the original scalar loop (checked at run time). Correct for any n, any start and
// any (mis)alignment.
// Supported form (checked; anything else is an error naming the site, never a rewrite):
//  - the init declares the index: `<T> i = <start>` (one declarator); the condition is `i < <n>` with no
//    operator of lower precedence than '<' in <n> at its top level; the increment is `++i`, `i++` or
//    `i += <stride>`; the body is `{ ... }` or one expression statement;
//  - every marked array (`arrays=`, default: the entry's buffers indexed as `X[i]` in the body) is used in
//    the body only as `X[i]`, and is a pointer to float, int, unsigned or double (width 2 only) given by the
//    entry's parameter or by `type=`;
//  - the body has no return, break, continue or goto, and does not modify i or any name used in <start>,
//    <n>, <stride> or base; those expressions (evaluated more than once) contain no =, ++ or --;
//  - a strided loop (stride not 1), e.g. a grid-stride loop, needs `base=<expr>`: the first index of the
//    range all threads share. Precondition there (the author's): the threads running the loop have
//    start - base = 0, 1, ..., stride-1 (each once), as in `for (i = base + tid; i < n; i += nthreads)`,
//    they see the same base, <n> and arrays, and the body does not depend on which thread runs it
//    (checked: no threadIdx/blockIdx in the body); the iterations are then redistributed among those
//    threads (each element still processed once; a per-thread floating-point accumulation is rounded
//    differently, a unit-stride loop keeps its order exactly).
// Preconditions (not checked): the iterations are independent, the marked arrays do not overlap, and
// n + W * stride does not overflow the index type. Written arrays are loaded first unless every use is a
// plain `X[i] = ...;` statement in a body without control flow (then they are only stored).
#include <algorithm>
#include <optional>
#include <set>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

struct marked_array {
  std::string name, type, vec_type;
  bool read = false, written = false;
};

std::string vector_type(const std::string& t, std::int64_t w) {
  const std::string n = std::to_string(w);
  if (t == "float") return "float" + n;
  if (t == "int") return "int" + n;
  if (t == "unsigned" || t == "unsigned int") return "uint" + n;
  if (t == "double" && w == 2) return "double2";
  if (t == "double") fail("double arrays support width 2 only");
  fail("arrays of '" + t + "' are not supported (float, int, unsigned or double)");
}

struct vectorize_op {
  std::string site;
  std::vector<std::int64_t> widths;

  std::vector<transform_param> parameters() const { return {{"value", to_values(widths), value(1)}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context& ctx) const {
    return guarded("vectorize", site, [&] {
      const auto width = int_value(v, "value");
      if (width != 1 && width != 2 && width != 4)
        fail("width " + std::to_string(width) + " (expected 1, 2 or 4)");
      const auto marks = site_annotations(source, "vectorize", site);
      for (const auto& a : marks)
        check_args(a, {"index", "arrays", "base", "type"});
      if (width == 1) return transform_result{source, {}, {}};
      const lexed lx(source);
      if (!lx.problem().empty()) fail("the source has " + lx.problem());
      std::optional<function_def> entry;
      try {
        entry = find_entry(lx, ctx.entry);
      } catch (const transform_failure&) {
        // arrays then need type=
      }
      text_edits edits;
      for (const auto& a : marks) {
        const auto L = parse_loop(lx, construct_after(lx, a));
        if (a.args.count("index") && a.args.at("index") != L.index)
          fail("index=" + a.args.at("index") + " but the loop's index is '" + L.index + "'");
        rewrite(lx, a, L, entry, ctx, width, edits);
      }
      return transform_result{edits.apply(source), {}, {}};
    });
  }

  void rewrite(const lexed& lx, const annotation& a, const loop_form& L,
               const std::optional<function_def>& entry, const transform_context& ctx, std::int64_t width,
               text_edits& edits) const {
    const auto src = lx.source();
    const std::size_t bf = L.body_first, bl = L.body_last;
    // Arrays.
    std::vector<std::string> names;
    if (a.args.count("arrays")) {
      names = split_list(a.args.at("arrays"));
      if (names.empty()) fail("arrays= lists no array");
    } else {
      for (std::size_t k = bf; k + 3 <= bl; ++k)
        if (lx[k].kind == token_kind::identifier && lx[k + 1].is("[") && lx[k + 2].is_identifier(L.index) &&
            lx[k + 3].is("]") &&
            std::find(ctx.buffer_names.begin(), ctx.buffer_names.end(), lx[k].text) !=
                ctx.buffer_names.end() &&
            std::find(names.begin(), names.end(), lx[k].text) == names.end())
          names.emplace_back(lx[k].text);
      if (names.empty()) fail("no buffer is indexed as X[" + L.index + "] in the body (give arrays=)");
    }
    std::vector<parameter> params;
    if (entry) params = parse_parameters(lx, *entry);
    std::vector<marked_array> arrays;
    for (const auto& n : names) {
      if (!is_identifier(n)) fail("arrays= names '" + n + "', not an identifier");
      if (n == L.index) fail("the index cannot be a marked array");
      marked_array m;
      m.name = n;
      if (a.args.count("type")) {
        m.type = a.args.at("type");
      } else {
        for (const auto& p : params)
          if (p.name == n && p.pointer_depth == 1) m.type = p.element_type;
        if (m.type.empty())
          fail("cannot tell the element type of '" + n +
               "' (not a pointer parameter of the entry): give type=");
      }
      m.vec_type = vector_type(m.type, width);
      arrays.push_back(std::move(m));
    }
    // Body checks.
    bool control = false;
    for (std::size_t k = bf; k <= bl; ++k) {
      const auto& t = lx[k];
      if (t.is_identifier("return") || t.is_identifier("break") || t.is_identifier("continue") ||
          t.is_identifier("goto"))
        fail("the body contains '" + std::string(t.text) + "'");
      if (t.is_identifier("if") || t.is_identifier("else") || t.is_identifier("for") ||
          t.is_identifier("while") || t.is_identifier("do") || t.is_identifier("switch") || t.is("?") ||
          t.is("&&") || t.is("||"))
        control = true;
      if (!L.stride.empty() && (t.is_identifier("threadIdx") || t.is_identifier("blockIdx")))
        fail("the body of a strided loop uses " + std::string(t.text) +
             ": its iterations would move to other threads");
    }
    if (modifies(lx, bf, bl, L.index)) fail("the body modifies the index " + L.index);
    std::string base = L.start;
    if (!L.stride.empty()) {
      if (!a.args.count("base"))
        fail(
            "a strided loop needs base=<expr>: the first index of the range the threads share "
            "(e.g. base=0 for a grid-stride loop over [0, n))");
      base = a.args.at("base");
      if (base.empty()) fail("base= is empty");
    } else if (a.args.count("base")) {
      fail("base= is only for strided loops (this loop's stride is 1)");
    }
    for (const std::string* e :
         std::initializer_list<const std::string*>{&L.start, &L.bound, &L.stride, &base})
      if (assigns(*e)) fail("'" + *e + "' has side effects (the rewrite evaluates it more than once)");
    {  // loop invariance of the expressions that are evaluated again
      const std::string exprs = L.start + " " + L.bound + " " + L.stride + " " + base;
      const lexed ex(exprs);
      for (const auto& t : ex.tokens())
        if (t.kind == token_kind::identifier && modifies(lx, bf, bl, t.text))
          fail("the body modifies '" + std::string(t.text) + "', which the loop bounds use");
    }
    for (auto& m : arrays) {
      bool any = false, only_plain_stores = true;
      for (std::size_t k = bf; k <= bl; ++k) {
        if (!lx[k].is_identifier(m.name)) continue;
        if (k > 0 && (lx[k - 1].is(".") || lx[k - 1].is("->"))) continue;
        if (!(k + 3 <= bl && lx[k + 1].is("[") && lx[k + 2].is_identifier(L.index) && lx[k + 3].is("]")))
          fail("'" + m.name + "' is used other than as " + m.name + "[" + L.index + "] in the body");
        if (k > 0 && lx[k - 1].is("&") &&
            !(k > 1 && (lx[k - 2].kind == token_kind::identifier || lx[k - 2].kind == token_kind::number ||
                        lx[k - 2].is(")") || lx[k - 2].is("]"))))
          fail("the body takes the address of " + m.name + "[" + L.index + "]");
        any = true;
        const bool pre = k > 0 && (lx[k - 1].is("++") || lx[k - 1].is("--"));
        const auto& next = k + 4 < lx.size() ? lx[k + 4] : lx[k + 3];
        const bool post = is_assignment(next.text) || next.is("++") || next.is("--");
        if (pre || post) m.written = true;
        const bool statement_start = k == bf || lx[k - 1].is(";") || lx[k - 1].is("{") || lx[k - 1].is("}");
        if (!(statement_start && next.is("="))) only_plain_stores = false;
        if (!(next.is("=") && !pre)) m.read = true;
      }
      if (!any) fail("the marked array '" + m.name + "' is not used in the body");
      if (m.written && (control || !only_plain_stores)) m.read = true;
    }
    // Text pieces.
    const std::string ind = indent_of(src, lx[L.for_tok].begin);
    const std::string W = std::to_string(width);
    const std::string pre = "kf_" + site + "_";
    const std::string T = L.type;
    const std::string body = std::string(src.substr(lx[bf].begin, lx[bl].end - lx[bf].begin));
    auto scalar_body = [&](int depth) {
      return L.braced ? reindent(body, std::string(2 * depth, ' ')) : body;
    };
    const std::string offset = L.stride.empty() ? "" : " + ((" + L.start + ") - (" + base + "))";
    const std::string step = L.stride.empty() ? W : W + " * (" + L.stride + ")";
    auto addr = [](const std::string& e) { return "reinterpret_cast<unsigned long long>(" + e + ")"; };
    auto phase = [&](const marked_array& m) {
      return "(" + addr(m.name) + " / sizeof(" + m.type + ") + (unsigned long long)(" + base + ")) % " + W;
    };
    std::string out;
    out += "{\n";
    out += ind + "  const unsigned long long " + pre + "phase = " + phase(arrays.front()) + ";\n";
    out += ind + "  const bool " + pre + "ok = ";
    if (arrays.size() == 1) {
      out += "true";
    } else {
      for (std::size_t j = 1; j < arrays.size(); ++j)
        out += (j > 1 ? " &&\n" + ind + "      " : std::string()) + phase(arrays[j]) + " == " + pre + "phase";
    }
    out += ";\n";
    out += ind + "  const " + T + " " + pre + "a = (" + base + ") + (" + T + ")((" + W + " - " + pre +
           "phase) % " + W + ");\n";
    out += ind + "  for (" + T + " " + L.index + " = " + L.start + "; " + L.index + " < " + L.bound +
           " && (!" + pre + "ok || " + L.index + " < " + pre + "a); " + L.incr + ")" +
           (L.braced ? " " : "\n" + ind + "    ") + scalar_body(1) + "\n";
    out += ind + "  if (" + pre + "ok) {\n";
    out += ind + "    for (" + T + " " + pre + "i = " + pre + "a" +
           (L.stride.empty() ? "" : " + " + W + " * ((" + L.start + ") - (" + base + "))") + "; " + pre +
           "i + " + std::to_string(width - 1) + " < " + L.bound + "; " + pre + "i += " + step + ") {\n";
    for (const auto& m : arrays) {
      if (m.read)
        out += ind + "      " + (m.written ? "" : "const ") + m.vec_type + " " + pre + m.name +
               " = *reinterpret_cast<const " + m.vec_type + "*>(" + m.name + " + " + pre + "i);\n";
      else
        out += ind + "      " + m.vec_type + " " + pre + m.name + ";\n";
    }
    static const char* comps[] = {"x", "y", "z", "w"};
    for (std::int64_t lane = 0; lane < width; ++lane) {
      // The body with X[i] -> lane component, i -> (g + lane).
      std::string copy;
      std::size_t pos = lx[bf].begin;
      for (std::size_t k = bf; k <= bl; ++k) {
        const auto& t = lx[k];
        if (t.kind != token_kind::identifier) continue;
        if (k > 0 && (lx[k - 1].is(".") || lx[k - 1].is("->"))) continue;
        auto it = std::find_if(arrays.begin(), arrays.end(),
                               [&](const marked_array& m) { return m.name == t.text; });
        if (it != arrays.end()) {
          copy.append(src.substr(pos, t.begin - pos));
          copy += pre + it->name + "." + comps[lane];
          pos = lx[k + 3].end;
          k += 3;
        } else if (t.text == L.index) {
          copy.append(src.substr(pos, t.begin - pos));
          copy += "(" + pre + "i + " + std::to_string(lane) + ")";
          pos = t.end;
        }
      }
      copy.append(src.substr(pos, lx[bl].end - pos));
      out += ind + "      " + (L.braced ? reindent(copy, "      ") : "{ " + copy + " }") + "\n";
    }
    for (const auto& m : arrays)
      if (m.written)
        out += ind + "      *reinterpret_cast<" + m.vec_type + "*>(" + m.name + " + " + pre + "i) = " + pre +
               m.name + ";\n";
    out += ind + "    }\n";
    out += ind + "    const " + T + " " + pre + "tail = " + pre + "a + (" + L.bound + " > " + pre + "a ? (" +
           T + ")((" + L.bound + " - " + pre + "a) / " + W + " * " + W + ") : (" + T + ")0);\n";
    out += ind + "    for (" + T + " " + L.index + " = " + pre + "tail" + offset + "; " + L.index + " < " +
           L.bound + "; " + L.incr + ")" + (L.braced ? " " : "\n" + ind + "      ") + scalar_body(2) + "\n";
    out += ind + "  }\n";
    out += ind + "}";
    edits.replace(lx[L.for_tok].begin, lx[bl].end, out);
  }
};

}  // namespace

void register_vectorize() {
  transform_registry().add(
      {"vectorize",
       "float2/float4 loads and stores for the elementwise loop marked '//@kf vectorize <site>' "
       "(scalar prologue to alignment, scalar tail, run-time fallback when the arrays' alignments differ)",
       {list_option("widths", nlohmann::json::array({1, 2, 4}),
                    "vector widths searched, from 1, 2, 4 (must include 1, the unchanged source)")},
       [](const options& o, const transform_site& s) -> transform {
         require_site(o, s, "vectorize");
         auto widths = int_list(o, "widths", 1, 4, 1);
         for (auto w : widths)
           if (w == 3) o.fail("widths", "3 is not a vector width (1, 2 or 4)");
         return vectorize_op{s.site, std::move(widths)};
       }});
}

}  // namespace kf::transforms
