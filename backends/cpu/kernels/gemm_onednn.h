// Batched row-major GEMMs through oneDNN's matmul primitive (libdnnl, Debian's OpenMP build),
// which picks its kernel by the CPU it runs on (AVX2, AVX-512, AVX512_BF16, AMX), never by the
// machine that built H2, up to H2_CPU_MAX_ISA (core/cpu_features.h). A primitive is made once per
// shape and kept: making one costs 50-120 us, running a small one 10-100 us
// (bench/gemm_library_bench.cpp).
//
// Shapes: out (batch, M, N) = alpha * op(a) @ op(b) + beta * out, with a (batch, M, K) or
// (batch, K, M) stored when trans_a, b (batch or 1, K, N) or (.., N, K) when trans_b (1: one b
// shared by every batch entry), out contiguous; a and b contiguous too, or (batch 1) rows of a
// wider matrix: lda, ldb elements apart (a K block of a row-major operand). Element types: f32
// everywhere, or bf16 a and b with a bf16 or f32 out (only where the CPU has a bf16 kernel:
// native_bf16()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"

namespace h2::cpu {

struct GemmDims {
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool b_shared = false;     // b is one (K, N) / (N, K) matrix for every batch entry
  int64_t lda = 0, ldb = 0;  // row strides of a and b as stored; 0: dense (batch 1 otherwise)
};

struct GemmCall {
  GemmDims dims;
  float alpha = 1, beta = 0;
  DType in = DType::f32;   // a and b: f32 or bf16
  DType out = DType::f32;  // f32, or bf16 when in is bf16
};

class OneDnnGemm {
 public:
  // Throws ConfigError for an H2_CPU_MAX_ISA that is no level, or that oneDNN, having
  // dispatched already, can no longer be held to.
  OneDnnGemm();
  ~OneDnnGemm();
  OneDnnGemm(const OneDnnGemm&) = delete;
  OneDnnGemm& operator=(const OneDnnGemm&) = delete;

  // Whether oneDNN runs bf16 x bf16 GEMMs natively on this CPU (AVX512_BF16 or AMX, as
  // H2_CPU_MAX_ISA leaves them; elsewhere it has no bf16 matmul, or an emulated one slower than
  // f32, and callers widen to f32).
  bool native_bf16() const { return native_bf16_; }
  // The instruction set oneDNN dispatches to in this process (its effective ISA, after
  // H2_CPU_MAX_ISA and ONEDNN_MAX_CPU_ISA): "avx2", "avx512_core_bf16", ...
  static std::string kernel_isa();
  // Runs `call` on `threads` OpenMP threads (1 inside a parallel region). Throws Error naming
  // the shape if oneDNN refuses it. Not from two threads at once: the primitives share the
  // library's scratchpad (one primitive run by two threads together gave wrong sums).
  void run(const GemmCall& call, const void* a, const void* b, void* out, int threads);

  // For several threads of one parallel region, each running its own GEMMs: the bytes of
  // workspace `call` needs (call it before the region: it makes the primitive), and the run on
  // the calling thread alone with `scratchpad` (`bytes` of this thread's own, 64-byte aligned;
  // Error if the primitive needs more). The primitives are made apart from run()'s, with a
  // caller-owned scratchpad, so that concurrent runs share nothing mutable.
  size_t scratchpad_bytes(const GemmCall& call);
  void run_alone(const GemmCall& call, const void* a, const void* b, void* out, void* scratchpad,
                 size_t bytes);

 private:
  void execute(const GemmCall& call, bool user_scratchpad, const void* a, const void* b, void* out,
               void* scratchpad, size_t bytes);

  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool native_bf16_ = false;
};

}  // namespace h2::cpu
