// libkforge_python.so: starts a Python interpreter inside a program that is not Python (the kforge CLI, the
// tests) and imports kforge._core, which installs the python strategy bridge (kforge/python_bridge.hpp).
//
// Contract of kforge_python_embed(message, size): returns 0 once kforge._core is imported (the interpreter is
// started on the first call, as the Python this library was built for: its virtual environment's
// site-packages are on sys.path); else non-zero with a one-paragraph reason in `message`. Idempotent and
// thread safe. On return the calling thread does not hold the GIL: kforge takes it for every call into
// Python. The interpreter lives until the process ends (it is never finalised: kforge may call it until
// exit).
#include <Python.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

namespace {

namespace fs = std::filesystem;

fs::path own_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&own_folder), &info) && info.dli_fname)
    return fs::path(info.dli_fname).parent_path();
  return {};
}

// The Python error being raised, as text (with its traceback), cleared.
std::string python_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string out = "unknown Python error";
  if (PyObject* tbm = PyImport_ImportModule("traceback")) {
    if (PyObject* lines = PyObject_CallMethod(tbm, "format_exception", "OOO", type ? type : Py_None,
                                              value ? value : Py_None, tb ? tb : Py_None)) {
      PyObject* empty = PyUnicode_FromString("");
      if (PyObject* joined = PyUnicode_Join(empty, lines)) {
        if (const char* s = PyUnicode_AsUTF8(joined)) out = s;
        Py_DECREF(joined);
      }
      Py_XDECREF(empty);
      Py_DECREF(lines);
    }
    Py_DECREF(tbm);
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return out;
}

// Where the kforge package is: installed beside this library (<lib>/kforge/python), else the source tree
// this library was built from, with the native module in the build tree.
std::string package_setup() {
  const auto installed = own_folder() / "kforge" / "python";
  if (fs::exists(installed / "kforge" / "__init__.py")) return installed.string();
  if (!std::getenv("KFORGE_NATIVE_DIR")) ::setenv("KFORGE_NATIVE_DIR", KFORGE_BUILD_NATIVE_DIR, 0);
  return KFORGE_SOURCE_PACKAGE_DIR;
}

std::string start_and_import() {
  const bool started_here = !Py_IsInitialized();
  if (started_here) {
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;  // SIGINT stays kforge's (a run stops cleanly)
    config.parse_argv = 0;
    // As if KFORGE_PYTHON_EXE had started: its prefix, and its virtual environment's site-packages.
    PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, KFORGE_PYTHON_EXE);
    if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st))
      return std::string("Py_InitializeFromConfig failed (") + (st.err_msg ? st.err_msg : "?") +
             ") for the Python kforge was built with, " KFORGE_PYTHON_EXE;
  }
  // From here on this thread holds the GIL (a fresh interpreter) or takes it (an existing one).
  const PyGILState_STATE gil = PyGILState_Ensure();
  std::string err;
  const std::string dir = package_setup();
  PyObject* sys_path = PySys_GetObject("path");  // borrowed
  PyObject* entry = PyUnicode_FromString(dir.c_str());
  if (sys_path && entry && PySequence_Contains(sys_path, entry) == 0) PyList_Insert(sys_path, 0, entry);
  Py_XDECREF(entry);
  if (PyObject* m = PyImport_ImportModule("kforge._core")) {
    Py_DECREF(m);
  } else {
    err = "importing kforge._core (the kforge package in " + dir + ") failed:\n" + python_error();
  }
  PyGILState_Release(gil);
  // A fresh interpreter's main thread state holds the GIL until released: release it for good, so that any
  // thread may take it.
  if (started_here) (void)PyEval_SaveThread();
  return err;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int kforge_python_embed(char* message, std::size_t size) {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] { error = start_and_import(); });
  if (error.empty()) return 0;
  std::snprintf(message, size, "%s", error.c_str());
  return 1;
}
