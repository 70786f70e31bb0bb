# h2_comm_core: what every Communicator shares (argument checks, reduce-op names). Included from
# comm/CMakeLists.txt; other parts of comm/ append their sources afterwards with
# target_sources(h2_comm_core PRIVATE ...), so this file only creates the library.
add_library(h2_comm_core STATIC
  ${CMAKE_CURRENT_LIST_DIR}/collective_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reduce_op.cpp)
target_link_libraries(h2_comm_core PUBLIC h2_core)
