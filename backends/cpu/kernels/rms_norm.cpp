// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void rms_norm_fwd(const RmsNormFwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu rms_norm_fwd: not written yet"); }

void rms_norm_bwd(const RmsNormBwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu rms_norm_bwd: not written yet"); }

}  // namespace h2::cpu
