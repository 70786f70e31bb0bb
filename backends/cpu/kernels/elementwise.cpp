// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void add(const AddArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu add: not written yet"); }

void swiglu_fwd(const SwigluFwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu swiglu_fwd: not written yet"); }

void swiglu_bwd(const SwigluBwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu swiglu_bwd: not written yet"); }

}  // namespace h2::cpu
