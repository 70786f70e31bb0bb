// The batch block scales (block_scales.h).
#include "core/lowp/block_scales.h"

#include "core/lowp/block_scale.h"
#include "core/lowp/encode_batch.h"

namespace h2::lowp {

void nvfp4_scales_n(const float* amax, int64_t n, float s_enc, float global, float* multipliers,
                    uint8_t* codes) {
  in_fastest_build([=] {
    for (int64_t b = 0; b < n; ++b) {
      const BlockScale s = nvfp4_scale(amax[b], s_enc, global);
      multipliers[b] = s.multiplier;
      codes[b] = s.code;
    }
  });
}

void f32_amax_scales_n(const float* amax, int64_t n, float max_finite, float* multipliers,
                       float* scales) {
  in_fastest_build([=] {
    for (int64_t b = 0; b < n; ++b) {
      const BlockScale s = f32_amax_scale(amax[b], max_finite);
      multipliers[b] = s.multiplier;
      scales[b] = s.scale;
    }
  });
}

void e8m0_scales_n(const float* amax, int64_t n, bool round_up, float max_finite,
                   float* multipliers, uint8_t* codes) {
  in_fastest_build([=] {
    for (int64_t b = 0; b < n; ++b) {
      const BlockScale s = e8m0_scale(amax[b], round_up, max_finite);
      multipliers[b] = s.multiplier;
      codes[b] = s.code;
    }
  });
}

}  // namespace h2::lowp
