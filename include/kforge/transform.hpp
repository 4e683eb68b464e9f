// kf::transform: a source-to-source operator the search composes.
//
// A transform is a pure function (kernel source, its parameter values) -> kernel source (plus compiler
// options), or a typed error. It declares the tuning parameters it adds to the search space. A kernel
// description lists transform instances under `transforms:`; a variant's genome is that ordered list with
// the values of every instance's parameters (they are parameters of the space like any other). Rendering
// applies the instances in order; a failing or conflicting composition is an invalid trial, never a crash.
//
// Sites in the source are marked with annotation comments (docs/transforms.md):
//     //@kf <operator> <site-name> [key=value ...]
// on the line before the construct they mark. A transform instance names the site it acts on; a kernel
// with no annotations still gets the parameter, launch-bounds and compiler-option transforms.
//
// Thread safety: apply() is const and called concurrently for different variants.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/options.hpp"
#include "kforge/registry.hpp"
#include "kforge/value.hpp"

namespace kf {

/// A tuning parameter a transform instance adds. `name` is local to the instance; the space calls it
/// "<instance>_<name>" (or "<instance>" when the transform has a single parameter named "value").
struct transform_param {
  std::string name;
  std::vector<value> values;
  value default_value;  ///< must be one of values; the default genome keeps the source unchanged
};

/// What a transform instance may read besides the source: the entry point and the kernel's arguments.
struct transform_context {
  std::string entry;                      ///< name of the kernel function to transform
  std::vector<std::string> buffer_names;  ///< pointer arguments, in order
  std::vector<std::string> read_only;     ///< buffers the kernel only reads (role in)
};

struct transform_result {
  std::string source;
  std::vector<std::string> options;  ///< compiler options to add
  std::string error;                 ///< non-empty: the transform does not apply (the trial is invalid)
  bool ok() const noexcept { return error.empty(); }
};

/// The values of one instance's parameters, by local name.
using transform_values = std::map<std::string, value, std::less<>>;

template <class T>
concept transform_like = requires(const T& t, const std::string& src, const transform_values& v,
                                  const transform_context& ctx) {
  { t.parameters() } -> std::convertible_to<std::vector<transform_param>>;
  { t.apply(src, v, ctx) } -> std::convertible_to<transform_result>;
};

class transform {
 public:
  template <transform_like T>
    requires(!std::same_as<std::remove_cvref_t<T>, transform>)
  transform(T t)  // NOLINT(google-explicit-constructor)
      : impl_(std::make_shared<model<T>>(std::move(t))) {}

  /// An empty transform: no parameters, leaves the source unchanged.
  transform() = default;

  std::vector<transform_param> parameters() const { return impl_ ? impl_->parameters() : std::vector<transform_param>{}; }
  transform_result apply(const std::string& source, const transform_values& v, const transform_context& ctx) const {
    if (!impl_) return {source, {}, {}};
    return impl_->apply(source, v, ctx);
  }

 private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual std::vector<transform_param> parameters() const = 0;
    virtual transform_result apply(const std::string&, const transform_values&, const transform_context&) const = 0;
  };
  template <class T>
  struct model final : concept_t {
    explicit model(T v) : value_(std::move(v)) {}
    std::vector<transform_param> parameters() const override { return value_.parameters(); }
    transform_result apply(const std::string& s, const transform_values& v, const transform_context& c) const override {
      return value_.apply(s, v, c);
    }
    T value_;
  };
  std::shared_ptr<const concept_t> impl_;
};

/// Where a transform instance acts: the site name from the description (may be empty for operators that
/// act on the whole kernel, such as launch bounds or compiler options).
struct transform_site {
  std::string site;
};

/// Transforms by type name ("unroll", "vectorize", "launch_bounds", ...). Factories receive the
/// instance's validated options and its site.
registry<transform, const transform_site&>& transform_registry();

/// Registers the built-in operators (transforms/).
void register_builtin_transforms();

// --- Helpers for operators (transforms/annotations.cpp) -----------------------------------------------

/// A marked site: the annotation line and what follows it.
struct annotation {
  std::string op;                           ///< e.g. "unroll"
  std::string site;                         ///< e.g. "k_loop"
  std::map<std::string, std::string> args;  ///< key=value pairs after the site name
  std::size_t line_begin = 0;               ///< offset of the annotation line in the source
  std::size_t line_end = 0;                 ///< offset just past its newline
};

/// Every `//@kf` annotation in `source`, in order.
std::vector<annotation> find_annotations(const std::string& source);

}  // namespace kf
