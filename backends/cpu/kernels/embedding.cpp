// PLACEHOLDER: being written.
#include "backends/cpu/kernels/kernels.h"
#include "core/error.h"

namespace h2::cpu {

void embedding_fwd(const EmbeddingFwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu embedding_fwd: not written yet"); }

void embedding_bwd(const EmbeddingBwdArgs&, Stream&) { H2_THROW(UnsupportedError, "cpu embedding_bwd: not written yet"); }

}  // namespace h2::cpu
