// The helpers every layer uses: initial values of a named weight (nn::Param) and the linear
// layer's forward and backward GEMMs. Backward passes ADD into a Param's f32 `grad`.
// Initial values are generated on the host from (seed, name) and uploaded, so they are identical
// on every device and independent of construction order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"
#include "nn/param.h"
#include "nn/stash.h"

namespace h2::models {

// The trainable-module contract (nn/) under the names every layer uses. Param names are Hugging
// Face LlamaForCausalLM's ("model.norm.weight").
using nn::Param;
using nn::Stash;
using nn::StashTransfer;

enum class Init { normal, ones };

// A 64-bit key for the random stream of one named object (a parameter's initial values, a
// linear layer's stochastic rounding): a pure function of (seed, name).
uint64_t name_key(uint64_t seed, std::string_view name);

// normal: N(0, std^2) from a counter-based generator keyed by (seed, name); ones: all 1.
Param make_param(std::string name, const Shape& shape, Init init, float std, uint64_t seed,
                 DType dtype, Device& device);

// out (N, O) = x (N, I) @ w^T, w: (O, I).
void linear_fwd(const Tensor& out, const Tensor& x, const Param& w);
// dx (N, I) = dy (N, O) @ w (or += when accumulate_dx); w.grad (O, I) += dy^T @ x.
void linear_bwd(const Tensor& dx, const Tensor& dy, const Tensor& x, Param& w,
                bool accumulate_dx = false);
// grad (f32) += dy^T @ x in one GEMM whatever dy's and x's dtype (FP32 sums, no rounding to
// the compute dtype in between).
void accumulate_weight_grad(const Tensor& grad, const Tensor& dy, const Tensor& x);
// grad (f32) += g (any floating dtype, same shape).
void accumulate_into(const Tensor& grad, const Tensor& g);

}  // namespace h2::models
