// Evaluation of kf::expression programs: numeric operators, the generic tree evaluator with the
// builtins, and the numeric bytecode interpreter (see expr_program.hpp).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "core/expr_program.hpp"
#include "kforge/error.hpp"

namespace kf::detail {

// ------------------------------------------------------------------------------------------------
// Names and failures

std::string_view symbol(binop op) noexcept {
  switch (op) {
    case binop::add:
      return "+";
    case binop::sub:
      return "-";
    case binop::mul:
      return "*";
    case binop::truediv:
      return "/";
    case binop::floordiv:
      return "//";
    case binop::mod:
      return "%";
    case binop::pow:
      return "** or pow()";
    case binop::lshift:
      return "<<";
    case binop::rshift:
      return ">>";
    case binop::bit_and:
      return "&";
    case binop::bit_or:
      return "|";
    case binop::bit_xor:
      return "^";
  }
  return "?";
}

std::string_view symbol(cmpop op) noexcept {
  switch (op) {
    case cmpop::eq:
      return "==";
    case cmpop::ne:
      return "!=";
    case cmpop::lt:
      return "<";
    case cmpop::le:
      return "<=";
    case cmpop::gt:
      return ">";
    case cmpop::ge:
      return ">=";
    case cmpop::in:
      return "in";
    case cmpop::not_in:
      return "not in";
  }
  return "?";
}

std::string_view symbol(unop op) noexcept {
  switch (op) {
    case unop::neg:
      return "-";
    case unop::pos:
      return "+";
    case unop::invert:
      return "~";
  }
  return "?";
}

std::string_view name_of(builtin b) noexcept {
  switch (b) {
    case builtin::min:
      return "min";
    case builtin::max:
      return "max";
    case builtin::abs:
      return "abs";
    case builtin::len:
      return "len";
    case builtin::sum:
      return "sum";
    case builtin::range:
      return "range";
    case builtin::list:
      return "list";
    case builtin::tuple:
      return "tuple";
    case builtin::to_int:
      return "int";
    case builtin::to_float:
      return "float";
    case builtin::to_bool:
      return "bool";
    case builtin::to_str:
      return "str";
    case builtin::round:
      return "round";
    case builtin::pow:
      return "pow";
    case builtin::any:
      return "any";
    case builtin::all:
      return "all";
    case builtin::sorted:
      return "sorted";
  }
  return "?";
}

void fail(std::uint32_t pos, std::string reason) {
  throw eval_failure{pos, std::move(reason)};
}

void fail_overflow(std::uint32_t pos) {
  fail(pos, "integer overflow");
}

namespace {

std::string_view tag_name(const num& n) noexcept {
  switch (n.tag) {
    case num::boolean:
      return "bool";
    case num::integer:
      return "int";
    case num::real:
      break;
  }
  return "float";
}

std::string quoted(std::string_view type) {
  return "'" + std::string(type) + "'";
}

[[noreturn]] void fail_operands(std::string_view op, std::string_view a, std::string_view b,
                                std::uint32_t pos) {
  fail(pos, "unsupported operand type(s) for " + std::string(op) + ": " + quoted(a) + " and " + quoted(b));
}

[[noreturn]] void fail_not_integer(const value& v, std::uint32_t pos) {
  fail(pos, quoted(v.type_name()) + " object cannot be interpreted as an integer");
}

// Python's float divmod: the quotient floors, the remainder takes the sign of the divisor.
double float_floordiv(double x, double y) {
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) div -= 1.0;
  }
  if (div != 0.0) {
    double floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
    return floordiv;
  }
  return std::copysign(0.0, x / y);
}

double float_mod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

bool is_odd_integer(double y) {
  return std::fmod(std::fabs(y), 2.0) == 1.0;
}

// CPython's float_pow, except that a negative base with a fractional exponent is an error (Python
// would produce a complex number) and overflow is an error as in Python.
double float_pow(double x, double y, std::uint32_t pos) {
  if (y == 0.0) return 1.0;
  if (std::isnan(x)) return x;
  if (std::isnan(y)) return x == 1.0 ? 1.0 : y;
  if (std::isinf(y)) {
    const double ax = std::fabs(x);
    if (ax == 1.0) return 1.0;
    return (y > 0) == (ax > 1.0) ? std::fabs(y) : 0.0;
  }
  if (std::isinf(x)) {
    const bool odd = is_odd_integer(y);
    if (x > 0) return y > 0 ? x : 0.0;
    return y > 0 ? (odd ? x : std::fabs(x)) : (odd ? std::copysign(0.0, x) : 0.0);
  }
  if (x == 0.0) {
    if (y < 0) fail(pos, "0.0 cannot be raised to a negative power");
    return is_odd_integer(y) ? x : 0.0;
  }
  bool negate = false;
  if (x < 0) {
    if (y != std::floor(y)) fail(pos, "negative number cannot be raised to a fractional power");
    x = -x;
    negate = is_odd_integer(y);
  }
  if (x == 1.0) return negate ? -1.0 : 1.0;
  const double r = std::pow(x, y);
  if (std::isinf(r)) fail(pos, "float overflow in **");
  return negate ? -r : r;
}

bool fits_int64(double t) noexcept {
  return t >= -9223372036854775808.0 && t < 9223372036854775808.0;
}

// Rounds half to even; x is finite.
double round_half_even(double x) {
  const double fl = std::floor(x);
  const double diff = x - fl;  // exact
  if (diff > 0.5) return fl + 1.0;
  if (diff < 0.5) return fl;
  return std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

// round(x, n) for a finite, nonzero double: rounds the exact decimal expansion of x half to even at
// 10**-n, as CPython does (so round(2.675, 2) == 2.67). Returns inf when the result overflows.
double round_decimal(double x, std::int64_t n) {
  static constexpr int kExactDigits = 1074;  // every double's fraction has at most this many digits
  char buf[1500];
  const auto res = std::to_chars(buf, buf + sizeof buf, std::fabs(x), std::chars_format::fixed, kExactDigits);
  const std::string_view text(buf, static_cast<std::size_t>(res.ptr - buf));
  const std::size_t dot = text.find('.');
  std::string digits(text.substr(0, dot));
  digits += text.substr(dot + 1);
  const std::int64_t keep = static_cast<std::int64_t>(dot) + n;  // digits kept from the left
  if (keep < 0) return std::copysign(0.0, x);
  if (keep >= static_cast<std::int64_t>(digits.size())) return x;
  const auto k = static_cast<std::size_t>(keep);
  const char first_dropped = digits[k];
  const bool rest_nonzero = digits.find_first_not_of('0', k + 1) != std::string::npos;
  const bool last_odd = k > 0 && (digits[k - 1] - '0') % 2 == 1;
  const bool up = first_dropped > '5' || (first_dropped == '5' && (rest_nonzero || last_odd));
  std::string kept = digits.substr(0, k);
  if (up) {
    std::size_t i = kept.size();
    while (i > 0 && kept[i - 1] == '9')
      kept[--i] = '0';
    if (i == 0) {
      kept.insert(kept.begin(), '1');
    } else {
      ++kept[i - 1];
    }
  }
  if (kept.empty()) kept = "0";
  // value = kept * 10**-n
  kept += 'e';
  kept += std::to_string(-n);
  double out = 0.0;
  const auto parsed = std::from_chars(kept.data(), kept.data() + kept.size(), out);
  if (parsed.ec == std::errc::result_out_of_range) {
    // Underflow cannot happen (the result is 0 or at least 10**-323); this is overflow.
    out = std::numeric_limits<double>::infinity();
  }
  return std::copysign(out, x);
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Numeric operators

num num_binary_slow(binop op, const num& a, const num& b, std::uint32_t pos) {
  const bool ints = both_integral(a, b);
  switch (op) {
    case binop::add:
    case binop::sub:
    case binop::mul:
      return num_binary(op, a, b, pos);  // handled there completely (no recursion)
    case binop::truediv:
      if (ints) {
        if (b.i == 0) fail(pos, "division by zero");
        return num::make_real(static_cast<double>(a.i) / static_cast<double>(b.i));
      } else {
        const double y = num_as_real(b);
        if (y == 0.0) fail(pos, "float division by zero");
        return num::make_real(num_as_real(a) / y);
      }
    case binop::floordiv:
      if (ints) {
        if (b.i == 0) fail(pos, "integer division by zero");
        if (a.i == std::numeric_limits<std::int64_t>::min()) fail_overflow(pos);  // b == -1
        return num::make_int(-a.i);
      } else {
        const double y = num_as_real(b);
        if (y == 0.0) fail(pos, "float floor division by zero");
        return num::make_real(float_floordiv(num_as_real(a), y));
      }
    case binop::mod:
      if (ints) {
        if (b.i == 0) fail(pos, "integer modulo by zero");
        return num::make_int(0);  // b == -1
      } else {
        const double y = num_as_real(b);
        if (y == 0.0) fail(pos, "float modulo by zero");
        return num::make_real(float_mod(num_as_real(a), y));
      }
    case binop::pow:
      return num_pow(a, b, pos);
    case binop::lshift:
    case binop::rshift:
    case binop::bit_and:
    case binop::bit_or:
    case binop::bit_xor:
      break;
  }
  if (!ints) fail_operands(symbol(op), tag_name(a), tag_name(b), pos);
  const bool bools = a.tag == num::boolean && b.tag == num::boolean;
  switch (op) {
    case binop::bit_and:
      return bools ? num::make_bool(a.i & b.i) : num::make_int(a.i & b.i);
    case binop::bit_or:
      return bools ? num::make_bool(a.i | b.i) : num::make_int(a.i | b.i);
    case binop::bit_xor:
      return bools ? num::make_bool(a.i ^ b.i) : num::make_int(a.i ^ b.i);
    case binop::lshift: {
      if (b.i < 0) fail(pos, "negative shift count");
      if (a.i == 0) return num::make_int(0);
      if (b.i >= 64) fail_overflow(pos);
      const auto r = static_cast<std::int64_t>(static_cast<std::uint64_t>(a.i) << b.i);
      if ((r >> b.i) != a.i) fail_overflow(pos);
      return num::make_int(r);
    }
    case binop::rshift:
      if (b.i < 0) fail(pos, "negative shift count");
      if (b.i >= 64) return num::make_int(a.i < 0 ? -1 : 0);
      return num::make_int(a.i >> b.i);
    default:
      break;
  }
  return num::make_int(0);  // not reached
}

num num_pow(const num& a, const num& b, std::uint32_t pos) {
  if (both_integral(a, b)) {
    if (b.i < 0) {
      if (a.i == 0) fail(pos, "0.0 cannot be raised to a negative power");
      return num::make_real(float_pow(static_cast<double>(a.i), static_cast<double>(b.i), pos));
    }
    std::int64_t result = 1, base = a.i;
    auto e = static_cast<std::uint64_t>(b.i);
    for (;;) {
      if ((e & 1) != 0 && __builtin_mul_overflow(result, base, &result)) fail_overflow(pos);
      e >>= 1;
      if (e == 0) break;
      // Squaring only when another factor follows, so the result overflows iff a square does.
      if (__builtin_mul_overflow(base, base, &base)) fail_overflow(pos);
    }
    return num::make_int(result);
  }
  return num::make_real(float_pow(num_as_real(a), num_as_real(b), pos));
}

num num_unary(unop op, const num& a, std::uint32_t pos) {
  switch (op) {
    case unop::neg:
      if (a.tag == num::real) return num::make_real(-a.d);
      if (a.i == std::numeric_limits<std::int64_t>::min()) fail_overflow(pos);
      return num::make_int(-a.i);
    case unop::pos:
      return a.tag == num::real ? a : num::make_int(a.i);
    case unop::invert:
      if (a.tag == num::real) fail(pos, "bad operand type for unary ~: 'float'");
      return num::make_int(~a.i);
  }
  return a;
}

num num_abs(const num& a, std::uint32_t pos) {
  if (a.tag == num::real) return num::make_real(std::fabs(a.d));
  if (a.i == std::numeric_limits<std::int64_t>::min()) fail_overflow(pos);
  return num::make_int(a.i < 0 ? -a.i : a.i);
}

namespace {
std::int64_t checked_float_to_int(double d, std::uint32_t pos) {
  if (std::isnan(d)) fail(pos, "cannot convert float NaN to integer");
  if (std::isinf(d)) fail(pos, "cannot convert float infinity to integer");
  if (!fits_int64(d)) fail_overflow(pos);
  return static_cast<std::int64_t>(d);
}
}  // namespace

num num_to_int(const num& a, std::uint32_t pos) {
  if (a.tag != num::real) return num::make_int(a.i);
  return num::make_int(checked_float_to_int(std::trunc(a.d), pos));
}

num num_round(const num& a, std::uint32_t pos) {
  if (a.tag != num::real) return num::make_int(a.i);
  if (!std::isfinite(a.d)) checked_float_to_int(a.d, pos);  // throws
  return num::make_int(checked_float_to_int(round_half_even(a.d), pos));
}

num num_round_digits(const num& a, const num& ndigits, std::uint32_t pos) {
  if (ndigits.tag == num::real) fail(pos, "'float' object cannot be interpreted as an integer");
  const std::int64_t n = ndigits.i;
  if (a.tag != num::real) {
    const std::int64_t x = a.i;
    if (n >= 0) return num::make_int(x);
    static constexpr std::int64_t kHalf19 = 5'000'000'000'000'000'000;  // 10**19 / 2
    if (n < -18) {  // |x| < 10**19: the result is 0 or +-10**19 (which overflows)
      if (n == -19 && (x > kHalf19 || x < -kHalf19)) fail_overflow(pos);
      return num::make_int(0);
    }
    std::int64_t p = 1;
    for (std::int64_t k = 0; k < -n; ++k)
      p *= 10;
    std::int64_t q = x / p, r = x % p;
    if (r < 0) {  // floor division
      r += p;
      q -= 1;
    }
    if (2 * r > p || (2 * r == p && (q & 1) != 0)) q += 1;
    std::int64_t out;
    if (__builtin_mul_overflow(q, p, &out)) fail_overflow(pos);
    return num::make_int(out);
  }
  const double x = a.d;
  if (!std::isfinite(x) || x == 0.0 || n > 323) return a;
  if (n < -308) return num::make_real(std::copysign(0.0, x));
  const double r = round_decimal(x, n);
  if (std::isinf(r)) fail(pos, "rounded value too large to represent");
  return num::make_real(r);
}

// ------------------------------------------------------------------------------------------------
// Operations on values

namespace {

value make_char(char c) {
  return value(std::string(1, c));
}

std::int64_t checked_length(std::int64_t n, std::uint32_t pos) {
  if (n > max_sequence_length) {
    fail(pos, "result too large (more than " + std::to_string(max_sequence_length) + " elements)");
  }
  return n;
}

/// Calls f(item) for each item of a list or the characters of a str; fails for other kinds.
template <class F>
void for_each_item(const value& v, std::uint32_t pos, F&& f) {
  if (v.is_list()) {
    for (const value& e : v.as_list())
      f(e);
  } else if (v.is_string()) {
    for (char c : v.as_string())
      f(make_char(c));
  } else {
    fail(pos, quoted(v.type_name()) + " object is not iterable");
  }
}

/// The items of a list or str as a list value.
value as_list_value(const value& v, std::uint32_t pos) {
  if (v.is_list()) return v;
  value_list out;
  for_each_item(v, pos, [&](const value& e) { out.push_back(e); });
  return value(std::move(out));
}

value repeat(const value& seq, std::int64_t n, std::uint32_t pos) {
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (n <= 0 || s.empty()) return value(std::string());
    checked_length(n > max_sequence_length ? n : static_cast<std::int64_t>(s.size()) * n, pos);
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      out += s;
    return value(std::move(out));
  }
  const value_list& l = seq.as_list();
  if (n <= 0 || l.empty()) return value(value_list{});
  checked_length(n > max_sequence_length ? n : static_cast<std::int64_t>(l.size()) * n, pos);
  value_list out;
  out.reserve(l.size() * static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    out.insert(out.end(), l.begin(), l.end());
  return value(std::move(out));
}

int ordered_compare(const value& a, const value& b, cmpop op, std::uint32_t pos) {
  try {
    return value::compare(a, b);
  } catch (const error& e) {
    if (a.type() != b.type() && !(a.is_number() && b.is_number())) {
      fail(pos, "'" + std::string(symbol(op)) + "' not supported between instances of " +
                    quoted(a.type_name()) + " and " + quoted(b.type_name()));
    }
    std::string msg = e.what();
    if (msg.rfind("'<'", 0) == 0) msg.replace(0, 3, "'" + std::string(symbol(op)) + "'");
    fail(pos, std::move(msg));
  }
}

bool contains(const value& container, const value& item, std::uint32_t pos) {
  if (container.is_list()) {
    for (const value& e : container.as_list()) {
      if (e == item) return true;
    }
    return false;
  }
  if (container.is_string()) {
    if (!item.is_string()) {
      fail(pos, "'in <string>' requires string as left operand, not " + std::string(item.type_name()));
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  fail(pos, "argument of type " + quoted(container.type_name()) + " is not iterable");
}

}  // namespace

value binary_value(binop op, const value& a, const value& b, std::uint32_t pos) {
  num x, y;
  if (to_num(a, x) && to_num(b, y)) return to_value(num_binary(op, x, y, pos));
  if (op == binop::add) {
    if (a.is_string() && b.is_string()) {
      const std::string& s = a.as_string();
      const std::string& t = b.as_string();
      checked_length(static_cast<std::int64_t>(s.size() + t.size()), pos);
      return value(s + t);
    }
    if (a.is_list() && b.is_list()) {
      const value_list& s = a.as_list();
      const value_list& t = b.as_list();
      checked_length(static_cast<std::int64_t>(s.size() + t.size()), pos);
      value_list out;
      out.reserve(s.size() + t.size());
      out.insert(out.end(), s.begin(), s.end());
      out.insert(out.end(), t.begin(), t.end());
      return value(std::move(out));
    }
  } else if (op == binop::mul) {
    if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(a, b.as_int(), pos);
    if (a.is_integral() && (b.is_string() || b.is_list())) return repeat(b, a.as_int(), pos);
  }
  fail_operands(symbol(op), a.type_name(), b.type_name(), pos);
}

bool compare_values(cmpop op, const value& a, const value& b, std::uint32_t pos) {
  switch (op) {
    case cmpop::in:
      return contains(b, a, pos);
    case cmpop::not_in:
      return !contains(b, a, pos);
    case cmpop::eq:
      return a == b;
    case cmpop::ne:
      return a != b;
    default:
      break;
  }
  num x, y;
  if (to_num(a, x) && to_num(b, y)) return num_compare(op, x, y);
  const int c = ordered_compare(a, b, op, pos);
  if (c == 2) return false;  // unordered (NaN inside lists)
  switch (op) {
    case cmpop::lt:
      return c < 0;
    case cmpop::le:
      return c <= 0;
    case cmpop::gt:
      return c > 0;
    case cmpop::ge:
      return c >= 0;
    default:
      return false;
  }
}

namespace {

value unary_value(unop op, const value& a, std::uint32_t pos) {
  num x;
  if (!to_num(a, x))
    fail(pos, "bad operand type for unary " + std::string(symbol(op)) + ": " + quoted(a.type_name()));
  return to_value(num_unary(op, x, pos));
}

value subscript_value(const value& obj, const value& index, std::uint32_t pos) {
  if (!obj.is_list() && !obj.is_string()) fail(pos, quoted(obj.type_name()) + " object is not subscriptable");
  const bool is_list = obj.is_list();
  if (!index.is_integral()) {
    fail(pos, is_list ? "list indices must be integers or slices, not " + std::string(index.type_name())
                      : "string indices must be integers, not " + quoted(index.type_name()));
  }
  const auto size = static_cast<std::int64_t>(is_list ? obj.as_list().size() : obj.as_string().size());
  std::int64_t i = index.as_int();
  if (i < 0) i += size;
  if (i < 0 || i >= size) fail(pos, is_list ? "list index out of range" : "string index out of range");
  const auto k = static_cast<std::size_t>(i);
  return is_list ? obj.as_list()[k] : make_char(obj.as_string()[k]);
}

value slice_value(const value& obj, const value& start, const value& stop, const value& step,
                  std::uint32_t pos) {
  if (!obj.is_list() && !obj.is_string()) fail(pos, quoted(obj.type_name()) + " object is not subscriptable");
  for (const value* v : {&start, &stop, &step}) {
    if (!v->is_none() && !v->is_integral()) {
      fail(pos, "slice indices must be integers or None, not " + std::string(v->type_name()));
    }
  }
  const bool is_list = obj.is_list();
  const auto len = static_cast<std::int64_t>(is_list ? obj.as_list().size() : obj.as_string().size());
  std::int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) fail(pos, "slice step cannot be zero");
  if (st < -std::numeric_limits<std::int64_t>::max()) st = -std::numeric_limits<std::int64_t>::max();
  const auto adjust = [&](const value& v, bool is_start) -> std::int64_t {
    if (v.is_none()) return st < 0 ? (is_start ? len - 1 : -1) : (is_start ? 0 : len);
    std::int64_t x = v.as_int();
    if (x < 0) {
      if (x < -len) return st < 0 ? -1 : 0;
      return x + len;
    }
    if (x >= len) return st < 0 ? len - 1 : len;
    return x;
  };
  const std::int64_t lo = adjust(start, true), hi = adjust(stop, false);
  std::int64_t count = 0;
  if (st > 0) {
    if (lo < hi) count = (hi - lo - 1) / st + 1;
  } else if (hi < lo) {
    count = (lo - hi - 1) / (-st) + 1;
  }
  if (is_list) {
    const value_list& l = obj.as_list();
    value_list out;
    out.reserve(static_cast<std::size_t>(count));
    for (std::int64_t j = 0; j < count; ++j)
      out.push_back(l[static_cast<std::size_t>(lo + j * st)]);
    return value(std::move(out));
  }
  const std::string& s = obj.as_string();
  std::string out;
  out.reserve(static_cast<std::size_t>(count));
  for (std::int64_t j = 0; j < count; ++j)
    out += s[static_cast<std::size_t>(lo + j * st)];
  return value(std::move(out));
}

// Python's int(str): optional whitespace and sign, decimal digits with single '_' between digits.
value parse_int_string(const std::string& s, std::uint32_t pos) {
  const auto bad = [&]() { fail(pos, "invalid literal for int() with base 10: " + value(s).repr()); };
  std::size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) bad();
  const std::size_t e = s.find_last_not_of(" \t\n\r\f\v") + 1;
  bool negative = false;
  if (s[b] == '+' || s[b] == '-') negative = s[b++] == '-';
  if (b >= e) bad();
  std::uint64_t magnitude = 0;
  const std::uint64_t limit = negative ? 9223372036854775808ULL : 9223372036854775807ULL;
  bool overflow = false;
  for (std::size_t i = b; i < e; ++i) {
    const char c = s[i];
    if (c == '_' && i > b && i + 1 < e && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    if (c < '0' || c > '9') bad();
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (magnitude > (limit - d) / 10) overflow = true;
    if (!overflow) magnitude = magnitude * 10 + d;
  }
  if (overflow) fail_overflow(pos);
  if (negative) return value(static_cast<std::int64_t>(0 - magnitude));
  return value(static_cast<std::int64_t>(magnitude));
}

}  // namespace

bool parse_python_float(std::string_view text, double& out) {
  std::string clean;
  std::size_t i = 0;
  const auto digit = [&](std::size_t k) { return k < text.size() && text[k] >= '0' && text[k] <= '9'; };
  // Scans digits with single underscores between them; returns the number scanned.
  const auto digits = [&]() {
    std::size_t n = 0;
    while (digit(i)) {
      clean += text[i++];
      ++n;
      if (i + 1 < text.size() && text[i] == '_' && digit(i + 1)) ++i;
    }
    return n;
  };
  std::size_t mantissa_digits = digits();
  if (i < text.size() && text[i] == '.') {
    clean += text[i++];
    mantissa_digits += digits();
  }
  if (mantissa_digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    clean += text[i++];
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) clean += text[i++];
    if (digits() == 0) return false;
  }
  if (i != text.size()) return false;
  const auto res =
      std::from_chars(clean.data(), clean.data() + clean.size(), out, std::chars_format::general);
  if (res.ptr != clean.data() + clean.size()) return false;
  if (res.ec == std::errc::result_out_of_range) {
    // Decimal magnitude: exponent plus the position of the first nonzero digit.
    const std::size_t epos = clean.find_first_of("eE");
    long long exponent = 0;
    if (epos != std::string::npos) {
      const std::string_view ex(clean.data() + epos + 1, clean.size() - epos - 1);
      const char* first = ex.data() + (ex[0] == '+' ? 1 : 0);
      const auto er = std::from_chars(first, ex.data() + ex.size(), exponent);
      if (er.ec == std::errc::result_out_of_range) exponent = ex[0] == '-' ? -(1LL << 40) : (1LL << 40);
    }
    const std::string_view mant(clean.data(), epos == std::string::npos ? clean.size() : epos);
    const std::size_t dot = std::min(mant.find('.'), mant.size());
    const std::size_t nz = mant.find_first_of("123456789");
    const long long position =
        nz < dot ? static_cast<long long>(dot - nz) : -static_cast<long long>(nz - dot - 1);
    out = exponent + position > 0 ? std::numeric_limits<double>::infinity() : 0.0;
  }
  return true;
}

namespace {

value parse_float_string(const std::string& s, std::uint32_t pos) {
  const auto bad = [&]() { fail(pos, "could not convert string to float: " + value(s).repr()); };
  const std::size_t b0 = s.find_first_not_of(" \t\n\r\f\v");
  if (b0 == std::string::npos) bad();
  std::size_t b = b0;
  const std::size_t e = s.find_last_not_of(" \t\n\r\f\v") + 1;
  bool negative = false;
  if (s[b] == '+' || s[b] == '-') negative = s[b++] == '-';
  std::string body = s.substr(b, e - b);
  std::string lower = body;
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double d = 0.0;
  if (lower == "inf" || lower == "infinity") {
    d = std::numeric_limits<double>::infinity();
  } else if (lower == "nan") {
    d = std::numeric_limits<double>::quiet_NaN();
  } else if (!parse_python_float(body, d)) {
    bad();
  }
  return value(negative ? -d : d);
}

template <bool is_max>
value min_max(std::span<const value> args, std::uint32_t pos) {
  const char* name = is_max ? "max" : "min";
  const cmpop op = is_max ? cmpop::gt : cmpop::lt;
  const value* best = nullptr;
  value best_owned;  // for characters of a string
  const auto consider = [&](const value& item) {
    if (best == nullptr || compare_values(op, item, *best, pos)) {
      best_owned = item;
      best = &best_owned;
    }
  };
  if (args.size() == 1) {
    for_each_item(args[0], pos, consider);
    if (best == nullptr) fail(pos, std::string(name) + "() arg is an empty sequence");
  } else {
    for (const value& a : args)
      consider(a);
  }
  return *best;
}

// An upper bound of v.repr().size(), or some number above `limit` once the bound exceeds it. Lists
// may share elements ([[0] * 10**7] * 10**7), so this walk is what keeps str() from exhausting memory.
std::size_t repr_length_bound(const value& v, std::size_t limit) {
  switch (v.type()) {
    case value::kind::none:
      return 4;
    case value::kind::boolean:
      return 5;
    case value::kind::integer:
      return 20;
    case value::kind::real:
      return 24;
    case value::kind::string:
      return 2 + 2 * v.as_string().size();
    case value::kind::list:
      break;
  }
  std::size_t total = 2;
  for (const value& e : v.as_list()) {
    total += 2 + repr_length_bound(e, limit);
    if (total > limit) break;
  }
  return total;
}

value range_value(std::span<const value> args, std::uint32_t pos) {
  for (const value& a : args) {
    if (!a.is_integral()) fail_not_integer(a, pos);
  }
  std::int64_t start = 0, stop = 0, step = 1;
  if (args.size() == 1) {
    stop = args[0].as_int();
  } else {
    start = args[0].as_int();
    stop = args[1].as_int();
    if (args.size() == 3) step = args[2].as_int();
  }
  if (step == 0) fail(pos, "range() arg 3 must not be zero");
  // Length without overflow: the distance and the step's magnitude as unsigned numbers.
  std::uint64_t count = 0;
  if (step > 0 && start < stop) {
    count = (static_cast<std::uint64_t>(stop) - static_cast<std::uint64_t>(start) - 1) /
                static_cast<std::uint64_t>(step) +
            1;
  } else if (step < 0 && stop < start) {
    const std::uint64_t magnitude = 0 - static_cast<std::uint64_t>(step);
    count = (static_cast<std::uint64_t>(start) - static_cast<std::uint64_t>(stop) - 1) / magnitude + 1;
  }
  if (count > static_cast<std::uint64_t>(max_sequence_length)) {
    fail(pos, "range() result too large (more than " + std::to_string(max_sequence_length) + " elements)");
  }
  value_list out;
  out.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t j = 0; j < count; ++j) {
    // Modulo 2**64: the intermediate may wrap, the element itself lies between start and stop.
    out.emplace_back(
        static_cast<std::int64_t>(static_cast<std::uint64_t>(start) + j * static_cast<std::uint64_t>(step)));
  }
  return value(std::move(out));
}

value call_builtin(builtin b, std::span<const value> args, std::uint32_t pos) {
  switch (b) {
    case builtin::min:
      return min_max<false>(args, pos);
    case builtin::max:
      return min_max<true>(args, pos);
    case builtin::abs: {
      num x;
      if (!to_num(args[0], x)) fail(pos, "bad operand type for abs(): " + quoted(args[0].type_name()));
      return to_value(num_abs(x, pos));
    }
    case builtin::len:
      if (args[0].is_list()) return value(static_cast<std::int64_t>(args[0].as_list().size()));
      if (args[0].is_string()) return value(static_cast<std::int64_t>(args[0].as_string().size()));
      fail(pos, "object of type " + quoted(args[0].type_name()) + " has no len()");
    case builtin::sum: {
      value acc = args.size() > 1 ? args[1] : value(0);
      if (acc.is_string()) fail(pos, "sum() can't sum strings [use ''.join(seq) instead]");
      for_each_item(args[0], pos, [&](const value& e) { acc = binary_value(binop::add, acc, e, pos); });
      return acc;
    }
    case builtin::range:
      return range_value(args, pos);
    case builtin::list:
    case builtin::tuple:
      return args.empty() ? value(value_list{}) : as_list_value(args[0], pos);
    case builtin::to_int: {
      if (args.empty()) return value(0);
      num x;
      if (to_num(args[0], x)) return to_value(num_to_int(x, pos));
      if (args[0].is_string()) return parse_int_string(args[0].as_string(), pos);
      fail(pos, "int() argument must be a string or a real number, not " + quoted(args[0].type_name()));
    }
    case builtin::to_float: {
      if (args.empty()) return value(0.0);
      num x;
      if (to_num(args[0], x)) return value(num_as_real(x));
      if (args[0].is_string()) return parse_float_string(args[0].as_string(), pos);
      fail(pos, "float() argument must be a string or a real number, not " + quoted(args[0].type_name()));
    }
    case builtin::to_bool:
      return value(!args.empty() && args[0].truthy());
    case builtin::to_str:
      if (args.empty()) return value(std::string());
      if (repr_length_bound(args[0], static_cast<std::size_t>(max_sequence_length)) >
          static_cast<std::size_t>(max_sequence_length)) {
        fail(pos, "result too large (more than " + std::to_string(max_sequence_length) + " characters)");
      }
      return value(args[0].str());
    case builtin::round: {
      num x;
      if (!to_num(args[0], x))
        fail(pos, "type " + std::string(args[0].type_name()) + " doesn't define __round__ method");
      if (args.size() == 1 || args[1].is_none()) return to_value(num_round(x, pos));
      if (!args[1].is_integral()) fail_not_integer(args[1], pos);
      return to_value(num_round_digits(x, num::make_int(args[1].as_int()), pos));
    }
    case builtin::pow:
      return binary_value(binop::pow, args[0], args[1], pos);
    case builtin::any:
    case builtin::all: {
      const bool want = b == builtin::any;
      bool found = false;
      for_each_item(args[0], pos, [&](const value& e) {
        if (!found && e.truthy() == want) found = true;
      });
      return value(want ? found : !found);
    }
    case builtin::sorted: {
      value_list items = as_list_value(args[0], pos).as_list();
      std::stable_sort(items.begin(), items.end(),
                       [&](const value& x, const value& y) { return compare_values(cmpop::lt, x, y, pos); });
      return value(std::move(items));
    }
  }
  fail(pos, "internal error: unknown builtin");
}

// ------------------------------------------------------------------------------------------------
// The generic evaluator

class evaluator {
 public:
  evaluator(const expr_program& p, std::span<const value* const> slots, value* locals)
      : p_(p), slots_(slots), locals_(locals) {}

  value eval(std::uint32_t n) {
    const node& nd = p_.nodes[n];
    const std::uint32_t* k = p_.kids.data() + nd.first;
    switch (nd.kind) {
      case node_kind::constant:
        return p_.constants[nd.index];
      case node_kind::slot:
        return *slots_[nd.index];
      case node_kind::local:
        return locals_[nd.index];
      case node_kind::unary:
        return unary_value(static_cast<unop>(nd.op), eval(k[0]), nd.pos);
      case node_kind::binary: {
        const value a = eval(k[0]);
        return binary_value(static_cast<binop>(nd.op), a, eval(k[1]), nd.pos);
      }
      case node_kind::logical_and: {
        value a = eval(k[0]);
        return a.truthy() ? eval(k[1]) : a;
      }
      case node_kind::logical_or: {
        value a = eval(k[0]);
        return a.truthy() ? a : eval(k[1]);
      }
      case node_kind::logical_not:
        return value(!eval(k[0]).truthy());
      case node_kind::compare:
        return value(eval_compare(nd, k));
      case node_kind::conditional:
        return eval(k[1]).truthy() ? eval(k[0]) : eval(k[2]);
      case node_kind::list: {
        value_list out;
        out.reserve(nd.count);
        for (std::uint32_t i = 0; i < nd.count; ++i)
          out.push_back(eval(k[i]));
        return value(std::move(out));
      }
      case node_kind::subscript: {
        const value obj = eval(k[0]);
        return subscript_value(obj, eval(k[1]), nd.pos);
      }
      case node_kind::slice:
        return eval_slice(nd, k);
      case node_kind::call:
        return eval_call(nd, k);
      case node_kind::comprehension:
        return eval_comprehension(nd);
      default:
        break;
    }
    fail(nd.pos, "internal error: not an expression node");
  }

 private:
  bool eval_compare(const node& nd, const std::uint32_t* k) {
    value left = eval(k[0]);
    for (std::uint32_t i = 0; i + 1 < nd.count; ++i) {
      value right = eval(k[i + 1]);
      const cmp_link& link = p_.links[nd.index + i];
      if (!compare_values(link.op, left, right, link.pos)) return false;
      left = std::move(right);
    }
    return true;
  }

  value eval_slice(const node& nd, const std::uint32_t* k) {
    const value obj = eval(k[0]);
    const value start = eval(k[1]);
    const value stop = eval(k[2]);
    return slice_value(obj, start, stop, eval(k[3]), nd.pos);
  }

  value eval_call(const node& nd, const std::uint32_t* k) {
    value_list args;
    args.reserve(nd.count);
    for (std::uint32_t i = 0; i < nd.count; ++i)
      args.push_back(eval(k[i]));
    return call_builtin(static_cast<builtin>(nd.op), args, nd.pos);
  }

  value eval_comprehension(const node& nd) {
    value_list out;
    run_clauses(nd, 1, out);
    return value(std::move(out));
  }

  // Runs clause i (and the ones after it) of comprehension `comp`, appending elements to `out`.
  void run_clauses(const node& comp, std::uint32_t i, value_list& out) {
    const std::uint32_t* k = p_.kids.data() + comp.first;
    while (i < comp.count && p_.nodes[k[i]].kind == node_kind::comp_if) {
      const node& c = p_.nodes[k[i]];
      if (!eval(p_.kids[c.first]).truthy()) return;
      ++i;
    }
    if (i == comp.count) {
      out.push_back(eval(k[0]));
      checked_length(static_cast<std::int64_t>(out.size()), comp.pos);
      return;
    }
    const node& c = p_.nodes[k[i]];
    const std::uint32_t target = p_.kids[c.first];
    const value iterable = eval(p_.kids[c.first + 1]);
    for_each_item(iterable, c.pos, [&](const value& item) {
      if (++steps_ > max_comprehension_steps) {
        fail(c.pos, "comprehension too large (more than " + std::to_string(max_comprehension_steps) +
                        " iterations)");
      }
      assign(target, item, c.pos);
      run_clauses(comp, i + 1, out);
    });
  }

  void assign(std::uint32_t t, const value& item, std::uint32_t pos) {
    const node& tn = p_.nodes[t];
    if (tn.kind == node_kind::target_local) {
      locals_[tn.index] = item;
      return;
    }
    if (!item.is_list() && !item.is_string()) {
      fail(pos, "cannot unpack non-iterable " + std::string(item.type_name()) + " object");
    }
    const value items = as_list_value(item, pos);
    const value_list& l = items.as_list();
    if (l.size() > tn.count)
      fail(pos, "too many values to unpack (expected " + std::to_string(tn.count) + ")");
    if (l.size() < tn.count) {
      fail(pos, "not enough values to unpack (expected " + std::to_string(tn.count) + ", got " +
                    std::to_string(l.size()) + ")");
    }
    for (std::uint32_t j = 0; j < tn.count; ++j)
      assign(p_.kids[tn.first + j], l[j], pos);
  }

  const expr_program& p_;
  std::span<const value* const> slots_;
  value* locals_;
  std::int64_t steps_ = 0;
};

}  // namespace

value eval_node(const expr_program& p, std::uint32_t n, std::span<const value* const> slots, value* locals) {
  evaluator ev(p, slots, locals);
  return ev.eval(n);
}

value run_generic(const expr_program& p, std::span<const value* const> slots) {
  if (p.local_count == 0) return eval_node(p, p.root, slots, nullptr);
  std::vector<value> locals(p.local_count);
  return eval_node(p, p.root, slots, locals.data());
}

// ------------------------------------------------------------------------------------------------
// The numeric bytecode interpreter

bool run_fast(const expr_program& p, std::span<const value* const> slots, num& out) {
  if (!p.has_fast) return false;
  num regs[max_fast_registers];
  const std::size_t nc = p.fast_consts.size();
  if (nc != 0) std::memcpy(static_cast<void*>(regs), p.fast_consts.data(), nc * sizeof(num));
  for (std::size_t k = 0; k < slots.size(); ++k) {
    if (!to_num(*slots[k], regs[nc + k])) return false;
  }
  const vm_instr* code = p.code.data();
  std::uint32_t pc = 0;
  for (;;) {
    const vm_instr& in = code[pc++];
    const num& x = regs[in.a];
    const num& y = regs[in.b];
    num& r = regs[in.dst];
    switch (in.code) {
      case vm_op::move:
        r = x;
        break;
      case vm_op::add: {
        std::int64_t v;
        if (both_integral(x, y) && !__builtin_add_overflow(x.i, y.i, &v)) {
          r = num::make_int(v);
        } else {
          r = num_binary(binop::add, x, y, in.pos);
        }
        break;
      }
      case vm_op::sub: {
        std::int64_t v;
        if (both_integral(x, y) && !__builtin_sub_overflow(x.i, y.i, &v)) {
          r = num::make_int(v);
        } else {
          r = num_binary(binop::sub, x, y, in.pos);
        }
        break;
      }
      case vm_op::mul: {
        std::int64_t v;
        if (both_integral(x, y) && !__builtin_mul_overflow(x.i, y.i, &v)) {
          r = num::make_int(v);
        } else {
          r = num_binary(binop::mul, x, y, in.pos);
        }
        break;
      }
      case vm_op::floordiv:
        r = num_binary(binop::floordiv, x, y, in.pos);
        break;
      case vm_op::mod:
        r = num_binary(binop::mod, x, y, in.pos);
        break;
      case vm_op::binary:
        r = num_binary(static_cast<binop>(in.sub), x, y, in.pos);
        break;
      case vm_op::eq:
        r = num::make_bool(both_integral(x, y) ? x.i == y.i : num_compare(cmpop::eq, x, y));
        break;
      case vm_op::ne:
        r = num::make_bool(both_integral(x, y) ? x.i != y.i : num_compare(cmpop::ne, x, y));
        break;
      case vm_op::lt:
        r = num::make_bool(both_integral(x, y) ? x.i < y.i : num_compare(cmpop::lt, x, y));
        break;
      case vm_op::le:
        r = num::make_bool(both_integral(x, y) ? x.i <= y.i : num_compare(cmpop::le, x, y));
        break;
      case vm_op::gt:
        r = num::make_bool(both_integral(x, y) ? x.i > y.i : num_compare(cmpop::gt, x, y));
        break;
      case vm_op::ge:
        r = num::make_bool(both_integral(x, y) ? x.i >= y.i : num_compare(cmpop::ge, x, y));
        break;
      case vm_op::in_list: {
        bool found = false;
        for (const num& e : p.num_lists[in.b]) {
          if (num_compare(cmpop::eq, x, e)) {
            found = true;
            break;
          }
        }
        r = num::make_bool(found != (in.sub != 0));
        break;
      }
      case vm_op::unary:
        r = num_unary(static_cast<unop>(in.sub), x, in.pos);
        break;
      case vm_op::logical_not:
        r = num::make_bool(!num_truthy(x));
        break;
      case vm_op::jump:
        pc = in.pos;
        break;
      case vm_op::jump_if_false:
        if (!num_truthy(x)) pc = in.pos;
        break;
      case vm_op::jump_if_true:
        if (num_truthy(x)) pc = in.pos;
        break;
      case vm_op::min2:
        r = num_compare(cmpop::lt, y, x) ? y : x;
        break;
      case vm_op::max2:
        r = num_compare(cmpop::gt, y, x) ? y : x;
        break;
      case vm_op::abs:
        r = num_abs(x, in.pos);
        break;
      case vm_op::to_int:
        r = num_to_int(x, in.pos);
        break;
      case vm_op::to_float:
        r = num::make_real(num_as_real(x));
        break;
      case vm_op::to_bool:
        r = num::make_bool(num_truthy(x));
        break;
      case vm_op::round1:
        r = num_round(x, in.pos);
        break;
      case vm_op::round2:
        r = num_round_digits(x, y, in.pos);
        break;
      case vm_op::ret:
        out = x;
        return true;
    }
  }
}

}  // namespace kf::detail
