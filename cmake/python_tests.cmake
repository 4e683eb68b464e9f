# The Python tests (tests/python, pytest from <repo>/.venv) as ctest tests labelled `python`, one per
# test file so that ctest runs them in parallel. Included at the end of CMakeLists.txt.
#
# Whether .venv exists is decided when the test runs, not when cmake configures: without it (or
# without pytest in it) each test prints why and exits 77, which ctest reports as skipped
# (SKIP_RETURN_CODE), so the tests never vanish silently. scripts/install-deps creates .venv.
if(KFORGE_BUILD_TESTS)
  set(_kf_venv_python "${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin/python")
  set(_kf_python_tests "${CMAKE_CURRENT_SOURCE_DIR}/tests/python")
  if(NOT EXISTS "${_kf_venv_python}")
    message(STATUS "Python tests: ${_kf_venv_python} is missing; they will be skipped (scripts/install-deps)")
  endif()
  file(GLOB _kf_pytest_files CONFIGURE_DEPENDS "${_kf_python_tests}/test_*.py")
  foreach(_kf_file IN LISTS _kf_pytest_files)
    get_filename_component(_kf_stem "${_kf_file}" NAME_WE)
    add_test(NAME "python.${_kf_stem}"
      COMMAND sh -c [[
if ! "$1" -c "import pytest" >/dev/null 2>&1; then
  echo "SKIP: $1 with pytest is missing (run scripts/install-deps to create the Python environment)"
  exit 77
fi
# Files marked "# kforge: needs the native module" skip, saying why, where kforge._core was not built.
if grep -q "^# kforge: needs the native module" "$2" && ! ls "$KFORGE_NATIVE_DIR"/_core*.so >/dev/null 2>&1; then
  echo "SKIP: kforge's native module was not built (cmake said why: nanobind missing from .venv?), $2 needs it"
  exit 77
fi
exec "$1" -m pytest -q -p no:cacheprovider "$2"
]] sh "${_kf_venv_python}" "${_kf_file}"
      WORKING_DIRECTORY "${_kf_python_tests}")
    # KFORGE_NATIVE_DIR: where this build puts kforge._core (cmake/kforge_python.cmake; the folder may not
    # exist). KFORGE_CLI and KFORGE_BUILD_DIR: for tests that run the programs.
    set_tests_properties("python.${_kf_stem}" PROPERTIES
      LABELS python SKIP_RETURN_CODE 77 TIMEOUT 900
      ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1;PYTHONPATH=${CMAKE_CURRENT_SOURCE_DIR}/python;KFORGE_NATIVE_DIR=${CMAKE_CURRENT_BINARY_DIR}/python/kforge;KFORGE_BUILD_DIR=${CMAKE_CURRENT_BINARY_DIR}")
  endforeach()
endif()
