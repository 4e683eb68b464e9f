// unroll: `#pragma unroll N` before a marked for loop.
//
//     //@kf unroll <site>
//     for (...) ...
//
// Parameter `<instance>` (values from the option `factors`, default 0): 0 leaves the loop to the compiler
// (no pragma: the source is unchanged), N >= 1 inserts `#pragma unroll N` on its own line, indented like
// the loop, right before it (1 forbids unrolling). A site may mark several loops (all are unrolled, e.g.
// the copies a coarsen instance made). Errors: the site is missing or marked for another operator; the
// construct after the annotation is not a `for` at the start of its line; the loop already has a
// `#pragma unroll` (from the source or another instance: a conflict). A pragma changes how the loop is
// compiled, never what it computes.
#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

struct unroll_op {
  std::string site;
  std::vector<std::int64_t> factors;

  std::vector<transform_param> parameters() const { return {{"value", to_values(factors), value(0)}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context&) const {
    return guarded("unroll", site, [&] {
      const auto factor = int_value(v, "value");
      if (factor < 0) fail("the factor " + std::to_string(factor) + " is negative");
      const auto marks = site_annotations(source, "unroll", site);
      for (const auto& a : marks)
        check_args(a, {});
      if (factor == 0) return transform_result{source, {}, {}};
      const lexed lx(source);
      text_edits edits;
      for (const auto& a : marks) {
        const std::size_t t = construct_after(lx, a);
        if (t < lx.size() && lx[t].kind == token_kind::directive &&
            lx[t].text.find("unroll") != std::string::npos && lx[t].text.find("pragma") != std::string::npos)
          fail(
              "the loop already has a '#pragma unroll' (in the source, or from another unroll instance at "
              "this site)");
        if (t >= lx.size() || !lx[t].is_identifier("for"))
          fail(
              "expected a for loop after the annotation, found '" +
              (t < lx.size() ? std::string(lx[t].text.substr(0, 40)) : std::string("the end of the source")) +
              "'");
        const std::size_t lb = line_begin(source, lx[t].begin);
        if (source.find_first_not_of(" \t", lb) != lx[t].begin) fail("the for loop must start its line");
        edits.insert(lb, indent_of(source, lb) + "#pragma unroll " + std::to_string(factor) + "\n");
      }
      return transform_result{edits.apply(source), {}, {}};
    });
  }
};

}  // namespace

void register_unroll() {
  transform_registry().add(
      {"unroll",
       "#pragma unroll N before the for loop marked '//@kf unroll <site>' (0: no pragma, the compiler "
       "decides)",
       {list_option("factors", nlohmann::json::array({0, 1, 2, 4, 8}),
                    "unroll factors searched (integers 0..1024; must include 0, the unchanged source)")},
       [](const options& o, const transform_site& s) -> transform {
         require_site(o, s, "unroll");
         return unroll_op{s.site, int_list(o, "factors", 0, 1024, 0)};
       }});
}

}  // namespace kf::transforms
