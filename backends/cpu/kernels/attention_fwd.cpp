// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void attention_fwd(const AttentionFwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu attention_fwd: not written yet"); }

}  // namespace h2::cpu
