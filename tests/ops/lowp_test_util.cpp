// Helpers of the low-precision op tests (see lowp_test_util.h).
#include "tests/ops/lowp_test_util.h"

#include <cmath>
#include <cstring>

#include "backends/registry.h"
#include "core/lowp/formats.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2::test {
namespace {

constexpr const char* kChips = R"(chips:
  - name: fp8chip
    memory: 512MiB
    memory_bandwidth: 1e12
    peak_flops: {f32: 1e12, bf16: 2e12, f8e4m3: 4e12, f8e5m2: 4e12, f4e2m1: 8e12}
    dtypes: [f32, bf16, f8e4m3, f8e5m2, f4e2m1, u8]
  - name: plainchip
    memory: 512MiB
    memory_bandwidth: 1e12
    peak_flops: {f32: 1e12, bf16: 2e12}
    dtypes: [f32, bf16, f8e4m3, f8e5m2, f4e2m1, u8]
  - name: nof8chip
    memory: 64MiB
    memory_bandwidth: 1e12
    peak_flops: {f32: 1e12}
    dtypes: [f32, bf16, u8]
)";

}  // namespace

Runtime& lowp_runtime() {
  static std::unique_ptr<Runtime> runtime = [] {
    RuntimeOptions options = RuntimeOptions::from_env();
    options.chips = vchip::parse_chip_specs(kChips, "lowp test chips");
    options.vchip_time_scale = 0;
    return create_runtime(options);
  }();
  return *runtime;
}

std::vector<uint8_t> download_bytes(const Tensor& t) {
  Tensor host = t.to(t.device().runtime().cpu());
  const uint8_t* p = static_cast<const uint8_t*>(host.data());
  return std::vector<uint8_t>(p, p + host.nbytes());
}

HostQ to_host(const lowp::QTensor& q) {
  HostQ h;
  h.spec = q.spec;
  h.rows = q.rows();
  h.cols = q.cols();
  h.scale_cols = q.scales.size(1);
  std::vector<uint8_t> raw = download_bytes(q.codes);
  h.codes.resize(size_t(h.rows * h.cols));
  for (size_t i = 0; i < h.codes.size(); ++i)
    h.codes[i] = q.spec.element == lowp::Format::e2m1
                     ? uint8_t(i % 2 == 0 ? raw[i / 2] & 0x0f : raw[i / 2] >> 4)
                     : raw[i];
  std::vector<uint8_t> scales = download_bytes(q.scales);
  if (q.spec.rule == lowp::ScaleRule::f32_amax) {
    h.f32_scales.resize(scales.size() / 4);
    std::memcpy(h.f32_scales.data(), scales.data(), scales.size());
  } else {
    h.scale_bytes = scales;
  }
  if (q.spec.rule == lowp::ScaleRule::nvfp4) {
    std::vector<uint8_t> g = download_bytes(q.global);
    std::memcpy(&h.global, g.data(), 4);
  }
  return h;
}

double scale_at(const HostQ& q, int64_t r, int64_t k) {
  const int64_t br = lowp::block_extent(q.spec.block_rows, q.rows);
  const int64_t bc = lowp::block_extent(q.spec.block_cols, q.cols);
  const size_t i = size_t((r / br) * q.scale_cols + k / bc);
  switch (q.spec.rule) {
    case lowp::ScaleRule::f32_amax:
      return q.f32_scales[i];
    case lowp::ScaleRule::nvfp4:
      return double(float(double(lowp::decode(lowp::Format::e4m3, q.scale_bytes[i])) * q.global));
    default:
      return q.scale_bytes[i] == 0xff ? std::nan("") : std::ldexp(1.0, int(q.scale_bytes[i]) - 127);
  }
}

std::vector<double> dequantize(const HostQ& q) {
  std::vector<double> out(size_t(q.rows * q.cols));
  for (int64_t r = 0; r < q.rows; ++r)
    for (int64_t k = 0; k < q.cols; ++k) {
      const size_t i = size_t(r * q.cols + k);
      out[i] = double(lowp::decode(q.spec.element, q.codes[i])) * scale_at(q, r, k);
    }
  return out;
}

RefGemm reference_gemm(const std::vector<double>& a, const std::vector<double>& b,
                       const std::vector<double>& c, int64_t M, int64_t N, int64_t K, double alpha,
                       double beta) {
  RefGemm ref;
  ref.out.assign(size_t(M * N), 0.0);
  ref.magnitude.assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = a[size_t(m * K + k)] * b[size_t(n * K + k)];
        sum += p;
        mag += std::fabs(p);
      }
      const size_t i = size_t(m * N + n);
      ref.out[i] = alpha * sum + (beta != 0 ? beta * c[i] : 0.0);
      ref.magnitude[i] = std::fabs(alpha) * mag + (beta != 0 ? std::fabs(beta * c[i]) : 0.0);
    }
  return ref;
}

lowp::QTensor quantize_values(Device& device, const std::vector<float>& values, int64_t rows,
                              int64_t cols, const lowp::QuantSpec& spec, DType in_dtype,
                              Tensor* stats) {
  Tensor in = tensor_from_floats(values, {rows, cols}, in_dtype, device.runtime().cpu()).to(device);
  lowp::QTensor q = lowp::QTensor::empty(spec, rows, cols, device);
  QuantizeArgs args{.q = q, .in = in};
  if (stats != nullptr) {
    *stats = Tensor::empty({2}, DType::f32, device);
    args.stats = *stats;
  }
  ops::quantize(args);
  return q;
}

std::vector<float> spread_values(std::mt19937_64& rng, int64_t n) {
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> exponent(-4, 4);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng) * std::exp2(exponent(rng));
  return v;
}

}  // namespace h2::test
