// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void adamw(const AdamwArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu adamw: not written yet"); }

}  // namespace h2::cpu
