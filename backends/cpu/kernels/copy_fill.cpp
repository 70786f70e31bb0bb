// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void copy(const CopyArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu copy: not written yet"); }

void fill(const FillArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu fill: not written yet"); }

}  // namespace h2::cpu
