# cmake --install: headers, libkforge_core.so, the programs, and a CMake package, so that an out-of-tree
# project's find_package(kforge) gives kforge::core (docs/plugins.md). Included from CMakeLists.txt.
#
# Layout under the prefix: include/kforge/*.hpp, lib/libkforge_core.so (+ libkforge_python.so and
# lib/kforge/python/kforge when the Python module is built), bin/kforge, bin/kforge-worker,
# lib/cmake/kforge/kforgeConfig.cmake. Installed programs find the library through RPATH $ORIGIN/../lib.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The core as a plug-in's link target: calls between its own functions stay direct (no interposition: the
# library is not meant to have its functions replaced), it must resolve every symbol itself.
set_target_properties(kforge_core PROPERTIES EXPORT_NAME core OUTPUT_NAME kforge_core
  VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  INSTALL_RPATH "$ORIGIN")
target_compile_options(kforge_core PRIVATE -fno-semantic-interposition)
target_link_options(kforge_core PRIVATE -Wl,--no-undefined)
target_include_directories(kforge_core INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# The embedded default experiment is read by the core (document.cpp): it lives in the library.
set_target_properties(kforge_embedded PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_link_libraries(kforge_core PRIVATE $<BUILD_INTERFACE:kforge_embedded>)
add_library(kforge::core ALIAS kforge_core)
set_target_properties(kforge kforge-worker PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
# Tests and benchmarks reach into what the core links privately (SQLite, yaml-cpp, zlib, xxhash, NVRTC):
# with a static core they inherited it; with the shared one they name it.
foreach(_kf_t kforge_unit_tests kforge_conformance_tests kforge_replay_tests kforge_gpu_tests kforge_mpi_tests
    kforge_bench)
  if(TARGET ${_kf_t})
    target_link_libraries(${_kf_t} PRIVATE SQLite::SQLite3 yaml-cpp ZLIB::ZLIB ${XXHASH_LIBRARY}
      ${KFORGE_NVRTC_LIBRARY} ${CMAKE_DL_LIBS})
  endif()
endforeach()

install(TARGETS kforge_core EXPORT kforge_targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT kforge
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS kforge kforge-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT kforge)
install(DIRECTORY include/kforge DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT kforge)
set(KFORGE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kforge)
install(EXPORT kforge_targets NAMESPACE kforge:: FILE kforgeTargets.cmake DESTINATION ${KFORGE_CMAKE_DIR}
  COMPONENT kforge)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kforgeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kforgeConfig.cmake INSTALL_DESTINATION ${KFORGE_CMAKE_DIR})
# A plug-in built against 0.1.x loads into 0.1.y; the run-time ABI check (kforge/plugin.hpp) is the guard.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kforgeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kforgeConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/kforgeConfigVersion.cmake
  DESTINATION ${KFORGE_CMAKE_DIR} COMPONENT kforge)

if(KFORGE_BUILD_TESTS)
  # The example plug-in built against the INSTALLED package (not this build tree) and run by the installed
  # kforge: cmake --install into a temporary prefix, configure and build examples/plugin there, kforge run
  # --plugin (cmake/test_installed_plugin.sh).
  add_test(NAME plugin.example_against_installed_package
    COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_installed_plugin.sh ${CMAKE_COMMAND} ${CMAKE_CURRENT_BINARY_DIR}
            ${CMAKE_CURRENT_SOURCE_DIR}/examples/plugin ${CMAKE_CURRENT_BINARY_DIR}/plugin-example-test)
  set_tests_properties(plugin.example_against_installed_package PROPERTIES LABELS "unit;plugin" TIMEOUT 600)

  # Plug-ins of the loader's tests (tests/plugins): one good, one built as if against another ABI, one
  # that throws while registering. MODULE libraries linked against kforge_core, as a user's would be.
  foreach(_kf_plugin good wrong_abi throws)
    add_library(kforge_test_plugin_${_kf_plugin} MODULE tests/plugins/test_plugin.cpp)
    target_link_libraries(kforge_test_plugin_${_kf_plugin} PRIVATE kforge_core)
    target_compile_options(kforge_test_plugin_${_kf_plugin} PRIVATE ${KFORGE_WARNINGS})
    string(TOUPPER ${_kf_plugin} _kf_upper)
    target_compile_definitions(kforge_test_plugin_${_kf_plugin} PRIVATE KFORGE_TEST_PLUGIN_${_kf_upper})
    set_target_properties(kforge_test_plugin_${_kf_plugin} PROPERTIES PREFIX "" OUTPUT_NAME test_plugin_${_kf_plugin}
      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/test-plugins)
    add_dependencies(kforge_unit_tests kforge_test_plugin_${_kf_plugin})
  endforeach()
endif()
