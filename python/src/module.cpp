// kforge._core: the native half of the kforge Python package (docs/plugins.md). The pure-Python half
// (python/kforge) re-exports it; import kforge, not kforge._core.
//
// Contract: every kforge misuse raises kforge.ConfigError (file, key and reason as attributes, the CLI's
// message as text) or kforge.Error; calls that run searches release the GIL, and Python strategies take it
// back for each call into Python.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>

#include "convert.hpp"
#include "kforge/kforge.hpp"
#include "kforge/problem.hpp"
#include "kforge/recorded.hpp"
#include "module.hpp"

namespace kf::py {

namespace {

PyObject* error_type = nullptr;
PyObject* config_error_type = nullptr;

void raise(PyObject* type, const std::string& message, const config_error* ce) {
  nb::object inst = nb::steal(PyObject_CallOneArg(type, nb::str(message.c_str(), message.size()).ptr()));
  if (!inst.is_valid()) return;  // the call raised; that error stands
  if (ce) {
    nb::setattr(inst, "file", nb::str(ce->file().c_str()));
    nb::setattr(inst, "key", nb::str(ce->key_path().c_str()));
    nb::setattr(inst, "reason", nb::str(ce->reason().c_str()));
  }
  PyErr_SetObject(type, inst.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const config_error& e) {
    raise(config_error_type, e.what(), &e);
  } catch (const error& e) {
    raise(error_type, e.what(), nullptr);
  }
}

param_type infer_type(const std::string& name, nb::handle values) {
  bool all_bool = true, all_int = true, all_number = true, all_string = true;
  std::size_t n = 0;
  for (auto v : values) {
    ++n;
    const bool b = nb::isinstance<nb::bool_>(v);
    const bool i = !b && (nb::isinstance<nb::int_>(v) || PyIndex_Check(v.ptr()));
    const bool f = !b && !i && (nb::isinstance<nb::float_>(v) || nb::hasattr(v, "__float__"));
    all_bool &= b;
    all_int &= i;
    all_number &= b || i || f;
    all_string &= nb::isinstance<nb::str>(v);
  }
  if (n == 0) throw error("parameter '" + name + "' has no values");
  if (all_bool) return param_type::boolean;
  if (all_int) return param_type::integer;
  if (all_number) return param_type::real;
  if (all_string) return param_type::string;
  throw error("parameter '" + name + "': values must be all numbers, all booleans or all strings");
}

search_space make_space(nb::dict params, nb::object constraints, nb::object constants, nb::object configs) {
  std::vector<param> ps;
  for (auto [k, v] : params) {
    const auto name = nb::cast<std::string>(nb::str(k));
    std::vector<value> values;
    for (auto x : v)
      values.push_back(to_value(x, name));
    ps.push_back(make_param(name, infer_type(name, v), std::move(values)));
  }
  std::vector<std::string> cs;
  if (!constraints.is_none())
    for (auto c : constraints)
      cs.push_back(nb::cast<std::string>(c));
  std::map<std::string, value> consts;
  if (!constants.is_none())
    for (auto [k, v] : nb::cast<nb::dict>(constants))
      consts.emplace(nb::cast<std::string>(nb::str(k)), to_value(v, nb::cast<std::string>(nb::str(k))));
  search_space space(std::move(ps), std::move(cs), std::move(consts));
  if (configs.is_none()) return space;
  std::vector<config> valid;
  for (auto c : configs)
    valid.push_back(config_from_python(space, c));
  return space.restricted_to(std::move(valid));
}

neighbourhood neighbourhood_from(const std::string& s) {
  if (s == "hamming") return neighbourhood::hamming;
  if (s == "adjacent") return neighbourhood::adjacent;
  if (s == "strictly_adjacent") return neighbourhood::strictly_adjacent;
  throw error("unknown neighbourhood '" + s + "' (expected hamming, adjacent or strictly_adjacent)");
}

nb::list configs_to_python(const std::vector<config>& cs) {
  nb::list out;
  for (const auto& c : cs)
    out.append(config_to_python(c));
  return out;
}

nb::dict values_of(const search_space& s, const config& c) {
  nb::dict d;
  for (std::size_t i = 0; i < s.dimension(); ++i)
    d[nb::str(s.params()[i].name.c_str())] = to_python(s.value_of(c, i));
  return d;
}

void bind_space(nb::module_& m) {
  nb::class_<search_space>(m, "Space",
                           "A search space: typed parameters (each a list of values) and constraints between "
                           "them. A configuration is a tuple of value indices, one per parameter; dicts "
                           "{parameter: value} are accepted wherever a configuration is.")
      .def(
          "__init__",
          [](search_space* self, nb::dict params, nb::object constraints, nb::object constants,
             nb::object configs) {
            new (self) search_space(make_space(params, constraints, constants, configs));
          },
          "params"_a, "constraints"_a = nb::none(), "constants"_a = nb::none(), "configs"_a = nb::none(),
          "A space from {name: [values...]}, constraints as Python expressions over the names (and "
          "`constants`), or `configs`: exactly these configurations are valid.")
      .def_static(
          "from_t1", [](const std::string& path) { return load_t1(path).space; }, "path"_a,
          "The space of a T1 file (the community format).")
      .def_static(
          "from_kernel", [](const std::string& path) { return load_kernel_problem(path).space; }, "path"_a,
          "The space of a kforge kernel description (docs/kernel.md).")
      .def_static(
          "from_recording",
          [](const std::string& path) { return recorded_space(*load_recorded_cached(path)); }, "path"_a,
          "The space of a recording (Kernel Tuner cache, T4 results, KTT output): its recorded "
          "configurations are the valid ones.")
      .def_prop_ro(
          "names",
          [](const search_space& s) {
            std::vector<std::string> out;
            for (const auto& p : s.params())
              out.push_back(p.name);
            return out;
          },
          "The parameter names, in order.")
      .def_prop_ro(
          "parameters",
          [](const search_space& s) {
            nb::dict d;
            for (const auto& p : s.params()) {
              nb::list l;
              for (const auto& v : p.values)
                l.append(to_python(v));
              d[nb::str(p.name.c_str())] = l;
            }
            return d;
          },
          "{name: [values...]} in parameter order.")
      .def_prop_ro("constraints",
                   [](const search_space& s) {
                     return std::vector<std::string>(s.constraint_sources().begin(),
                                                     s.constraint_sources().end());
                   })
      .def_prop_ro("dimension", &search_space::dimension)
      .def_prop_ro("cartesian_size", &search_space::cartesian_size, "Product of the value-list sizes.")
      .def_prop_ro(
          "size", [](const search_space& s) { return s.valid().size(); },
          "Number of valid configurations (enumerates the space on first use).")
      .def("__len__", [](const search_space& s) { return s.valid().size(); })
      .def_prop_ro(
          "enumerable", [](const search_space& s) { return s.valid_if_enumerable() != nullptr; },
          "Whether the valid configurations can be listed (size, valid()): False for a space too large to "
          "enumerate (more than 200,000,000 valid configurations, or a constrained space of more than 1e9 "
          "combinations estimated to have that many); strategies then draw with sample() and is_valid().")
      .def(
          "valid",
          [](const search_space& s) {
            const auto& v = s.valid();
            if (v.size() > search_space::max_valid_configs())
              throw error("the space has " + std::to_string(v.size()) +
                          " valid configurations, too many to list: draw them with sample() and is_valid()");
            nb::list out;
            for (std::size_t i = 0; i < v.size(); ++i)
              out.append(config_to_python(v.at(i)));
            return out;
          },
          "Every valid configuration, in lexicographic order (refused beyond 200,000,000: see enumerable).")
      .def(
          "is_valid",
          [](const search_space& s, nb::handle c) {
            try {
              return s.is_valid(config_from_python(s, c));
            } catch (const error&) {
              return false;
            }
          },
          "config"_a)
      .def(
          "sample",
          [](const search_space& s, std::size_t n, std::uint64_t seed) {
            rng r(seed);
            std::vector<config> out;
            for (std::size_t i = 0; i < n; ++i)
              out.push_back(s.sample(r));
            return configs_to_python(out);
          },
          "n"_a, "seed"_a = 0,
          "n configurations drawn uniformly from the valid ones (with replacement), seeded.")
      .def(
          "neighbours",
          [](const search_space& s, nb::handle c, const std::string& kind) {
            return configs_to_python(s.neighbours(config_from_python(s, c), neighbourhood_from(kind)));
          },
          "config"_a, "kind"_a = "hamming",
          "The valid neighbours: hamming (one parameter differs), adjacent (every parameter within one "
          "step), strictly_adjacent (one parameter moved one step).")
      .def(
          "encode", [](const search_space& s, nb::handle c) { return s.encode(config_from_python(s, c)); },
          "config"_a, "The configuration in [0,1]^d (ordered parameters by index, others one-hot).")
      .def_prop_ro("encoded_dimension", &search_space::encoded_dimension)
      .def(
          "values",
          [](const search_space& s, nb::handle c) { return values_of(s, config_from_python(s, c)); },
          "config"_a, "{parameter: value} of a configuration.")
      .def(
          "config",
          [](const search_space& s, nb::handle c) { return config_to_python(config_from_python(s, c)); },
          "values"_a, "The index tuple of a configuration given as {parameter: value} (or as indices).")
      .def(
          "key", [](const search_space& s, nb::handle c) { return s.key(config_from_python(s, c)); },
          "config"_a, "Kernel Tuner's cache key: the values' str(), joined by ','.")
      .def(
          "describe",
          [](const search_space& s, nb::handle c) { return s.describe(config_from_python(s, c)); },
          "config"_a)
      .def("__repr__", [](const search_space& s) {
        std::string out = "kforge.Space(" + std::to_string(s.dimension()) + " parameters: ";
        for (std::size_t i = 0; i < s.dimension(); ++i)
          out += (i ? ", " : "") + s.params()[i].name;
        char buf[64];
        std::snprintf(buf, sizeof buf, "; %.6g combinations)", s.cartesian_size());
        return out + buf;
      });
}

void bind_trial(nb::module_& m) {
  nb::class_<trial>(m, "Trial",
                    "One evaluation of one configuration: status, time (ms, the median of the timed runs), "
                    "costs by stage, metrics, error.")
      .def(
          "__init__",
          [](trial* t, nb::handle cfg, double time_ms, nb::handle st, std::map<std::string, double> metrics,
             std::string err, std::vector<double> times_ms) {
            new (t) trial();
            // The configuration is kept as given (indices); a Strategy checks it against its space.
            config c;
            for (auto x : cfg)
              c.push_back(nb::cast<std::uint32_t>(x));
            t->cfg = std::move(c);
            t->st = status_from_python(st);
            t->time_ms = t->st == status::ok ? time_ms : trial::nan;
            if (t->st == status::ok && !std::isfinite(time_ms))
              throw error("an ok trial needs a finite time_ms");
            t->metrics.insert(metrics.begin(), metrics.end());
            t->error = std::move(err);
            t->times_ms = std::move(times_ms);
            t->device = "python";
          },
          "config"_a, "time_ms"_a = trial::nan, "status"_a = "ok",
          "metrics"_a = std::map<std::string, double>{}, "error"_a = "", "times_ms"_a = std::vector<double>{},
          "A trial to tell a Strategy: the configuration's index tuple, its time in ms when ok, else a "
          "status (invalid, compile_failed, launch_failed, wrong_result, timeout, crashed).")
      .def_prop_ro("config", [](const trial& t) { return config_to_python(t.cfg); })
      .def_prop_ro("sequence", [](const trial& t) { return t.sequence; })
      .def_prop_ro("status", [](const trial& t) { return std::string(to_string(t.st)); })
      .def_prop_ro("ok", &trial::ok)
      .def_prop_ro("time_ms", [](const trial& t) { return t.time_ms; })
      .def_prop_ro("time_iqr_ms", [](const trial& t) { return t.time_iqr_ms; })
      .def_prop_ro("time_min_ms", [](const trial& t) { return t.time_min_ms; })
      .def_prop_ro("times_ms", [](const trial& t) { return t.times_ms; })
      .def_prop_ro(
          "metrics",
          [](const trial& t) { return std::map<std::string, double>(t.metrics.begin(), t.metrics.end()); })
      .def_prop_ro("error", [](const trial& t) { return t.error; })
      .def_prop_ro("device", [](const trial& t) { return t.device; })
      .def_prop_ro("clock_s", [](const trial& t) { return t.clock_s; })
      .def_prop_ro("batch", [](const trial& t) { return t.batch; })
      .def_prop_ro("timestamp", [](const trial& t) { return t.timestamp; })
      .def_prop_ro(
          "cost",
          [](const trial& t) {
            return std::map<std::string, double>{
                {"compile", t.cost.compile}, {"check", t.cost.check},         {"benchmark", t.cost.benchmark},
                {"profile", t.cost.profile}, {"framework", t.cost.framework}, {"strategy", t.cost.strategy},
                {"total", t.cost.total()}};
          },
          "Seconds the trial cost, by stage.")
      .def("__repr__", [](const trial& t) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6g", t.time_ms);
        std::string cfg;
        for (std::size_t i = 0; i < t.cfg.size(); ++i)
          cfg += (i ? ", " : "") + std::to_string(t.cfg[i]);
        return "kforge.Trial(#" + std::to_string(t.sequence) + " (" + cfg + ") " +
               std::string(to_string(t.st)) + (t.ok() ? std::string(" ") + buf + " ms" : std::string()) + ")";
      });
}

}  // namespace

}  // namespace kf::py

NB_MODULE(_core, m) {
  using namespace kf::py;
  m.doc() = "kforge's native module (import kforge instead)";
  kf::register_builtins();
  // kforge.Error and kforge.ConfigError (also a ValueError: a misuse). ConfigError has file, key, reason.
  error_type = PyErr_NewExceptionWithDoc("kforge.Error", "A kforge error: the message says what failed.",
                                         PyExc_RuntimeError, nullptr);
  nb::object bases = nb::make_tuple(nb::handle(error_type), nb::handle(PyExc_ValueError));
  config_error_type = PyErr_NewExceptionWithDoc(
      "kforge.ConfigError",
      "A mistake in a config or an argument: .file, .key and .reason say where and why.", bases.ptr(),
      nullptr);
  m.attr("Error") = nb::handle(error_type);
  m.attr("ConfigError") = nb::handle(config_error_type);
  nb::register_exception_translator(translate);

  m.def(
      "version", [] { return std::string(kf::version()); }, "kforge's version.");
  bind_space(m);
  bind_trial(m);
  bind_strategy(m);
  bind_run(m);
}
