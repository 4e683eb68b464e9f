#include "transforms/cuda_text.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

namespace kf::transforms {

void fail(const std::string& message) {
  throw transform_failure(message);
}

namespace {

bool ident_start(char c) noexcept {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool ident_char(char c) noexcept {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool space_char(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

constexpr std::array<std::string_view, 4> puncts3 = {"<<=", ">>=", "...", "->*"};
constexpr std::array<std::string_view, 21> puncts2 = {
    "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "::", "##"};

bool string_prefix(std::string_view w) noexcept {
  return w == "u8" || w == "u" || w == "U" || w == "L" || w == "R" || w == "u8R" || w == "uR" || w == "UR" ||
         w == "LR";
}

}  // namespace

lexed::lexed(std::string_view source) : src_(source) {
  const std::string_view s = src_;
  const std::size_t n = s.size();
  std::size_t i = 0;
  bool line_start = true;  // only whitespace since the last newline
  auto note = [&](const std::string& what) {
    if (problem_.empty()) problem_ = what;
  };
  while (i < n) {
    const char c = s[i];
    if (space_char(c)) {
      if (c == '\n') line_start = true;
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n')
        ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      const auto close = s.find("*/", i + 2);
      if (close == std::string_view::npos) {
        note("an unterminated /* comment");
        break;
      }
      i = close + 2;
      continue;
    }
    token t;
    t.begin = i;
    if (c == '#' && line_start) {
      // A directive runs to the end of the line; a backslash before the newline continues it.
      std::size_t j = i;
      while (j < n && s[j] != '\n') {
        if (s[j] == '\\' && j + 1 < n && s[j + 1] == '\n') {
          j += 2;
          continue;
        }
        if (s[j] == '\\' && j + 2 < n && s[j + 1] == '\r' && s[j + 2] == '\n') {
          j += 3;
          continue;
        }
        ++j;
      }
      std::size_t e = j;
      while (e > i && (s[e - 1] == '\r' || s[e - 1] == ' ' || s[e - 1] == '\t'))
        --e;
      t.kind = token_kind::directive;
      t.end = e;
      i = j;
    } else if (ident_start(c)) {
      std::size_t j = i;
      while (j < n && ident_char(s[j]))
        ++j;
      const std::string_view w = s.substr(i, j - i);
      if (j < n && (s[j] == '"' || s[j] == '\'') && string_prefix(w)) {
        if (w.back() == 'R' && s[j] == '"') {
          // Raw string: R"delim( ... )delim"
          const auto paren = s.find('(', j + 1);
          if (paren == std::string_view::npos) {
            note("an unterminated raw string literal");
            break;
          }
          const std::string close = ")" + std::string(s.substr(j + 1, paren - j - 1)) + "\"";
          const auto end = s.find(close, paren + 1);
          if (end == std::string_view::npos) {
            note("an unterminated raw string literal");
            break;
          }
          t.kind = token_kind::literal;
          t.end = end + close.size();
          i = t.end;
        } else {
          i = j;  // the quote is lexed below, with the prefix
          const char q = s[i];
          std::size_t k = i + 1;
          while (k < n && s[k] != q && s[k] != '\n')
            k += s[k] == '\\' ? 2 : 1;
          if (k >= n || s[k] != q) {
            note("an unterminated literal");
            break;
          }
          t.kind = token_kind::literal;
          t.end = k + 1;
          i = t.end;
        }
      } else {
        t.kind = token_kind::identifier;
        t.end = j;
        i = j;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < n && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      std::size_t j = i + 1;
      while (j < n) {
        const char d = s[j];
        if ((d == '+' || d == '-') &&
            (s[j - 1] == 'e' || s[j - 1] == 'E' || s[j - 1] == 'p' || s[j - 1] == 'P')) {
          ++j;
        } else if (ident_char(d) || d == '.') {
          ++j;
        } else if (d == '\'' && j + 1 < n && ident_char(s[j + 1])) {
          j += 2;
        } else {
          break;
        }
      }
      t.kind = token_kind::number;
      t.end = j;
      i = j;
    } else if (c == '"' || c == '\'') {
      std::size_t k = i + 1;
      while (k < n && s[k] != c && s[k] != '\n')
        k += s[k] == '\\' ? 2 : 1;
      if (k >= n || s[k] != c) {
        note("an unterminated literal");
        break;
      }
      t.kind = token_kind::literal;
      t.end = k + 1;
      i = t.end;
    } else {
      t.kind = token_kind::punct;
      std::size_t len = 1;
      for (auto p : puncts3)
        if (s.compare(i, 3, p) == 0) len = 3;
      if (len == 1)
        for (auto p : puncts2)
          if (s.compare(i, 2, p) == 0) len = 2;
      t.end = i + len;
      i = t.end;
    }
    t.text = s.substr(t.begin, t.end - t.begin);
    toks_.push_back(t);
    line_start = false;
  }
  // Brackets.
  match_.assign(toks_.size(), std::string_view::npos);
  std::vector<std::size_t> stack;
  for (std::size_t k = 0; k < toks_.size(); ++k) {
    const auto& t = toks_[k];
    if (t.kind != token_kind::punct || t.text.size() != 1) continue;
    const char b = t.text[0];
    if (b == '(' || b == '[' || b == '{') {
      stack.push_back(k);
    } else if (b == ')' || b == ']' || b == '}') {
      const char want = b == ')' ? '(' : b == ']' ? '[' : '{';
      if (stack.empty() || toks_[stack.back()].text[0] != want) {
        note("an unbalanced '" + std::string(1, b) + "' at offset " + std::to_string(t.begin));
        stack.clear();
        continue;
      }
      match_[k] = stack.back();
      match_[stack.back()] = k;
      stack.pop_back();
    }
  }
  if (!stack.empty()) note("an unclosed '" + std::string(toks_[stack.back()].text) + "'");
}

std::size_t lexed::match(std::size_t i) const {
  if (i >= match_.size() || match_[i] == std::string_view::npos)
    fail(problem_.empty() ? "a bracket without its match" : "the source has " + problem_);
  return match_[i];
}

std::size_t lexed::first_at(std::size_t offset) const noexcept {
  auto it = std::lower_bound(toks_.begin(), toks_.end(), offset,
                             [](const token& t, std::size_t off) { return t.begin < off; });
  return static_cast<std::size_t>(it - toks_.begin());
}

std::string_view lexed::span(std::size_t first, std::size_t last) const {
  if (first > last || last >= toks_.size()) return {};
  return src_.substr(toks_[first].begin, toks_[last].end - toks_[first].begin);
}

bool is_assignment(std::string_view op) noexcept {
  return op == "=" || op == "+=" || op == "-=" || op == "*=" || op == "/=" || op == "%=" || op == "&=" ||
         op == "|=" || op == "^=" || op == "<<=" || op == ">>=";
}

bool is_identifier(std::string_view s) noexcept {
  if (s.empty() || !ident_start(s[0])) return false;
  return std::all_of(s.begin(), s.end(), ident_char);
}

bool mentions(const lexed& lx, std::size_t first, std::size_t last, std::string_view name) {
  for (std::size_t i = first; i <= last && i < lx.size(); ++i)
    if (lx[i].is_identifier(name)) return true;
  return false;
}

bool assigns(std::string_view expr) {
  const lexed lx(expr);
  for (const auto& t : lx.tokens())
    if (t.kind == token_kind::punct && (is_assignment(t.text) || t.is("++") || t.is("--"))) return true;
  return false;
}

bool modifies(const lexed& lx, std::size_t first, std::size_t last, std::string_view name) {
  for (std::size_t i = first; i <= last && i < lx.size(); ++i) {
    if (!lx[i].is_identifier(name)) continue;
    if (i > 0 && (lx[i - 1].is(".") || lx[i - 1].is("->"))) continue;  // a member of the same name
    if (i > 0 && (lx[i - 1].is("++") || lx[i - 1].is("--") || lx[i - 1].is("&"))) return true;
    if (i + 1 < lx.size() && (is_assignment(lx[i + 1].text) || lx[i + 1].is("++") || lx[i + 1].is("--")))
      return true;
  }
  return false;
}

std::size_t line_begin(std::string_view s, std::size_t offset) noexcept {
  offset = std::min(offset, s.size());
  const auto p = offset == 0 ? std::string_view::npos : s.rfind('\n', offset - 1);
  return p == std::string_view::npos ? 0 : p + 1;
}

std::size_t line_end(std::string_view s, std::size_t offset) noexcept {
  const auto p = s.find('\n', offset);
  return p == std::string_view::npos ? s.size() : p + 1;
}

std::string indent_of(std::string_view s, std::size_t offset) {
  const std::size_t b = line_begin(s, offset);
  std::size_t e = b;
  while (e < s.size() && (s[e] == ' ' || s[e] == '\t'))
    ++e;
  return std::string(s.substr(b, e - b));
}

std::string reindent(std::string_view text, std::string_view extra) {
  std::string out;
  out.reserve(text.size() + extra.size() * 8);
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size() && text[i + 1] != '\n') out += extra;
  }
  return out;
}

// --- Functions ---------------------------------------------------------------------------------------------

namespace {
bool trailing_qualifier(const token& t) {
  return t.kind == token_kind::identifier &&
         (t.is("const") || t.is("noexcept") || t.is("override") || t.is("final") || t.is("volatile"));
}
bool control_keyword(const token& t) {
  return t.is("if") || t.is("for") || t.is("while") || t.is("switch") || t.is("catch") || t.is("sizeof") ||
         t.is("decltype") || t.is("alignas") || t.is("__launch_bounds__") || t.is("__attribute__") ||
         t.is("return");
}
}  // namespace

std::vector<function_def> function_definitions(const lexed& lx) {
  std::vector<function_def> out;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    if (!lx[i].is("{")) continue;
    std::size_t p = i;
    while (p > 0 && trailing_qualifier(lx[p - 1]))
      --p;
    if (p == 0 || !lx[p - 1].is(")")) continue;  // namespace, extern "C", class or initializer: look inside
    const std::size_t close = p - 1;
    const std::size_t open = lx.match(close);
    if (open == 0 || lx[open - 1].kind != token_kind::identifier || control_keyword(lx[open - 1])) continue;
    function_def f;
    f.name = open - 1;
    f.params_open = open;
    f.params_close = close;
    f.body_open = i;
    f.body_close = lx.match(i);
    std::size_t h = f.name;
    while (h > 0 && !lx[h - 1].is(";") && !lx[h - 1].is("}") && !lx[h - 1].is("{") &&
           lx[h - 1].kind != token_kind::directive)
      --h;
    f.header = h;
    for (std::size_t k = h; k < f.name; ++k)
      f.global |= lx[k].is_identifier("__global__");
    out.push_back(f);
    i = f.body_close;  // nested braces belong to this function
  }
  return out;
}

function_def find_entry(const lexed& lx, std::string_view entry) {
  if (!lx.problem().empty()) fail("the source has " + lx.problem());
  std::vector<function_def> found;
  for (const auto& f : function_definitions(lx))
    if (f.global && lx[f.name].text == entry) found.push_back(f);
  if (found.empty())
    fail("the source has no __global__ definition of the entry '" + std::string(entry) + "'");
  if (found.size() > 1)
    fail("the source has " + std::to_string(found.size()) + " __global__ definitions of the entry '" +
         std::string(entry) + "'");
  return found.front();
}

namespace {
bool qualifier(const token& t) {
  return t.is("const") || t.is("volatile") || t.is("__restrict__") || t.is("__restrict") || t.is("restrict");
}
bool builtin_type_word(const token& t) {
  static const std::set<std::string_view> words = {
      "int",  "float",  "double", "char",   "short",   "long",     "unsigned", "signed",  "bool",
      "void", "size_t", "half",   "__half", "int64_t", "uint64_t", "int32_t",  "uint32_t"};
  return t.kind == token_kind::identifier && words.count(t.text) > 0;
}
}  // namespace

std::vector<parameter> parse_parameters(const lexed& lx, const function_def& f) {
  std::vector<parameter> out;
  std::size_t start = f.params_open + 1;
  int angle = 0;
  auto finish = [&](std::size_t first, std::size_t last_excl) {
    if (first >= last_excl) return;
    if (last_excl - first == 1 && lx[first].is("void")) return;
    parameter p;
    p.first = first;
    p.last = last_excl - 1;
    std::size_t end = last_excl;  // tokens before a default argument
    for (std::size_t k = first; k < last_excl; ++k) {
      if (lx[k].is("(") || lx[k].is("[") || lx[k].is("{")) {
        k = lx.match(k);
        continue;
      }
      if (lx[k].is("=")) {
        end = k;
        break;
      }
    }
    bool understood = true;
    std::size_t name = end;
    for (std::size_t k = end; k-- > first;) {
      if (lx[k].kind == token_kind::identifier && !qualifier(lx[k])) {
        name = k;
        break;
      }
    }
    if (name != end && name > first && !builtin_type_word(lx[name])) {
      p.name = std::string(lx[name].text);
      p.name_tok = name;
      if (name + 1 != end) understood = false;  // arrays and the like
    }
    for (std::size_t k = first; k < end; ++k) {
      if (lx[k].is("(") || lx[k].is("&") || lx[k].is("&&") || lx[k].is("[")) understood = false;
      if (lx[k].is("*")) {
        ++p.pointer_depth;
        p.star = k;
      }
    }
    if (p.pointer_depth > 0) {
      for (std::size_t k = first; k < p.star; ++k)
        p.const_pointee |= lx[k].is("const");
      for (std::size_t k = p.star + 1; k < end; ++k)
        p.restricted |= lx[k].is("__restrict__") || lx[k].is("__restrict") || lx[k].is("restrict");
    }
    const std::size_t type_end = p.pointer_depth > 0 ? p.star : (p.name.empty() ? end : name);
    for (std::size_t k = first; k < type_end; ++k) {
      if (qualifier(lx[k]) || lx[k].is("*") || lx[k].is("struct")) continue;
      if (!p.element_type.empty() &&
          (lx[k].kind == token_kind::identifier || lx[k].kind == token_kind::number) &&
          (lx[k - 1].kind == token_kind::identifier || lx[k - 1].kind == token_kind::number))
        p.element_type += ' ';
      p.element_type += lx[k].text;
    }
    if (!understood) p.pointer_depth = -1;
    out.push_back(std::move(p));
  };
  for (std::size_t k = start; k < f.params_close; ++k) {
    const auto& t = lx[k];
    if (t.is("(") || t.is("[") || t.is("{")) {
      k = lx.match(k);
      continue;
    }
    if (t.is("<")) ++angle;
    if (t.is(">")) angle = std::max(0, angle - 1);
    if (t.is(">>")) angle = std::max(0, angle - 2);
    if (t.is(",") && angle == 0) {
      finish(start, k);
      start = k + 1;
    }
  }
  finish(start, f.params_close);
  return out;
}

// --- Loops -------------------------------------------------------------------------------------------------

// Index of the first top-level token in [first, last) that is `what`, or last.
std::size_t find_top(const lexed& lx, std::size_t first, std::size_t last, std::string_view what) {
  for (std::size_t k = first; k < last; ++k) {
    if (lx[k].is("(") || lx[k].is("[") || lx[k].is("{")) {
      k = lx.match(k);
      continue;
    }
    if (lx[k].is(what)) return k;
  }
  return last;
}

loop_form parse_loop(const lexed& lx, std::size_t t) {
  loop_form L;
  if (t >= lx.size() || !lx[t].is_identifier("for"))
    fail("expected a for loop after the annotation, found '" +
         (t < lx.size() ? std::string(lx[t].text.substr(0, 40)) : std::string("the end of the source")) +
         "'");
  L.for_tok = t;
  L.open = t + 1;
  if (L.open >= lx.size() || !lx[L.open].is("(")) fail("malformed for loop");
  L.close = lx.match(L.open);
  const std::size_t s1 = find_top(lx, L.open + 1, L.close, ";");
  const std::size_t s2 = find_top(lx, s1 + 1, L.close, ";");
  if (s1 >= L.close || s2 >= L.close) fail("malformed for loop header");
  // init: <type> i = <start>
  const std::size_t eq = find_top(lx, L.open + 1, s1, "=");
  if (eq >= s1 || eq < L.open + 3 || eq + 1 >= s1)
    fail("the loop must declare its index: for (<type> i = <start>; ...)");
  if (find_top(lx, L.open + 1, s1, ",") < s1) fail("the loop's init declares more than one variable");
  const auto& idx = lx[eq - 1];
  if (idx.kind != token_kind::identifier)
    fail("the loop must declare its index: for (<type> i = <start>; ...)");
  for (std::size_t k = L.open + 1; k < eq - 1; ++k)
    if (lx[k].kind != token_kind::identifier) fail("the index type must be a plain integer type");
  L.index = std::string(idx.text);
  L.type = std::string(lx.span(L.open + 1, eq - 2));
  L.start = std::string(lx.span(eq + 1, s1 - 1));
  // condition: i < <n>
  if (s2 < s1 + 4 || !lx[s1 + 1].is_identifier(L.index) || !lx[s1 + 2].is("<"))
    fail("the condition must be '" + L.index + " < <n>'");
  for (std::size_t k = s1 + 3; k < s2; ++k) {
    if (lx[k].is("(") || lx[k].is("[")) {
      k = lx.match(k);
      continue;
    }
    static const std::set<std::string_view> low = {
        "<", ">", "<=", ">=", "==", "!=", "&",  "|",  "^",  "&&", "||",  "?",  ":",
        ",", "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="};
    if (lx[k].kind == token_kind::punct && low.count(lx[k].text))
      fail("the condition must be '" + L.index + " < <n>' with nothing of lower precedence in <n>");
  }
  L.bound = std::string(lx.span(s1 + 3, s2 - 1));
  // increment
  L.incr = std::string(lx.span(s2 + 1, L.close - 1));
  const std::size_t n_inc = L.close - s2 - 1;
  if (n_inc == 2 && ((lx[s2 + 1].is("++") && lx[s2 + 2].is_identifier(L.index)) ||
                     (lx[s2 + 1].is_identifier(L.index) && lx[s2 + 2].is("++")))) {
    L.stride.clear();
  } else if (n_inc >= 3 && lx[s2 + 1].is_identifier(L.index) && lx[s2 + 2].is("+=")) {
    if (find_top(lx, s2 + 3, L.close, ",") < L.close)
      fail("the increment must be '" + L.index + " += <stride>'");
    L.stride = std::string(lx.span(s2 + 3, L.close - 1));
    if (L.stride == "1") L.stride.clear();
  } else {
    fail("the increment must be ++" + L.index + ", " + L.index + "++ or " + L.index + " += <stride>");
  }
  // body
  const std::size_t b = L.close + 1;
  if (b >= lx.size()) fail("the loop has no body");
  if (lx[b].is("{")) {
    L.braced = true;
    L.body_first = b;
    L.body_last = lx.match(b);
  } else {
    static const std::set<std::string_view> compound = {"if", "for", "while", "do", "switch", "else"};
    if (lx[b].kind == token_kind::identifier && compound.count(lx[b].text))
      fail("a body that is not one expression statement must be in braces");
    std::size_t semi = find_top(lx, b, lx.size(), ";");
    if (semi >= lx.size()) fail("the loop body has no ';'");
    L.body_first = b;
    L.body_last = semi;
  }
  return L;
}

// --- Sites -------------------------------------------------------------------------------------------------

namespace {
bool well_formed(const std::string& source, const annotation& a) {
  std::size_t p = a.line_begin;
  while (p < source.size() && (source[p] == ' ' || source[p] == '\t'))
    ++p;
  if (source.compare(p, 5, "//@kf") != 0) return false;
  p += 5;
  return p >= source.size() || source[p] == ' ' || source[p] == '\t' || source[p] == '\r' ||
         source[p] == '\n';
}
}  // namespace

std::vector<annotation> site_annotations(const std::string& source, std::string_view op,
                                         std::string_view site) {
  std::vector<annotation> mine;
  std::set<std::string> others;
  for (auto& a : find_annotations(source)) {
    if (!well_formed(source, a) || a.site != site) continue;
    if (a.op == op)
      mine.push_back(std::move(a));
    else
      others.insert(a.op);
  }
  if (!mine.empty()) return mine;
  if (!others.empty()) {
    std::string list;
    for (const auto& o : others)
      list += (list.empty() ? "'" : ", '") + o + "'";
    fail("the site is marked for " + list + ", not for '" + std::string(op) + "' (no '//@kf " +
         std::string(op) + " " + std::string(site) + "' annotation)");
  }
  fail("the site is missing from the source (no '//@kf " + std::string(op) + " " + std::string(site) +
       "' annotation)");
}

std::size_t construct_after(const lexed& lx, const annotation& a) {
  return lx.first_at(a.line_end);
}

std::string arg_or(const annotation& a, const std::string& key, const std::string& fallback) {
  auto it = a.args.find(key);
  return it == a.args.end() ? fallback : it->second;
}

void check_args(const annotation& a, const std::vector<std::string>& allowed) {
  for (const auto& [k, v] : a.args) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string list;
    for (const auto& x : allowed)
      list += (list.empty() ? "" : ", ") + x;
    fail("unknown annotation argument '" + k + "' (expected " + (list.empty() ? "none" : list) + ")");
  }
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p <= s.size()) {
    auto c = s.find(',', p);
    if (c == std::string_view::npos) c = s.size();
    if (c > p) out.emplace_back(s.substr(p, c - p));
    p = c + 1;
  }
  return out;
}

// --- Edits -------------------------------------------------------------------------------------------------

void text_edits::replace(std::size_t begin, std::size_t end, std::string text) {
  edits_.push_back({begin, end, std::move(text)});
}

std::string text_edits::apply(std::string_view source) const {
  std::vector<const edit*> order;
  for (const auto& e : edits_)
    order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const edit* a, const edit* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::string out;
  out.reserve(source.size() + 256);
  std::size_t pos = 0;
  for (const auto* e : order) {
    if (e->begin < pos || e->end > source.size() || e->end < e->begin)
      fail("two rewrites of the same text conflict (offset " + std::to_string(e->begin) + ")");
    out.append(source.substr(pos, e->begin - pos));
    out += e->text;
    pos = e->end;
  }
  out.append(source.substr(pos));
  return out;
}

// --- Options, values ---------------------------------------------------------------------------------------

option_spec list_option(std::string name, nlohmann::json def, std::string doc) {
  option_spec s;
  s.name = std::move(name);
  s.type = option_type::list;
  s.default_value = std::move(def);
  s.doc = std::move(doc);
  return s;
}

void require_site(const options& o, const transform_site& s, std::string_view op) {
  if (s.site.empty())
    o.where().fail(std::string(op) +
                   " acts on a marked site: give the instance `site: <name>` (the name in its " + "'//@kf " +
                   std::string(op) + " <name>' annotation)");
  if (!is_identifier(s.site))
    o.where().fail("the site '" + s.site + "' is not a name (letters, digits and _)");
}

std::vector<std::int64_t> int_list(const options& o, std::string_view name, std::int64_t lo, std::int64_t hi,
                                   std::optional<std::int64_t> neutral) {
  const auto& j = o.json(name);
  if (!j.is_array() || j.empty()) o.fail(name, "expected a non-empty list of integers");
  std::vector<std::int64_t> out;
  for (const auto& x : j) {
    if (!x.is_number_integer()) o.fail(name, "expected integers, got " + describe_json(x));
    const auto v = x.get<std::int64_t>();
    if (v < lo || v > hi)
      o.fail(name,
             std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    if (std::find(out.begin(), out.end(), v) != out.end())
      o.fail(name, std::to_string(v) + " is listed twice");
    out.push_back(v);
  }
  if (neutral && std::find(out.begin(), out.end(), *neutral) == out.end())
    o.fail(name,
           "must include " + std::to_string(*neutral) + " (the value that leaves the source unchanged)");
  return out;
}

std::vector<std::string> string_list(const options& o, std::string_view name) {
  const auto& j = o.json(name);
  if (!j.is_array() || j.empty()) o.fail(name, "expected a non-empty list of strings");
  std::vector<std::string> out;
  for (const auto& x : j) {
    if (!x.is_string()) o.fail(name, "expected strings, got " + describe_json(x));
    auto v = x.get<std::string>();
    if (std::find(out.begin(), out.end(), v) != out.end()) o.fail(name, "'" + v + "' is listed twice");
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<value> to_values(const std::vector<std::int64_t>& xs) {
  std::vector<value> out;
  for (auto x : xs)
    out.emplace_back(static_cast<long long>(x));
  return out;
}

std::vector<value> to_values(const std::vector<std::string>& xs) {
  std::vector<value> out;
  for (const auto& x : xs)
    out.emplace_back(x);
  return out;
}

namespace {
const value& find_value(const transform_values& v, std::string_view name) {
  auto it = v.find(name);
  if (it == v.end()) fail("no value for its parameter '" + std::string(name) + "'");
  return it->second;
}
}  // namespace

std::int64_t int_value(const transform_values& v, std::string_view name) {
  const auto& x = find_value(v, name);
  if (x.is_integral()) return x.as_int();
  if (x.is_real() && x.as_real() == static_cast<double>(static_cast<std::int64_t>(x.as_real())))
    return static_cast<std::int64_t>(x.as_real());
  fail("parameter '" + std::string(name) + "' is " + x.repr() + ", not an integer");
}

bool bool_value(const transform_values& v, std::string_view name) {
  const auto& x = find_value(v, name);
  if (!x.is_number()) fail("parameter '" + std::string(name) + "' is " + x.repr() + ", not a bool");
  return x.truthy();
}

std::string string_value(const transform_values& v, std::string_view name) {
  const auto& x = find_value(v, name);
  if (!x.is_string()) fail("parameter '" + std::string(name) + "' is " + x.repr() + ", not a string");
  return x.as_string();
}

}  // namespace kf::transforms
