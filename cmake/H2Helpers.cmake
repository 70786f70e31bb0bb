# Small helpers shared by the folder CMakeLists: one way to declare a test and a backend.

# h2_add_test(NAME SOURCES... LIBS lib... LABELS label...)
# One GoogleTest executable; every test case becomes a CTest test carrying LABELS
# (unit, multiproc, cuda, slow: see docs/architecture.md).
function(h2_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" ENVIRONMENT "${H2_TEST_ENVIRONMENT}"
                       DISCOVERY_TIMEOUT 60)
endfunction()

# What every test runs with: a given CPU peak for MFU figures. The peak is otherwise measured once
# per machine (5 GEMMs of 2048^3) and cached in the user's home; measured beside other tests it
# is a fraction of the real one and took 30-50 s (CI, a clean build folder).
# tests/backends/cpu_peak_test.cpp measures it on purpose, into temporary caches. One variable
# only: gtest_discover_tests (CMake 3.25) splits a list into separate properties; scripts/test.sh
# also exports OMP_WAIT_POLICY=passive for tests run side by side.
set(H2_TEST_ENVIRONMENT "H2_CPU_PEAK_GFLOPS=100")

# h2_test_environment(): gives H2_TEST_ENVIRONMENT to every add_test of the calling folder (call
# it after them; h2_add_test's tests have it already).
function(h2_test_environment)
  get_property(tests DIRECTORY PROPERTY TESTS)
  if(tests)
    # Scripts may run h2 with a peak of their own: any cache they write stays in the build folder.
    set_property(TEST ${tests} APPEND PROPERTY ENVIRONMENT "${H2_TEST_ENVIRONMENT}"
                                                           "XDG_CACHE_HOME=${PROJECT_BINARY_DIR}/test-cache")
  endif()
endfunction()

# h2_add_capped_runs(TARGET LEVELS level... [FILTER pattern]): runs the GoogleTest executable
# TARGET (all of it, or the cases FILTER matches) once more per level with H2_CPU_MAX_ISA=level
# (core/cpu_features.h), as the tests TARGET_on_LEVEL: the dispatch paths of older CPUs (H2's
# kernels, oneDNN's, and on the AVX2 path OpenBLAS's) forced on this one. Where the CPU has nothing
# above a level, its run repeats the default one; where the kernels were built for more than the
# level (H2_CPU_ARCH native or x86-64-v4), the run stops at load (exit 70, kernel_isa.h) and
# counts as skipped. Call h2_test_environment() after it, as for any add_test.
function(h2_add_capped_runs target)
  cmake_parse_arguments(ARG "" "FILTER" "LEVELS" ${ARGN})
  set(filter "*")
  if(ARG_FILTER)
    set(filter "${ARG_FILTER}")
  endif()
  foreach(level ${ARG_LEVELS})
    add_test(NAME ${target}_on_${level} COMMAND ${target} --gtest_brief=1 --gtest_filter=${filter})
    set(environment H2_CPU_MAX_ISA=${level})
    # The cap does not reach OpenBLAS (attention's block GEMMs, the low-precision tiles): on the
    # AVX2 path it is held to its Haswell kernels as well, which any CPU H2's default build runs
    # on has. (An AVX-512 core name would not load on an AVX2-only CPU, so that level keeps the
    # CPU's own.)
    if(level STREQUAL "avx2")
      list(APPEND environment OPENBLAS_CORETYPE=Haswell)
    endif()
    set_tests_properties(${target}_on_${level} PROPERTIES LABELS unit SKIP_RETURN_CODE 70
                                                          ENVIRONMENT "${environment}")
  endforeach()
endfunction()

# h2_add_backend(NAME SOURCES...): a backend library that may depend on core only.
function(h2_add_backend name)
  add_library(h2_backend_${name} STATIC ${ARGN})
  target_link_libraries(h2_backend_${name} PUBLIC h2_core)
endfunction()

# h2_cpu_arch(TARGET) / h2_cpu_arch(SOURCE FILE...): compiles a target's sources, or single files,
# with -march=${H2_CPU_ARCH} (the top-level CMakeLists explains the choice).
function(h2_cpu_arch kind)
  if(NOT H2_CPU_ARCH)
    return()
  endif()
  if(kind STREQUAL "SOURCE")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -march=${H2_CPU_ARCH})
  else()
    target_compile_options(${kind} PRIVATE -march=${H2_CPU_ARCH})
  endif()
endfunction()
