// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void rope_fwd(const RopeArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu rope_fwd: not written yet"); }

void rope_bwd(const RopeArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu rope_bwd: not written yet"); }

}  // namespace h2::cpu
