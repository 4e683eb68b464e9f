// kf::expression: Python-style expressions, parsed once and evaluated many times.
//
// The language is the subset of Python's expression grammar that tuning-space files (T1, Kernel Tuner
// restrictions, kforge kernel descriptions) use:
//   literals      1, 0x1f, 1_000, 1.5, 1e-3, 'a', "a", True, False, None, [a, b], (a, b)
//   operators     or and not | in, not in, ==, !=, <, <=, >, >= (chained: 32 <= a*b <= 1024)
//                 | ^ & << >> + - * / // % ** unary - + ~
//   conditional   a if cond else b
//   calls         min max abs len sum range list tuple int float bool str round pow any all sorted
//   comprehension [e for x in xs if c] (several for/if clauses)
//   subscripts    xs[i], xs[-1], xs[a:b]
// with Python's semantics (floor division and modulo take the sign of the divisor, `/` is true
// division, `**` of ints stays int, `and`/`or` return an operand, tuples behave as lists).
//
// Names that are not builtins and not comprehension variables are *free names*; the caller binds
// them to values positionally, in the order free_names() lists them.
//
// Thread safety: a parsed expression is immutable; evaluate() may be called concurrently.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/value.hpp"

namespace kf {

namespace detail {
struct expr_program;  // the parsed, constant-folded form
}

class expression {
 public:
  /// Parses `text`. Throws kf::parse_error (with the column) on a syntax error or an unknown
  /// function name. Sub-expressions without free names are folded to constants here; a constant
  /// sub-expression that cannot be evaluated (1/0) throws kf::eval_error.
  static expression parse(std::string_view text);

  expression();  // the constant None
  expression(const expression&);
  expression(expression&&) noexcept;
  expression& operator=(const expression&);
  expression& operator=(expression&&) noexcept;
  ~expression();

  const std::string& source() const noexcept;

  /// Free names in order of first appearance; evaluate() takes one value per name, in this order.
  std::span<const std::string> free_names() const noexcept;

  /// True when the expression has no free names (it folded to one constant).
  bool is_constant() const noexcept;

  /// Evaluates with free name i bound to *slots[i]. Throws kf::eval_error (with the column of the
  /// failing sub-expression) on a runtime error such as division by zero or a type error; never
  /// crashes and never returns a NaN that Python would not also produce.
  /// Precondition: slots.size() == free_names().size() (checked; a mismatch throws kf::error).
  value evaluate(std::span<const value* const> slots) const;

  /// Convenience: evaluate with values instead of pointers.
  value evaluate_values(std::span<const value> slots) const;

  /// Convenience for expressions without free names.
  value evaluate() const;

  /// truthy(evaluate(slots)), with a fast path for comparisons of numbers.
  bool test(std::span<const value* const> slots) const;

 private:
  std::shared_ptr<const detail::expr_program> program_;
};

}  // namespace kf
