// smem_tile: stage a tile of a global array in shared memory (with optional padding columns) instead of
// reading it directly from global memory.
//
//     //@kf smem_tile <site> array=<A> rows=<R> cols=<C> [type=<T>]
//     #define <acc>(r, c) <expression reading element (r, c) of the tile from A>
//     {
//       ... reads <acc>(r, c), 0 <= r < R, 0 <= c < C ...
//     }
//
// Parameter `<instance>` (strings: "direct" then "shared_pad<P>" for each P of the option `pads`, default
// [0, 1]): "direct" leaves the source unchanged (the block reads through the macro, i.e. global memory).
// "shared_padP" keeps the #define line, then inserts
//     __shared__ T kf_<site>[R][C + P];                     // P padding columns against bank conflicts
//     for (int kf_<site>_t = <linear thread index>; kf_<site>_t < (R) * (C); kf_<site>_t += <block size>)
//       kf_<site>[kf_<site>_t / (C)][kf_<site>_t % (C)] = <acc>(kf_<site>_t / (C), kf_<site>_t % (C));
//     __syncthreads();
//     #undef <acc>
//     #define <acc>(r, c) kf_<site>[r][c]
// before the block, and `__syncthreads();`, `#undef <acc>` and the original #define line after it (so the
// rest of the source sees the original macro). The block then reads the staged copy.
// Supported form (checked): the line after the annotation is a function-like #define of two parameters
// whose body does not mention threadIdx; it is followed by a `{ ... }` block inside the entry; the block does
// not assign through the macro or to A[...] and contains no return, goto, break or continue; R and C are
// expressions without spaces (numbers, macro names, * + - / parentheses); T is `type=` or the element type
// of the entry's pointer parameter A.
// Preconditions (the author's, not checked): the macro's value for (r, c) is the same in every thread of
// the block and may be evaluated for every (r, c) of the tile (bounds folded into the macro, e.g.
// `(k0 + (c) < K ? A[...] : 0.0f)`); every thread of the block reaches the block (it holds barriers); A is
// not written while the block runs. Under them the staged block reads exactly the values the direct one read.
#include <algorithm>
#include <cctype>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

struct macro_def {
  std::string name, p1, p2;
  std::string body;
};

// Parses "#define name(p1, p2) body".
macro_def parse_define(std::string_view d) {
  macro_def m;
  std::size_t p = 1;  // after '#'
  auto skip = [&] {
    while (p < d.size() && (d[p] == ' ' || d[p] == '\t'))
      ++p;
  };
  auto ident = [&] {
    const std::size_t b = p;
    while (p < d.size() && (std::isalnum(static_cast<unsigned char>(d[p])) || d[p] == '_'))
      ++p;
    return std::string(d.substr(b, p - b));
  };
  skip();
  if (ident() != "define") fail("expected '#define <accessor>(r, c) ...' on the line after the annotation");
  skip();
  m.name = ident();
  if (m.name.empty() || p >= d.size() || d[p] != '(')
    fail("expected a function-like macro '#define <accessor>(r, c) ...' after the annotation");
  ++p;
  skip();
  m.p1 = ident();
  skip();
  if (p >= d.size() || d[p] != ',') fail("the accessor macro must take two parameters (row, column)");
  ++p;
  skip();
  m.p2 = ident();
  skip();
  if (m.p1.empty() || m.p2.empty() || p >= d.size() || d[p] != ')')
    fail("the accessor macro must take two parameters (row, column)");
  ++p;
  m.body = std::string(d.substr(p));
  return m;
}

bool simple_expression(const std::string& e) {
  return !e.empty() && std::all_of(e.begin(), e.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '(' || c == ')' || c == '*' ||
           c == '+' || c == '-' || c == '/';
  });
}

struct smem_tile_op {
  std::string site;
  std::vector<std::int64_t> pads;

  std::vector<transform_param> parameters() const {
    std::vector<value> vals{value("direct")};
    for (auto p : pads)
      vals.emplace_back("shared_pad" + std::to_string(p));
    return {{"value", vals, value("direct")}};
  }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context& ctx) const {
    return guarded("smem_tile", site, [&] {
      const auto choice = string_value(v, "value");
      std::int64_t pad = -1;
      if (choice != "direct") {
        const std::string prefix = "shared_pad";
        if (choice.rfind(prefix, 0) != 0 || choice.size() == prefix.size() ||
            choice.size() > prefix.size() + 2 ||
            !std::all_of(choice.begin() + static_cast<std::ptrdiff_t>(prefix.size()), choice.end(),
                         [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          fail("unknown value '" + choice + "' (expected direct or shared_pad<P>)");
        pad = std::stoll(choice.substr(prefix.size()));
      }
      const auto marks = site_annotations(source, "smem_tile", site);
      if (marks.size() > 1)
        fail("the site is marked " + std::to_string(marks.size()) + " times (once expected)");
      const auto& a = marks.front();
      check_args(a, {"array", "rows", "cols", "type"});
      for (const char* k : {"array", "rows", "cols"})
        if (!a.args.count(k)) fail(std::string("the annotation needs ") + k + "=");
      const auto array = a.args.at("array"), rows = a.args.at("rows"), cols = a.args.at("cols");
      if (!is_identifier(array)) fail("array=" + array + " is not a name");
      if (!simple_expression(rows) || !simple_expression(cols))
        fail("rows= and cols= must be expressions of numbers, names, * + - / and parentheses");
      if (pad < 0) return transform_result{source, {}, {}};

      const lexed lx(source);
      const auto f = find_entry(lx, ctx.entry);
      const std::size_t d = construct_after(lx, a);
      if (d >= lx.size() || lx[d].kind != token_kind::directive)
        fail("expected '#define <accessor>(r, c) ...' on the line after the annotation");
      const auto m = parse_define(lx[d].text);
      if (m.body.find("threadIdx") != std::string::npos)
        fail("the accessor macro uses threadIdx: its value must be the same in every thread of the block");
      const std::size_t open = d + 1;
      if (open >= lx.size() || !lx[open].is("{")) fail("expected a { ... } block after the #define line");
      const std::size_t close = lx.match(open);
      if (open <= f.body_open || close >= f.body_close)
        fail("the block is not inside the entry kernel '" + ctx.entry + "'");
      for (std::size_t k = open; k <= close; ++k) {
        const auto& t = lx[k];
        if (t.is_identifier("return") || t.is_identifier("goto") || t.is_identifier("break") ||
            t.is_identifier("continue"))
          fail("the block contains '" + std::string(t.text) +
               "' (every thread must reach the barrier after it)");
        if ((t.is_identifier(m.name) || t.is_identifier(array)) && k + 1 <= close &&
            (lx[k + 1].is("(") || lx[k + 1].is("["))) {
          const std::size_t c = lx.match(k + 1);
          if (c + 1 < lx.size() &&
              (is_assignment(lx[c + 1].text) || lx[c + 1].is("++") || lx[c + 1].is("--")))
            fail("the block writes " + std::string(t.text) +
                 "(...): the tile must be read-only in the block");
        }
      }
      std::string type = arg_or(a, "type", "");
      if (type.empty()) {
        for (const auto& p : parse_parameters(lx, f))
          if (p.name == array && p.pointer_depth == 1) type = p.element_type;
        if (type.empty())
          fail("cannot tell the element type of '" + array + "' (not a pointer parameter): give type=");
      }
      const std::string ind = indent_of(source, lx[open].begin);
      const std::string tile = "kf_" + site, t = "kf_" + site + "_t";
      const std::string R = "(" + rows + ")", C = "(" + cols + ")";
      std::string before;
      before += ind + "__shared__ " + type + " " + tile + "[" + rows + "][" + cols + " + " +
                std::to_string(pad) + "];\n";
      before += ind + "for (int " + t +
                " = (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); " + t +
                " < " + R + " * " + C + "; " + t + " += (int)(blockDim.x * blockDim.y * blockDim.z))\n";
      before += ind + "  " + tile + "[" + t + " / " + C + "][" + t + " % " + C + "] = " + m.name + "(" + t +
                " / " + C + ", " + t + " % " + C + ");\n";
      before += ind + "__syncthreads();\n";
      before += "#undef " + m.name + "\n";
      before +=
          "#define " + m.name + "(" + m.p1 + ", " + m.p2 + ") " + tile + "[" + m.p1 + "][" + m.p2 + "]\n";
      std::string after = "\n" + ind + "__syncthreads();\n#undef " + m.name + "\n" + std::string(lx[d].text);
      text_edits edits;
      edits.insert(line_begin(source, lx[open].begin), before);
      edits.insert(lx[close].end, after);
      return transform_result{edits.apply(source), {}, {}};
    });
  }
};

}  // namespace

void register_smem_tile() {
  transform_registry().add(
      {"smem_tile",
       "stages the tile read through the accessor macro after "
       "'//@kf smem_tile <site> array=A rows=R cols=C' in a __shared__ array with P padding columns "
       "(direct: unchanged)",
       {list_option(
           "pads", nlohmann::json::array({0, 1}),
           "padding columns searched for the staged tile (0..8); values are direct, shared_pad<P>...")},
       [](const options& o, const transform_site& s) -> transform {
         require_site(o, s, "smem_tile");
         return smem_tile_op{s.site, int_list(o, "pads", 0, 8, std::nullopt)};
       }});
}

}  // namespace kf::transforms
