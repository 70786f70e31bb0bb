// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void cross_entropy_fwd(const CrossEntropyFwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu cross_entropy_fwd: not written yet"); }

void cross_entropy_bwd(const CrossEntropyBwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu cross_entropy_bwd: not written yet"); }

}  // namespace h2::cpu
