// The batch block scales (block_scales.h).
#include "core/lowp/block_scales.h"

#include "core/lowp/block_scale.h"
#include "core/lowp/encode_batch.h"

namespace h2::lowp {

H2_AVX512_CLONE
void nvfp4_scales_n(const float* amax, int64_t n, float s_enc, float global, float* multipliers,
                    uint8_t* codes) {
  for (int64_t b = 0; b < n; ++b) {
    const BlockScale s = nvfp4_scale(amax[b], s_enc, global);
    multipliers[b] = s.multiplier;
    codes[b] = s.code;
  }
}

}  // namespace h2::lowp
