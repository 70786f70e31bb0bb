# Finds Debian's OpenMP build of OpenBLAS (libopenblas-openmp-dev). We want this variant, not the
# pthread one: inside an OpenMP parallel region it runs single-threaded instead of oversubscribing.
# Defines the imported target OpenBLAS::OpenBLAS.
find_path(OpenBLASOpenMP_INCLUDE_DIR cblas.h
  PATHS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
find_library(OpenBLASOpenMP_LIBRARY openblas
  PATHS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp
  NO_DEFAULT_PATH)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(OpenBLASOpenMP
  REQUIRED_VARS OpenBLASOpenMP_LIBRARY OpenBLASOpenMP_INCLUDE_DIR
  REASON_FAILURE_MESSAGE "install libopenblas-openmp-dev (scripts/install_deps.sh)")
if(OpenBLASOpenMP_FOUND AND NOT TARGET OpenBLAS::OpenBLAS)
  add_library(OpenBLAS::OpenBLAS UNKNOWN IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES
    IMPORTED_LOCATION ${OpenBLASOpenMP_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${OpenBLASOpenMP_INCLUDE_DIR})
endif()
