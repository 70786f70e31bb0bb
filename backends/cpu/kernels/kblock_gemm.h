// fp8_blockwise's GEMM by H2's own kernel on CPUs with AVX512_BF16: each K block's products summed
// in registers (or, where the CPU has AMX, in its tiles, then stored to L1) and promoted to the
// FP32 accumulator with the block's scales there, as an FP8 tensor core promotes its partial
// sums, instead of one library GEMM per K block into FP32 tiles that a second pass rescales
// (qmatmul.cpp's oneDNN route, for H2_CPU_KBLOCK_GEMM=onednn: on an AMX Xeon the tiles made the
// fp8_blockwise step 1.3x faster than that route, by then batched; its AVX-512 loop ran at 0.63x
// the route's speed before that).
#pragma once

#include "backends/cpu/kernels/quant_operand.h"
#include "core/device.h"
#include "core/op_args.h"

namespace h2::cpu {

// Whether this CPU runs kblock_gemm (AVX512F, AVX512BW, AVX512DQ, AVX512VL and AVX512_BF16; it
// takes AMX's tiles where the CPU has AMX-BF16 too, H2_CPU_MAX_ISA leaves them, Linux grants
// them and K blocks are multiples of 32 wide).
bool kblock_gemm_runs_here();

// Whether kblock_gemm beats the oneDNN route for K blocks kb wide here: always, except on an AMX
// CPU for blocks not a multiple of 32 wide, which its tiles do not take and its AVX-512 loop runs
// at 0.63x the oneDNN route's speed there (performance.md, the AMX Xeon).
bool kblock_gemm_suits(int64_t kb);

// out (M, N) = beta * out + sum_j alpha * diag(sa_j) (A_j @ B_j^T) diag(sb_j) for
// QMatmulArgs a (M, K) and b (N, K) with FP32 scales in 1-row or square K blocks of the same
// width kb (the caller checks: f32_amax rules, kb even), out f32 or bf16. A_j, B_j: the code
// values of K block j (exact in bf16); sa_j, sb_j: their rows' scales in block j.
void kblock_gemm(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                 Stream& stream);

// Whether this CPU runs kblock_gemm_avx2 (AVX2 and FMA) and kblock_gemm_avx512 (AVX512F and
// AVX512BW).
bool kblock_gemm_avx2_runs_here();
bool kblock_gemm_avx512_runs_here();

// What the FP32 K-block GEMMs multiply: the operands' code values, their FP32 block scales
// (f32_amax, one block width on both sides) applied per K block as kblock_gemm applies them; or
// their local values (where both operands' scales fold into exact values,
// QuantOperand::folds_to_bf16: per-tensor, E8M0, NVFP4), one block over all of K with both
// operands' factors in alpha, the products and sums of qmatmul's exact bf16 GEMM.
enum class KBlockValues { codes, local };

// kblock_gemm's product for CPUs without bf16 GEMMs (kblock_fp32.h): the values decoded to FP32,
// each K block's products summed by FMAs and promoted as kblock_gemm promotes them, in 256-bit
// (kblock_avx2.cpp) or 512-bit registers (kblock_avx512.cpp). Any block width; out f32 or bf16.
void kblock_gemm_avx2(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                      KBlockValues values, Stream& stream);
void kblock_gemm_avx512(const QMatmulArgs& args, const QuantOperand& a, const QuantOperand& b,
                        KBlockValues values, Stream& stream);

}  // namespace h2::cpu
