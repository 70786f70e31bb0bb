// The qmatmul op against a double-precision GEMM of the operands dequantized independently from
// their codes and scales (tests/ops/lowp_test_util.cpp): mixed specs (blockwise FP8, MXFP8 E4M3
// and E5M2, MXFP4, NVFP4, per-tensor), odd shapes, K spanning several chunks, panels of more
// than 2048 rows, bf16 output, alpha and beta; then the dispatch path on cpu:0 and on virtual
// chips (bit-identical results, pacing at the FP8 peak or the f32 fallback, autocompare).
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/quant_operand.h"
#include "backends/vchip/vchip_backend.h"
#include "core/error.h"
#include "core/half_float.h"
#include "core/op_cost.h"
#include "core/ops.h"
#include "core/tensor_host.h"
#include "tests/ops/lowp_test_util.h"

namespace h2::test {
namespace {

using lowp::Format;
using lowp::QuantSpec;
using lowp::ScaleRule;

const QuantSpec kBlockwiseAct = spec(Format::e4m3, ScaleRule::f32_amax, 1, 128);
const QuantSpec kBlockwiseWeight = spec(Format::e4m3, ScaleRule::f32_amax, 128, 128);
const QuantSpec kBlockwiseE5m2 = spec(Format::e5m2, ScaleRule::f32_amax, 1, 128);
const QuantSpec kBlockwiseE2m1 = spec(Format::e2m1, ScaleRule::f32_amax, 1, 128);
// Narrower K blocks: one AMX tile step per block (32), and blocks that are no whole number of
// steps (48: on an AMX CPU the oneDNN route, elsewhere H2's AVX-512 kernel).
const QuantSpec kBlockwise32 = spec(Format::e4m3, ScaleRule::f32_amax, 1, 32);
const QuantSpec kBlockwise48 = spec(Format::e4m3, ScaleRule::f32_amax, 1, 48);
const QuantSpec kMxE4m3 = spec(Format::e4m3, ScaleRule::e8m0_floor, 1, 32);
const QuantSpec kMxE5m2 = spec(Format::e5m2, ScaleRule::e8m0_ceil, 1, 32);
const QuantSpec kMxfp4 = spec(Format::e2m1, ScaleRule::e8m0_floor, 1, 32);
const QuantSpec kNvfp4 = spec(Format::e2m1, ScaleRule::nvfp4, 1, 16);
const QuantSpec kPerTensorE4m3 = spec(Format::e4m3, ScaleRule::f32_amax, 0, 0);
const QuantSpec kPerTensorE5m2 = spec(Format::e5m2, ScaleRule::f32_amax, 0, 0);

struct Case {
  QuantSpec a, b;
  int64_t M, N, K;
  DType out_dtype = DType::f32;
  float alpha = 1, beta = 0;
};

std::string name(const Case& c) {
  return fmt::format("a {} b {} M={} N={} K={} out {} alpha {} beta {}", lowp::describe(c.a),
                     lowp::describe(c.b), c.M, c.N, c.K, dtype_name(c.out_dtype), c.alpha, c.beta);
}

// Runs the case on `device` and checks it against the reference: max |diff| / max |ref| and, per
// element, |diff| <= 1e-5 * sum_k |a||b| (plus the bf16 rounding of out).
void check_case(const Case& c, Device& device) {
  SCOPED_TRACE(name(c) + " on " + device.str());
  std::mt19937_64 rng(uint64_t(c.M * 131 + c.N * 7 + c.K));
  std::vector<float> av = spread_values(rng, c.M * c.K);
  std::vector<float> bv = spread_values(rng, c.N * c.K);
  std::vector<float> cv = spread_values(rng, c.M * c.N);
  lowp::QTensor a = quantize_values(device, av, c.M, c.K, c.a);
  lowp::QTensor b = quantize_values(device, bv, c.N, c.K, c.b);
  Device& cpu = lowp_runtime().cpu();
  Tensor out;
  if (c.beta != 0) {
    out = tensor_from_floats(cv, {c.M, c.N}, c.out_dtype, cpu).to(device);
    cv = tensor_to_floats(out);  // the rounded values the kernel reads
  } else {
    std::vector<float> nan(size_t(c.M * c.N), std::numeric_limits<float>::quiet_NaN());
    out = tensor_from_floats(nan, {c.M, c.N}, c.out_dtype, cpu).to(device);
  }
  ops::qmatmul({.out = out, .a = a, .b = b, .alpha = c.alpha, .beta = c.beta});
  std::vector<double> c64(cv.begin(), cv.end());
  RefGemm ref = reference_gemm(dequantize(to_host(a)), dequantize(to_host(b)), c64, c.M, c.N, c.K,
                               c.alpha, c.beta);
  std::vector<float> got = tensor_to_floats(out);
  const double rounding = c.out_dtype == DType::f32 ? 0.0 : std::ldexp(1.0, -8);
  double max_diff = 0, max_ref = 0;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(double(got[i]) - ref.out[i]);
    max_diff =
        std::max(max_diff, std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff);
    max_ref = std::max(max_ref, std::fabs(ref.out[i]));
    if (!(diff <= 1e-5 * ref.magnitude[i] + rounding * std::fabs(ref.out[i]))) {
      if (bad++ < 5)
        ADD_FAILURE() << "element " << i << ": got " << got[i] << ", reference " << ref.out[i]
                      << ", sum |a||b| " << ref.magnitude[i];
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_LE(max_diff, (1e-5 + rounding) * max_ref)
      << "max |diff| " << max_diff << ", max |ref| " << max_ref;
}

TEST(Qmatmul, MatchesTheDequantizedReference) {
  Device& cpu = lowp_runtime().cpu();
  const Case cases[] = {
      // DeepSeek-style: 1 x 128 activations against 128 x 128 weights, K over three chunks.
      {kBlockwiseAct, kBlockwiseWeight, 130, 70, 1152},
      {kBlockwiseAct, kBlockwiseWeight, 37, 53, 384},
      // A weight gradient's operands (1 x 128 on both sides), and a ragged last K block (44).
      {kBlockwiseAct, kBlockwiseAct, 29, 35, 512},
      {kBlockwiseAct, kBlockwiseWeight, 17, 140, 300},
      // An odd K (bf16 pairs along K padded with a zero) and tiles of 12 rows plus one of 1.
      {kBlockwiseAct, kBlockwiseWeight, 25, 33, 203},
      // One K block, the first and the last (H2's kernel stores it from the registers).
      {kBlockwiseAct, kBlockwiseWeight, 14, 40, 100},
      // H2's kernel packs b's codes 64 columns at a time, in chunks of 256: K = 258 ends on a
      // single pair (half a 32-bit word), K = 642 crosses chunks; N = 47 leaves a panel of 15
      // rows. E5M2 codes (a hybrid recipe's gradients) and E2M1 nibbles (packed from decoded
      // rows) with block scales along K.
      {kBlockwiseAct, kBlockwiseWeight, 13, 47, 258},
      {kBlockwiseAct, kBlockwiseAct, 26, 64, 642},
      {kBlockwiseE5m2, kBlockwiseE5m2, 15, 33, 320},
      {kBlockwiseAct, kBlockwiseE5m2, 12, 20, 130},
      {kBlockwiseE2m1, kBlockwiseE2m1, 14, 37, 384},
      {kBlockwise32, kBlockwise32, 35, 40, 100},
      {kBlockwise48, kBlockwise48, 19, 33, 150},
      // MX: K a multiple of 32, not of 128.
      {kMxE4m3, kMxE4m3, 37, 53, 96},
      {kMxE4m3, kMxE5m2, 29, 41, 160},
      {kMxfp4, kMxfp4, 33, 17, 96},
      {kNvfp4, kNvfp4, 19, 45, 80},
      {kNvfp4, kNvfp4, 5, 7, 16},
      // Per tensor, K not a multiple of any block.
      {kPerTensorE4m3, kPerTensorE5m2, 23, 31, 203},
      {kPerTensorE4m3, kPerTensorE4m3, 1, 1, 1},
      // One block over a K of three chunks: the FP32 route decodes its second and third chunks
      // from inside the block (QuantOperand::decode_row's partial first block).
      {kPerTensorE4m3, kPerTensorE5m2, 7, 9, 1100},
      // Mixed families and FP4 against FP8.
      {kBlockwiseAct, kNvfp4, 21, 18, 256},
      {kMxfp4, kPerTensorE4m3, 9, 12, 64},
      {kBlockwiseAct, kMxE4m3, 12, 10, 1100},
  };
  for (const Case& c : cases) check_case(c, cpu);
}

TEST(Qmatmul, Bf16OutputAlphaAndBeta) {
  Device& cpu = lowp_runtime().cpu();
  check_case({kMxE4m3, kMxE4m3, 37, 53, 96, DType::bf16}, cpu);
  check_case({kBlockwiseAct, kBlockwiseWeight, 40, 24, 640, DType::f32, 0.5f, -1.5f}, cpu);
  check_case({kBlockwiseAct, kBlockwiseWeight, 33, 20, 384, DType::bf16, 1.5f, 0.5f}, cpu);
  check_case({kBlockwiseAct, kBlockwiseWeight, 14, 40, 100, DType::f32, 1.0f, 0.5f}, cpu);
  // A weight gradient's accumulation (beta 1) over several rows of tiles and panels.
  check_case({kBlockwiseAct, kBlockwiseAct, 30, 70, 256, DType::f32, 1.0f, 1.0f}, cpu);
  // Nine K blocks, rescaled in passes of several (the last one partial), into a bf16 out.
  check_case({kBlockwiseAct, kBlockwiseWeight, 33, 20, 1100, DType::bf16, 1.5f, 0.5f}, cpu);
  check_case({kNvfp4, kMxfp4, 17, 33, 160, DType::bf16, 2.0f, 1.0f}, cpu);
  check_case({kPerTensorE4m3, kPerTensorE4m3, 8, 8, 32, DType::f16, 1.0f, 0.25f}, cpu);
}

// A bf16 out holds the f32 out rounded to nearest even (f32_to_bf16), bit for bit, with the
// same operands: for FP32 block scales, subnormal sums included (alpha 2^-140 takes every sum
// below 2^-126, where a converter that treats subnormal inputs as zero would differ).
TEST(Qmatmul, Bf16OutIsTheF32OutRoundedToNearestEven) {
  Device& cpu = lowp_runtime().cpu();
  std::mt19937_64 rng(5);
  const int64_t M = 37, N = 70, K = 300;
  lowp::QTensor a = quantize_values(cpu, spread_values(rng, M * K), M, K, kBlockwiseAct);
  lowp::QTensor b = quantize_values(cpu, spread_values(rng, N * K), N, K, kBlockwiseWeight);
  for (const float alpha : {1.0f, 0x1p-140f}) {
    SCOPED_TRACE(fmt::format("alpha {}", alpha));
    Tensor f32 = Tensor::zeros({M, N}, DType::f32, cpu),
           bf16 = Tensor::zeros({M, N}, DType::bf16, cpu);
    ops::qmatmul({.out = f32, .a = a, .b = b, .alpha = alpha});
    ops::qmatmul({.out = bf16, .a = a, .b = b, .alpha = alpha});
    const float* wide = f32.data_as<float>();
    const bf16_t* narrow = bf16.data_as<bf16_t>();
    int64_t subnormal = 0, bad = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      subnormal += wide[i] != 0 && std::fabs(wide[i]) < std::numeric_limits<float>::min();
      if (narrow[i].bits != f32_to_bf16(wide[i]) && bad++ < 5) {
        ADD_FAILURE() << "element " << i << ": " << wide[i] << " stored as bf16 bits "
                      << narrow[i].bits << ", rounded " << f32_to_bf16(wide[i]);
      }
    }
    EXPECT_EQ(bad, 0);
    if (alpha < 1) {
      EXPECT_GT(subnormal, M * N / 2) << "the case must reach subnormal sums";
    }
  }
}

TEST(Qmatmul, PanelsOfMoreThan2048Rows) {
  Device& cpu = lowp_runtime().cpu();
  check_case({kMxE4m3, kMxE4m3, 2100, 40, 64}, cpu);                          // two M panels
  check_case({kMxE4m3, kNvfp4, 24, 2100, 64, DType::bf16, 1.0f, 0.5f}, cpu);  // two N panels
  check_case({kBlockwiseAct, kBlockwiseWeight, 2100, 40, 256, DType::bf16, 1.0f, 0.5f}, cpu);
}

// A causal attention's dq is exactly 0 on the first row of every sequence, so an MX-quantized dy
// has blocks of zeros, whose amax of 0 gives E8M0's smallest scale, 2^-127. The exact bf16 route
// still takes them (any scale times 0 is 0), where before the whole GEMM fell back to FP32
// (4 of an mxfp8 step's GEMMs, at twice the time); not a block of tiny nonzero values, whose
// products with a scale below 2^-100 may leave bf16's normal range.
TEST(Qmatmul, MxBlocksOfZerosStillFoldToBf16) {
  Device& cpu = lowp_runtime().cpu();
  const int64_t M = 6, N = 5, K = 64;
  std::mt19937_64 rng(7);
  const std::vector<float> av = spread_values(rng, M * K), bv = spread_values(rng, N * K);
  for (const QuantSpec& s : {kMxE4m3, kMxfp4}) {
    SCOPED_TRACE(lowp::describe(s));
    std::vector<float> zeros = av;  // row 1: +0 and -0
    for (int64_t k = 0; k < K; ++k) zeros[size_t(K + k)] = k % 2 == 0 ? 0.0f : -0.0f;
    const lowp::QTensor a = quantize_values(cpu, zeros, M, K, s);
    const lowp::QTensor b = quantize_values(cpu, bv, N, K, s);
    EXPECT_TRUE(cpu::QuantOperand(a).folds_to_bf16(M));
    Tensor out =
        tensor_from_floats(std::vector<float>(size_t(M * N), 0.0f), {M, N}, DType::f32, cpu);
    ops::qmatmul({.out = out, .a = a, .b = b});
    const RefGemm ref = reference_gemm(dequantize(to_host(a)), dequantize(to_host(b)),
                                       std::vector<double>(size_t(M * N), 0.0), M, N, K, 1, 0);
    const std::vector<float> got = tensor_to_floats(out);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_LE(std::fabs(got[i] - ref.out[i]), 1e-5 * ref.magnitude[i]) << "element " << i;

    // Row 1's first block: amax 1e-35, a scale code below 27, nonzero in odd columns only
    // (E2M1's high nibbles).
    std::vector<float> tiny = av;
    for (int64_t k = 0; k < 32; ++k) tiny[size_t(K + k)] = k % 2 == 1 ? 1e-35f : 0.0f;
    EXPECT_FALSE(cpu::QuantOperand(quantize_values(cpu, tiny, M, K, s)).folds_to_bf16(M));
  }
}

TEST(Qmatmul, EmptyReductionScalesOut) {
  Device& cpu = lowp_runtime().cpu();
  lowp::QTensor a = lowp::QTensor::empty(kPerTensorE4m3, 2, 0, cpu);
  lowp::QTensor b = lowp::QTensor::empty(kPerTensorE4m3, 3, 0, cpu);
  Tensor out = tensor_from_floats(std::vector<float>(6, 2.0f), {2, 3}, DType::f32, cpu);
  ops::qmatmul({.out = out, .a = a, .b = b, .beta = 0.5f});
  EXPECT_EQ(tensor_to_floats(out), std::vector<float>(6, 1.0f));
  ops::qmatmul({.out = out, .a = a, .b = b});
  EXPECT_EQ(tensor_to_floats(out), std::vector<float>(6, 0.0f));
}

TEST(Qmatmul, ShapeErrors) {
  Device& cpu = lowp_runtime().cpu();
  lowp::QTensor a = lowp::QTensor::empty(kMxE4m3, 4, 64, cpu);
  lowp::QTensor b = lowp::QTensor::empty(kMxE4m3, 5, 32, cpu);
  Tensor out = Tensor::empty({4, 5}, DType::f32, cpu);
  EXPECT_THROW(ops::qmatmul({.out = out, .a = a, .b = b}), Error);
}

// Dispatch on virtual chips: the paced CPU kernels give bytes identical to cpu:0.
TEST(Qmatmul, VirtualChipsMatchCpuBitForBit) {
  Runtime& rt = lowp_runtime();
  Device& cpu = rt.cpu();
  std::mt19937_64 rng(17);
  const int64_t M = 33, N = 20, K = 160;
  std::vector<float> av = spread_values(rng, M * K), bv = spread_values(rng, N * K);
  for (const char* chip : {"vchip:fp8chip", "vchip:plainchip"}) {
    Device& dev = rt.device(chip);
    for (const auto& [sa, sb] : {std::pair{kMxE4m3, kMxE5m2}, std::pair{kNvfp4, kBlockwiseAct}}) {
      SCOPED_TRACE(std::string(chip) + " " + lowp::describe(sa) + " / " + lowp::describe(sb));
      lowp::QTensor a_cpu = quantize_values(cpu, av, M, K, sa);
      lowp::QTensor b_cpu = quantize_values(cpu, bv, N, K, sb);
      lowp::QTensor a_dev = quantize_values(dev, av, M, K, sa);
      lowp::QTensor b_dev = quantize_values(dev, bv, N, K, sb);
      EXPECT_EQ(a_dev.codes.device().str(), dev.str());
      EXPECT_EQ(download_bytes(a_dev.codes), download_bytes(a_cpu.codes));
      EXPECT_EQ(download_bytes(a_dev.scales), download_bytes(a_cpu.scales));
      EXPECT_EQ(download_bytes(b_dev.codes), download_bytes(b_cpu.codes));
      Tensor out_cpu = Tensor::empty({M, N}, DType::bf16, cpu);
      Tensor out_dev = Tensor::empty({M, N}, DType::bf16, dev);
      ops::qmatmul({.out = out_cpu, .a = a_cpu, .b = b_cpu});
      ops::qmatmul({.out = out_dev, .a = a_dev, .b = b_dev});
      EXPECT_EQ(download_bytes(out_dev), download_bytes(out_cpu));
    }
  }
}

TEST(Qmatmul, CostIsCountedAtTheElementDtype) {
  Runtime& rt = lowp_runtime();
  auto& fp8 = static_cast<vchip::VchipDevice&>(rt.device("vchip:fp8chip"));
  auto& plain = static_cast<vchip::VchipDevice&>(rt.device("vchip:plainchip"));
  lowp::QTensor a = lowp::QTensor::empty(kMxE4m3, 64, 128, fp8);
  lowp::QTensor b = lowp::QTensor::empty(kMxE4m3, 32, 128, fp8);
  Tensor out = Tensor::empty({64, 32}, DType::f32, fp8);
  OpCost cost = op_cost_qmatmul({.out = out, .a = a, .b = b});
  EXPECT_EQ(cost.dtype, DType::f8e4m3);
  EXPECT_EQ(cost.flops, 2.0 * 64 * 32 * 128);
  EXPECT_EQ(cost.bytes, 64 * 128 + 64 * 4 + 32 * 128 + 32 * 4 + 64 * 32 * 4);
  const double memory = cost.bytes / 1e12;
  EXPECT_DOUBLE_EQ(fp8.modelled_seconds(cost), cost.flops / 4e12 + memory);
  EXPECT_DOUBLE_EQ(plain.modelled_seconds(cost), cost.flops / 1e12 + memory);  // f32 fallback
  OpCost q = op_cost_quantize({.q = a, .in = Tensor::empty({64, 128}, DType::bf16, fp8)});
  EXPECT_EQ(q.bytes, 64 * 128 * 2 + 64 * 128 + 64 * 4);
  EXPECT_EQ(q.dtype, DType::bf16);
}

// Autocompare (H2_CHECK_OPS) of quantize and qmatmul on a virtual chip: both ops are shadow-run
// on the CPU from copies of their quantized operands (codes and scales) and their outputs
// compared. The chip runs the CPU's kernels, so the comparison must happen and must match: the
// test reads the comparison's own log lines (a skipped check, an operand copied without its
// scales or a wrong slot would show as "not compared" or "differs").
TEST(Qmatmul, AutocompareComparesQuantizeAndQmatmulOnAVirtualChip) {
  Runtime& rt = lowp_runtime();
  Device& dev = rt.device("vchip:fp8chip");
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  auto logger = spdlog::default_logger();
  const spdlog::level::level_enum level = logger->level();
  logger->sinks().push_back(sink);
  logger->set_level(spdlog::level::debug);
  rt.policy().check[size_t(Op::quantize)] = true;
  rt.policy().check[size_t(Op::qmatmul)] = true;
  std::mt19937_64 rng(23);
  lowp::QTensor a = quantize_values(dev, spread_values(rng, 16 * 64), 16, 64, kNvfp4);
  lowp::QTensor b = quantize_values(dev, spread_values(rng, 8 * 64), 8, 64, kMxE4m3);
  Tensor out = Tensor::empty({16, 8}, DType::f32, dev);
  ops::qmatmul({.out = out, .a = a, .b = b});
  rt.policy().check.reset();
  logger->set_level(level);
  logger->sinks().pop_back();
  std::string log;
  for (const std::string& line : sink->last_formatted()) log += line;
  EXPECT_NE(log.find("H2_CHECK_OPS: qmatmul output 'out' on " + dev.str() + " matches cpu"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("H2_CHECK_OPS: quantize output"), std::string::npos) << log;
  EXPECT_EQ(log.find("differs from cpu"), std::string::npos) << log;
  EXPECT_EQ(log.find("not compared"), std::string::npos) << log;
}

}  // namespace
}  // namespace h2::test
