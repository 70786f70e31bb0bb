// What the CPU kernels keep between calls on one device (cpu:0 or a virtual chip): which library
// runs its GEMMs and that library's cached state, and RoPE's tables. A device owns one; kernels
// reach it through their stream (Stream::native_handle() of a CPU-executed stream), so nothing is
// process-global.
#pragma once

#include <string>

#include "backends/cpu/kernels/gemm_onednn.h"
#include "backends/cpu/kernels/rope_tables.h"
#include "core/device.h"

namespace h2::cpu {

// Who runs the matmul op's GEMMs. oneDNN by default: 1.04-1.68x OpenBLAS on 15 of the 18 GEMMs
// of a small training step, level on a 124M model's, 1.28x on the whole small step
// (docs/performance.md, "GEMM library");
// OpenBLAS stays for the GEMMs issued inside the kernels' own parallel regions (low-precision
// tiles) and as the H2_CPU_GEMM=openblas fallback.
enum class GemmProvider { onednn, openblas };

std::string gemm_provider_name(GemmProvider provider);
// The kernels that library runs in this process, which its own settings choose as well as the
// CPU (ONEDNN_MAX_CPU_ISA, OPENBLAS_CORETYPE): oneDNN's effective ISA or OpenBLAS's core, e.g.
// "onednn avx512_core_bf16", "openblas Haswell".
std::string gemm_kernels_name(GemmProvider provider);
// "onednn" or "openblas"; anything else throws ConfigError naming `where` and the value.
GemmProvider parse_gemm_provider(const std::string& name, const std::string& where);

// Whether fp8_blockwise's K-block GEMMs run in H2's kernel (kernels/kblock_gemm.h) rather than as
// one oneDNN GEMM per block: H2_CPU_KBLOCK_GEMM (auto, h2 or onednn; ConfigError naming it for
// anything else, or for h2 on a CPU without AVX512_BF16). auto is H2's kernel wherever it runs,
// on AMX's tiles where the CPU has them.
bool h2_kblock_gemm_from_env();

class KernelContext {
 public:
  explicit KernelContext(GemmProvider gemm, bool h2_kblock_gemm = false)
      : gemm_provider_(gemm), h2_kblock_gemm_(h2_kblock_gemm) {}
  GemmProvider gemm_provider() const { return gemm_provider_; }
  OneDnnGemm& onednn() { return onednn_; }
  RopeTables& rope_tables() { return rope_tables_; }
  bool h2_kblock_gemm() const { return h2_kblock_gemm_; }

 private:
  GemmProvider gemm_provider_;
  const bool h2_kblock_gemm_;
  OneDnnGemm onednn_;
  RopeTables rope_tables_;
};

// The context of the device that `stream` belongs to; throws if the stream is not one a CPU
// kernel may run on.
KernelContext& kernel_context(Stream& stream);

}  // namespace h2::cpu
