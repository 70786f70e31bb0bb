// What the CPU kernels keep between calls on one device (cpu:0 or a virtual chip): which library
// runs its GEMMs and that library's cached state. A device owns one; kernels reach it through
// their stream (Stream::native_handle() of a CPU-executed stream), so nothing is process-global.
#pragma once

#include <string>

#include "backends/cpu/kernels/gemm_onednn.h"
#include "core/device.h"

namespace h2::cpu {

// Who runs the matmul op's GEMMs. oneDNN by default: 1.04-1.68x OpenBLAS on 15 of the 18 GEMMs
// of a small training step, level on a 124M model's, 1.28x on the whole small step
// (docs/performance.md, "GEMM library");
// OpenBLAS stays for the GEMMs issued inside the kernels' own parallel regions (attention blocks,
// low-precision tiles) and as the H2_CPU_GEMM=openblas fallback.
enum class GemmProvider { onednn, openblas };

std::string gemm_provider_name(GemmProvider provider);
// "onednn" or "openblas"; anything else throws ConfigError naming `where` and the value.
GemmProvider parse_gemm_provider(const std::string& name, const std::string& where);

class KernelContext {
 public:
  explicit KernelContext(GemmProvider gemm) : gemm_provider_(gemm) {}
  GemmProvider gemm_provider() const { return gemm_provider_; }
  OneDnnGemm& onednn() { return onednn_; }

 private:
  GemmProvider gemm_provider_;
  OneDnnGemm onednn_;
};

// The context of the device that `stream` belongs to; throws if the stream is not one a CPU
// kernel may run on.
KernelContext& kernel_context(Stream& stream);

}  // namespace h2::cpu
