// Rotary-embedding frequencies, shared by every backend's rope kernel (host and CUDA device code):
// plain RoPE, inv_freq_i = theta^(-2i/D) for pair i < D/2, and Llama 3's frequency scaling
// (Hugging Face rope_type "llama3", transformers' _compute_llama3_parameters): with the
// wavelength w = 2 pi / inv_freq and L = original_max_positions,
//   w < L / high_freq_factor  (high frequencies)   inv_freq unchanged
//   w > L / low_freq_factor   (low frequencies)    inv_freq / factor
//   otherwise, s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor):
//                                                  (1 - s) * inv_freq / factor + s * inv_freq
// Llama 3's scaling leaves the attention scale at 1, so cos and sin are not rescaled.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace h2 {

struct RopeScaling {
  double factor = 0;  // 0: plain RoPE; Llama 3.1 uses 8
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_max_positions = 8192;
  H2_HOST_DEVICE bool enabled() const { return factor > 0; }
  bool operator==(const RopeScaling&) const = default;
};

// inv_freq of pair i (0 <= i < dim / 2) for head dimension `dim`.
H2_HOST_DEVICE inline double rope_inv_freq(int64_t i, int64_t dim, double theta,
                                           const RopeScaling& scaling) {
  const double inv_freq = ::pow(theta, -2.0 * double(i) / double(dim));
  if (!scaling.enabled()) return inv_freq;
  const double pi = 3.14159265358979323846;
  const double wavelength = 2 * pi / inv_freq;
  const double length = scaling.original_max_positions;
  if (wavelength < length / scaling.high_freq_factor) return inv_freq;
  if (wavelength > length / scaling.low_freq_factor) return inv_freq / scaling.factor;
  const double smooth = (length / wavelength - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
  return (1 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
}

}  // namespace h2
