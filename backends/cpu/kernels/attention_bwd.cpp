// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void attention_bwd(const AttentionBwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu attention_bwd: not written yet"); }

}  // namespace h2::cpu
