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

// Who runs the K-block GEMMs of FP32 block scales along K (fp8_blockwise), each block's sums
// promoted with its scales: H2's AVX512_BF16 kernel (kernels/kblock_gemm.h, on AMX's tiles where
// the CPU has them), H2's FP32 kernels in AVX-512 or AVX2 registers (kernels/kblock_fp32.h; as
// there are no bf16 GEMMs where they run, they also take per-tensor, MX and NVFP4 operands, whose
// scales fold into exact values), or the libraries' routes (qmatmul.cpp: a oneDNN bf16 GEMM per
// block where oneDNN has bf16 instructions, else FP32 tiles of scaled values into the SGEMM,
// summed over all of K at once).
enum class KBlockKernel { library, h2_avx512_bf16, h2_avx512, h2_avx2 };

// H2_CPU_KBLOCK_GEMM: auto (the default) and h2 are the first of H2's kernels that runs here:
// AVX512_BF16, AVX-512 (AVX512F and AVX512BW), AVX2 (with FMA); where none does, auto is the
// libraries' and h2 a ConfigError. onednn is the libraries'. ConfigError naming the knob for
// anything else. H2_CPU_MAX_ISA's cap counts as the CPU.
KBlockKernel kblock_kernel_from_env();

class KernelContext {
 public:
  explicit KernelContext(GemmProvider gemm, KBlockKernel kblock = KBlockKernel::library)
      : gemm_provider_(gemm), kblock_kernel_(kblock) {}
  GemmProvider gemm_provider() const { return gemm_provider_; }
  OneDnnGemm& onednn() { return onednn_; }
  RopeTables& rope_tables() { return rope_tables_; }
  KBlockKernel kblock_kernel() const { return kblock_kernel_; }

 private:
  GemmProvider gemm_provider_;
  const KBlockKernel kblock_kernel_;
  OneDnnGemm onednn_;
  RopeTables rope_tables_;
};

// The context of the device that `stream` belongs to; throws if the stream is not one a CPU
// kernel may run on.
KernelContext& kernel_context(Stream& stream);

}  // namespace h2::cpu
