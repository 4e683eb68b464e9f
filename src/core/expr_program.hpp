// Private representation of a parsed kf::expression (see include/kforge/expr.hpp).
//
// A program is built once by build_program(): lex + parse into a flat node array, resolve names
// (free names -> slots, comprehension variables -> locals), fold constant sub-trees, compact, and,
// when the whole expression is numeric, compile a register bytecode for the hot path.
//
// Two evaluators share the arithmetic below, so they agree on every result and every error:
//   run_generic  walks the node array with kf::value (lists, strings, comprehensions, builtins);
//   run_fast     executes the bytecode on inline numbers without allocating; it declines (returns
//                false) when a bound value is not a number.
// Both throw eval_failure (position + reason); expression turns it into kf::eval_error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/value.hpp"

namespace kf::detail {

/// Longest list or string an expression may build (range(), repetition, comprehensions).
inline constexpr std::int64_t max_sequence_length = 10'000'000;
/// Most comprehension loop iterations one evaluation may run (all for clauses of all comprehensions).
inline constexpr std::int64_t max_comprehension_steps = 10'000'000;
/// Deepest bracket / unary / conditional nesting the parser accepts.
inline constexpr int max_nesting = 200;
/// Tallest parse tree (long operator chains); bounds the recursion of every tree walk.
inline constexpr int max_tree_height = 1000;
/// Most registers the numeric bytecode may use (they live in a stack array).
inline constexpr std::size_t max_fast_registers = 256;

/// A runtime failure at a 0-based source position; converted to kf::eval_error at the API boundary.
struct eval_failure {
  std::uint32_t pos;
  std::string reason;
};

/// Throws eval_failure{pos, reason}. Kept out of line so hot paths stay small.
[[noreturn]] void fail(std::uint32_t pos, std::string reason);

// ------------------------------------------------------------------------------------------------
// Operators and builtins

enum class binop : std::uint8_t {
  add,
  sub,
  mul,
  truediv,
  floordiv,
  mod,
  pow,
  lshift,
  rshift,
  bit_and,
  bit_or,
  bit_xor
};
enum class cmpop : std::uint8_t { eq, ne, lt, le, gt, ge, in, not_in };
enum class unop : std::uint8_t { neg, pos, invert };
enum class builtin : std::uint8_t {
  min,
  max,
  abs,
  len,
  sum,
  range,
  list,
  tuple,
  to_int,
  to_float,
  to_bool,
  to_str,
  round,
  pow,
  any,
  all,
  sorted
};

/// The Python spelling of an operator or builtin ("//", "not in", "round").
std::string_view symbol(binop op) noexcept;
std::string_view symbol(cmpop op) noexcept;
std::string_view symbol(unop op) noexcept;
std::string_view name_of(builtin b) noexcept;

// ------------------------------------------------------------------------------------------------
// Inline numbers: bool, int64 and double with Python's numeric semantics.

struct num {
  enum tag_t : std::uint8_t { boolean = 0, integer = 1, real = 2 };
  tag_t tag;
  union {
    std::int64_t i;  // boolean (0 or 1) and integer
    double d;        // real
  };

  static num make_bool(bool b) noexcept {
    num n;
    n.tag = boolean;
    n.i = b ? 1 : 0;
    return n;
  }
  static num make_int(std::int64_t v) noexcept {
    num n;
    n.tag = integer;
    n.i = v;
    return n;
  }
  static num make_real(double v) noexcept {
    num n;
    n.tag = real;
    n.d = v;
    return n;
  }
};

inline bool num_truthy(const num& n) noexcept {
  return n.tag == num::real ? n.d != 0.0 : n.i != 0;
}
inline double num_as_real(const num& n) noexcept {
  return n.tag == num::real ? n.d : static_cast<double>(n.i);
}
/// Neither is a float (bool and int use integer arithmetic).
inline bool both_integral(const num& a, const num& b) noexcept {
  return ((a.tag | b.tag) & num::real) == 0;
}

/// Loads a number; false for None, str and list.
inline bool to_num(const value& v, num& out) {
  switch (v.type()) {
    case value::kind::integer:
      out = num::make_int(v.as_int());
      return true;
    case value::kind::real:
      out = num::make_real(v.as_real());
      return true;
    case value::kind::boolean:
      out = num::make_bool(v.as_bool());
      return true;
    default:
      return false;
  }
}

inline value to_value(const num& n) {
  switch (n.tag) {
    case num::boolean:
      return value(n.i != 0);
    case num::integer:
      return value(n.i);
    case num::real:
      break;
  }
  return value(n.d);
}

// Out-of-line parts of the numeric operators (rare cases, floats, errors).
[[noreturn]] void fail_overflow(std::uint32_t pos);
num num_binary_slow(binop op, const num& a, const num& b, std::uint32_t pos);
num num_unary(unop op, const num& a, std::uint32_t pos);
num num_pow(const num& a, const num& b, std::uint32_t pos);
num num_abs(const num& a, std::uint32_t pos);
num num_to_int(const num& a, std::uint32_t pos);
num num_round(const num& a, std::uint32_t pos);
num num_round_digits(const num& a, const num& ndigits, std::uint32_t pos);

/// a <op> b for two numbers. Integer +, -, *, //, % are inline; the rest is out of line.
inline num num_binary(binop op, const num& a, const num& b, std::uint32_t pos) {
  if (both_integral(a, b)) {
    std::int64_t r;
    switch (op) {
      case binop::add:
        if (__builtin_add_overflow(a.i, b.i, &r)) fail_overflow(pos);
        return num::make_int(r);
      case binop::sub:
        if (__builtin_sub_overflow(a.i, b.i, &r)) fail_overflow(pos);
        return num::make_int(r);
      case binop::mul:
        if (__builtin_mul_overflow(a.i, b.i, &r)) fail_overflow(pos);
        return num::make_int(r);
      case binop::floordiv:
        if (b.i > 0 || b.i < -1) {  // no zero division and no INT64_MIN // -1
          const std::int64_t q = a.i / b.i;
          return num::make_int((a.i % b.i != 0 && ((a.i < 0) != (b.i < 0))) ? q - 1 : q);
        }
        break;
      case binop::mod:
        if (b.i > 0 || b.i < -1) {
          const std::int64_t m = a.i % b.i;
          return num::make_int((m != 0 && ((m < 0) != (b.i < 0))) ? m + b.i : m);
        }
        break;
      default:
        break;
    }
  } else if (op == binop::add) {
    return num::make_real(num_as_real(a) + num_as_real(b));
  } else if (op == binop::sub) {
    return num::make_real(num_as_real(a) - num_as_real(b));
  } else if (op == binop::mul) {
    return num::make_real(num_as_real(a) * num_as_real(b));
  }
  return num_binary_slow(op, a, b, pos);
}

/// a <op> b for two numbers (not `in`): Python compares bool, int and float by value; NaN is
/// unordered. Mixed int/float compares as double, like kf::value's == and compare().
inline bool num_compare(cmpop op, const num& a, const num& b) noexcept {
  if (both_integral(a, b)) {
    switch (op) {
      case cmpop::eq:
        return a.i == b.i;
      case cmpop::ne:
        return a.i != b.i;
      case cmpop::lt:
        return a.i < b.i;
      case cmpop::le:
        return a.i <= b.i;
      case cmpop::gt:
        return a.i > b.i;
      case cmpop::ge:
        return a.i >= b.i;
      default:
        return false;
    }
  }
  const double x = num_as_real(a), y = num_as_real(b);
  switch (op) {
    case cmpop::eq:
      return x == y;
    case cmpop::ne:
      return x != y;
    case cmpop::lt:
      return x < y;
    case cmpop::le:
      return x <= y;
    case cmpop::gt:
      return x > y;
    case cmpop::ge:
      return x >= y;
    default:
      return false;
  }
}

// ------------------------------------------------------------------------------------------------
// The program

enum class node_kind : std::uint8_t {
  constant,       // index: constants[index]
  slot,           // index: free name number
  local,          // index: comprehension variable number
  name,           // (parse stage only) index: name pool entry
  unary,          // op: unop; kid: operand
  binary,         // op: binop; kids: left, right
  logical_and,    // kids: left, right (returns an operand)
  logical_or,     // kids: left, right (returns an operand)
  logical_not,    // kid: operand
  compare,        // kids: count operands; links[index .. index + count - 1) hold the operators
  conditional,    // kids: value if true, condition, value if false
  list,           // kids: elements (list displays and tuples)
  subscript,      // kids: object, index
  slice,          // kids: object, start, stop, step (a None constant where omitted)
  call,           // op: builtin; kids: arguments; index: name pool entry of the callee (parse stage)
  comprehension,  // kids: element, then comp_for / comp_if clauses (the first is a comp_for)
  comp_for,       // kids: target, iterable
  comp_if,        // kid: condition
  target_name,    // (parse stage only) index: name pool entry
  target_local,   // index: comprehension variable number
  target_tuple,   // kids: targets
};

/// One node; its kids are program::kids[first .. first + count). pos is the 0-based source offset
/// reported by errors: the operator of an operation, the name of a call, the '[' of a subscript.
struct node {
  node_kind kind;
  std::uint8_t op;
  std::uint32_t pos;
  std::uint32_t first;
  std::uint32_t count;
  std::uint32_t index;
};

struct cmp_link {
  cmpop op;
  std::uint32_t pos;
};

/// Bytecode operations of the numeric fast path. Registers a, b are operands, dst the result; jump
/// targets are instruction indices held in pos.
enum class vm_op : std::uint8_t {
  move,  // dst = a
  add,   // dst = a + b (likewise sub, mul, floordiv, mod)
  sub,
  mul,
  floordiv,
  mod,
  binary,  // dst = a <sub: binop> b (the other binary operators)
  eq,      // dst = a == b (likewise ne, lt, le, gt, ge)
  ne,
  lt,
  le,
  gt,
  ge,
  in_list,        // dst = a in num_lists[b]; sub != 0: not in
  unary,          // dst = <sub: unop> a
  logical_not,    // dst = not a
  jump,           // goto pos
  jump_if_false,  // if not a: goto pos
  jump_if_true,   // if a: goto pos
  min2,           // dst = b < a ? b : a   (min() keeps the first of equal values)
  max2,           // dst = b > a ? b : a
  abs,            // dst = abs(a)
  to_int,         // dst = int(a)
  to_float,       // dst = float(a)
  to_bool,        // dst = bool(a)
  round1,         // dst = round(a)
  round2,         // dst = round(a, b)
  ret,            // return a
};

struct vm_instr {
  vm_op code;
  std::uint8_t sub;
  std::uint16_t dst, a, b;
  std::uint32_t pos;
};

struct expr_program {
  std::string source;
  std::vector<std::string> free_names;  // slot order
  std::vector<node> nodes;
  std::vector<std::uint32_t> kids;
  std::vector<cmp_link> links;
  std::vector<value> constants;
  std::uint32_t root = 0;
  std::uint32_t local_count = 0;
  bool constant = true;  // the root is a constant node

  // Numeric fast path: registers are [fast_consts][slots][temporaries].
  bool has_fast = false;
  std::uint32_t fast_registers = 0;
  std::vector<num> fast_consts;
  std::vector<vm_instr> code;
  std::vector<std::vector<num>> num_lists;  // right operands of `in` that are constant number lists
};

/// Parses an unsigned decimal float in Python syntax ("1.5", ".5", "1.", "1e3", "1_000.5"); false when
/// `text` is not one. Overflow gives inf and underflow 0, as in Python.
bool parse_python_float(std::string_view text, double& out);

/// Parses, resolves, folds and compiles `text`. Throws kf::parse_error, or kf::eval_error when a
/// constant sub-expression fails.
std::shared_ptr<const expr_program> build_program(std::string_view text);

/// Evaluates node `n` of `p` with the generic evaluator. `locals` has p.local_count entries.
/// Throws eval_failure.
value eval_node(const expr_program& p, std::uint32_t n, std::span<const value* const> slots, value* locals);

/// Evaluates the whole program with the generic evaluator. Throws eval_failure.
value run_generic(const expr_program& p, std::span<const value* const> slots);

/// Runs the numeric bytecode; false (nothing evaluated) when p has none or a slot is not a number.
/// Throws eval_failure.
bool run_fast(const expr_program& p, std::span<const value* const> slots, num& out);

}  // namespace kf::detail
