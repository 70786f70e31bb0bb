// Profiles from a chip's data-sheet figures instead of a measurement, for clusters that exist only
// on paper (the 1,024- and 4,096-chip studies) and for a first plan before any chip is at hand.
// Each unit's time is a roofline with stated efficiencies:
//
//   t = GEMM FLOPs / (e_gemm x peak) + attention FLOPs / (e_attn x peak) + bytes / (e_mem x BW)
//
// per micro-batch of r rows, N = r T tokens (T the sequence, C the model dim, K the key/value
// width C n_kv / n_heads, F the FFN width, V the vocabulary, b the compute dtype's bytes):
//
//   block  forward  GEMM 2 N (2 C^2 + 2 C K + 3 C F), causal attention 2 N T C,
//                   bytes: the weights once, N (12 C + 4 F) b of norms, residuals and the gate;
//          input gradient: the forward's GEMM FLOPs, twice its attention, twice its bytes;
//          weight gradient: the forward's GEMM FLOPs and the FP32 gradient written;
//          keeps N (6 C + 2 K + 3 F) b plus a log-sum-exp per head and token;
//   embedding: a gather of N C b bytes, a scatter-add of N C FP32 bytes back;
//   head   the final norm and the GEMM 2 N C V forward (twice backward), the logits and the
//          loss's probabilities N V 4 bytes each way;
//   optimizer: AdamW reads parameters, FP32 gradient and moments and writes three, 28 bytes per
//          parameter (plus 2 x 4 for an FP32 master beside a 16-bit copy).
//
// The efficiencies are assumptions, not facts; the defaults are what well-tuned large-model
// training reaches on current accelerators (GEMM 60% of dense peak, fused attention 40%,
// streaming kernels 80% of memory bandwidth) and are stated in every file written. They are the
// plateaus of curves in the operation's size: small operations run further from peak (a GEMM of
// few rows cannot fill the chip, a short sequence's attention tiles are mostly edges), taken as
//
//   e_gemm(N) = e_gemm N / (N + N_half),   e_attention(T) = e_attention T / (T + T_half)
//
// with N the micro-batch's tokens on the chip and T the sequence; by default both reach half
// their plateau at 256 (tokens; sequence length), so a 4,096-token micro-batch runs GEMMs at 94%
// of the plateau and a 256-token one at 50%.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "parallel/planner/profile.h"

namespace h2::parallel::planner {

struct Efficiency {
  double gemm = 0.6;              // of the chip's dense peak for the dtype (the curve's plateau)
  double attention = 0.4;         // of the same peak (the plateau)
  double memory = 0.8;            // of the memory bandwidth
  double gemm_half_tokens = 256;  // N_half: tokens at which GEMMs reach half the plateau
  double attention_half_tokens = 256;  // T_half: sequence length of half the plateau
};

// A data-sheet profile's origin in its key: the efficiencies it assumed, so that profiles made
// with other efficiencies, or measured, are other profiles (and other files).
std::string datasheet_origin(const Efficiency& efficiency);

// The profile `h2 profile --datasheet` writes: the figures above for each of `rows`, under the
// key profile_key(chip, time_scale, model, dtype, datasheet_origin(efficiency)).
ChipProfile datasheet_profile(const ChipSpec& chip, double time_scale, const ModelShape& model,
                              DType dtype, const std::vector<int64_t>& rows,
                              const Efficiency& efficiency = {});

}  // namespace h2::parallel::planner
