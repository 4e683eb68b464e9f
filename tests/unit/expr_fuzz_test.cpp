// Deterministic fuzz tests of kf::expression (seeded std::mt19937_64, a few seconds at most):
//  * mutations of valid expressions either parse or throw parse_error / eval_error, and the ones
//    that parse evaluate to a value or throw eval_error; the numeric fast path and the generic
//    evaluator agree on every result and every error;
//  * random integer expressions, printed with minimal parentheses, evaluate to what an independent
//    reference evaluator with Python semantics computes (values, error reasons and positions).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/expr_program.hpp"
#include "kforge/error.hpp"
#include "kforge/expr.hpp"

namespace {

using kf::expression;
using kf::value;

/// The outcome of one evaluation: a value's repr, or an error's position and reason.
struct outcome {
  bool ok = false;
  std::string repr;
  std::size_t pos = 0;
  std::string reason;
  friend bool operator==(const outcome&, const outcome&) = default;
};

std::ostream& operator<<(std::ostream& os, const outcome& o) {
  if (o.ok) return os << "value " << o.repr;
  return os << "error at " << o.pos << ": " << o.reason;
}

/// Evaluates through the public API; a failure of any other kind than kf::eval_error / kf::error
/// is a test failure.
outcome evaluate_public(const expression& e, const std::vector<const value*>& slots,
                        const std::string& text) {
  outcome o;
  try {
    const value v = e.evaluate(slots);
    o.ok = true;
    o.repr = v.repr();
    // test() agrees with the truthiness of evaluate().
    EXPECT_EQ(e.test(slots), v.truthy()) << text;
  } catch (const kf::eval_error& err) {
    o.pos = err.position();
    o.reason = err.reason();
    EXPECT_THROW(e.test(slots), kf::eval_error) << text;
  } catch (const kf::error& err) {
    ADD_FAILURE() << "kf::error (not eval_error) from evaluating " << text << ": " << err.what();
  } catch (const std::exception& err) {
    ADD_FAILURE() << "unexpected exception from evaluating " << text << ": " << err.what();
  }
  return o;
}

/// Evaluates with the numeric bytecode when it applies (nullopt otherwise) or the generic evaluator.
std::optional<outcome> evaluate_detail(const kf::detail::expr_program& p,
                                       const std::vector<const value*>& slots, bool fast) {
  outcome o;
  try {
    if (fast) {
      kf::detail::num n;
      if (!kf::detail::run_fast(p, slots, n)) return std::nullopt;
      o.repr = kf::detail::to_value(n).repr();
    } else {
      o.repr = kf::detail::run_generic(p, slots).repr();
    }
    o.ok = true;
  } catch (const kf::detail::eval_failure& f) {
    o.pos = f.pos;
    o.reason = f.reason;
  }
  return o;
}

/// Checks that both evaluators of `program` agree with the public result for these bindings.
void cross_check(const kf::detail::expr_program& program, const std::vector<const value*>& slots,
                 const outcome& expected) {
  if (program.constant) return;
  const auto generic = evaluate_detail(program, slots, false);
  EXPECT_EQ(*generic, expected) << "generic evaluator differs for " << program.source;
  if (const auto fast = evaluate_detail(program, slots, true)) {
    EXPECT_EQ(*fast, expected) << "numeric fast path differs for " << program.source;
  }
}

// ------------------------------------------------------------------------------------------------
// Mutation fuzzing

const char* const kCorpus[] = {
    "block_size_x*block_size_y<=1024",
    "32 <= block_size_x * block_size_y <= 1024",
    "use_shmem == 0 or "
    "(((block_size_x*tile_size_x+(filter_width-1)))*((block_size_y*tile_size_y+(filter_height-"
    "1)))) < 12*1024",
    "KWG % ((MDIMC * NDIMC)/MDIMA) == 0",
    "[1, 2, 4, 8, 16] + list(range(32, 1024+1, 32))",
    "[2**i for i in range(0, 6)]",
    "[i for i in range(1, 11)]",
    "a if b else c",
    "not a and b or c",
    "x in [1, 2, 3] and y not in (4, 5)",
    "xs[1:3] + xs[::-1] + [xs[-1]]",
    "'abc'[i] * 2 + \"d\\n\"",
    "min(a, b) + max([1, 2, c]) - abs(d)",
    "len(s) + sum([1, 2.5]) // 2 % 3",
    "round(x / 3, 2) + int('12') + float('1.5') + round(y)",
    "sorted([3, 1, 2])[0] ** 2 ** -1",
    "[a * b for a, b in [(1, 2), (3, 4)] if a > 0]",
    "any(x > 3 for x in range(5)) and all([True, 1])",
    "~a << 2 | b >> 1 ^ c & 7",
    "1_000 + 0x1f + 0o17 + 0b101 + 1e3 + .5",
    "str(a) + bool(b) * 'x'",
    "pow(a, 2) if a < 10 else -a",
    "[[i * j for j in range(i)] for i in range(4)]",
    "(a, b) == [a, b]",
    "tuple([1]) + list('ab')",
    "a // b * c - d % e",
    "x == 1.5 != y < z >= 0",
    "None if a else True",
    "min(block_size_x, 64) * tile_size_x >= 64 and block_size_x in [32, 64, 128]",
    "a / b > 1.5 or int(a) ** 2 > b",
    "[x for x in xs if x % 2] # odd ones",
    "max(a, b, c) - min(a, b, c) < 3",
};

const char* const kTokens[] = {
    " for ", " in ",   " if ",   " else ", " and ", " or ",    " not ",  "**",
    "//",    "(",      ")",      "[",      "]",     ",",       ":",      "'",
    "\"",    "range(", "min(",   "len(",   "sum(",  "sorted(", "1e308",  "9223372036854775807",
    "-",     "0",      "True",   "None",   "[]",    "()",      "lambda", " is ",
    ".",     "#",      "\\",     "x",      "0x",    "1_",      "e",      "~",
    "<<",    "==",     "not in",
};

constexpr std::string_view kChars = "0123456789abcdefxyz_+-*/%<>=!&|^~()[]{},:.'\" #\\\n\tijeEoO";

std::string mutate(std::string s, std::mt19937_64& rng) {
  const auto below = [&](std::size_t n) {
    return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n);
  };
  const int count = rng() % 3 == 0 ? 2 + static_cast<int>(rng() % 3) : 1;
  for (int m = 0; m < count; ++m) {
    const std::size_t at = below(s.size() + 1);
    switch (rng() % 8) {
      case 0:
        s.insert(at, 1, kChars[below(kChars.size())]);
        break;
      case 1:
        if (!s.empty()) s.erase(below(s.size()), 1);
        break;
      case 2:
        if (!s.empty()) s[below(s.size())] = kChars[below(kChars.size())];
        break;
      case 3:
        s.insert(at, kTokens[below(std::size(kTokens))]);
        break;
      case 4:
        s.resize(at);
        break;
      case 5: {  // duplicate a substring
        const std::size_t from = below(s.size() + 1);
        s.insert(at, s.substr(from, below(8) + 1));
        break;
      }
      case 6: {  // splice: our prefix, another corpus entry's suffix
        const std::string other = kCorpus[below(std::size(kCorpus))];
        s = s.substr(0, at) + other.substr(below(other.size() + 1));
        break;
      }
      default:
        if (s.size() > 1) std::swap(s[below(s.size())], s[below(s.size())]);
    }
  }
  return s;
}

value random_value(std::mt19937_64& rng) {
  static const std::array<value, 22> pool = {
      value(0),
      value(1),
      value(2),
      value(-3),
      value(7),
      value(64),
      value(2.5),
      value(-0.5),
      value(0.0),
      value(true),
      value(false),
      value(),
      value("ab"),
      value(""),
      value(kf::value_list{1, 2}),
      value(kf::value_list{kf::value_list{1, 2}, kf::value_list{3, 4}}),
      value(kf::value_list{}),
      value(9223372036854775807LL),
      value(-9223372036854775807LL - 1),
      value(1e308),
      value(1024),
      value(3),
  };
  return pool[rng() % pool.size()];
}

TEST(ExprFuzz, MutationsParseOrFailCleanly) {
  std::mt19937_64 rng(20240611);
  int parsed = 0, parse_errors = 0, fold_errors = 0, evaluated = 0, eval_errors = 0;
  for (int iteration = 0; iteration < 50000; ++iteration) {
    const std::string text = mutate(kCorpus[rng() % std::size(kCorpus)], rng);
    std::optional<expression> e;
    try {
      e = expression::parse(text);
      ++parsed;
    } catch (const kf::parse_error& err) {
      ++parse_errors;
      EXPECT_EQ(err.source(), text);
      EXPECT_LE(err.position(), text.size()) << text;
      continue;
    } catch (const kf::eval_error& err) {  // a constant sub-expression failed
      ++fold_errors;
      EXPECT_LE(err.position(), text.size()) << text;
      continue;
    } catch (const std::exception& err) {
      ADD_FAILURE() << "unexpected exception from parsing '" << text << "': " << err.what();
      continue;
    }
    const auto program = kf::detail::build_program(text);
    for (int binding = 0; binding < 3; ++binding) {
      std::vector<value> values;
      for (std::size_t i = 0; i < e->free_names().size(); ++i)
        values.push_back(random_value(rng));
      std::vector<const value*> slots;
      for (const value& v : values)
        slots.push_back(&v);
      const outcome o = evaluate_public(*e, slots, text);
      ++evaluated;
      if (!o.ok) {
        ++eval_errors;
        EXPECT_LE(o.pos, text.size()) << text;
      }
      cross_check(*program, slots, o);
      if (e->is_constant()) break;
    }
  }
  // The mix stays interesting: plenty of inputs reach each stage.
  EXPECT_GT(parsed, 8000);
  EXPECT_GT(parse_errors, 20000);
  EXPECT_GT(fold_errors, 100);
  EXPECT_GT(eval_errors, 5000);
  EXPECT_GT(evaluated, 20000);
}

// ------------------------------------------------------------------------------------------------
// Random integer expressions against a reference evaluator

struct ref_value {
  bool is_bool = false;
  std::int64_t v = 0;
};

struct ref_error {
  std::size_t pos;
  std::string reason;
};

enum class rk {
  literal,
  boolean,
  variable,
  unary,
  logical_not,
  binary,
  logical_and,
  logical_or,
  chain,
  conditional
};

struct rnode {
  rk kind = rk::literal;
  std::string op;                // unary / binary operator
  std::vector<std::string> ops;  // comparison operators of a chain
  std::int64_t v = 0;            // literal value / variable index
  std::vector<int> kids;
  std::size_t pos = 0;                // operator position in the printed text
  std::vector<std::size_t> link_pos;  // chain operator positions
};

class reference_case {
 public:
  explicit reference_case(std::mt19937_64& rng) : rng_(rng) { root_ = generate(0); }

  /// Prints the expression with the parentheses that precedence requires (and a few more).
  std::string print() {
    text_.clear();
    emit(root_, 0);
    return text_;
  }

  /// The error a constant sub-expression raises at parse time (folding visits maximal constant
  /// sub-trees in source order), if any.
  std::optional<ref_error> folding_error() const { return fold(root_); }

  /// Python's result for the given variable bindings.
  ref_value evaluate(const std::array<ref_value, 3>& vars) const { return eval(root_, vars); }

 private:
  int add(rnode n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size() - 1);
  }

  int leaf() {
    rnode n;
    const auto r = rng_() % 10;
    if (r < 5) {
      n.kind = rk::literal;
      n.v = static_cast<std::int64_t>(rng_() % 19) - 9;
    } else if (r < 6) {
      n.kind = rk::boolean;
      n.v = static_cast<std::int64_t>(rng_() % 2);
    } else {
      n.kind = rk::variable;
      n.v = static_cast<std::int64_t>(rng_() % 3);
    }
    return add(n);
  }

  int generate(int depth) {
    if (depth >= 6 || rng_() % 10 < 2) return leaf();
    static const char* const kBinary[] = {"+", "-", "*", "//", "%", "**", "<<", ">>",
                                          "&", "|", "^", "+",  "-", "*",  "//", "%"};
    static const char* const kCompare[] = {"==", "!=", "<", "<=", ">", ">="};
    static const char* const kUnary[] = {"-", "+", "~"};
    rnode n;
    switch (rng_() % 12) {
      case 0:
        n.kind = rk::unary;
        n.op = kUnary[rng_() % 3];
        n.kids = {generate(depth + 1)};
        break;
      case 1:
        n.kind = rk::logical_not;
        n.kids = {generate(depth + 1)};
        break;
      case 2:
        n.kind = rng_() % 2 ? rk::logical_and : rk::logical_or;
        n.kids = {generate(depth + 1), generate(depth + 1)};
        break;
      case 3:
      case 4: {
        n.kind = rk::chain;
        const int links = 1 + static_cast<int>(rng_() % 3);
        n.kids.push_back(generate(depth + 1));
        for (int i = 0; i < links; ++i) {
          n.ops.push_back(kCompare[rng_() % 6]);
          n.kids.push_back(generate(depth + 1));
        }
        break;
      }
      case 5:
        n.kind = rk::conditional;
        n.kids = {generate(depth + 1), generate(depth + 1), generate(depth + 1)};
        break;
      default: {
        n.kind = rk::binary;
        n.op = kBinary[rng_() % std::size(kBinary)];
        const int left = generate(depth + 1);
        int right;
        if (n.op == "**") {  // small non-negative literal exponents keep results integral
          rnode e;
          e.kind = rk::literal;
          e.v = static_cast<std::int64_t>(rng_() % 5);
          right = add(e);
        } else {
          right = generate(depth + 1);
        }
        n.kids = {left, right};
      }
    }
    return add(n);
  }

  // Python precedence levels: conditional 0, or 1, and 2, not 3, comparisons 4, | 5, ^ 6, & 7,
  // shifts 8, + - 9, * // % 10, unary 11, ** 12, atoms 13.
  static int binary_level(const std::string& op) {
    if (op == "|") return 5;
    if (op == "^") return 6;
    if (op == "&") return 7;
    if (op == "<<" || op == ">>") return 8;
    if (op == "+" || op == "-") return 9;
    if (op == "**") return 12;
    return 10;
  }

  int level(const rnode& n) const {
    switch (n.kind) {
      case rk::literal:
        return n.v < 0 ? 11 : 13;
      case rk::boolean:
      case rk::variable:
        return 13;
      case rk::unary:
        return 11;
      case rk::logical_not:
        return 3;
      case rk::binary:
        return binary_level(n.op);
      case rk::logical_and:
        return 2;
      case rk::logical_or:
        return 1;
      case rk::chain:
        return 4;
      case rk::conditional:
        return 0;
    }
    return 0;
  }

  void space() {
    if (rng_() % 2) text_ += ' ';
  }

  std::size_t emit_op(const std::string& op) {
    space();
    const std::size_t pos = text_.size();
    text_ += op;
    space();
    return pos;
  }

  void emit(int id, int min_level) {
    rnode& n = nodes_[static_cast<std::size_t>(id)];
    const bool parens = level(n) < min_level || rng_() % 16 == 0;
    if (parens) text_ += '(';
    static const char* const kNames[] = {"a", "b", "c"};
    switch (n.kind) {
      case rk::literal:
        text_ += std::to_string(n.v);
        break;
      case rk::boolean:
        text_ += n.v ? "True" : "False";
        break;
      case rk::variable:
        text_ += kNames[n.v];
        break;
      case rk::unary:
        n.pos = text_.size();
        text_ += n.op;
        emit(n.kids[0], 11);
        break;
      case rk::logical_not:
        text_ += "not ";
        emit(n.kids[0], 3);
        break;
      case rk::binary: {
        const int lv = binary_level(n.op);
        if (n.op == "**") {
          emit(n.kids[0], 13);
          n.pos = emit_op("**");
          emit(n.kids[1], 11);
        } else {
          emit(n.kids[0], lv);
          n.pos = emit_op(n.op);
          emit(n.kids[1], lv + 1);
        }
        break;
      }
      case rk::logical_and:
      case rk::logical_or: {
        const int lv = n.kind == rk::logical_and ? 2 : 1;
        emit(n.kids[0], lv);
        text_ += n.kind == rk::logical_and ? " and " : " or ";
        emit(n.kids[1], lv + 1);
        break;
      }
      case rk::chain:
        n.link_pos.clear();
        emit(n.kids[0], 5);
        for (std::size_t i = 0; i < n.ops.size(); ++i) {
          n.link_pos.push_back(emit_op(n.ops[i]));
          emit(n.kids[i + 1], 5);
        }
        break;
      case rk::conditional:
        emit(n.kids[0], 1);
        text_ += " if ";
        emit(n.kids[1], 1);
        text_ += " else ";
        emit(n.kids[2], 0);
        break;
    }
    if (parens) text_ += ')';
  }

  bool has_variable(int id) const {
    const rnode& n = nodes_[static_cast<std::size_t>(id)];
    if (n.kind == rk::variable) return true;
    for (int k : n.kids) {
      if (has_variable(k)) return true;
    }
    return false;
  }

  std::optional<ref_error> fold(int id) const {
    const rnode& n = nodes_[static_cast<std::size_t>(id)];
    if (!has_variable(id)) {
      try {
        eval(id, {});
      } catch (const ref_error& e) {
        return e;
      }
      return std::nullopt;
    }
    for (int k : n.kids) {
      if (auto e = fold(k)) return e;
    }
    return std::nullopt;
  }

  static ref_value integer(std::int64_t v) { return {false, v}; }
  static ref_value boolean(bool b) { return {true, b ? 1 : 0}; }
  static bool truthy(const ref_value& x) { return x.v != 0; }

  // x <op> y for + - *, or a ref_error when the exact result does not fit in 64 bits.
  static std::int64_t checked(char op, std::int64_t x, std::int64_t y, std::size_t pos) {
    std::int64_t r = 0;
    const bool overflowed = op == '+'   ? __builtin_add_overflow(x, y, &r)
                            : op == '-' ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
    if (overflowed) throw ref_error{pos, "integer overflow"};
    return r;
  }

  static bool compare(const std::string& op, std::int64_t x, std::int64_t y) {
    if (op == "==") return x == y;
    if (op == "!=") return x != y;
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  }

  ref_value binary(const rnode& n, ref_value a, ref_value b) const {
    const std::int64_t x = a.v, y = b.v;
    if (n.op == "+" || n.op == "-" || n.op == "*") return integer(checked(n.op[0], x, y, n.pos));
    if (n.op == "//" || n.op == "%") {
      if (y == 0)
        throw ref_error{n.pos, n.op == "//" ? "integer division by zero" : "integer modulo by zero"};
      // Python: x == y * q + m with 0 <= |m| < |y| and m having the sign of y.
      std::int64_t m = x % y;
      if (m != 0 && (m < 0) != (y < 0)) m += y;
      if (n.op == "%") return integer(m);
      if (x == INT64_MIN && y == -1) throw ref_error{n.pos, "integer overflow"};
      return integer((x - m) / y);
    }
    if (n.op == "**") {
      std::int64_t p = 1;
      for (std::int64_t i = 0; i < y; ++i)
        p = checked('*', p, x, n.pos);
      return integer(p);
    }
    if (n.op == "<<" || n.op == ">>") {
      if (y < 0) throw ref_error{n.pos, "negative shift count"};
      std::int64_t v = x;
      if (n.op == "<<") {
        for (std::int64_t i = 0; i < y && v != 0; ++i)
          v = checked('*', v, 2, n.pos);
      } else {
        for (std::int64_t i = 0; i < y && v != 0 && v != -1; ++i)
          v = v >= 0 ? v / 2 : (v - 1) / 2;
      }
      return integer(v);
    }
    const bool bools = a.is_bool && b.is_bool;
    const std::int64_t v = n.op == "&" ? (x & y) : (n.op == "|" ? (x | y) : (x ^ y));
    return bools ? boolean(v != 0) : integer(v);
  }

  ref_value eval(int id, const std::array<ref_value, 3>& vars) const {
    const rnode& n = nodes_[static_cast<std::size_t>(id)];
    switch (n.kind) {
      case rk::literal:
        return integer(n.v);
      case rk::boolean:
        return boolean(n.v != 0);
      case rk::variable:
        return vars[static_cast<std::size_t>(n.v)];
      case rk::unary: {
        const ref_value x = eval(n.kids[0], vars);
        if (n.op == "+") return integer(x.v);
        if (n.op == "~") return integer(-x.v - 1);
        if (x.v == INT64_MIN) throw ref_error{n.pos, "integer overflow"};
        return integer(-x.v);
      }
      case rk::logical_not:
        return boolean(!truthy(eval(n.kids[0], vars)));
      case rk::binary: {
        const ref_value a = eval(n.kids[0], vars);
        const ref_value b = eval(n.kids[1], vars);
        return binary(n, a, b);
      }
      case rk::logical_and: {
        const ref_value a = eval(n.kids[0], vars);
        return truthy(a) ? eval(n.kids[1], vars) : a;
      }
      case rk::logical_or: {
        const ref_value a = eval(n.kids[0], vars);
        return truthy(a) ? a : eval(n.kids[1], vars);
      }
      case rk::chain: {
        ref_value left = eval(n.kids[0], vars);
        for (std::size_t i = 0; i < n.ops.size(); ++i) {
          const ref_value right = eval(n.kids[i + 1], vars);
          if (!compare(n.ops[i], left.v, right.v)) return boolean(false);
          left = right;
        }
        return boolean(true);
      }
      case rk::conditional:
        return truthy(eval(n.kids[1], vars)) ? eval(n.kids[0], vars) : eval(n.kids[2], vars);
    }
    return {};
  }

  std::mt19937_64& rng_;
  std::vector<rnode> nodes_;
  int root_ = 0;
  std::string text_;
};

std::string repr(const ref_value& v) {
  if (v.is_bool) return v.v ? "True" : "False";
  return std::to_string(v.v);
}

TEST(ExprFuzz, RandomIntegerExpressionsMatchReference) {
  std::mt19937_64 rng(7);
  int compared = 0, errors = 0, fold_errors = 0;
  for (int iteration = 0; iteration < 8000; ++iteration) {
    reference_case rc(rng);
    const std::string text = rc.print();
    const std::optional<ref_error> folding = rc.folding_error();
    std::optional<expression> e;
    try {
      e = expression::parse(text);
    } catch (const kf::parse_error& err) {
      ADD_FAILURE() << "parse error in generated expression " << text << ": " << err.what();
      continue;
    } catch (const kf::eval_error& err) {
      ASSERT_TRUE(folding.has_value()) << text << ": " << err.what();
      EXPECT_EQ(err.position(), folding->pos) << text;
      EXPECT_EQ(err.reason(), folding->reason) << text;
      ++fold_errors;
      continue;
    }
    ASSERT_FALSE(folding.has_value()) << text << " should fail at parse time: " << folding->reason;
    const auto program = kf::detail::build_program(text);
    for (int binding = 0; binding < 3; ++binding) {
      std::array<ref_value, 3> vars;
      std::vector<value> values;
      for (auto& v : vars) {
        v = rng() % 8 == 0 ? ref_value{true, static_cast<std::int64_t>(rng() % 2)}
                           : ref_value{false, static_cast<std::int64_t>(rng() % 13) - 6};
      }
      // Bind in free_names() order (first appearance in the text).
      for (const std::string& name : e->free_names()) {
        const ref_value& r = vars[static_cast<std::size_t>(name[0] - 'a')];
        values.push_back(r.is_bool ? value(r.v != 0) : value(r.v));
      }
      std::vector<const value*> slots;
      for (const value& v : values)
        slots.push_back(&v);
      outcome expected;
      try {
        expected.repr = repr(rc.evaluate(vars));
        expected.ok = true;
      } catch (const ref_error& err) {
        expected.pos = err.pos;
        expected.reason = err.reason;
        ++errors;
      }
      const outcome actual = evaluate_public(*e, slots, text);
      EXPECT_EQ(actual, expected) << text << " with a=" << repr(vars[0]) << " b=" << repr(vars[1])
                                  << " c=" << repr(vars[2]);
      cross_check(*program, slots, actual);
      ++compared;
      if (e->is_constant()) break;
    }
  }
  EXPECT_GT(compared - errors, 5000);  // values
  EXPECT_GT(errors, 1000);
  EXPECT_GT(fold_errors, 500);
}

}  // namespace
