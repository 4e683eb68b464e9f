# kforge's Python package, native parts (docs/plugins.md). Included from CMakeLists.txt.
#
#   kforge._core          the nanobind module (python/src/module*.cpp), linked against libkforge_core.so, written
#                         to <build>/python/kforge/_core.<abi>.so with its stub _core.pyi. The pure-Python
#                         package is python/kforge; its __init__ finds the module in $KFORGE_NATIVE_DIR, next to
#                         itself (pip install), or in <repo>/build/python/kforge (the README's build).
#   libkforge_python.so   python/src/embed.cpp, linked against libpython: loaded with dlopen by libkforge_core.so
#                         only when a python strategy is asked for outside Python (the CLI, the tests), so that
#                         kforge starts on a machine without Python.
#
# KFORGE_BUILD_PYTHON: AUTO (default) builds them when the Python (KFORGE_PYTHON_EXECUTABLE, default
# <repo>/.venv/bin/python; under pip, the building Python) has nanobind, and says why not otherwise; ON
# requires it; OFF skips it.
set(KFORGE_BUILD_PYTHON AUTO CACHE STRING "Build kforge's Python module: AUTO, ON or OFF")
set_property(CACHE KFORGE_BUILD_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(KFORGE_PYTHON_EXECUTABLE "" CACHE FILEPATH "The Python to build kforge's module for (default: <repo>/.venv/bin/python)")

set(_kf_py_why "")
set(_kf_py_exe "${KFORGE_PYTHON_EXECUTABLE}")
if(SKBUILD)
  set(_kf_py_exe "${Python_EXECUTABLE}")
elseif(NOT _kf_py_exe)
  set(_kf_py_exe "${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin/python")
endif()
if(KFORGE_BUILD_PYTHON STREQUAL "OFF")
  set(_kf_py_why "KFORGE_BUILD_PYTHON is OFF")
elseif(NOT EXISTS "${_kf_py_exe}")
  set(_kf_py_why "${_kf_py_exe} is missing (scripts/install-deps creates <repo>/.venv)")
else()
  execute_process(COMMAND "${_kf_py_exe}" -m nanobind --cmake_dir OUTPUT_VARIABLE _kf_nb_dir
    RESULT_VARIABLE _kf_nb_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT _kf_nb_rc EQUAL 0)
    set(_kf_py_why "${_kf_py_exe} has no nanobind (python/requirements.txt; scripts/install-deps)")
  endif()
endif()
if(_kf_py_why)
  if(KFORGE_BUILD_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "KFORGE_BUILD_PYTHON is ON, but ${_kf_py_why}")
  endif()
  message(STATUS "kforge Python module: skipped: ${_kf_py_why}; Python tests that need it will be skipped")
  set(KFORGE_PYTHON_MODULE_DIR "" CACHE INTERNAL "")
  return()
endif()

set(Python_EXECUTABLE "${_kf_py_exe}")
find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module OPTIONAL_COMPONENTS Development.Embed)
find_package(nanobind CONFIG REQUIRED PATHS "${_kf_nb_dir}" NO_DEFAULT_PATH)
message(STATUS "kforge Python module: for ${Python_EXECUTABLE} (Python ${Python_VERSION}), nanobind ${nanobind_VERSION}")

set(KFORGE_PYTHON_MODULE_DIR "${CMAKE_CURRENT_BINARY_DIR}/python/kforge" CACHE INTERNAL "where kforge._core is built")
file(GLOB _kf_py_sources CONFIGURE_DEPENDS python/src/module*.cpp)
nanobind_add_module(kforge_python_module NB_STATIC ${_kf_py_sources})
set_target_properties(kforge_python_module PROPERTIES OUTPUT_NAME _core
  LIBRARY_OUTPUT_DIRECTORY "${KFORGE_PYTHON_MODULE_DIR}")
target_include_directories(kforge_python_module PRIVATE python/src)
target_link_libraries(kforge_python_module PRIVATE kforge_core)
# Only kforge's own sources get kforge's warnings; nanobind's headers are its own business.
set_source_files_properties(${_kf_py_sources} PROPERTIES COMPILE_OPTIONS "${KFORGE_WARNINGS};-Wno-shadow=local")

# The stub, for editors: generated from the built module (nanobind's stubgen); python/kforge/_core.pyi is
# the committed copy, which tests/python/test_kforge_package.py compares with this one.
add_custom_command(OUTPUT "${KFORGE_PYTHON_MODULE_DIR}/_core.pyi"
  COMMAND ${CMAKE_COMMAND} -E env "KFORGE_NATIVE_DIR=${KFORGE_PYTHON_MODULE_DIR}"
          "PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/python" "${Python_EXECUTABLE}" -m nanobind.stubgen
          -q -m kforge._core -o "${KFORGE_PYTHON_MODULE_DIR}/_core.pyi"
  DEPENDS kforge_python_module
  COMMENT "Generating the stub of kforge._core")
add_custom_target(kforge_python_stub ALL DEPENDS "${KFORGE_PYTHON_MODULE_DIR}/_core.pyi")

# libkforge_python.so: the embedded interpreter for programs that are not Python.
if(Python_Development.Embed_FOUND)
  add_library(kforge_python SHARED python/src/embed.cpp)
  target_link_libraries(kforge_python PRIVATE Python::Python)
  target_compile_options(kforge_python PRIVATE ${KFORGE_WARNINGS})
  target_compile_definitions(kforge_python PRIVATE
    KFORGE_PYTHON_EXE="${Python_EXECUTABLE}"
    KFORGE_SOURCE_PACKAGE_DIR="${CMAKE_CURRENT_SOURCE_DIR}/python"
    KFORGE_BUILD_NATIVE_DIR="${KFORGE_PYTHON_MODULE_DIR}")
  set_target_properties(kforge_python PROPERTIES OUTPUT_NAME kforge_python INSTALL_RPATH "$ORIGIN")
  # Whoever may ask for a python strategy finds it built.
  add_dependencies(kforge kforge_python kforge_python_module)
  install(TARGETS kforge_python LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT kforge)
  # Test and benchmark programs that create python strategies (the conformance suite runs the example).
  foreach(_kf_t kforge_unit_tests kforge_conformance_tests kforge_bench)
    if(TARGET ${_kf_t})
      target_compile_definitions(${_kf_t} PRIVATE KFORGE_HAVE_PYTHON=1)
      add_dependencies(${_kf_t} kforge_python kforge_python_module)
    endif()
  endforeach()
else()
  message(STATUS "kforge Python module: ${Python_EXECUTABLE} has no shared libpython; python strategies run "
                 "from Python only (the CLI cannot embed it)")
endif()
# The package, installed beside the libraries: <prefix>/lib/kforge/python/kforge (libkforge_python.so looks
# there first).
install(DIRECTORY python/kforge DESTINATION ${CMAKE_INSTALL_LIBDIR}/kforge/python COMPONENT kforge
  PATTERN __pycache__ EXCLUDE)
install(TARGETS kforge_python_module LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/kforge/python/kforge
  COMPONENT kforge)
set_target_properties(kforge_python_module PROPERTIES INSTALL_RPATH "$ORIGIN/../../..")

# pip install . (scikit-build-core, pyproject.toml): the wheel holds the package, the module and
# libkforge_core.so beside it.
if(SKBUILD)
  # (The pure-Python files come from pyproject.toml's wheel.packages.)
  install(TARGETS kforge_python_module LIBRARY DESTINATION kforge COMPONENT python)
  install(TARGETS kforge_core LIBRARY DESTINATION kforge COMPONENT python)
  install(FILES "${KFORGE_PYTHON_MODULE_DIR}/_core.pyi" DESTINATION kforge COMPONENT python)
  set_target_properties(kforge_python_module PROPERTIES INSTALL_RPATH "$ORIGIN")
endif()
