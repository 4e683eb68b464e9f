// Building kf::expression programs: lexer, recursive-descent parser, name resolution, constant
// folding, compaction and the numeric bytecode compiler (see expr_program.hpp).
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/expr_program.hpp"
#include "kforge/error.hpp"

namespace kf::detail {
namespace {

// ------------------------------------------------------------------------------------------------
// Lexer

enum class tk : std::uint8_t { end, name, keyword, integer, real, string, punct };

enum class kw : std::uint8_t { and_, or_, not_, in, if_, else_, for_, true_, false_, none, is, unsupported };

enum class pu : std::uint8_t {
  lparen,
  rparen,
  lbrack,
  rbrack,
  comma,
  colon,
  plus,
  minus,
  star,
  slash,
  dslash,
  percent,
  dstar,
  lshift,
  rshift,
  amp,
  pipe,
  caret,
  tilde,
  lt,
  le,
  gt,
  ge,
  eq,
  ne,
  assign
};

struct token {
  tk kind = tk::end;
  std::uint8_t sub = 0;  // kw or pu
  std::uint32_t pos = 0;
  std::uint32_t len = 0;
  std::int64_t ival = 0;
  double dval = 0.0;
  std::string text;  // name, or the decoded string literal
};

struct keyword_entry {
  std::string_view word;
  kw k;
};

constexpr std::array<keyword_entry, 35> kKeywords{{
    {"and", kw::and_},
    {"or", kw::or_},
    {"not", kw::not_},
    {"in", kw::in},
    {"if", kw::if_},
    {"else", kw::else_},
    {"for", kw::for_},
    {"True", kw::true_},
    {"False", kw::false_},
    {"None", kw::none},
    {"is", kw::is},
    {"as", kw::unsupported},
    {"assert", kw::unsupported},
    {"async", kw::unsupported},
    {"await", kw::unsupported},
    {"break", kw::unsupported},
    {"class", kw::unsupported},
    {"continue", kw::unsupported},
    {"def", kw::unsupported},
    {"del", kw::unsupported},
    {"elif", kw::unsupported},
    {"except", kw::unsupported},
    {"finally", kw::unsupported},
    {"from", kw::unsupported},
    {"global", kw::unsupported},
    {"import", kw::unsupported},
    {"lambda", kw::unsupported},
    {"nonlocal", kw::unsupported},
    {"pass", kw::unsupported},
    {"raise", kw::unsupported},
    {"return", kw::unsupported},
    {"try", kw::unsupported},
    {"while", kw::unsupported},
    {"with", kw::unsupported},
    {"yield", kw::unsupported},
}};

struct builtin_entry {
  std::string_view name;
  builtin b;
  std::uint32_t min_args, max_args;
};

constexpr std::uint32_t kMany = std::numeric_limits<std::uint32_t>::max();

constexpr std::array<builtin_entry, 17> kBuiltins{{
    {"min", builtin::min, 1, kMany},
    {"max", builtin::max, 1, kMany},
    {"abs", builtin::abs, 1, 1},
    {"len", builtin::len, 1, 1},
    {"sum", builtin::sum, 1, 2},
    {"range", builtin::range, 1, 3},
    {"list", builtin::list, 0, 1},
    {"tuple", builtin::tuple, 0, 1},
    {"int", builtin::to_int, 0, 1},
    {"float", builtin::to_float, 0, 1},
    {"bool", builtin::to_bool, 0, 1},
    {"str", builtin::to_str, 0, 1},
    {"round", builtin::round, 1, 2},
    {"pow", builtin::pow, 2, 2},
    {"any", builtin::any, 1, 1},
    {"all", builtin::all, 1, 1},
    {"sorted", builtin::sorted, 1, 1},
}};

const builtin_entry* find_builtin(std::string_view name) {
  for (const auto& e : kBuiltins) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_dec(char c) {
  return c >= '0' && c <= '9';
}

int digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 99;
}

std::string describe_char(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  static const char* hex = "0123456789abcdef";
  const auto u = static_cast<unsigned char>(c);
  return std::string("'\\x") + hex[u >> 4] + hex[u & 15] + "'";
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class lexer {
 public:
  explicit lexer(std::string_view src) : src_(src) {}

  std::vector<token> run() {
    std::vector<token> out;
    for (;;) {
      skip_space();
      token t;
      t.pos = static_cast<std::uint32_t>(i_);
      if (i_ >= src_.size()) {
        out.push_back(std::move(t));
        return out;
      }
      const char c = src_[i_];
      if (is_dec(c) || (c == '.' && i_ + 1 < src_.size() && is_dec(src_[i_ + 1]))) {
        number(t);
      } else if (c == '\'' || c == '"') {
        string_literal(t);
      } else if (is_name_start(c)) {
        name(t);
      } else {
        punct(t);
      }
      t.len = static_cast<std::uint32_t>(i_) - t.pos;
      out.push_back(std::move(t));
    }
  }

 private:
  [[noreturn]] void error(std::size_t pos, std::string reason) const {
    throw parse_error(std::string(src_), pos, std::move(reason));
  }

  char at(std::size_t k) const { return k < src_.size() ? src_[k] : '\0'; }

  void skip_space() {
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++i_;
      } else if (c == '#') {
        while (i_ < src_.size() && src_[i_] != '\n')
          ++i_;
      } else if (c == '\\' && (at(i_ + 1) == '\n' || (at(i_ + 1) == '\r' && at(i_ + 2) == '\n'))) {
        i_ += at(i_ + 1) == '\n' ? 2 : 3;  // explicit line continuation
      } else {
        return;
      }
    }
  }

  // Scans digits of `base` with single '_' between digits; appends them to `out`. A leading '_' is
  // allowed only right after a base prefix (0x_1f).
  void digits(int base, std::string& out, bool leading_underscore) {
    const std::size_t start = i_;
    for (;;) {
      const char c = at(i_);
      if (c == '_') {
        const bool after_digit = i_ > start ? digit_value(src_[i_ - 1]) < base : leading_underscore;
        if (!after_digit || digit_value(at(i_ + 1)) >= base) error(i_, "invalid '_' in number literal");
        ++i_;
      } else if (digit_value(c) < base) {
        out += c;
        ++i_;
      } else {
        return;
      }
    }
  }

  void number(token& t) {
    const std::size_t start = i_;
    const char c1 = static_cast<char>(std::tolower(static_cast<unsigned char>(at(i_ + 1))));
    if (src_[i_] == '0' && (c1 == 'x' || c1 == 'o' || c1 == 'b')) {
      const int base = c1 == 'x' ? 16 : (c1 == 'o' ? 8 : 2);
      const char* kind = c1 == 'x' ? "hexadecimal" : (c1 == 'o' ? "octal" : "binary");
      i_ += 2;
      std::string ds;
      digits(base, ds, true);
      if (ds.empty() && !is_name_char(at(i_))) error(start, std::string("invalid ") + kind + " literal");
      if (is_name_char(at(i_)))
        error(i_, std::string("invalid digit ") + describe_char(at(i_)) + " in " + kind + " literal");
      std::uint64_t v = 0;
      for (char d : ds) {
        const auto dv = static_cast<std::uint64_t>(digit_value(d));
        if (v > (9223372036854775807ULL - dv) / static_cast<std::uint64_t>(base)) {
          error(start, "integer literal is too large (more than 64 bits)");
        }
        v = v * static_cast<std::uint64_t>(base) + dv;
      }
      t.kind = tk::integer;
      t.ival = static_cast<std::int64_t>(v);
      return;
    }
    std::string int_part;
    digits(10, int_part, false);
    bool is_float = false;
    if (at(i_) == '.') {
      is_float = true;
      ++i_;
      if (at(i_) == '_') error(i_, "invalid '_' in number literal");
      std::string frac;
      digits(10, frac, false);
    }
    if (at(i_) == 'e' || at(i_) == 'E') {
      const std::size_t k = i_ + ((at(i_ + 1) == '+' || at(i_ + 1) == '-') ? 2 : 1);
      if (!is_dec(at(k))) error(i_, "invalid float literal");
      is_float = true;
      i_ = k;
      std::string ex;
      digits(10, ex, false);
    }
    if (at(i_) == 'j' || at(i_) == 'J') error(start, "complex numbers are not supported");
    if (is_name_char(at(i_))) error(i_, "invalid decimal literal");
    const std::string_view text = src_.substr(start, i_ - start);
    if (is_float) {
      double d = 0.0;
      if (!parse_python_float(text, d)) error(start, "invalid float literal");
      t.kind = tk::real;
      t.dval = d;
      return;
    }
    if (int_part.size() > 1 && int_part[0] == '0' && int_part.find_first_not_of('0') != std::string::npos) {
      error(start, "leading zeros in decimal integer literals are not permitted (use 0o for octal)");
    }
    std::int64_t v = 0;
    const auto res = std::from_chars(int_part.data(), int_part.data() + int_part.size(), v);
    if (res.ec != std::errc()) error(start, "integer literal is too large (more than 64 bits)");
    t.kind = tk::integer;
    t.ival = v;
  }

  std::uint32_t hex_escape(std::size_t start, int count) {
    std::uint32_t v = 0;
    for (int k = 0; k < count; ++k) {
      const int d = digit_value(at(i_));
      if (d >= 16) error(start, "truncated escape sequence in string literal");
      v = v * 16 + static_cast<std::uint32_t>(d);
      ++i_;
    }
    return v;
  }

  void string_literal(token& t) {
    const std::size_t start = i_;
    const char quote = src_[i_++];
    std::string out;
    for (;;) {
      if (i_ >= src_.size() || src_[i_] == '\n') error(start, "unterminated string literal");
      const char c = src_[i_++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= src_.size()) error(start, "unterminated string literal");
      const std::size_t esc = i_ - 1;
      const char e = src_[i_++];
      switch (e) {
        case '\n':
          break;  // line continuation inside the literal
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
          append_utf8(out, hex_escape(esc, 2));
          break;
        case 'u':
          append_utf8(out, hex_escape(esc, 4));
          break;
        case 'U': {
          const std::uint32_t cp = hex_escape(esc, 8);
          if (cp > 0x10ffff) error(esc, "invalid Unicode escape (above U+10FFFF)");
          append_utf8(out, cp);
          break;
        }
        case 'N':
          error(esc, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t v = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && at(i_) >= '0' && at(i_) <= '7'; ++k)
              v = v * 8 + static_cast<std::uint32_t>(src_[i_++] - '0');
            append_utf8(out, v);
          } else {  // unknown escapes keep the backslash, as in Python
            out += '\\';
            out += e;
          }
      }
    }
    t.kind = tk::string;
    t.text = std::move(out);
  }

  void name(token& t) {
    const std::size_t start = i_;
    while (i_ < src_.size() && is_name_char(src_[i_]))
      ++i_;
    const std::string_view word = src_.substr(start, i_ - start);
    if (at(i_) == '\'' || at(i_) == '"') {
      std::string lower(word);
      for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower == "u") {  // u'...' is an ordinary string
        string_literal(t);
        return;
      }
      if (lower.size() <= 2 && lower.find_first_not_of("rbf") == std::string::npos) {
        error(start, "string prefix '" + std::string(word) + "' is not supported");
      }
    }
    for (const auto& e : kKeywords) {
      if (e.word == word) {
        t.kind = tk::keyword;
        t.sub = static_cast<std::uint8_t>(e.k);
        t.text = std::string(word);
        return;
      }
    }
    t.kind = tk::name;
    t.text = std::string(word);
  }

  void punct(token& t) {
    const char c = src_[i_];
    const char n = at(i_ + 1);
    t.kind = tk::punct;
    auto set = [&](pu p, std::size_t len) {
      t.sub = static_cast<std::uint8_t>(p);
      i_ += len;
    };
    switch (c) {
      case '(':
        return set(pu::lparen, 1);
      case ')':
        return set(pu::rparen, 1);
      case '[':
        return set(pu::lbrack, 1);
      case ']':
        return set(pu::rbrack, 1);
      case ',':
        return set(pu::comma, 1);
      case ':':
        return set(pu::colon, 1);
      case '+':
        return set(pu::plus, 1);
      case '-':
        return set(pu::minus, 1);
      case '*':
        return n == '*' ? set(pu::dstar, 2) : set(pu::star, 1);
      case '/':
        return n == '/' ? set(pu::dslash, 2) : set(pu::slash, 1);
      case '%':
        return set(pu::percent, 1);
      case '&':
        return set(pu::amp, 1);
      case '|':
        return set(pu::pipe, 1);
      case '^':
        return set(pu::caret, 1);
      case '~':
        return set(pu::tilde, 1);
      case '<':
        if (n == '<') return set(pu::lshift, 2);
        return n == '=' ? set(pu::le, 2) : set(pu::lt, 1);
      case '>':
        if (n == '>') return set(pu::rshift, 2);
        return n == '=' ? set(pu::ge, 2) : set(pu::gt, 1);
      case '=':
        return n == '=' ? set(pu::eq, 2) : set(pu::assign, 1);
      case '!':
        if (n == '=') return set(pu::ne, 2);
        error(i_, "unexpected character '!' (use 'not' or '!=')");
      case '.':
        error(i_, "attribute access is not supported");
      case '{':
      case '}':
        error(i_, "dict and set displays are not supported");
      case '@':
        error(i_, "the '@' operator is not supported");
      default:
        error(i_, "unexpected character " + describe_char(c));
    }
  }

  std::string_view src_;
  std::size_t i_ = 0;
};

// ------------------------------------------------------------------------------------------------
// Parser: builds parse-stage nodes (names unresolved) into the program.

class parser {
 public:
  parser(std::string_view src, expr_program& p) : src_(src), p_(p) { toks_ = lexer(src).run(); }

  std::uint32_t parse() {
    depth_ = -1;
    const std::uint32_t first = parse_test();
    std::uint32_t result = first;
    if (at(pu::comma)) {  // a bare tuple: 1, 2
      std::vector<std::uint32_t> elems{first};
      const std::uint32_t pos = peek().pos;
      while (accept(pu::comma)) {
        if (peek().kind == tk::end) break;
        elems.push_back(parse_test());
      }
      result = make(node_kind::list, 0, pos, elems);
    }
    if (peek().kind != tk::end) error(peek().pos, "unexpected " + describe(peek()));
    return result;
  }

  std::vector<std::string> names;  // name pool (node index field of name / target_name / call)

 private:
  // Nesting guard: brackets, unary operators, `not`, `**` and conditionals each count one level.
  struct nest {
    explicit nest(parser& ps, std::uint32_t pos) : ps_(ps) {
      if (++ps_.depth_ > max_nesting) {
        ps_.error(pos,
                  "expression is nested too deeply (more than " + std::to_string(max_nesting) + " levels)");
      }
    }
    ~nest() { --ps_.depth_; }
    nest(const nest&) = delete;
    nest& operator=(const nest&) = delete;
    parser& ps_;
  };

  [[noreturn]] void error(std::size_t pos, std::string reason) const {
    throw parse_error(std::string(src_), pos, std::move(reason));
  }

  const token& peek(std::size_t ahead = 0) const { return toks_[std::min(at_ + ahead, toks_.size() - 1)]; }
  const token& next() {
    const token& t = toks_[at_];
    if (at_ + 1 < toks_.size()) ++at_;
    return t;
  }
  bool at(pu p, std::size_t ahead = 0) const {
    const token& t = peek(ahead);
    return t.kind == tk::punct && t.sub == static_cast<std::uint8_t>(p);
  }
  bool at_kw(kw k, std::size_t ahead = 0) const {
    const token& t = peek(ahead);
    return t.kind == tk::keyword && t.sub == static_cast<std::uint8_t>(k);
  }
  bool accept(pu p) {
    if (!at(p)) return false;
    next();
    return true;
  }
  void expect(pu p, const char* what) {
    if (!accept(p)) error(peek().pos, std::string("expected ") + what);
  }

  std::string describe(const token& t) const {
    if (t.kind == tk::end) return "end of expression";
    std::string text(src_.substr(t.pos, t.len));
    if (text.size() > 24) text = text.substr(0, 21) + "...";
    return "'" + text + "'";
  }

  std::uint32_t intern(const std::string& name) {
    const auto it = name_ids_.find(name);
    if (it != name_ids_.end()) return it->second;
    const auto id = static_cast<std::uint32_t>(names.size());
    names.push_back(name);
    name_ids_.emplace(name, id);
    return id;
  }

  std::uint32_t make(node_kind k, std::uint8_t op, std::uint32_t pos, std::span<const std::uint32_t> kids,
                     std::uint32_t index = 0, std::uint32_t extra_height = 0) {
    std::uint32_t h = 0;
    for (std::uint32_t kid : kids)
      h = std::max(h, heights_[kid]);
    h += 1 + extra_height;
    if (h > static_cast<std::uint32_t>(max_tree_height)) {
      error(pos,
            "expression is too complex (parse tree deeper than " + std::to_string(max_tree_height) + ")");
    }
    const auto id = static_cast<std::uint32_t>(p_.nodes.size());
    p_.nodes.push_back(node{k, op, pos, static_cast<std::uint32_t>(p_.kids.size()),
                            static_cast<std::uint32_t>(kids.size()), index});
    p_.kids.insert(p_.kids.end(), kids.begin(), kids.end());
    heights_.push_back(h);
    return id;
  }
  std::uint32_t make(node_kind k, std::uint8_t op, std::uint32_t pos,
                     std::initializer_list<std::uint32_t> kids, std::uint32_t index = 0) {
    return make(k, op, pos, std::span<const std::uint32_t>(kids.begin(), kids.size()), index);
  }
  std::uint32_t make_constant(value v, std::uint32_t pos) {
    const auto idx = static_cast<std::uint32_t>(p_.constants.size());
    p_.constants.push_back(std::move(v));
    return make(node_kind::constant, 0, pos, {}, idx);
  }

  // test := or_test ['if' or_test 'else' test]
  std::uint32_t parse_test() {
    nest guard(*this, peek().pos);
    const std::uint32_t then = parse_or();
    if (!at_kw(kw::if_)) return then;
    const std::uint32_t pos = next().pos;
    const std::uint32_t cond = parse_or();
    if (!at_kw(kw::else_)) error(peek().pos, "expected 'else'");
    next();
    const std::uint32_t otherwise = parse_test();
    return make(node_kind::conditional, 0, pos, {then, cond, otherwise});
  }

  std::uint32_t parse_or() {
    std::uint32_t left = parse_and();
    while (at_kw(kw::or_)) {
      const std::uint32_t pos = next().pos;
      left = make(node_kind::logical_or, 0, pos, {left, parse_and()});
    }
    return left;
  }

  std::uint32_t parse_and() {
    std::uint32_t left = parse_not();
    while (at_kw(kw::and_)) {
      const std::uint32_t pos = next().pos;
      left = make(node_kind::logical_and, 0, pos, {left, parse_not()});
    }
    return left;
  }

  std::uint32_t parse_not() {
    if (!at_kw(kw::not_)) return parse_comparison();
    const std::uint32_t pos = next().pos;
    nest guard(*this, pos);
    return make(node_kind::logical_not, 0, pos, {parse_not()});
  }

  std::optional<cmpop> comparison_operator() const {
    const token& t = peek();
    if (t.kind == tk::punct) {
      switch (static_cast<pu>(t.sub)) {
        case pu::lt:
          return cmpop::lt;
        case pu::le:
          return cmpop::le;
        case pu::gt:
          return cmpop::gt;
        case pu::ge:
          return cmpop::ge;
        case pu::eq:
          return cmpop::eq;
        case pu::ne:
          return cmpop::ne;
        default:
          return std::nullopt;
      }
    }
    if (at_kw(kw::in)) return cmpop::in;
    if (at_kw(kw::not_) && at_kw(kw::in, 1)) return cmpop::not_in;
    if (at_kw(kw::is)) error(t.pos, "'is' is not supported (use == or !=)");
    return std::nullopt;
  }

  std::uint32_t parse_comparison() {
    const std::uint32_t first = parse_bitor();
    std::optional<cmpop> op = comparison_operator();
    if (!op) return first;
    std::vector<std::uint32_t> operands{first};
    std::vector<cmp_link> links;
    const std::uint32_t pos = peek().pos;
    while (op) {
      links.push_back(cmp_link{*op, next().pos});
      if (*op == cmpop::not_in) next();
      operands.push_back(parse_bitor());
      op = comparison_operator();
    }
    const auto link_index = static_cast<std::uint32_t>(p_.links.size());  // after nested comparisons
    p_.links.insert(p_.links.end(), links.begin(), links.end());
    return make(node_kind::compare, 0, pos, operands, link_index);
  }

  // Left-associative binary levels, lowest first.
  std::uint32_t parse_bitor() { return parse_binary_level(0); }

  static std::optional<binop> level_operator(int level, pu p) {
    switch (level) {
      case 0:
        return p == pu::pipe ? std::optional(binop::bit_or) : std::nullopt;
      case 1:
        return p == pu::caret ? std::optional(binop::bit_xor) : std::nullopt;
      case 2:
        return p == pu::amp ? std::optional(binop::bit_and) : std::nullopt;
      case 3:
        if (p == pu::lshift) return binop::lshift;
        return p == pu::rshift ? std::optional(binop::rshift) : std::nullopt;
      case 4:
        if (p == pu::plus) return binop::add;
        return p == pu::minus ? std::optional(binop::sub) : std::nullopt;
      case 5:
        switch (p) {
          case pu::star:
            return binop::mul;
          case pu::slash:
            return binop::truediv;
          case pu::dslash:
            return binop::floordiv;
          case pu::percent:
            return binop::mod;
          default:
            return std::nullopt;
        }
      default:
        return std::nullopt;
    }
  }

  std::uint32_t parse_binary_level(int level) {
    if (level == 6) return parse_factor();
    std::uint32_t left = parse_binary_level(level + 1);
    for (;;) {
      const token& t = peek();
      if (t.kind != tk::punct) return left;
      const std::optional<binop> op = level_operator(level, static_cast<pu>(t.sub));
      if (!op) return left;
      const std::uint32_t pos = next().pos;
      const std::uint32_t right = parse_binary_level(level + 1);
      left = make(node_kind::binary, static_cast<std::uint8_t>(*op), pos, {left, right});
    }
  }

  // factor := ('+' | '-' | '~') factor | power
  std::uint32_t parse_factor() {
    const token& t = peek();
    if (t.kind == tk::punct) {
      std::optional<unop> op;
      if (t.sub == static_cast<std::uint8_t>(pu::minus)) op = unop::neg;
      if (t.sub == static_cast<std::uint8_t>(pu::plus)) op = unop::pos;
      if (t.sub == static_cast<std::uint8_t>(pu::tilde)) op = unop::invert;
      if (op) {
        const std::uint32_t pos = next().pos;
        nest guard(*this, pos);
        return make(node_kind::unary, static_cast<std::uint8_t>(*op), pos, {parse_factor()});
      }
    }
    return parse_power();
  }

  // power := primary ['**' factor]
  std::uint32_t parse_power() {
    const std::uint32_t base = parse_primary();
    if (!at(pu::dstar)) return base;
    const std::uint32_t pos = next().pos;
    nest guard(*this, pos);
    const std::uint32_t exponent = parse_factor();
    return make(node_kind::binary, static_cast<std::uint8_t>(binop::pow), pos, {base, exponent});
  }

  std::uint32_t parse_primary() {
    std::uint32_t e = (peek().kind == tk::name && at(pu::lparen, 1)) ? parse_call() : parse_atom();
    for (;;) {
      if (at(pu::lbrack)) {
        e = parse_subscript(e);
      } else if (at(pu::lparen)) {
        error(peek().pos, "only the builtin functions can be called");
      } else {
        return e;
      }
    }
  }

  std::uint32_t parse_call() {
    const token& name = next();
    const builtin_entry* fn = find_builtin(name.text);
    if (fn == nullptr) error(name.pos, "unknown function '" + name.text + "'");
    const std::uint32_t name_pos = name.pos;
    const std::uint32_t name_id = intern(name.text);
    next();  // '('
    std::vector<std::uint32_t> args;
    while (!at(pu::rparen)) {
      if (peek().kind == tk::name && at(pu::assign, 1))
        error(peek().pos, "keyword arguments are not supported");
      const std::uint32_t arg_pos = peek().pos;
      std::uint32_t arg = parse_test();
      if (at_kw(kw::for_)) {  // a generator expression, evaluated as a list
        arg = parse_comprehension(arg, arg_pos);
        if (!args.empty() || !at(pu::rparen)) {
          error(arg_pos, "a generator expression must be the only argument of a call");
        }
      }
      args.push_back(arg);
      if (!accept(pu::comma)) break;
    }
    expect(pu::rparen, "')'");
    const auto n = static_cast<std::uint32_t>(args.size());
    if (n < fn->min_args || n > fn->max_args) {
      std::string what;
      if (fn->min_args == fn->max_args) {
        what = "exactly " + std::to_string(fn->min_args) + (fn->min_args == 1 ? " argument" : " arguments");
      } else if (fn->max_args == kMany) {
        what = "at least " + std::to_string(fn->min_args) + (fn->min_args == 1 ? " argument" : " arguments");
      } else if (fn->min_args == 0) {
        what = "at most " + std::to_string(fn->max_args) + (fn->max_args == 1 ? " argument" : " arguments");
      } else {
        what = std::to_string(fn->min_args) + " to " + std::to_string(fn->max_args) + " arguments";
      }
      error(name_pos, std::string(fn->name) + "() takes " + what + " (" + std::to_string(n) + " given)");
    }
    return make(node_kind::call, static_cast<std::uint8_t>(fn->b), name_pos, args, name_id);
  }

  std::uint32_t parse_subscript(std::uint32_t obj) {
    const std::uint32_t pos = next().pos;  // '['
    std::uint32_t start;
    if (at(pu::colon)) {
      start = make_constant(value(), pos);
    } else {
      const std::uint32_t index = parse_test();
      if (!at(pu::colon)) {
        expect(pu::rbrack, "']'");
        return make(node_kind::subscript, 0, pos, {obj, index});
      }
      start = index;
    }
    next();  // ':'
    const std::uint32_t stop = (at(pu::colon) || at(pu::rbrack)) ? make_constant(value(), pos) : parse_test();
    std::uint32_t step;
    if (accept(pu::colon) && !at(pu::rbrack)) {
      step = parse_test();
    } else {
      step = make_constant(value(), pos);
    }
    expect(pu::rbrack, "']'");
    return make(node_kind::slice, 0, pos, {obj, start, stop, step});
  }

  // After the element of a comprehension: ('for' targets 'in' or_test | 'if' or_test)+
  std::uint32_t parse_comprehension(std::uint32_t element, std::uint32_t pos) {
    std::vector<std::uint32_t> kids{element};
    for (;;) {
      if (at_kw(kw::for_)) {
        next();
        const std::uint32_t target = parse_target_list();
        if (!at_kw(kw::in)) error(peek().pos, "expected 'in'");
        next();
        const std::uint32_t iter_pos = peek().pos;
        const std::uint32_t iterable = parse_or();
        kids.push_back(make(node_kind::comp_for, 0, iter_pos, {target, iterable}));
      } else if (at_kw(kw::if_)) {
        next();
        const std::uint32_t cond_pos = peek().pos;
        kids.push_back(make(node_kind::comp_if, 0, cond_pos, {parse_or()}));
      } else {
        break;
      }
    }
    return make(node_kind::comprehension, 0, pos, kids, 0, static_cast<std::uint32_t>(kids.size()));
  }

  std::uint32_t parse_target_list() {
    const std::uint32_t pos = peek().pos;
    const std::uint32_t first = parse_target();
    if (!at(pu::comma)) return first;
    std::vector<std::uint32_t> items{first};
    while (accept(pu::comma)) {
      if (at_kw(kw::in)) break;
      items.push_back(parse_target());
    }
    return make(node_kind::target_tuple, 0, pos, items);
  }

  std::uint32_t parse_target() {
    const token& t = peek();
    nest guard(*this, t.pos);
    if (t.kind == tk::name) {
      next();
      return make(node_kind::target_name, 0, t.pos, {}, intern(t.text));
    }
    if (at(pu::lparen) || at(pu::lbrack)) {
      const pu close = at(pu::lparen) ? pu::rparen : pu::rbrack;
      const std::uint32_t pos = next().pos;
      std::vector<std::uint32_t> items;
      bool comma = false;
      while (!at(close)) {
        items.push_back(parse_target());
        if (!accept(pu::comma)) break;
        comma = true;
      }
      expect(close, close == pu::rparen ? "')'" : "']'");
      if (items.empty()) error(pos, "expected a loop variable");
      if (items.size() == 1 && !comma && close == pu::rparen) return items[0];
      return make(node_kind::target_tuple, 0, pos, items);
    }
    error(t.pos, "expected a loop variable, found " + describe(t));
  }

  std::uint32_t parse_atom() {
    const token& t = peek();
    switch (t.kind) {
      case tk::end:
        error(t.pos, "unexpected end of expression");
      case tk::integer:
        next();
        return make_constant(value(t.ival), t.pos);
      case tk::real:
        next();
        return make_constant(value(t.dval), t.pos);
      case tk::string: {
        const std::uint32_t pos = next().pos;
        std::string s = t.text;
        while (peek().kind == tk::string)
          s += next().text;  // adjacent literals concatenate
        return make_constant(value(std::move(s)), pos);
      }
      case tk::name:
        next();
        return make(node_kind::name, 0, t.pos, {}, intern(t.text));
      case tk::keyword:
        switch (static_cast<kw>(t.sub)) {
          case kw::true_:
            next();
            return make_constant(value(true), t.pos);
          case kw::false_:
            next();
            return make_constant(value(false), t.pos);
          case kw::none:
            next();
            return make_constant(value(), t.pos);
          case kw::unsupported:
          case kw::is:
            error(t.pos, "'" + t.text + "' is not supported");
          default:
            error(t.pos, "unexpected " + describe(t));
        }
      case tk::punct:
        break;
    }
    if (at(pu::lparen)) return parse_parenthesized();
    if (at(pu::lbrack)) return parse_list_display();
    error(t.pos, "unexpected " + describe(t));
  }

  std::uint32_t parse_parenthesized() {
    const std::uint32_t pos = next().pos;  // '('
    if (accept(pu::rparen)) return make(node_kind::list, 0, pos, {});
    const std::uint32_t first = parse_test();
    if (at_kw(kw::for_)) {
      const std::uint32_t comp = parse_comprehension(first, pos);
      expect(pu::rparen, "')'");
      return comp;
    }
    if (!at(pu::comma)) {
      expect(pu::rparen, "')'");
      return first;
    }
    std::vector<std::uint32_t> elems{first};
    while (accept(pu::comma)) {
      if (at(pu::rparen)) break;
      elems.push_back(parse_test());
    }
    expect(pu::rparen, "')'");
    return make(node_kind::list, 0, pos, elems);
  }

  std::uint32_t parse_list_display() {
    const std::uint32_t pos = next().pos;  // '['
    if (accept(pu::rbrack)) return make(node_kind::list, 0, pos, {});
    const std::uint32_t first = parse_test();
    if (at_kw(kw::for_)) {
      const std::uint32_t comp = parse_comprehension(first, pos);
      expect(pu::rbrack, "']'");
      return comp;
    }
    std::vector<std::uint32_t> elems{first};
    while (accept(pu::comma)) {
      if (at(pu::rbrack)) break;
      elems.push_back(parse_test());
    }
    expect(pu::rbrack, "']'");
    return make(node_kind::list, 0, pos, elems);
  }

  std::string_view src_;
  expr_program& p_;
  std::vector<token> toks_;
  std::size_t at_ = 0;
  int depth_ = -1;
  std::vector<std::uint32_t> heights_;
  std::unordered_map<std::string, std::uint32_t> name_ids_;
};

// ------------------------------------------------------------------------------------------------
// Name resolution: name -> slot (free name) or local (comprehension variable).

class resolver {
 public:
  resolver(expr_program& p, const std::vector<std::string>& names)
      : p_(p), names_(names), free_id_(names.size(), -1) {}

  void run() {
    resolve(p_.root);
    // Slots in order of first appearance in the source.
    std::vector<std::uint32_t> order(free_pos_.size());
    for (std::uint32_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return free_pos_[a] < free_pos_[b]; });
    std::vector<std::uint32_t> slot_of(order.size());
    for (std::uint32_t s = 0; s < order.size(); ++s) {
      slot_of[order[s]] = s;
      p_.free_names.push_back(names_[free_name_[order[s]]]);
    }
    for (node& nd : p_.nodes) {
      if (nd.kind == node_kind::slot) nd.index = slot_of[nd.index];
    }
    p_.local_count = local_count_;
  }

 private:
  struct scope {
    std::vector<std::uint32_t> targets;                          // every loop variable of the comprehension
    std::vector<std::pair<std::uint32_t, std::uint32_t>> bound;  // (name, local) assigned so far
  };

  [[noreturn]] void error(std::uint32_t pos, std::string reason) const {
    throw parse_error(p_.source, pos, std::move(reason));
  }

  // Local id for `name` at `pos`, or nullopt for a free name.
  std::optional<std::uint32_t> lookup(std::uint32_t name, std::uint32_t pos) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s) {
      for (auto b = s->bound.rbegin(); b != s->bound.rend(); ++b) {
        if (b->first == name) return b->second;
      }
      if (std::find(s->targets.begin(), s->targets.end(), name) != s->targets.end()) {
        error(pos, "comprehension variable '" + names_[name] + "' is used before it is assigned");
      }
    }
    return std::nullopt;
  }

  void collect_targets(std::uint32_t t, std::vector<std::uint32_t>& out) const {
    const node& tn = p_.nodes[t];
    if (tn.kind == node_kind::target_name) {
      out.push_back(tn.index);
      return;
    }
    for (std::uint32_t j = 0; j < tn.count; ++j)
      collect_targets(p_.kids[tn.first + j], out);
  }

  void bind(std::uint32_t t) {
    node& tn = p_.nodes[t];
    if (tn.kind == node_kind::target_name) {
      scopes_.back().bound.emplace_back(tn.index, local_count_);
      tn.kind = node_kind::target_local;
      tn.index = local_count_++;
      return;
    }
    for (std::uint32_t j = 0; j < tn.count; ++j)
      bind(p_.kids[tn.first + j]);
  }

  void resolve(std::uint32_t n) {
    node& nd = p_.nodes[n];
    switch (nd.kind) {
      case node_kind::name: {
        if (const auto local = lookup(nd.index, nd.pos)) {
          nd.kind = node_kind::local;
          nd.index = *local;
          return;
        }
        std::int64_t& id = free_id_[nd.index];
        if (id < 0) {
          id = static_cast<std::int64_t>(free_pos_.size());
          free_pos_.push_back(nd.pos);
          free_name_.push_back(nd.index);
        }
        const auto fid = static_cast<std::size_t>(id);
        free_pos_[fid] = std::min(free_pos_[fid], nd.pos);
        nd.kind = node_kind::slot;
        nd.index = static_cast<std::uint32_t>(fid);
        return;
      }
      case node_kind::call:
        for (const auto& s : scopes_) {
          if (std::find(s.targets.begin(), s.targets.end(), nd.index) != s.targets.end()) {
            error(nd.pos, "'" + names_[nd.index] + "' is a comprehension variable, not a function");
          }
        }
        break;
      case node_kind::comprehension: {
        const std::uint32_t first = nd.first, count = nd.count;
        // The first iterable is evaluated in the enclosing scope.
        const node& c0 = p_.nodes[p_.kids[first + 1]];
        resolve(p_.kids[c0.first + 1]);
        scope s;
        for (std::uint32_t i = 1; i < count; ++i) {
          const node& c = p_.nodes[p_.kids[first + i]];
          if (c.kind == node_kind::comp_for) collect_targets(p_.kids[c.first], s.targets);
        }
        scopes_.push_back(std::move(s));
        for (std::uint32_t i = 1; i < count; ++i) {
          const node c = p_.nodes[p_.kids[first + i]];
          if (c.kind == node_kind::comp_for) {
            if (i > 1) resolve(p_.kids[c.first + 1]);
            bind(p_.kids[c.first]);
          } else {
            resolve(p_.kids[c.first]);
          }
        }
        resolve(p_.kids[first]);  // the element
        scopes_.pop_back();
        return;
      }
      default:
        break;
    }
    const std::uint32_t first = nd.first, count = nd.count;
    for (std::uint32_t j = 0; j < count; ++j)
      resolve(p_.kids[first + j]);
  }

  expr_program& p_;
  const std::vector<std::string>& names_;
  std::vector<std::int64_t> free_id_;     // name pool entry -> provisional free id
  std::vector<std::uint32_t> free_pos_;   // provisional free id -> first position
  std::vector<std::uint32_t> free_name_;  // provisional free id -> name pool entry
  std::vector<scope> scopes_;
  std::uint32_t local_count_ = 0;
};

// ------------------------------------------------------------------------------------------------
// Constant folding: every maximal sub-tree that depends on no free name and no comprehension
// variable bound outside it is evaluated once and replaced by a constant.

class folder {
 public:
  explicit folder(expr_program& p) : p_(p), free_(p.nodes.size(), false), open_(p.nodes.size()) {}

  void run() {
    analyse(p_.root);
    fold(p_.root);
  }

 private:
  bool is_expression(node_kind k) const {
    return k != node_kind::comp_for && k != node_kind::comp_if && k != node_kind::target_local &&
           k != node_kind::target_tuple;
  }

  void bound_locals(std::uint32_t t, std::vector<std::uint32_t>& out) const {
    const node& tn = p_.nodes[t];
    if (tn.kind == node_kind::target_local) {
      out.push_back(tn.index);
      return;
    }
    for (std::uint32_t j = 0; j < tn.count; ++j)
      bound_locals(p_.kids[tn.first + j], out);
  }

  void analyse(std::uint32_t n) {
    const node nd = p_.nodes[n];
    std::vector<std::uint32_t> open;
    bool free = nd.kind == node_kind::slot;
    if (nd.kind == node_kind::local) open.push_back(nd.index);
    for (std::uint32_t j = 0; j < nd.count; ++j) {
      const std::uint32_t kid = p_.kids[nd.first + j];
      analyse(kid);
      free = free || free_[kid];
      open.insert(open.end(), open_[kid].begin(), open_[kid].end());
    }
    if (nd.kind == node_kind::comprehension) {
      std::vector<std::uint32_t> bound;
      for (std::uint32_t j = 1; j < nd.count; ++j) {
        const node& c = p_.nodes[p_.kids[nd.first + j]];
        if (c.kind == node_kind::comp_for) bound_locals(p_.kids[c.first], bound);
      }
      std::erase_if(open,
                    [&](std::uint32_t l) { return std::find(bound.begin(), bound.end(), l) != bound.end(); });
    }
    std::sort(open.begin(), open.end());
    open.erase(std::unique(open.begin(), open.end()), open.end());
    free_[n] = free;
    open_[n] = std::move(open);
  }

  void fold(std::uint32_t n) {
    const node nd = p_.nodes[n];
    if (nd.kind == node_kind::constant) return;
    if (is_expression(nd.kind) && !free_[n] && open_[n].empty()) {
      std::vector<value> locals(p_.local_count);
      value v;
      try {
        v = eval_node(p_, n, {}, locals.data());
      } catch (const eval_failure& f) {
        throw eval_error(p_.source, f.pos, f.reason);
      }
      const auto idx = static_cast<std::uint32_t>(p_.constants.size());
      p_.constants.push_back(std::move(v));
      p_.nodes[n] = node{node_kind::constant, 0, nd.pos, 0, 0, idx};
      return;
    }
    if (nd.kind == node_kind::target_local || nd.kind == node_kind::target_tuple) return;
    for (std::uint32_t j = 0; j < nd.count; ++j)
      fold(p_.kids[nd.first + j]);
  }

  expr_program& p_;
  std::vector<bool> free_;
  std::vector<std::vector<std::uint32_t>> open_;
};

// Rebuilds the node, kid, link and constant arrays with only the nodes reachable from the root,
// kids before parents.
void compact(expr_program& p) {
  expr_program out;
  const auto copy = [&](const auto& self, std::uint32_t n) -> std::uint32_t {
    node nd = p.nodes[n];
    std::vector<std::uint32_t> kids(nd.count);
    for (std::uint32_t j = 0; j < nd.count; ++j)
      kids[j] = self(self, p.kids[nd.first + j]);
    if (nd.kind == node_kind::constant) {
      nd.index = static_cast<std::uint32_t>(out.constants.size());
      out.constants.push_back(p.constants[p.nodes[n].index]);
    } else if (nd.kind == node_kind::compare) {
      nd.index = static_cast<std::uint32_t>(out.links.size());
      out.links.insert(out.links.end(), p.links.begin() + p.nodes[n].index,
                       p.links.begin() + p.nodes[n].index + (nd.count - 1));
    }
    nd.first = static_cast<std::uint32_t>(out.kids.size());
    out.kids.insert(out.kids.end(), kids.begin(), kids.end());
    out.nodes.push_back(nd);
    return static_cast<std::uint32_t>(out.nodes.size() - 1);
  };
  p.root = copy(copy, p.root);
  p.nodes = std::move(out.nodes);
  p.kids = std::move(out.kids);
  p.links = std::move(out.links);
  p.constants = std::move(out.constants);
}

// ------------------------------------------------------------------------------------------------
// Numeric bytecode compiler

class vm_compiler {
 public:
  /// Longer constant lists on the right of `in` stay with the generic evaluator (no second copy).
  static constexpr std::size_t kMaxFastList = 4096;

  explicit vm_compiler(expr_program& p) : p_(p), index_of_(p.nodes.size(), 0) {}

  void run() {
    if (!eligible(p_.root)) return;
    const auto slots = static_cast<std::uint32_t>(p_.free_names.size());
    temp_base_ = static_cast<std::uint32_t>(consts_.size()) + slots;
    const std::uint32_t result = compile(p_.root);
    emit(vm_op::ret, 0, 0, result, 0, 0);
    const std::uint32_t total = temp_base_ + temps_;
    if (total > max_fast_registers || code_.size() > std::numeric_limits<std::uint32_t>::max() / 2) return;
    p_.has_fast = true;
    p_.fast_registers = total;
    p_.fast_consts = std::move(consts_);
    p_.code = std::move(code_);
    p_.num_lists = std::move(lists_);
  }

 private:
  // True when the sub-tree computes a number from numbers only; registers its constants.
  bool eligible(std::uint32_t n) {
    const node& nd = p_.nodes[n];
    const std::uint32_t* k = p_.kids.data() + nd.first;
    switch (nd.kind) {
      case node_kind::constant: {
        num x;
        if (!to_num(p_.constants[nd.index], x) || consts_.size() >= max_fast_registers) return false;
        index_of_[n] = static_cast<std::uint32_t>(consts_.size());
        consts_.push_back(x);
        return true;
      }
      case node_kind::slot:
        return true;
      case node_kind::unary:
      case node_kind::binary:
      case node_kind::logical_and:
      case node_kind::logical_or:
      case node_kind::logical_not:
      case node_kind::conditional:
        break;
      case node_kind::compare:
        for (std::uint32_t i = 0; i + 1 < nd.count; ++i) {
          const cmpop op = p_.links[nd.index + i].op;
          if (op != cmpop::in && op != cmpop::not_in) continue;
          // Only `x in <constant list of numbers>` as the last link.
          if (i + 2 != nd.count) return false;
          const node& rhs = p_.nodes[k[i + 1]];
          if (rhs.kind != node_kind::constant || !p_.constants[rhs.index].is_list()) return false;
          if (p_.constants[rhs.index].as_list().size() > kMaxFastList) return false;
          std::vector<num> items;
          for (const value& v : p_.constants[rhs.index].as_list()) {
            num x;
            if (!to_num(v, x)) return false;
            items.push_back(x);
          }
          index_of_[k[i + 1]] = static_cast<std::uint32_t>(lists_.size());
          lists_.push_back(std::move(items));
          for (std::uint32_t j = 0; j + 1 < nd.count; ++j) {
            if (!eligible(k[j])) return false;
          }
          return true;
        }
        break;
      case node_kind::call: {
        const auto b = static_cast<builtin>(nd.op);
        const bool ok =
            ((b == builtin::min || b == builtin::max) && nd.count >= 2) ||
            ((b == builtin::abs || b == builtin::to_int || b == builtin::to_float || b == builtin::to_bool) &&
             nd.count == 1) ||
            b == builtin::round || b == builtin::pow;
        if (!ok) return false;
        break;
      }
      default:
        return false;
    }
    for (std::uint32_t j = 0; j < nd.count; ++j) {
      if (!eligible(k[j])) return false;
    }
    return true;
  }

  std::uint32_t temp() { return temp_base_ + temps_++; }

  std::size_t emit(vm_op code, std::uint8_t sub, std::uint32_t dst, std::uint32_t a, std::uint32_t b,
                   std::uint32_t pos) {
    // Register numbers beyond 16 bits only occur when the program is rejected for size anyway.
    code_.push_back(vm_instr{code, sub, static_cast<std::uint16_t>(dst), static_cast<std::uint16_t>(a),
                             static_cast<std::uint16_t>(b), pos});
    return code_.size() - 1;
  }
  void patch_to_here(std::size_t at) { code_[at].pos = static_cast<std::uint32_t>(code_.size()); }

  std::uint32_t compile(std::uint32_t n) {
    const node nd = p_.nodes[n];
    const std::uint32_t* k = p_.kids.data() + nd.first;
    switch (nd.kind) {
      case node_kind::constant:
        return index_of_[n];
      case node_kind::slot:
        return static_cast<std::uint32_t>(consts_.size()) + nd.index;
      case node_kind::unary: {
        const std::uint32_t a = compile(k[0]);
        const std::uint32_t t = temp();
        emit(vm_op::unary, nd.op, t, a, 0, nd.pos);
        return t;
      }
      case node_kind::binary: {
        const std::uint32_t a = compile(k[0]);
        const std::uint32_t b = compile(k[1]);
        const std::uint32_t t = temp();
        vm_op code = vm_op::binary;
        switch (static_cast<binop>(nd.op)) {
          case binop::add:
            code = vm_op::add;
            break;
          case binop::sub:
            code = vm_op::sub;
            break;
          case binop::mul:
            code = vm_op::mul;
            break;
          case binop::floordiv:
            code = vm_op::floordiv;
            break;
          case binop::mod:
            code = vm_op::mod;
            break;
          default:
            break;
        }
        emit(code, nd.op, t, a, b, nd.pos);
        return t;
      }
      case node_kind::logical_and:
      case node_kind::logical_or: {
        const std::uint32_t t = temp();
        emit(vm_op::move, 0, t, compile(k[0]), 0, 0);
        const std::size_t jump = emit(
            nd.kind == node_kind::logical_and ? vm_op::jump_if_false : vm_op::jump_if_true, 0, 0, t, 0, 0);
        emit(vm_op::move, 0, t, compile(k[1]), 0, 0);
        patch_to_here(jump);
        return t;
      }
      case node_kind::logical_not: {
        const std::uint32_t a = compile(k[0]);
        const std::uint32_t t = temp();
        emit(vm_op::logical_not, 0, t, a, 0, 0);
        return t;
      }
      case node_kind::conditional: {
        const std::uint32_t t = temp();
        const std::size_t to_else = emit(vm_op::jump_if_false, 0, 0, compile(k[1]), 0, 0);
        emit(vm_op::move, 0, t, compile(k[0]), 0, 0);
        const std::size_t to_end = emit(vm_op::jump, 0, 0, 0, 0, 0);
        patch_to_here(to_else);
        emit(vm_op::move, 0, t, compile(k[2]), 0, 0);
        patch_to_here(to_end);
        return t;
      }
      case node_kind::compare: {
        const std::uint32_t t = temp();
        std::uint32_t left = compile(k[0]);
        std::vector<std::size_t> exits;
        for (std::uint32_t i = 0; i + 1 < nd.count; ++i) {
          const cmp_link& link = p_.links[nd.index + i];
          if (link.op == cmpop::in || link.op == cmpop::not_in) {
            emit(vm_op::in_list, link.op == cmpop::not_in ? 1 : 0, t, left, index_of_[k[i + 1]], link.pos);
            break;  // always the last link
          }
          const std::uint32_t right = compile(k[i + 1]);
          static constexpr vm_op kCodes[] = {vm_op::eq, vm_op::ne, vm_op::lt,
                                             vm_op::le, vm_op::gt, vm_op::ge};
          emit(kCodes[static_cast<int>(link.op)], static_cast<std::uint8_t>(link.op), t, left, right,
               link.pos);
          if (i + 2 < nd.count) exits.push_back(emit(vm_op::jump_if_false, 0, 0, t, 0, 0));
          left = right;
        }
        for (std::size_t e : exits)
          patch_to_here(e);
        return t;
      }
      case node_kind::call: {
        const auto b = static_cast<builtin>(nd.op);
        if (b == builtin::min || b == builtin::max) {
          std::uint32_t acc = compile(k[0]);
          for (std::uint32_t j = 1; j < nd.count; ++j) {
            const std::uint32_t x = compile(k[j]);
            const std::uint32_t t = temp();
            emit(b == builtin::min ? vm_op::min2 : vm_op::max2, 0, t, acc, x, nd.pos);
            acc = t;
          }
          return acc;
        }
        const std::uint32_t a = compile(k[0]);
        const std::uint32_t x = nd.count > 1 ? compile(k[1]) : 0;
        const std::uint32_t t = temp();
        switch (b) {
          case builtin::abs:
            emit(vm_op::abs, 0, t, a, 0, nd.pos);
            break;
          case builtin::to_int:
            emit(vm_op::to_int, 0, t, a, 0, nd.pos);
            break;
          case builtin::to_float:
            emit(vm_op::to_float, 0, t, a, 0, nd.pos);
            break;
          case builtin::to_bool:
            emit(vm_op::to_bool, 0, t, a, 0, nd.pos);
            break;
          case builtin::round:
            emit(nd.count == 1 ? vm_op::round1 : vm_op::round2, 0, t, a, x, nd.pos);
            break;
          default:  // pow
            emit(vm_op::binary, static_cast<std::uint8_t>(binop::pow), t, a, x, nd.pos);
        }
        return t;
      }
      default:
        return 0;  // not reached: eligible() accepted only the kinds above
    }
  }

  expr_program& p_;
  std::vector<num> consts_;
  std::vector<std::vector<num>> lists_;
  // Per node: the register of a numeric constant, or the num_lists entry of an `in` operand.
  std::vector<std::uint32_t> index_of_;
  std::vector<vm_instr> code_;
  std::uint32_t temp_base_ = 0;
  std::uint32_t temps_ = 0;
};

}  // namespace

std::shared_ptr<const expr_program> build_program(std::string_view text) {
  auto p = std::make_shared<expr_program>();
  p->source = std::string(text);
  if (text.size() >= std::numeric_limits<std::uint32_t>::max() / 2) {
    throw parse_error(p->source, 0, "expression is too long");
  }
  std::vector<std::string> names;
  {
    parser ps(text, *p);
    p->root = ps.parse();
    names = std::move(ps.names);
  }
  resolver(*p, names).run();
  folder(*p).run();
  compact(*p);
  p->constant = p->nodes[p->root].kind == node_kind::constant;
  if (!p->constant) vm_compiler(*p).run();
  return p;
}

}  // namespace kf::detail
