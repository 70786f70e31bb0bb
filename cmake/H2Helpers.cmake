# Small helpers shared by the folder CMakeLists: one way to declare a test and a backend.

# h2_add_test(NAME SOURCES... LIBS lib... LABELS label...)
# One GoogleTest executable; every test case becomes a CTest test carrying LABELS
# (unit, multiproc, cuda, slow: see docs/architecture.md).
function(h2_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()

# h2_add_backend(NAME SOURCES...): a backend library that may depend on core only.
function(h2_add_backend name)
  add_library(h2_backend_${name} STATIC ${ARGN})
  target_link_libraries(h2_backend_${name} PUBLIC h2_core)
endfunction()
