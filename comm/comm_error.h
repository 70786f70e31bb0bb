// Errors of the communication layer. A lost peer, a timeout and a mismatched collective are
// CommErrors whose message names the rank and the operation; bad launcher variables are
// ConfigErrors (core/error.h).
#pragma once

#include "core/error.h"

namespace h2::comm {

class CommError : public Error {
 public:
  using Error::Error;
};

// Another client than the job's own tried to use the rendezvous store (wrong or missing token).
class AuthError : public CommError {
 public:
  using CommError::CommError;
};

}  // namespace h2::comm
