// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void sum(const SumArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu sum: not written yet"); }

void sum_squares(const SumArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu sum_squares: not written yet"); }

}  // namespace h2::cpu
