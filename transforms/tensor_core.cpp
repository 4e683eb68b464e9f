// tensor_core: chooses which of the source's alternative implementations of a block is compiled, e.g. a
// scalar loop or a tensor-core (mma/wmma) version of it.
//
//     //@kf tensor_core <site> begin=scalar
//     #if 1
//       ... the scalar code (active in the source) ...
//     #endif
//     //@kf tensor_core <site> begin=mma
//     #if 0
//       ... the tensor-core code ...
//     #endif
//     //@kf tensor_core <site> end
//
// Each alternative is `begin=<name>` followed by exactly one `#if 0` / `#if 1` ... `#endif` group (blank
// lines around it allowed, nested #if groups inside it allowed); exactly one alternative is `#if 1` in the
// source, so the source compiles by itself (and so does a reference kernel in it). The operator rewrites
// the `0`/`1` of each group so that only the chosen alternative is compiled; nothing else changes.
// Parameter `<instance>` (strings from the option `choices`, default [scalar, mma]): the first choice is the
// default and must be the source's active alternative (the source is then unchanged). A site may hold
// several such groups (e.g. copies made by coarsen): each is switched. Errors: the site is missing or
// marked for another operator; markers out of order (begin ... begin ... end, at least two alternatives);
// an alternative not wrapped in one #if 0/1 ... #endif group; no or several active alternatives; the chosen
// alternative or the default absent. Guarantee: the alternatives are the source author's; the operator
// only selects one of them textually (whether they compute the same thing is the author's contract).
#include <algorithm>
#include <cctype>

#include "kforge/transform.hpp"
#include "transforms/cuda_text.hpp"
#include "transforms/operators.hpp"

namespace kf::transforms {

namespace {

struct alternative {
  std::string name;
  std::size_t digit = 0;  // offset of the 0/1 of its #if line
  bool active = false;
};

// The directive word of a line ("if", "endif", ...) and the offset just after it; empty for other lines.
std::pair<std::string, std::size_t> directive_word(std::string_view s, std::size_t b, std::size_t e) {
  std::size_t p = b;
  while (p < e && (s[p] == ' ' || s[p] == '\t'))
    ++p;
  if (p >= e || s[p] != '#') return {"", p};
  ++p;
  while (p < e && (s[p] == ' ' || s[p] == '\t'))
    ++p;
  std::size_t q = p;
  while (q < e && std::isalpha(static_cast<unsigned char>(s[q])))
    ++q;
  return {std::string(s.substr(p, q - p)), q};
}

bool blank(std::string_view s, std::size_t b, std::size_t e) {
  for (std::size_t p = b; p < e; ++p)
    if (s[p] != ' ' && s[p] != '\t' && s[p] != '\r' && s[p] != '\n') return false;
  return true;
}

// Parses the text [b, e) of alternative `name`: one #if 0|1 ... #endif group.
alternative parse_alternative(const std::string& s, std::size_t b, std::size_t e, const std::string& name) {
  alternative alt;
  alt.name = name;
  int depth = 0;
  bool opened = false, closed = false;
  for (std::size_t lb = b; lb < e; lb = line_end(s, lb)) {
    const std::size_t le = std::min(line_end(s, lb), e);
    if (blank(s, lb, le)) continue;
    if (closed) fail("alternative '" + name + "': text after the #endif that closes it");
    const auto [word, after] = directive_word(s, lb, le);
    if (!opened) {
      if (word != "if")
        fail("alternative '" + name +
             "' must start with a line '#if 0' or '#if 1' right after its begin marker");
      std::size_t p = after;
      while (p < le && (s[p] == ' ' || s[p] == '\t'))
        ++p;
      const bool one_digit = p < le && (s[p] == '0' || s[p] == '1') &&
                             (p + 1 >= le || s[p + 1] == ' ' || s[p + 1] == '\t' || s[p + 1] == '\r' ||
                              s[p + 1] == '\n' || s[p + 1] == '/');
      if (!one_digit) fail("alternative '" + name + "' must start with '#if 0' or '#if 1'");
      alt.digit = p;
      alt.active = s[p] == '1';
      opened = true;
      depth = 1;
      continue;
    }
    if (word == "if" || word == "ifdef" || word == "ifndef") ++depth;
    if ((word == "else" || word == "elif") && depth == 1)
      fail("alternative '" + name + "': #" + word + " belongs in another alternative, not in this group");
    if (word == "endif" && --depth == 0) closed = true;
  }
  if (!opened) fail("alternative '" + name + "' is empty (expected '#if 0' or '#if 1' ... '#endif')");
  if (!closed) fail("alternative '" + name + "': its #if has no #endif before the next marker");
  return alt;
}

struct tensor_core_op {
  std::string site;
  std::vector<std::string> choices;

  std::vector<transform_param> parameters() const {
    return {{"value", to_values(choices), value(choices.front())}};
  }

  transform_result apply(const std::string& source, const transform_values& v,
                         const transform_context&) const {
    return guarded("tensor_core", site, [&] {
      const auto choice = string_value(v, "value");
      const auto marks = site_annotations(source, "tensor_core", site);
      text_edits edits;
      std::size_t i = 0;
      while (i < marks.size()) {
        // One group: begin=<a> ... begin=<b> ... end
        std::vector<alternative> alts;
        while (i < marks.size() && marks[i].args.count("begin")) {
          check_args(marks[i], {"begin"});
          const auto name = marks[i].args.at("begin");
          if (!is_identifier(name)) fail("begin='" + name + "' is not a name");
          for (const auto& a : alts)
            if (a.name == name) fail("two alternatives named '" + name + "'");
          if (i + 1 >= marks.size()) fail("alternative '" + name + "' has no end marker after it");
          alts.push_back(parse_alternative(source, marks[i].line_end, marks[i + 1].line_begin, name));
          ++i;
        }
        if (alts.empty() || i >= marks.size() || !marks[i].args.count("end"))
          fail("expected '//@kf tensor_core " + site +
               " begin=<name>' markers closed by '//@kf tensor_core " + site + " end'");
        check_args(marks[i], {"end"});
        ++i;
        if (alts.size() < 2) fail("a group needs at least two alternatives");
        const auto active =
            std::count_if(alts.begin(), alts.end(), [](const alternative& a) { return a.active; });
        if (active != 1)
          fail("exactly one alternative must be '#if 1' in the source, found " + std::to_string(active));
        const auto& def =
            *std::find_if(alts.begin(), alts.end(), [](const alternative& a) { return a.active; });
        if (def.name != choices.front())
          fail("the source's active alternative is '" + def.name + "' but the default choice is '" +
               choices.front() + "' (list the active alternative first in `choices`)");
        std::string names;
        bool found = false;
        for (const auto& a : alts) {
          names += (names.empty() ? "" : ", ") + a.name;
          found |= a.name == choice;
        }
        if (!found) fail("no alternative '" + choice + "' (the site offers " + names + ")");
        for (const auto& a : alts)
          if (a.active != (a.name == choice))
            edits.replace(a.digit, a.digit + 1, a.name == choice ? "1" : "0");
      }
      return transform_result{edits.apply(source), {}, {}};
    });
  }
};

}  // namespace

void register_tensor_core() {
  transform_registry().add(
      {"tensor_core",
       "selects which alternative (e.g. scalar or mma) of the block marked "
       "'//@kf tensor_core <site> begin=<name>' is compiled",
       {list_option(
           "choices", nlohmann::json::array({"scalar", "mma"}),
           "alternative names searched; the first is the default and must be the source's active (#if 1) "
           "alternative")},
       [](const options& o, const transform_site& s) -> transform {
         require_site(o, s, "tensor_core");
         auto choices = string_list(o, "choices");
         for (const auto& c : choices)
           if (!is_identifier(c)) o.fail("choices", "'" + c + "' is not a name (letters, digits and _)");
         return tensor_core_op{s.site, std::move(choices)};
       }});
}

}  // namespace kf::transforms
