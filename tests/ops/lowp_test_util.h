// Helpers of the low-precision op tests (quantize, qmatmul, their CUDA comparison): a runtime
// whose virtual chips store FP8/FP4 codes, host copies of a QTensor, an independent
// double-precision dequantization straight from the definitions in core/lowp/quant_spec.h, and a
// reference GEMM of the dequantized operands.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/lowp/quant_spec.h"
#include "core/op_args.h"
#include "core/runtime.h"

namespace h2::test {

// One runtime per test process, virtual chips unpaced: cpu:0, vchip:fp8chip (f8 peak),
// vchip:plainchip (f32 and bf16 peaks only), vchip:nof8chip (no FP8/FP4 storage), and cuda
// devices where built and present.
Runtime& lowp_runtime();

// A spec in one line: element format, scale rule, block rows x block columns (0: whole).
inline lowp::QuantSpec spec(lowp::Format f, lowp::ScaleRule rule, int64_t block_rows,
                            int64_t block_cols) {
  return {.element = f, .rule = rule, .block_rows = block_rows, .block_cols = block_cols};
}

// The raw bytes of any tensor (contiguous copy, through host memory).
std::vector<uint8_t> download_bytes(const Tensor& t);

// A QTensor's contents on the host: codes one per element (E2M1 unpacked), the scale bytes or
// values, the nvfp4 global.
struct HostQ {
  lowp::QuantSpec spec;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes;        // rows * cols
  std::vector<float> f32_scales;     // f32_amax
  std::vector<uint8_t> scale_bytes;  // E8M0 or E4M3 codes
  float global = 0;                  // nvfp4
  int64_t scale_cols = 0;            // GC
};
HostQ to_host(const lowp::QTensor& q);

// The FP32/FP64 scale of element (r, k) per quant_spec.h: the f32 value, 2^(e - 127), or
// float(decode_e4m3(sb) * g).
double scale_at(const HostQ& q, int64_t r, int64_t k);
// Every dequantized element, decode(code) * s, row-major.
std::vector<double> dequantize(const HostQ& q);

// alpha * A @ B^T + beta * C in double (A: M x K, B: N x K, C: M x N or empty when beta == 0),
// and the per-element magnitude sum_k |a||b| (the scale of FP32 rounding error).
struct RefGemm {
  std::vector<double> out;
  std::vector<double> magnitude;
};
RefGemm reference_gemm(const std::vector<double>& a, const std::vector<double>& b,
                       const std::vector<double>& c, int64_t M, int64_t N, int64_t K, double alpha,
                       double beta);

// Quantizes host values (R, K) on `device` through ops::quantize; stats (2 f32) when given.
lowp::QTensor quantize_values(Device& device, const std::vector<float>& values, int64_t rows,
                              int64_t cols, const lowp::QuantSpec& spec,
                              DType in_dtype = DType::f32, Tensor* stats = nullptr);

// n normally distributed values with a spread of magnitudes (each scaled by 2^U(-4, 4)).
std::vector<float> spread_values(std::mt19937_64& rng, int64_t n);

}  // namespace h2::test
