#include <nanobind/stl/string.h>

#include <cmath>

#include "convert.hpp"

namespace kf::py {

nb::object to_python(const nlohmann::json& j) {
  using t = nlohmann::json::value_t;
  switch (j.type()) {
    case t::null:
    case t::discarded:
      return nb::none();
    case t::boolean:
      return nb::bool_(j.get<bool>());
    case t::number_integer:
      return nb::int_(j.get<std::int64_t>());
    case t::number_unsigned:
      return nb::steal(PyLong_FromUnsignedLongLong(j.get<std::uint64_t>()));
    case t::number_float:
      return nb::float_(j.get<double>());
    case t::string:
      return nb::str(j.get_ref<const std::string&>().c_str(), j.get_ref<const std::string&>().size());
    case t::array: {
      nb::list l;
      for (const auto& x : j)
        l.append(to_python(x));
      return l;
    }
    case t::object: {
      nb::dict d;
      for (const auto& [k, v] : j.items())
        d[nb::str(k.c_str(), k.size())] = to_python(v);
      return d;
    }
    case t::binary:
      break;
  }
  return nb::none();
}

nlohmann::json to_json(nb::handle h, const std::string& what) {
  if (h.is_none()) return nullptr;
  if (nb::isinstance<nb::bool_>(h)) return nb::cast<bool>(h);
  if (nb::isinstance<nb::int_>(h)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(h.ptr(), &overflow);
    if (overflow > 0) return static_cast<std::uint64_t>(PyLong_AsUnsignedLongLong(h.ptr()));
    if (overflow < 0) throw nb::type_error((what + ": integer below -2^63").c_str());
    return static_cast<std::int64_t>(v);
  }
  if (nb::isinstance<nb::float_>(h)) return nb::cast<double>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (PyDict_Check(h.ptr())) {
    nlohmann::json out = nlohmann::json::object();
    for (auto [k, v] : nb::borrow<nb::dict>(h)) {
      if (!nb::isinstance<nb::str>(k)) throw nb::type_error((what + ": keys must be strings").c_str());
      const auto key = nb::cast<std::string>(k);
      out[key] = to_json(v, what + "." + key);
    }
    return out;
  }
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    nlohmann::json out = nlohmann::json::array();
    std::size_t i = 0;
    for (auto x : h)
      out.push_back(to_json(x, what + "[" + std::to_string(i++) + "]"));
    return out;
  }
  // numpy scalars and other numbers: through their Python int/float value.
  if (PyIndex_Check(h.ptr())) return to_json(nb::steal(PyNumber_Index(h.ptr())), what);
  if (PyFloat_Check(h.ptr()) || nb::hasattr(h, "__float__")) return to_json(nb::float_(h), what);
  throw nb::type_error(
      (what + ": cannot be written in a config (" +
       nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))))) +
       "); use dicts, lists, strings, numbers, booleans and None")
          .c_str());
}

nb::object to_python(const value& v) {
  switch (v.type()) {
    case value::kind::none:
      return nb::none();
    case value::kind::boolean:
      return nb::bool_(v.as_bool());
    case value::kind::integer:
      return nb::int_(v.as_int());
    case value::kind::real:
      return nb::float_(v.as_real());
    case value::kind::string:
      return nb::str(v.as_string().c_str(), v.as_string().size());
    case value::kind::list: {
      nb::list l;
      for (const auto& x : v.as_list())
        l.append(to_python(x));
      return l;
    }
  }
  return nb::none();
}

value to_value(nb::handle h, const std::string& what) {
  if (h.is_none()) return {};
  if (nb::isinstance<nb::bool_>(h)) return nb::cast<bool>(h);
  if (nb::isinstance<nb::int_>(h) || (PyIndex_Check(h.ptr()) && !nb::isinstance<nb::float_>(h)))
    return static_cast<long long>(nb::cast<std::int64_t>(nb::steal(PyNumber_Index(h.ptr()))));
  if (nb::isinstance<nb::float_>(h) || nb::hasattr(h, "__float__")) return nb::cast<double>(nb::float_(h));
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr())) {
    value_list l;
    for (auto x : h)
      l.push_back(to_value(x, what));
    return l;
  }
  throw nb::type_error((what + ": expected None, a bool, int, float, str or a list of them").c_str());
}

nb::tuple config_to_python(const config& c) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(c.size()));
  if (!t) throw nb::python_error();
  for (std::size_t i = 0; i < c.size(); ++i)
    PyTuple_SET_ITEM(t, static_cast<Py_ssize_t>(i), PyLong_FromUnsignedLong(c[i]));
  return nb::steal<nb::tuple>(t);
}

config config_from_python(const search_space& space, nb::handle h) {
  const auto params = space.params();
  if (PyDict_Check(h.ptr())) {
    std::map<std::string, value, std::less<>> values;
    for (auto [k, v] : nb::borrow<nb::dict>(h)) {
      if (!nb::isinstance<nb::str>(k)) throw error("a configuration's keys are parameter names (strings)");
      const auto name = nb::cast<std::string>(k);
      values.emplace(name, to_value(v, name));
    }
    for (const auto& [name, v] : values)
      if (!space.param_index(name))
        throw error("a configuration names '" + name + "', which is not a parameter");
    return space.from_values(values, false);
  }
  // The fast path: a tuple or list of Python ints.
  const bool is_tuple = PyTuple_Check(h.ptr()), is_list = PyList_Check(h.ptr());
  if (!is_tuple && !is_list && !PySequence_Check(h.ptr()))
    throw error(
        "a configuration is a tuple of value indices (one per parameter) or a dict {parameter: value}");
  nb::object seq = (is_tuple || is_list) ? nb::borrow(h) : nb::steal(PySequence_Tuple(h.ptr()));
  if (!seq.is_valid()) throw nb::python_error();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  if (static_cast<std::size_t>(n) != params.size())
    throw error("a configuration has " + std::to_string(n) + " indices, the space " +
                std::to_string(params.size()) + " parameters");
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  config c(params.size());
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long x = PyLong_AsLongLong(items[i]);
    if (x == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw error("a configuration's index " + std::to_string(i) + " (" + params[i].name +
                  ") is not an integer");
    }
    if (x < 0 || static_cast<std::size_t>(x) >= params[i].values.size())
      throw error("a configuration's index " + std::to_string(x) + " for " + params[i].name +
                  " is out of range (0.." + std::to_string(params[i].values.size() - 1) + ")");
    c[i] = static_cast<std::uint32_t>(x);
  }
  return c;
}

status status_from_python(nb::handle h) {
  const auto name = nb::cast<std::string>(nb::str(h));
  if (auto s = status_from_string(name)) return *s;
  throw nb::value_error(
      ("unknown status '" + name +
       "' (expected ok, invalid, compile_failed, launch_failed, wrong_result, timeout, crashed)")
          .c_str());
}

}  // namespace kf::py
