// Checked NCCL calls for comm/vendors/nccl: H2_NCCL_CHECK(expr) throws CommError with file:line,
// the call's text, NCCL's name for the status and its last error message. CUDA runtime calls use
// the CUDA backend's H2_CUDA_CHECK (backends/cuda/cuda_check.h). Calls on a non-blocking
// communicator that may answer ncclInProgress go through the communicator's own completion check
// instead (NcclCommunicator::State::complete, nccl_state.h).
#pragma once

#include <fmt/format.h>
#include <nccl.h>

#include <string>

#include "comm/comm_error.h"
#include "core/error.h"

namespace h2::comm::nccl {

// "ncclInvalidArgument: invalid argument (last error: ...)" for messages.
inline std::string describe_nccl(ncclResult_t status, ncclComm_t comm = nullptr) {
  const char* last = ncclGetLastError(comm);
  std::string out = ncclGetErrorString(status);
  if (last != nullptr && *last != '\0') out += fmt::format(" (last NCCL error: {})", last);
  return out;
}

[[noreturn]] inline void throw_nccl_error(ncclResult_t status, const char* call, const char* file,
                                          int line, ncclComm_t comm = nullptr) {
  throw CommError(fmt::format("{} failed: {}", call, describe_nccl(status, comm)),
                  ::h2::SourceLine{file, line});
}

}  // namespace h2::comm::nccl

#define H2_NCCL_CHECK(expr)                                                           \
  do {                                                                                \
    ncclResult_t h2_nccl_status_ = (expr);                                            \
    if (h2_nccl_status_ != ncclSuccess)                                               \
      ::h2::comm::nccl::throw_nccl_error(h2_nccl_status_, #expr, __FILE__, __LINE__); \
  } while (0)
