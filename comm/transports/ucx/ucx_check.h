// H2_UCX_CHECK: every UCX call that returns a status goes through it.
#pragma once

#include <ucs/type/status.h>

#include "comm/comm_error.h"

#define H2_UCX_CHECK(call)                                    \
  do {                                                        \
    const ucs_status_t h2_ucx_status_ = (call);               \
    if (h2_ucx_status_ != UCS_OK) [[unlikely]]                \
      H2_THROW(::h2::comm::CommError, "{} failed: {}", #call, \
               ::ucs_status_string(h2_ucx_status_));          \
  } while (0)
