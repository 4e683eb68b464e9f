// pipeline: software pipelining of a shared-memory tile loop with cp.async (sm_80+), 2 or 3 stages.
//
//     __shared__ float As[TILE][TILE];            // the staged buffers, declared in the entry before the
//     loop
//     //@kf pipeline <site> buffers=As[,Bs...]
//     for (int t = <start>; t < <bound>; ++t | t++ | t += <step>) {
//       As[ty][tx] = A[...];                      // load part: copies of one element from global memory
//       Bs[ty][tx] = (<cond>) ? B[...] : 0.0f;    //   (guarded form: zero outside the bounds)
//       __syncthreads();                          // the first top-level barrier ends the load part
//       ... compute on As, Bs ...
//       __syncthreads();                          // the body ends with a barrier
//     }
//
// Parameter `<instance>` (values from the option `stages`, default [1, 2, 3]; 1 leaves the source
// unchanged). With S stages every buffer gets a leading dimension [S]; the load part of iteration m is
// issued S-1 iterations ahead into stage m % S as cp.async copies (`kf_cp_async(&As[stage][ty][tx], &A[...],
// pred)`, 4, 8 or 16 bytes; a false guard zero-fills without reading), and iteration m computes on stage
// m % S after waiting for its copies (cp.async.wait_group S-1) and the load part's barrier. The loop header
// is kept; the loop variable is re-bound to the future iteration's value inside the load part. Helper
// functions (kf_cp_async, kf_cp_async_commit, kf_cp_async_wait, inline PTX) are added once at the top of
// the source. Stage reuse is safe because the body ends with a barrier (checked).
// Supported form (checked): the loop form above (index declared in the init, condition `t < <bound>`,
// increment ++t, t++ or t += <step>), inside the entry kernel; the buffers are declared `__shared__` arrays
// in the entry before the loop and used nowhere else in the entry outside the loop; in the load part every
// use of a buffer is a statement `Buf[...]... = G[...];` or `Buf[...]... = (<cond>) ? G[...] : 0;` (any
// zero literal) where G is a pointer parameter of the entry that the loop does not write; the body has no
// return, goto, break or continue and ends with `__syncthreads();`.
// Preconditions (not checked): the load part does nothing but compute indices and issue those copies (it
// runs S-1 iterations early), the compute part does not use names declared in the load part (a compile
// error otherwise), every thread runs every iteration, <bound> and <step> are loop-invariant, and G's
// element type equals the buffer's (a static_assert checks 4, 8 or 16 bytes).
#include <algorithm>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

constexpr std::string_view helpers = R"cuda(#ifndef KF_CP_ASYNC_HELPERS
#define KF_CP_ASYNC_HELPERS
// cp.async helpers added by kforge's pipeline transform (sm_80 and newer).
template <class T>
__device__ __forceinline__ void kf_cp_async(T* dst, const T* src, bool pred) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const size_t s = __cvta_generic_to_global(src);
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
               :: "r"(d), "l"(s), "n"(sizeof(T)), "r"(pred ? (int)sizeof(T) : 0) : "memory");
}
__device__ __forceinline__ void kf_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void kf_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
#endif
)cuda";

bool zero_literal(const token& t) {
  if (t.kind != token_kind::number) return false;
  bool zero = false;
  for (char c : t.text) {
    if (c == '0')
      zero = true;
    else if (c != '.' && c != 'f' && c != 'F' && c != 'u' && c != 'U' && c != 'l' && c != 'L')
      return false;
  }
  return zero;
}

struct pipeline_op {
  std::string site;
  std::vector<std::int64_t> stages;

  std::vector<transform_param> parameters() const { return {{"value", to_values(stages), value(1)}}; }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context& ctx) const {
    return guarded("pipeline", site, [&] {
      const auto S = int_value(v, "value");
      if (S < 1 || S > 4) fail("stages " + std::to_string(S) + " (expected 1 to 4)");
      const auto marks = site_annotations(source, "pipeline", site);
      if (marks.size() > 1)
        fail("the site is marked " + std::to_string(marks.size()) + " times (once expected)");
      const auto& a = marks.front();
      check_args(a, {"buffers"});
      const auto buffers = split_list(arg_or(a, "buffers", ""));
      if (buffers.empty()) fail("the annotation needs buffers=<shared array>[,...]");
      for (const auto& b : buffers)
        if (!is_identifier(b)) fail("buffers= names '" + b + "', not an identifier");
      if (S == 1) return transform_result{source, {}, {}};
      return transform_result{rewrite(source, a, buffers, S, ctx), {}, {}};
    });
  }

  std::string rewrite(const std::string& source, const annotation& a, const std::vector<std::string>& buffers,
                      std::int64_t S, const transform_context& ctx) const {
    const lexed lx(source);
    const auto f = find_entry(lx, ctx.entry);
    const auto L = parse_loop(lx, construct_after(lx, a));
    if (L.for_tok <= f.body_open || L.body_last >= f.body_close)
      fail("the loop is not inside the entry kernel '" + ctx.entry + "'");
    if (!L.braced) fail("the loop body must be a { ... } block");
    for (const std::string* e : {&L.start, &L.bound, &L.stride})
      if (assigns(*e)) fail("'" + *e + "' has side effects (the rewrite evaluates it more than once)");
    const std::size_t bo = L.body_first, bc = L.body_last;
    for (std::size_t k = bo; k <= bc; ++k)
      if (lx[k].is_identifier("return") || lx[k].is_identifier("goto") || lx[k].is_identifier("break") ||
          lx[k].is_identifier("continue"))
        fail("the loop body contains '" + std::string(lx[k].text) + "'");
    const std::size_t sync = find_top(lx, bo + 1, bc, "__syncthreads");
    if (sync >= bc || sync + 3 >= bc || !lx[sync + 1].is("(") || !lx[sync + 2].is(")") ||
        !lx[sync + 3].is(";"))
      fail("the loop body needs a top-level '__syncthreads();' after its load part");
    if (sync == bo + 1) fail("the load part (before the first __syncthreads()) is empty");
    if (bc < 4 || !lx[bc - 4].is_identifier("__syncthreads") || !lx[bc - 3].is("(") || !lx[bc - 2].is(")") ||
        !lx[bc - 1].is(";") || bc - 4 == sync)
      fail("the loop body must end with '__syncthreads();' (after the compute part)");
    const auto params = parse_parameters(lx, f);
    auto pointer_param = [&](std::string_view n) {
      return std::any_of(params.begin(), params.end(),
                         [&](const parameter& p) { return p.name == n && p.pointer_depth == 1; });
    };
    text_edits edits;
    // Declarations: `__shared__ ... Buf[...]...;` in the entry before the loop.
    for (const auto& b : buffers) {
      std::size_t decl = 0;
      int found = 0;
      for (std::size_t k = f.body_open + 1; k < L.for_tok; ++k) {
        if (!lx[k].is_identifier("__shared__")) continue;
        const std::size_t end = find_top(lx, k, L.for_tok, ";");
        for (std::size_t j = k + 1; j < end; ++j)
          if (lx[j].is_identifier(b) && j + 1 < end && lx[j + 1].is("[")) {
            if (k > 0 && lx[k - 1].is_identifier("extern"))
              fail("'" + b + "' is dynamic (extern) shared memory");
            decl = j;
            ++found;
          }
        k = end;
      }
      if (found != 1) fail("no __shared__ array declaration of '" + b + "' in the entry before the loop");
      for (std::size_t k = f.body_open + 1; k < f.body_close; ++k)
        if (lx[k].is_identifier(b) && k != decl && (k < L.for_tok || k > bc))
          fail("'" + b + "' is used outside the loop");
      edits.insert(lx[decl].end, "[" + std::to_string(S) + "]");
    }
    auto is_buffer = [&](const token& t) {
      return t.kind == token_kind::identifier &&
             std::find(buffers.begin(), buffers.end(), t.text) != buffers.end();
    };
    const std::string pre = "kf_" + site + "_";
    // Load part: [bo + 1, sync), rewritten to cp.async copies into stage `<pre>ls`.
    std::string load;
    {
      std::size_t pos = lx[bo + 1].begin;
      for (std::size_t k = bo + 1; k < sync; ++k) {
        if (!is_buffer(lx[k])) continue;
        const auto& prev = lx[k - 1];
        const bool statement_start = k == bo + 1 || prev.is(";") || prev.is("{") || prev.is("}") ||
                                     prev.is(")") || prev.is_identifier("else");
        std::size_t j = k + 1;
        while (j < sync && lx[j].is("["))
          j = lx.match(j) + 1;
        if (!statement_start || j == k + 1 || j >= sync || !lx[j].is("="))
          fail("in the load part, '" + std::string(lx[k].text) +
               "' may only be the target of a copy statement 'Buf[...] = G[...];'");
        const std::size_t semi = find_top(lx, j + 1, sync, ";");
        if (semi >= sync) fail("a load statement has no ';'");
        // rhs: G[e] or (cond) ? G[e] : 0
        std::string src_text, pred = "true";
        std::size_t r = j + 1;
        std::string cond;
        if (lx[r].is("(")) {
          const std::size_t rc = lx.match(r);
          if (rc + 1 >= semi || !lx[rc + 1].is("?"))
            fail("the copy into '" + std::string(lx[k].text) + "' must be 'G[...]' or '(cond) ? G[...] : 0'");
          cond = std::string(lx.span(r, rc));
          r = rc + 2;
        }
        if (r + 1 >= semi || lx[r].kind != token_kind::identifier || !lx[r + 1].is("["))
          fail("the copy into '" + std::string(lx[k].text) + "' must read 'G[...]' from global memory");
        const std::string g(lx[r].text);
        if (!pointer_param(g)) fail("'" + g + "' is not a pointer parameter of the entry (a global array)");
        const std::size_t gc = lx.match(r + 1);
        for (std::size_t q = r; q <= gc; ++q)
          if (is_buffer(lx[q]))
            fail("a load statement reads the staged buffer '" + std::string(lx[q].text) + "'");
        if (cond.empty()) {
          if (gc + 1 != semi)
            fail("the copy into '" + std::string(lx[k].text) + "' must be exactly 'G[...]'");
          src_text = "&" + std::string(lx.span(r, gc));
        } else {
          if (gc + 2 >= semi || !lx[gc + 1].is(":") || gc + 3 != semi || !zero_literal(lx[gc + 2]))
            fail("the guarded copy into '" + std::string(lx[k].text) + "' must be '(cond) ? G[...] : 0'");
          for (std::size_t q = j + 1; q < r; ++q)
            if (is_buffer(lx[q]))
              fail("a load statement reads the staged buffer '" + std::string(lx[q].text) + "'");
          src_text = pre + "p ? &" + std::string(lx.span(r, gc)) + " : " + g;
          pred = pre + "p";
        }
        for (std::size_t q = k + 1; q < j; ++q)
          if (is_buffer(lx[q]))
            fail("a load statement indexes with the staged buffer '" + std::string(lx[q].text) + "'");
        load.append(source, pos, lx[k].begin - pos);
        const std::string dst =
            "&" + std::string(lx[k].text) + "[" + pre + "ls]" + std::string(lx.span(k + 1, j - 1));
        if (cond.empty())
          load += "kf_cp_async(" + dst + ", " + src_text + ", true);";
        else
          load += "{ const bool " + pre + "p = " + cond + "; kf_cp_async(" + dst + ", " + src_text + ", " +
                  pred + "); }";
        pos = lx[semi].end;
        k = semi;
      }
      load.append(source, pos, lx[sync].begin - pos);
      // Trim the trailing whitespace before the barrier.
      while (!load.empty() &&
             (load.back() == ' ' || load.back() == '\n' || load.back() == '\t' || load.back() == '\r'))
        load.pop_back();
    }
    // Global arrays must not be written in the loop.
    for (std::size_t k = bo; k <= bc; ++k)
      if (lx[k].kind == token_kind::identifier && pointer_param(lx[k].text) && k + 1 <= bc &&
          lx[k + 1].is("[")) {
        const std::size_t c = lx.match(k + 1);
        if (c + 1 < lx.size() &&
            (is_assignment(lx[c + 1].text) || lx[c + 1].is("++") || lx[c + 1].is("--"))) {
          // Only a problem if it is a source of a copy.
          for (std::size_t q = bo + 1; q < sync; ++q)
            if (lx[q].is_identifier(lx[k].text))
              fail("the loop writes '" + std::string(lx[k].text) + "', which it copies ahead of time");
        }
      }
    // Compute part: [sync, bc), buffers -> Buf[<pre>cs].
    std::string compute;
    {
      std::size_t pos = lx[sync].begin;
      for (std::size_t k = sync; k < bc; ++k) {
        if (!is_buffer(lx[k]) || lx[k - 1].is(".") || lx[k - 1].is("->")) continue;
        compute.append(source, pos, lx[k].end - pos);
        compute += "[" + pre + "cs]";
        pos = lx[k].end;
      }
      compute.append(source, pos, lx[bc - 1].end - pos);
    }
    const std::string ind = indent_of(source, lx[L.for_tok].begin);
    const std::string T = L.type, step = L.stride.empty() ? "1" : "(" + L.stride + ")";
    const std::string Ss = std::to_string(S), ahead = std::to_string(S - 1);
    std::string out = "{\n";
    out += ind + "  for (int " + pre + "s = 0; " + pre + "s < " + ahead + "; ++" + pre +
           "s) {  // prologue: issue tiles 0.." + std::to_string(S - 2) + "\n";
    out += ind + "    const " + T + " " + pre + "k = (" + L.start + ") + " + pre + "s * " + step + ";\n";
    out += ind + "    if (" + pre + "k < " + L.bound + ") {\n";
    out += ind + "      const int " + pre + "ls = " + pre + "s;\n";
    out += ind + "      const " + T + " " + L.index + " = " + pre + "k;\n";
    out += ind + "      " + reindent(load, "    ") + "\n";
    out += ind + "    }\n";
    out += ind + "    kf_cp_async_commit();\n";
    out += ind + "  }\n";
    out += ind + "  int " + pre + "it = 0;\n";
    out += ind + "  for (" + T + " " + L.index + " = " + L.start + "; " + L.index + " < " + L.bound + "; " +
           L.incr + ") {\n";
    out += ind + "    {\n";
    out += ind + "      const " + T + " " + pre + "k = " + L.index + " + " + ahead + " * " + step + ";\n";
    out += ind + "      if (" + pre + "k < " + L.bound + ") {\n";
    out += ind + "        const int " + pre + "ls = (" + pre + "it + " + ahead + ") % " + Ss + ";\n";
    out += ind + "        const " + T + " " + L.index + " = " + pre + "k;\n";
    out += ind + "        " + reindent(load, "      ") + "\n";
    out += ind + "      }\n";
    out += ind + "      kf_cp_async_commit();\n";
    out += ind + "    }\n";
    out += ind + "    kf_cp_async_wait<" + ahead + ">();\n";
    out += ind + "    const int " + pre + "cs = " + pre + "it % " + Ss + ";\n";
    out += ind + "    " + reindent(compute, "  ") + "\n";
    out += ind + "    ++" + pre + "it;\n";
    out += ind + "  }\n";
    out += ind + "  kf_cp_async_wait<0>();\n";
    out += ind + "}";
    edits.replace(lx[L.for_tok].begin, lx[bc].end, out);
    std::string result = edits.apply(source);
    if (source.find("KF_CP_ASYNC_HELPERS") == std::string::npos) result = std::string(helpers) + result;
    return result;
  }
};

}  // namespace

void register_pipeline() {
  transform_registry().add(
      {"pipeline",
       "cp.async software pipelining (S stages) of the shared-memory tile loop marked '//@kf pipeline <site> "
       "buffers=...'",
       {list_option("stages", nlohmann::json::array({1, 2, 3}),
                    "pipeline depths searched (1..4; must include 1, the unchanged source)")},
       [](const options& o, const transform_site& s) -> transform {
         require_site(o, s, "pipeline");
         return pipeline_op{s.site, int_list(o, "stages", 1, 4, 1)};
       }});
}

}  // namespace kf::transforms
