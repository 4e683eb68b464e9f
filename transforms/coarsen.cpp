// coarsen: thread coarsening of a marked block of the entry kernel: each thread does the work of F blocks'
// threads, the grid shrinks by F.
//
//     //@kf coarsen <site> [dim=x]
//     {
//       const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
//       if (i < n) y[i] = a * x[i];
//     }
//
// Parameter `<instance>` (values from the option `factors`, default [1, 2, 4, 8]; 1 leaves the source
// unchanged). With factor F the block `{ ... }` after the annotation is repeated F times; in copy k
// (k = 0..F-1) every `blockIdx.<dim>` becomes `(blockIdx.<dim> * Fu + ku)` and every `gridDim.<dim>`
// becomes `(gridDim.<dim> * Fu)`. Copy k of block b therefore does exactly what block b*F+k of a grid F
// times larger did, in that order; consecutive copies cover consecutive blocks, so accesses stay
// coalesced. The description's grid expression uses the parameter to launch F times fewer blocks, e.g.
// grid: ["(n + 256 * coarsen_body - 1) // (256 * coarsen_body)"] for an instance named coarsen_body.
// Supported form (checked): the block is a `{ ... }` compound statement inside the entry kernel; it uses
// blockIdx.<dim>; the rest of the entry does not use blockIdx.<dim> or gridDim.<dim>; no macro of the
// source mentions blockIdx or gridDim; the block contains no return, goto, break or continue.
// Precondition (the author's, not checked): the block is correct for any grid at least as large as needed
// (it bounds-checks its index, or is a grid-stride loop), since the last block's copies may run past the
// original grid; device functions called from the block do not read blockIdx.<dim>/gridDim.<dim>.
#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

// Offsets of `<obj> . <dim>` token triples in tokens [first, last).
std::vector<std::pair<std::size_t, std::size_t>> uses(const lexed& lx, std::size_t first, std::size_t last,
                                                      std::string_view obj, std::string_view dim) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t k = first; k + 2 < last; ++k)
    if (lx[k].is_identifier(obj) && lx[k + 1].is(".") && lx[k + 2].is_identifier(dim) &&
        !(k > 0 && (lx[k - 1].is(".") || lx[k - 1].is("->"))))
      out.emplace_back(k, k + 2);
  return out;
}

struct coarsen_op {
  std::string site;
  std::vector<std::int64_t> factors;

  std::vector<transform_param> parameters() const { return {{"value", to_values(factors), value(1)}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context& ctx) const {
    return guarded("coarsen", site, [&] {
      const auto factor = int_value(v, "value");
      if (factor < 1) fail("the factor " + std::to_string(factor) + " is below 1");
      const auto marks = site_annotations(source, "coarsen", site);
      for (const auto& a : marks) {
        check_args(a, {"dim"});
        const auto dim = arg_or(a, "dim", "x");
        if (dim != "x" && dim != "y" && dim != "z") fail("dim=" + dim + " (expected x, y or z)");
      }
      if (factor == 1) return transform_result{source, {}, {}};
      const lexed lx(source);
      const auto f = find_entry(lx, ctx.entry);
      for (const auto& t : lx.tokens())
        if (t.kind == token_kind::directive && (t.text.find("blockIdx") != std::string_view::npos ||
                                                t.text.find("gridDim") != std::string_view::npos))
          fail("a preprocessor line mentions blockIdx or gridDim: the operator cannot rewrite inside macros");
      const std::string fu = std::to_string(factor) + "u";
      text_edits edits;
      for (const auto& a : marks) {
        const auto dim = arg_or(a, "dim", "x");
        const std::size_t open = construct_after(lx, a);
        if (open >= lx.size() || !lx[open].is("{")) fail("expected a { ... } block after the annotation");
        const std::size_t close = lx.match(open);
        if (open <= f.body_open || close >= f.body_close)
          fail("the block is not inside the entry kernel '" + ctx.entry + "'");
        for (std::size_t k = open; k <= close; ++k)
          if (lx[k].is_identifier("return") || lx[k].is_identifier("goto") || lx[k].is_identifier("break") ||
              lx[k].is_identifier("continue"))
            fail("the block contains '" + std::string(lx[k].text) +
                 "' (unsupported: a copy would skip the others)");
        const auto block_uses = uses(lx, open, close, "blockIdx", dim);
        if (block_uses.empty())
          fail("the block does not use blockIdx." + dim + ": its copies would repeat the same work");
        for (const char* obj : {"blockIdx", "gridDim"}) {
          const auto all = uses(lx, f.body_open, f.body_close, obj, dim);
          for (const auto& [b, e] : all)
            if (b < open || e > close)
              fail(std::string("the entry uses ") + obj + "." + dim +
                   " outside the block: it would disagree with the coarsened grid");
        }
        auto grid_uses = uses(lx, open, close, "gridDim", dim);
        std::string copies;
        const std::string indent = indent_of(source, lx[open].begin);
        for (std::int64_t k = 0; k < factor; ++k) {
          std::size_t pos = lx[open].begin;
          std::string copy;
          std::size_t bi = 0, gi = 0;
          while (bi < block_uses.size() || gi < grid_uses.size()) {
            const bool take_block = gi >= grid_uses.size() ||
                                    (bi < block_uses.size() && block_uses[bi].first < grid_uses[gi].first);
            const auto [b, e] = take_block ? block_uses[bi++] : grid_uses[gi++];
            copy.append(source, pos, lx[b].begin - pos);
            copy += take_block ? "(blockIdx." + dim + " * " + fu + " + " + std::to_string(k) + "u)"
                               : "(gridDim." + dim + " * " + fu + ")";
            pos = lx[e].end;
          }
          copy.append(source, pos, lx[close].end - pos);
          copies += (k == 0 ? "" : "\n" + indent) + copy;
        }
        edits.replace(lx[open].begin, lx[close].end, copies);
      }
      return transform_result{edits.apply(source), {}, {}};
    });
  }
};

}  // namespace

void register_coarsen() {
  transform_registry().add(
      {"coarsen",
       "thread coarsening: the block marked '//@kf coarsen <site> [dim=x]' is repeated F times, "
       "copy k acting as block blockIdx*F+k (the grid expression divides by the instance's parameter)",
       {list_option("factors", nlohmann::json::array({1, 2, 4, 8}),
                    "coarsening factors searched (1..64; must include 1, the unchanged source)")},
       [](const options& o, const transform_site& s) -> transform {
         require_site(o, s, "coarsen");
         return coarsen_op{s.site, int_list(o, "factors", 1, 64, 1)};
       }});
}

}  // namespace kf::transforms
