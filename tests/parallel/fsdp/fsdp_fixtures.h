// Fixtures for the FSDP tests: parameter sets of known sizes (N divisible or not by the group
// size), a tiny decoder block with Hugging Face names, closed-form per-rank gradients whose sums
// over ranks are exact in FP32, and comparisons that throw (rank bodies run in forked processes,
// where gtest assertions do not reach the parent; H2_CHECK fails them).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "models/layers/param.h"
#include "models/units.h"

namespace h2::parallel::fsdp::testing {

// A unit's parameters, owned by the test (standing in for a model Unit).
struct ParamSet {
  std::string name;
  std::vector<models::Param> params;
  std::unique_ptr<models::BlockUnit> block;  // when the set is a real decoder block
  std::vector<models::Param*> pointers();    // Hugging Face order
  int64_t numel();
};

// "divisible": N = 36 (divisible by 1, 2, 3); "odd": N = 37 (by neither 2 nor 3), parameters
// spanning shard boundaries; "tiny": N = 2 (rank 2 of 3 owns only padding); "block": a decoder
// block (C = 8, H = 2, Hkv = 1, F = 12: N = 496, divisible by 2, not by 3). Values depend only
// on (set, seed), never on the rank.
ParamSet make_param_set(const std::string& name, DType dtype, Device& device, uint64_t seed = 7);
std::vector<std::string> param_set_names();

// Rank r's gradient for flat element i at step s: a multiple of 1/16 in [-0.5, 0.5], so sums
// over a few ranks and steps are exact in FP32 whatever the order.
float grad_value(int rank, int step, int64_t i);
// Fills (or, with accumulate, adds into) every Param's grad with grad_value(rank, step,
// salt + flat index).
void write_grads(const std::vector<models::Param*>& params, int rank, int step, int64_t salt,
                 bool accumulate);
// sum over ranks 0..ranks-1 of grad_value(r, step, salt + i), i < n.
std::vector<float> summed_grads(int64_t n, int ranks, int step, int64_t salt);

// The host values of every Param's value, flattened in order.
std::vector<float> flat_values(const std::vector<models::Param*>& params);

// Bit-exact comparison of two float vectors (throws naming `what` and the first difference).
void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what);
// |got - want| <= rtol * |want| + atol for every element (throws naming the first failure).
void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                  double atol, const std::string& what);

}  // namespace h2::parallel::fsdp::testing
