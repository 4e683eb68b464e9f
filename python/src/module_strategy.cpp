// Strategies from Python: the ask/tell Strategy object over any registered strategy, strategies written in
// Python (held by value in kf::strategy like any other, through py_strategy), and the python strategy
// bridge that kforge_core uses for `strategy: {type: python, ...}` (kforge/python_bridge.hpp).
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "convert.hpp"
#include "kforge/evaluator.hpp"
#include "kforge/kforge.hpp"
#include "kforge/plugin.hpp"
#include "kforge/python_bridge.hpp"
#include "kforge/strategy.hpp"
#include "kforge/transform.hpp"
#include "module.hpp"

namespace kf::py {

namespace {

bool finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// One Python object shared by C++ copies (a registry entry's factory is copied without the GIL): copying
// the shared_ptr touches no reference count of Python's; the last owner drops the object with the GIL.
struct shared_object {
  nb::object o;
  explicit shared_object(nb::object x) : o(std::move(x)) {}
  ~shared_object() {
    if (!Py_IsInitialized() || finalizing()) {
      (void)o.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    o.reset();
  }
};

// Python objects owned from C++: released with the GIL held, whichever thread drops them; left alone once
// the interpreter is finalising (it frees them itself).
struct held {
  nb::object cls, instance, propose, observe, finished;
  nb::dict kwargs;
  bool propose_takes_state = false;
  std::string name;
  ~held() {
    if (!Py_IsInitialized() || finalizing()) {
      for (nb::object* o : {&cls, &instance, &propose, &observe, &finished})
        (void)o->release();
      (void)kwargs.release();
      return;
    }
    nb::gil_scoped_acquire gil;
    cls.reset();
    instance.reset();
    propose.reset();
    observe.reset();
    finished.reset();
    kwargs.reset();
  }
};

// The message of a Python exception without its traceback: "LookupError: x has no class Y".
std::string short_message(nb::python_error& e) {
  const auto type = nb::cast<std::string>(nb::getattr(e.type(), "__name__", nb::str("Exception")));
  return type + ": " + nb::cast<std::string>(nb::str(e.value()));
}

nb::object helpers() {
  return nb::module_::import_("kforge._strategies");
}

// A Python exception raised by a strategy's code, as a kforge error (traceback included).
[[noreturn]] void strategy_raised(const std::string& name, const char* method, nb::python_error& e) {
  std::string msg = "python strategy '" + name + "' raised in " + method + ": " + e.what();
  throw error(msg);
}

// What a Python strategy's propose(n, state) sees, valid during that call only.
struct state_view {
  const search_state* s;
  const search_space* space;
};

}  // namespace

/// A strategy written in Python: a class constructed as cls(space, seed, **options) by initialize(), then
/// asked propose(n) (or propose(n, state)) and told observe(trials). Held by value in kf::strategy.
class py_strategy {
 public:
  py_strategy(nb::object cls, nb::dict kwargs, std::string name) : h_(std::make_unique<held>()) {
    h_->cls = std::move(cls);
    h_->kwargs = std::move(kwargs);
    h_->name = std::move(name);
  }

  void initialize(const search_space& space, std::uint64_t seed) {
    nb::gil_scoped_acquire gil;
    space_ = space;
    try {
      h_->instance = h_->cls(nb::cast(space, nb::rv_policy::copy), seed, **h_->kwargs);
      h_->propose = h_->instance.attr("propose");
      h_->observe = h_->instance.attr("observe");
      h_->finished =
          nb::hasattr(h_->instance, "finished") ? nb::object(h_->instance.attr("finished")) : nb::object();
      h_->propose_takes_state = nb::cast<bool>(helpers().attr("takes_state")(h_->propose));
    } catch (nb::python_error& e) {
      strategy_raised(h_->name, "__init__", e);
    }
  }

  std::vector<config> propose(const search_state& s, std::size_t n) {
    nb::gil_scoped_acquire gil;
    std::vector<config> out;
    try {
      nb::object res;
      if (h_->propose_takes_state) {
        state_view view{&s, &space_};
        res = h_->propose(n, nb::cast(&view, nb::rv_policy::reference));
      } else {
        res = h_->propose(n);
      }
      if (res.is_none()) return out;
      for (auto c : res)
        out.push_back(config_from_python(space_, c));
    } catch (nb::python_error& e) {
      strategy_raised(h_->name, "propose()", e);
    } catch (const error& e) {
      throw error("python strategy '" + h_->name +
                  "' proposed something that is not a configuration: " + e.what());
    }
    return out;
  }

  void observe(const search_state&, std::span<const trial> done) {
    nb::gil_scoped_acquire gil;
    try {
      nb::list l;
      for (const auto& t : done)
        l.append(nb::cast(t, nb::rv_policy::copy));
      h_->observe(l);
    } catch (nb::python_error& e) {
      strategy_raised(h_->name, "observe()", e);
    }
  }

  bool finished(const search_state&) const {
    if (!h_->finished.is_valid()) return false;
    nb::gil_scoped_acquire gil;
    try {
      return nb::cast<bool>(nb::bool_(h_->finished()));
    } catch (nb::python_error& e) {
      strategy_raised(h_->name, "finished()", e);
    }
  }

 private:
  std::unique_ptr<held> h_;
  search_space space_;
};

namespace {

// The type names kforge._strategies.option writes (its _KNOWN_TYPES); to_string(option_type) spells two of
// them differently ("number", "mapping") for error messages, so the table is explicit.
option_type option_type_from(const std::string& t, const config_location& where) {
  static const std::pair<std::string_view, option_type> names[] = {
      {"integer", option_type::integer}, {"real", option_type::real}, {"boolean", option_type::boolean},
      {"string", option_type::string},   {"list", option_type::list}, {"object", option_type::object},
      {"any", option_type::any}};
  for (const auto& [name, type] : names)
    if (name == t) return type;
  where.fail("option type '" + t + "' is not one of integer, real, boolean, string, list, object, any");
}

// The options a Python class declares (kforge._strategies.declared_options), as option_specs.
std::vector<option_spec> class_options(nb::handle cls, const config_location& where) {
  std::vector<option_spec> out;
  nb::object list;
  try {
    list = helpers().attr("declared_options")(cls);
  } catch (nb::python_error& e) {
    where.fail("the class's options are not declared right: " + short_message(e));
  }
  for (auto item : list) {
    const auto j = to_json(item, "options");
    option_spec o;
    o.name = j.at("name").get<std::string>();
    o.type = option_type_from(j.at("type").get<std::string>(), where.child(o.name));
    o.default_value = j.value("default", nlohmann::json());
    o.doc = j.value("doc", "");
    if (j.contains("min") && !j["min"].is_null()) o.min = j["min"].get<double>();
    if (j.contains("max") && !j["max"].is_null()) o.max = j["max"].get<double>();
    if (j.contains("choices") && j["choices"].is_array())
      o.choices = j["choices"].get<std::vector<std::string>>();
    o.required = j.value("required", false);
    out.push_back(std::move(o));
  }
  return out;
}

// The class named by a python strategy's params; config errors at module / class.
nb::object load_class(const nlohmann::json& params, const config_location& where) {
  const auto module = params.at("module").get<std::string>();
  const auto cls = params.at("class").get<std::string>();
  try {
    return helpers().attr("load_class")(module, cls, where.file);
  } catch (nb::python_error& e) {
    const bool missing_class = e.matches(PyExc_LookupError);
    where.child(missing_class ? "class" : "module").fail(short_message(e));
  }
}

std::string class_name(nb::handle cls) {
  return nb::cast<std::string>(nb::getattr(cls, "__qualname__", nb::str("strategy")));
}

// The kwargs a class is constructed with: the resolved options, less module and class.
nb::dict class_kwargs(const options& o) {
  nb::dict kw;
  for (const auto& [k, v] : o.resolved().items())
    if (k != "module" && k != "class") kw[nb::str(k.c_str())] = to_python(v);
  return kw;
}

strategy make_python_strategy(nb::object cls, const options& o, std::string name) {
  return strategy(py_strategy(std::move(cls), class_kwargs(o), std::move(name)), "python");
}

// The bridge kforge_core calls for `strategy: {type: python, params: {module, class, ...}}`.
python_bridge make_bridge() {
  python_bridge b;
  b.declared_options = [](const nlohmann::json& params, const config_location& where) {
    auto specs = python_strategy_base_options();
    // Without a module and a class (or with ill-typed ones) the base options alone report it.
    if (!params.is_object() || !params.contains("module") || !params["module"].is_string() ||
        !params.contains("class") || !params["class"].is_string())
      return specs;
    nb::gil_scoped_acquire gil;
    const auto cls = load_class(params, where);
    for (auto& o : class_options(cls, where.child("class"))) {
      if (o.name == "module" || o.name == "class")
        where.child("class").fail("the class declares option '" + o.name +
                                  "', a name python strategies reserve");
      specs.push_back(std::move(o));
    }
    return specs;
  };
  b.make_strategy = [](const options& o) {
    nb::gil_scoped_acquire gil;
    nlohmann::json params = {{"module", o.string("module")}, {"class", o.string("class")}};
    auto cls = load_class(params, o.where());
    auto s = make_python_strategy(cls, o, class_name(cls));
    return s;
  };
  return b;
}

// --- ask/tell ------------------------------------------------------------------------------------------

/// kforge.Strategy: any registered strategy, asked and told by hand (Optuna's ask/tell).
class ask_tell {
 public:
  ask_tell(search_space space, strategy s, std::uint64_t seed, std::optional<std::size_t> budget,
           std::string name)
      : space_ptr_(std::make_unique<search_space>(std::move(space))),
        space_(*space_ptr_),
        strat_(std::move(s)),
        budget_(budget),
        name_(std::move(name)) {
    nb::gil_scoped_release release;
    strat_.initialize(space_, seed);
  }
  // Strategies keep the address of the space they were initialised with: it lives on the heap, so that
  // moving this object (into its Python wrapper) keeps it where it is.
  ask_tell(ask_tell&& o) noexcept
      : space_ptr_(std::move(o.space_ptr_)),
        space_(*space_ptr_),
        strat_(std::move(o.strat_)),
        history_(std::move(o.history_)),
        pending_(std::move(o.pending_)),
        budget_(o.budget_),
        name_(std::move(o.name_)),
        next_sequence_(o.next_sequence_),
        step_(o.step_) {}
  ask_tell& operator=(ask_tell&&) = delete;

  nb::list propose(std::size_t n) {
    std::vector<config> got;
    {
      auto left = evaluations_left();
      if (left) n = std::min(n, *left);
      if (n == 0) return nb::list();
      nb::gil_scoped_release release;
      got = strat_.propose(search_state(space_, history_, pending_, left), n);
    }
    check(got, n);
    nb::list out;
    for (auto& c : got) {
      out.append(config_to_python(c));
      pending_.push_back(std::move(c));
    }
    return out;
  }

  void observe(nb::handle items) {
    std::vector<trial> group;
    for (auto item : items)
      group.push_back(to_trial(item, group));
    if (group.empty()) return;
    const std::size_t first = history_.size();
    for (auto& t : group) {
      pending_.erase(std::find(pending_.begin(), pending_.end(), t.cfg));
      t.sequence = next_sequence_++;
      t.batch = step_;
      history_.add(std::move(t));
    }
    ++step_;
    nb::gil_scoped_release release;
    strat_.observe(search_state(space_, history_, pending_, std::nullopt),
                   std::span<const trial>(history_.trials().data() + first, history_.size() - first));
  }

  bool finished() {
    nb::gil_scoped_release release;
    return strat_.finished(search_state(space_, history_, pending_, evaluations_left()));
  }

  const search_space& space() const { return space_; }
  const run_history& history() const { return history_; }
  const std::vector<config>& pending() const { return pending_; }
  const std::string& name() const { return name_; }
  std::optional<std::size_t> evaluations_left() const {
    if (!budget_) return std::nullopt;
    const auto used = history_.size() + pending_.size();
    return *budget_ > used ? *budget_ - used : 0;
  }

 private:
  // The strategy contract, as the experiment loop checks it.
  void check(const std::vector<config>& got, std::size_t n) const {
    if (got.size() > n)
      throw error("strategy '" + name_ + "' proposed " + std::to_string(got.size()) +
                  " configurations where " + std::to_string(n) + " were asked for");
    for (std::size_t i = 0; i < got.size(); ++i) {
      const auto& c = got[i];
      if (!space_.is_valid(c)) throw error("strategy '" + name_ + "' proposed an invalid configuration");
      if (history_.measured(c) || std::find(pending_.begin(), pending_.end(), c) != pending_.end() ||
          std::find(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(i), c) !=
              got.begin() + static_cast<std::ptrdiff_t>(i))
        throw error("strategy '" + name_ + "' proposed " + space_.describe(c) + " again");
    }
  }

  // A Trial, or (config, time_ms), or {config|values, time_ms, status, metrics, error}, for a pending config.
  trial to_trial(nb::handle item, const std::vector<trial>& so_far) const {
    trial t;
    if (nb::isinstance<trial>(item)) {
      t = nb::cast<const trial&>(item);
      t.cfg = config_from_python(space_, config_to_python(t.cfg));  // checks the indices against the space
    } else if (PyDict_Check(item.ptr())) {
      auto d = nb::borrow<nb::dict>(item);
      if (d.contains("config"))
        t.cfg = config_from_python(space_, d["config"]);
      else if (d.contains("values"))
        t.cfg = config_from_python(space_, d["values"]);
      else
        throw error("a trial dict needs 'config' (indices) or 'values' ({parameter: value})");
      t.st = d.contains("status") ? status_from_python(d["status"]) : status::ok;
      if (d.contains("time_ms")) t.time_ms = nb::cast<double>(nb::float_(d["time_ms"]));
      if (d.contains("error")) t.error = nb::cast<std::string>(nb::str(d["error"]));
      if (d.contains("metrics"))
        for (auto [k, v] : nb::borrow<nb::dict>(d["metrics"]))
          t.metrics.emplace(nb::cast<std::string>(nb::str(k)), nb::cast<double>(nb::float_(v)));
    } else if (PyTuple_Check(item.ptr()) && PyTuple_GET_SIZE(item.ptr()) == 2) {
      t.cfg = config_from_python(space_, nb::borrow(PyTuple_GET_ITEM(item.ptr(), 0)));
      nb::handle time = PyTuple_GET_ITEM(item.ptr(), 1);
      t.st = time.is_none() ? status::crashed : status::ok;
      if (!time.is_none()) t.time_ms = nb::cast<double>(nb::float_(time));
    } else {
      throw error("observe() takes Trials, (config, time_ms) pairs or dicts {config, time_ms, status}");
    }
    if (t.st == status::ok && !std::isfinite(t.time_ms))
      throw error("trial of " + space_.describe(t.cfg) + ": an ok trial needs a finite time_ms");
    if (t.st != status::ok) t.time_ms = trial::nan;
    if (std::find(pending_.begin(), pending_.end(), t.cfg) == pending_.end() ||
        std::any_of(so_far.begin(), so_far.end(), [&](const trial& o) { return o.cfg == t.cfg; }))
      throw error("trial of " + space_.describe(t.cfg) + ": not proposed by this strategy, or told already");
    if (t.device.empty()) t.device = "python";
    return t;
  }

  std::unique_ptr<search_space> space_ptr_;
  const search_space& space_;
  strategy strat_;
  run_history history_;
  std::vector<config> pending_;
  std::optional<std::size_t> budget_;
  std::string name_;
  std::uint64_t next_sequence_ = 0;
  std::uint32_t step_ = 0;
};

nb::object options_json(const std::vector<option_spec>& specs) {
  nb::list out;
  for (const auto& o : specs) {
    nb::dict d;
    d["name"] = nb::str(o.name.c_str());
    d["type"] = nb::str(std::string(to_string(o.type)).c_str());
    d["default"] = to_python(o.default_value);
    d["doc"] = nb::str(o.doc.c_str());
    d["required"] = nb::bool_(o.required);
    if (o.min) d["min"] = nb::float_(*o.min);
    if (o.max) d["max"] = nb::float_(*o.max);
    if (!o.choices.empty()) d["choices"] = nb::cast(o.choices);
    out.append(d);
  }
  return out;
}

template <class R>
nb::list entries(const R& reg) {
  nb::list out;
  for (const auto& n : reg.names()) {
    const auto e = reg.get(n);
    nb::dict d;
    d["name"] = nb::str(n.c_str());
    d["summary"] = nb::str(e.summary.c_str());
    d["options"] = options_json(e.options);
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_strategy(nb::module_& m) {
  set_python_bridge(make_bridge());

  nb::class_<state_view>(m, "SearchState",
                         "What a Python strategy's propose(n, state) sees (valid during that call only).")
      .def(
          "seen",
          [](const state_view& v, nb::handle c) { return v.s->seen(config_from_python(*v.space, c)); },
          "config"_a, "Measured or in flight.")
      .def_prop_ro(
          "pending",
          [](const state_view& v) {
            nb::list l;
            for (const auto& c : v.s->pending())
              l.append(config_to_python(c));
            return l;
          },
          "Proposed and not yet observed.")
      .def_prop_ro("evaluations_left", [](const state_view& v) { return v.s->evaluations_left(); })
      .def_prop_ro("measured", [](const state_view& v) { return v.s->history().size(); })
      .def_prop_ro("best", [](const state_view& v) -> std::optional<trial> {
        if (const auto* b = v.s->history().best()) return *b;
        return std::nullopt;
      });

  nb::class_<ask_tell>(
      m, "Strategy",
      "A search strategy asked for configurations and told their results (ask/tell). Made by "
      "kforge.strategy(name_or_class, space, seed=..., **options).")
      .def("propose", &ask_tell::propose, "n"_a = 1,
           "Up to n configurations (index tuples): valid, distinct, neither measured nor pending; fewer when "
           "the "
           "strategy or the budget has no more.")
      .def("observe", &ask_tell::observe, "trials"_a,
           "Results of proposed configurations: Trials, (config, time_ms) pairs (time None: failed) or dicts "
           "{config or values, time_ms, status, metrics, error}. One call is one group for the strategy.")
      .def("finished", &ask_tell::finished, "Whether the strategy has nothing more to propose.")
      .def_prop_ro("space", [](const ask_tell& a) { return a.space(); })
      .def_prop_ro("name", &ask_tell::name)
      .def_prop_ro(
          "trials",
          [](const ask_tell& a) {
            return std::vector<trial>(a.history().trials().begin(), a.history().trials().end());
          },
          "Every observed trial, in the order told.")
      .def_prop_ro("pending",
                   [](const ask_tell& a) {
                     nb::list l;
                     for (const auto& c : a.pending())
                       l.append(config_to_python(c));
                     return l;
                   })
      .def_prop_ro("evaluations_left", &ask_tell::evaluations_left)
      .def_prop_ro(
          "best",
          [](const ask_tell& a) -> std::optional<trial> {
            if (const auto* b = a.history().best()) return *b;
            return std::nullopt;
          },
          "The fastest ok trial, or None.");

  m.def(
      "strategy",
      [](nb::handle name_or_class, const search_space& space, std::uint64_t seed,
         std::optional<std::size_t> budget, nb::kwargs params) {
        const config_location where{"kforge.strategy()", "params"};
        if (nb::isinstance<nb::str>(name_or_class)) {
          const auto name = nb::cast<std::string>(name_or_class);
          plugin_spec spec{name, to_json(params, "params"), {"kforge.strategy()", ""}};
          auto s = strategy_registry().create(spec);
          return ask_tell(space, std::move(s), seed, budget, name);
        }
        // A class: its declared options checked like a registered strategy's.
        const auto specs = class_options(name_or_class, where);
        const options o(specs, to_json(params, "params"), where);
        auto name = class_name(name_or_class);
        auto s = make_python_strategy(nb::borrow(name_or_class), o, name);
        return ask_tell(space, std::move(s), seed, budget, name);
      },
      "strategy"_a, "space"_a, "seed"_a = 0, "budget"_a = nb::none(), "params"_a,
      "An ask/tell Strategy: a registered strategy by name (random, ga, bo, hybrid, ...) or a Python "
      "strategy "
      "class, with its options as keywords (checked like a config's). `budget` caps the evaluations.");

  m.def(
      "register_strategy",
      [](const std::string& name, nb::object cls, std::optional<std::string> summary) {
        const auto specs = class_options(cls, {"kforge.register_strategy()", name});
        std::string text = summary ? *summary : nb::cast<std::string>(helpers().attr("summary")(cls));
        auto held_cls = std::make_shared<shared_object>(cls);
        strategy_registry().add({name, text, specs, [held_cls, name](const options& o) {
                                   nb::gil_scoped_acquire gil;
                                   auto s = make_python_strategy(held_cls->o, o, name);
                                   s.set_name(name);
                                   return s;
                                 }});
      },
      "name"_a, "cls"_a, "summary"_a = nb::none(),
      "Registers a Python strategy class under `name`: usable by kforge.strategy(name, ...) and in configs "
      "run "
      "from this process ({type: name, params: {...}}), its options checked like a built-in's.");

  m.def(
      "strategies", [] { return strategy_registry().names(); }, "The registered strategies' names.");
  m.def(
      "plugins",
      [] {
        nb::dict d;
        d["strategies"] = entries(strategy_registry());
        d["evaluators"] = entries(evaluator_registry());
        d["transforms"] = entries(transform_registry());
        nb::list files;
        for (const auto& p : loaded_plugins()) {
          nb::dict f;
          f["file"] = nb::str(p.resolved.string().c_str());
          f["added"] = nb::cast(p.added);
          files.append(f);
        }
        d["plugins"] = files;
        return d;
      },
      "Registered strategies, evaluators and transforms with their options, and the loaded plug-ins.");
  m.def(
      "load_plugin",
      [](const std::string& file) {
        const auto& p = load_plugin(file, {"kforge.load_plugin()", "file"});
        return p.added;
      },
      "file"_a, "Loads a shared-library plug-in (docs/plugins.md); returns what it registered.");
}

}  // namespace kf::py
