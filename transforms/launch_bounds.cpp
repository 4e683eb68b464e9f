// launch_bounds: `__launch_bounds__(MAX_THREADS, MIN_BLOCKS)` on the entry kernel.
//
// Parameter `<instance>` (values from the option `min_blocks`, default [0, 1, 2, 4]): 0 leaves the entry's
// declaration as it is (default: the source is unchanged); k >= 1 replaces the entry's
// `__launch_bounds__(...)`, or inserts one right before the kernel's name, with `__launch_bounds__(M, k)`.
// M is the option `max_threads` (a number, or an expression the source can evaluate such as a tuning
// parameter's macro `block_size`), or when that option is empty the first argument of the entry's own
// `__launch_bounds__`. Takes no site. Errors: no __global__ definition of the entry; no M available.
// Launch bounds change register allocation, never results; a launch with more threads than M fails at
// run time (an invalid trial), so M must bound the description's block size.
#include <algorithm>
#include <cctype>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

struct launch_bounds_op {
  std::string max_threads;  // empty: from the source
  std::vector<std::int64_t> min_blocks;

  std::vector<transform_param> parameters() const { return {{"value", to_values(min_blocks), value(0)}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context& ctx) const {
    return guarded("launch_bounds", "", [&] {
      const auto blocks = int_value(v, "value");
      if (blocks < 0) fail("min_blocks " + std::to_string(blocks) + " is negative");
      const lexed lx(source);
      const auto f = find_entry(lx, ctx.entry);
      if (blocks == 0) return transform_result{source, {}, {}};
      std::optional<std::size_t> existing;
      for (std::size_t k = f.header; k < f.name; ++k)
        if (lx[k].is_identifier("__launch_bounds__")) existing = k;
      std::string max = max_threads;
      text_edits edits;
      if (existing) {
        const std::size_t open = *existing + 1;
        if (open >= f.name || !lx[open].is("(")) fail("__launch_bounds__ without its arguments");
        const std::size_t close = lx.match(open);
        if (max.empty()) {
          std::size_t end = close;  // first argument: up to a top-level comma
          for (std::size_t k = open + 1; k < close; ++k) {
            if (lx[k].is("(") || lx[k].is("["))
              k = lx.match(k);
            else if (lx[k].is(",")) {
              end = k;
              break;
            }
          }
          if (end == open + 1) fail("the entry's __launch_bounds__ has no first argument");
          max = std::string(lx.span(open + 1, end - 1));
        }
        edits.replace(lx[*existing].begin, lx[close].end,
                      "__launch_bounds__(" + max + ", " + std::to_string(blocks) + ")");
      } else {
        if (max.empty())
          fail(
              "the entry has no __launch_bounds__ to take the maximum block size from: give the option "
              "max_threads (a number or an expression such as block_size)");
        edits.insert(lx[f.name].begin, "__launch_bounds__(" + max + ", " + std::to_string(blocks) + ") ");
      }
      return transform_result{edits.apply(source), {}, {}};
    });
  }
};

}  // namespace

void register_launch_bounds() {
  transform_registry().add(
      {"launch_bounds",
       "__launch_bounds__(max_threads, min_blocks) on the entry kernel (min_blocks 0: the declaration is "
       "unchanged)",
       {string_option("max_threads", "",
                      "the bound on the block size: a number or an expression the source can evaluate (e.g. "
                      "block_size, a tuning parameter's macro); empty: the entry's own __launch_bounds__"),
        list_option("min_blocks", nlohmann::json::array({0, 1, 2, 4}),
                    "minimum resident blocks per SM searched (0..32; must include 0, the unchanged source)")},
       [](const options& o, const transform_site& s) -> transform {
         if (!s.site.empty()) o.where().fail("launch_bounds acts on the entry kernel and takes no site");
         const auto& m = o.string("max_threads");
         const bool ok = std::all_of(m.begin(), m.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ' ' || c == '(' ||
                  c == ')' || c == '*' || c == '+' || c == '-' || c == '/';
         });
         if (!ok)
           o.fail("max_threads", "expected a number or a simple expression (letters, digits, _ ( ) * + - /)");
         return launch_bounds_op{m, int_list(o, "min_blocks", 0, 32, 0)};
       }});
}

}  // namespace kf::transforms
