// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void matmul(const MatmulArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu matmul: not written yet"); }

}  // namespace h2::cpu
