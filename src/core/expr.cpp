// kf::expression: the public face of the expression language (include/kforge/expr.hpp). Parsing and
// evaluation live in expr_parse.cpp and expr_eval.cpp.
#include "kforge/expr.hpp"

#include <array>

#include "core/expr_program.hpp"
#include "kforge/error.hpp"

namespace kf {

namespace {

const detail::expr_program& none_program() {
  static const detail::expr_program program = [] {
    detail::expr_program p;
    p.constants.emplace_back();
    p.nodes.push_back(detail::node{detail::node_kind::constant, 0, 0, 0, 0, 0});
    return p;
  }();
  return program;
}

[[noreturn]] void slot_count_mismatch(const detail::expr_program& p, std::size_t given) {
  std::string names;
  for (const auto& n : p.free_names)
    names += (names.empty() ? "" : ", ") + n;
  throw error("expression '" + excerpt(p.source, 200) + "' takes " + std::to_string(p.free_names.size()) +
              " value(s) (" + names + ") but " + std::to_string(given) + " were given");
}

}  // namespace

expression expression::parse(std::string_view text) {
  expression e;
  e.program_ = detail::build_program(text);
  return e;
}

expression::expression() = default;
expression::expression(const expression&) = default;
expression::expression(expression&&) noexcept = default;
expression& expression::operator=(const expression&) = default;
expression& expression::operator=(expression&&) noexcept = default;
expression::~expression() = default;

const std::string& expression::source() const noexcept {
  return program_ ? program_->source : none_program().source;
}

std::span<const std::string> expression::free_names() const noexcept {
  return program_ ? std::span<const std::string>(program_->free_names) : std::span<const std::string>();
}

bool expression::is_constant() const noexcept {
  return !program_ || program_->constant;
}

value expression::evaluate(std::span<const value* const> slots) const {
  const detail::expr_program& p = program_ ? *program_ : none_program();
  if (slots.size() != p.free_names.size()) slot_count_mismatch(p, slots.size());
  if (p.constant) return p.constants[p.nodes[p.root].index];
  try {
    detail::num out;
    if (detail::run_fast(p, slots, out)) return detail::to_value(out);
    return detail::run_generic(p, slots);
  } catch (const detail::eval_failure& f) {
    throw eval_error(p.source, f.pos, f.reason);
  }
}

value expression::evaluate_values(std::span<const value> slots) const {
  static constexpr std::size_t kInline = 16;
  if (slots.size() <= kInline) {
    std::array<const value*, kInline> ptrs{};
    for (std::size_t i = 0; i < slots.size(); ++i)
      ptrs[i] = &slots[i];
    return evaluate(std::span<const value* const>(ptrs.data(), slots.size()));
  }
  std::vector<const value*> ptrs(slots.size());
  for (std::size_t i = 0; i < slots.size(); ++i)
    ptrs[i] = &slots[i];
  return evaluate(ptrs);
}

value expression::evaluate() const {
  return evaluate(std::span<const value* const>());
}

bool expression::test(std::span<const value* const> slots) const {
  const detail::expr_program& p = program_ ? *program_ : none_program();
  if (slots.size() != p.free_names.size()) slot_count_mismatch(p, slots.size());
  if (p.constant) return p.constants[p.nodes[p.root].index].truthy();
  try {
    detail::num out;
    if (detail::run_fast(p, slots, out)) return detail::num_truthy(out);
    return detail::run_generic(p, slots).truthy();
  } catch (const detail::eval_failure& f) {
    throw eval_error(p.source, f.pos, f.reason);
  }
}

}  // namespace kf
