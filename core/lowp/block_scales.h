// Block scales of many blocks in one call: the batch form of block_scale.h's rules for the CPU
// quantizer, compiled also for AVX-512 and chosen by the running CPU (as the
// portable batch encoders are: encode_batch.h), the same bits as the scalar rule block by block.
#pragma once

#include <cstdint>

namespace h2::lowp {

// For b < n: nvfp4_scale(amax[b], s_enc, global) as multipliers[b] and codes[b] (the E4M3
// scale byte). (Its two FP32 divisions per block, as the rule defines them, kept this loop at
// 0.91 ns a block on a Zen 4 core in AVX2 registers, with spills; 0.58 in AVX-512's.)
void nvfp4_scales_n(const float* amax, int64_t n, float s_enc, float global, float* multipliers,
                    uint8_t* codes);

// For b < n: f32_amax_scale(amax[b], max_finite) as multipliers[b] and scales[b]. multipliers
// may be amax itself. (One block per 128 values for fp8_blockwise: in the quantizer's strips,
// the scalar rule's two divisions per block and the bookkeeping around them held 15% of the
// strip loop's own samples.)
void f32_amax_scales_n(const float* amax, int64_t n, float max_finite, float* multipliers,
                       float* scales);

// For b < n: e8m0_scale(amax[b], round_up, max_finite) as multipliers[b] and codes[b] (the E8M0
// byte). multipliers may be amax itself.
void e8m0_scales_n(const float* amax, int64_t n, bool round_up, float max_finite,
                   float* multipliers, uint8_t* codes);

}  // namespace h2::lowp
