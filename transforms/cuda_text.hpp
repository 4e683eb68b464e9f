// Text helpers shared by the transformation operators: a CUDA C++ tokenizer with bracket matching, the
// entry kernel's definition and parameter list, annotation sites, literal edits of the source, and the
// checks every operator does on its options and values.
//
// Contract: nothing here guesses. A construct that is not in the form an operator supports is reported
// by throwing transform_failure (the operator turns it into transform_result::error, an invalid trial);
// the helpers never throw anything else for a bad source. All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/options.hpp"
#include "kforge/transform.hpp"

namespace kf::transforms {

/// A construct an operator cannot rewrite (or a conflict). The message says what and where; the operator
/// prefixes it with its name and site.
struct transform_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void fail(const std::string& message);

// --- Tokens ------------------------------------------------------------------------------------------------

enum class token_kind : std::uint8_t {
  identifier,  ///< also keywords
  number,      ///< a preprocessing number: 12, 0x1f, 1.5e-3f, 4u
  literal,     ///< a string or character literal (with its prefix and quotes)
  punct,       ///< an operator or punctuator; multi-character operators are one token ("->", "+=", "<<=")
  directive,   ///< a whole preprocessor line from '#' to its end (continuation lines included)
};

struct token {
  token_kind kind = token_kind::punct;
  std::size_t begin = 0;  ///< offsets into the source
  std::size_t end = 0;
  std::string_view text;
  bool is(std::string_view s) const noexcept { return text == s; }
  bool is_identifier(std::string_view s) const noexcept {
    return kind == token_kind::identifier && text == s;
  }
};

/// The tokens of a source (comments and whitespace dropped), with every bracket matched. The source must
/// outlive this object. Unbalanced brackets, an unterminated comment or literal are recorded, not thrown:
/// match() and the functions that need structure throw transform_failure then.
class lexed {
 public:
  explicit lexed(std::string_view source);

  std::string_view source() const noexcept { return src_; }
  std::size_t size() const noexcept { return toks_.size(); }
  const token& operator[](std::size_t i) const { return toks_.at(i); }
  const std::vector<token>& tokens() const noexcept { return toks_; }

  /// Index of the bracket matching the one at `i` ((, [, { or their closers).
  std::size_t match(std::size_t i) const;
  /// Index of the first token that begins at or after `offset` (size() when none).
  std::size_t first_at(std::size_t offset) const noexcept;
  /// The source text from the beginning of token `first` to the end of token `last` (inclusive).
  std::string_view span(std::size_t first, std::size_t last) const;
  /// True when the lexer found a problem (unbalanced brackets, unterminated comment or literal).
  const std::string& problem() const noexcept { return problem_; }

 private:
  std::string_view src_;
  std::vector<token> toks_;
  std::vector<std::size_t> match_;
  std::string problem_;
};

/// True for "=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=".
bool is_assignment(std::string_view op) noexcept;
/// True for a C identifier.
bool is_identifier(std::string_view s) noexcept;
/// True when `name` occurs as an identifier token in tokens [first, last].
bool mentions(const lexed& lx, std::size_t first, std::size_t last, std::string_view name);
/// True when `expr` contains an assignment, ++ or -- (an expression a rewrite may not evaluate twice).
bool assigns(std::string_view expr);
/// True when identifier `name` is assigned (=, op=, ++, --) or has its address taken in [first, last].
bool modifies(const lexed& lx, std::size_t first, std::size_t last, std::string_view name);

// --- Lines -------------------------------------------------------------------------------------------------

std::size_t line_begin(std::string_view s, std::size_t offset) noexcept;
/// Offset just past the newline of the line containing `offset` (or the end of the text).
std::size_t line_end(std::string_view s, std::size_t offset) noexcept;
/// The spaces and tabs that start the line containing `offset`.
std::string indent_of(std::string_view s, std::size_t offset);
/// `text` with `extra` inserted after every newline that is followed by more text.
std::string reindent(std::string_view text, std::string_view extra);

// --- Functions ---------------------------------------------------------------------------------------------

/// A function definition at namespace scope (not nested in another function's body).
struct function_def {
  std::size_t header = 0;  ///< first token of the declaration (after the previous ;, } or { or directive)
  std::size_t name = 0;    ///< the name token (just before the parameter list)
  std::size_t params_open = 0, params_close = 0;  ///< ( and )
  std::size_t body_open = 0, body_close = 0;      ///< { and }
  bool global = false;                            ///< declared __global__
};

std::vector<function_def> function_definitions(const lexed& lx);
/// The single __global__ definition named `entry`; transform_failure when absent or ambiguous.
function_def find_entry(const lexed& lx, std::string_view entry);

/// One parameter of a function definition.
struct parameter {
  std::size_t first = 0, last = 0;  ///< tokens (inclusive)
  std::string name;                 ///< empty when unnamed
  std::size_t name_tok = 0;
  int pointer_depth = 0;       ///< number of '*' (0: not a pointer); -1 for forms not understood (arrays of
                               ///< pointers, function pointers, references)
  std::size_t star = 0;        ///< the last '*' token (pointers)
  bool const_pointee = false;  ///< 'const' before the last '*'
  bool restricted = false;     ///< __restrict__ / __restrict after the last '*'
  std::string element_type;    ///< the pointee (or the type) without qualifiers, words joined by ' '
};
std::vector<parameter> parse_parameters(const lexed& lx, const function_def& f);

// --- Loops -------------------------------------------------------------------------------------------------

/// Index of the first token in [first, last) that is `what` outside any brackets, or `last`.
std::size_t find_top(const lexed& lx, std::size_t first, std::size_t last, std::string_view what);

/// A counted for loop `for (<type> i = <start>; i < <bound>; ++i | i++ | i += <stride>) <body>`.
struct loop_form {
  // tokens: for, (, ); texts of the pieces; stride empty for 1
  std::size_t for_tok = 0, open = 0, close = 0;
  std::string type, index, start, bound, incr, stride;  // stride empty: 1
  std::size_t body_first = 0, body_last = 0;            // tokens, inclusive
  bool braced = false;
};

/// Parses the for loop starting at token `t`; transform_failure naming what is not in the form. <bound> may
/// hold no operator of lower precedence than '<' at its top level; the body is `{...}` or one expression
/// statement (body_last is its ';').
loop_form parse_loop(const lexed& lx, std::size_t t);

// --- Sites -------------------------------------------------------------------------------------------------

/// The annotations of `op` at `site`, in source order. Throws transform_failure when there is none:
/// naming the operator(s) the site is marked for instead, if any. Only well-formed annotations count:
/// `//@kf` must be followed by a space or the end of the line.
std::vector<annotation> site_annotations(const std::string& source, std::string_view op,
                                         std::string_view site);
/// Offset of the first token after the annotation (annotation lines are comments, so stacked annotations
/// are skipped). Returns the token index (lx.size() when none).
std::size_t construct_after(const lexed& lx, const annotation& a);
/// The annotation's argument `key`, or `fallback` when absent.
std::string arg_or(const annotation& a, const std::string& key, const std::string& fallback);
/// Throws unless every key of the annotation is in `allowed`.
void check_args(const annotation& a, const std::vector<std::string>& allowed);
/// Splits "a,b,c" (empty parts dropped).
std::vector<std::string> split_list(std::string_view s);

// --- Edits -------------------------------------------------------------------------------------------------

/// Replacements of byte ranges of one source, applied together. Ranges must not overlap (an overlap is a
/// conflict between two rewrites and throws transform_failure).
class text_edits {
 public:
  void replace(std::size_t begin, std::size_t end, std::string text);
  void insert(std::size_t at, std::string text) { replace(at, at, std::move(text)); }
  bool empty() const noexcept { return edits_.empty(); }
  std::string apply(std::string_view source) const;

 private:
  struct edit {
    std::size_t begin, end;
    std::string text;
  };
  std::vector<edit> edits_;
};

// --- Options, values, results ------------------------------------------------------------------------------

/// An option holding a list (the parameter values an instance searches), with its default.
option_spec list_option(std::string name, nlohmann::json def, std::string doc);
/// The operator's site: a config error when an operator that needs one is given none.
void require_site(const options& o, const transform_site& s, std::string_view op);
/// An option holding a list of integers in [lo, hi], without duplicates, containing `neutral` when given.
std::vector<std::int64_t> int_list(const options& o, std::string_view name, std::int64_t lo, std::int64_t hi,
                                   std::optional<std::int64_t> neutral);
/// An option holding a non-empty list of strings without duplicates.
std::vector<std::string> string_list(const options& o, std::string_view name);

std::vector<value> to_values(const std::vector<std::int64_t>& xs);
std::vector<value> to_values(const std::vector<std::string>& xs);

/// A parameter value by local name: transform_failure when absent or of the wrong kind.
std::int64_t int_value(const transform_values& v, std::string_view name);
bool bool_value(const transform_values& v, std::string_view name);
std::string string_value(const transform_values& v, std::string_view name);

/// Runs `body` (returning the new source) and turns a transform_failure or kf::error into an error result
/// that starts with "<op> at site '<site>': " (or "<op>: " without a site).
template <class F>
transform_result guarded(std::string_view op, std::string_view site, F&& body) {
  const std::string prefix =
      std::string(op) + (site.empty() ? std::string(": ") : " at site '" + std::string(site) + "': ");
  try {
    return body();
  } catch (const std::exception& e) {
    transform_result r;
    r.error = prefix + e.what();
    return r;
  }
}

}  // namespace kf::transforms
