// Linear: a weight (out, in) and how its three GEMMs run (forward, dgrad, wgrad; see
// core/lowp/recipe.h): in the compute dtype with plain matmuls, or quantized per a low-precision
// recipe with FP32 accumulation. It keeps what a user needs to see when a recipe is in trouble:
// the amax and the fraction of saturated values of each quantized operand (x, W, dy), and, for
// delayed scaling, the amax histories.
// Shapes: x (N, I), out (N, O), W (O, I); N tokens, I in features, O out features.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "core/lowp/delayed_scaling.h"
#include "core/lowp/precision_policy.h"
#include "core/lowp/recipe.h"
#include "models/layers/param.h"

namespace h2::models {

// Whether quantizing a matrix's transpose under `spec` gives the transpose of its quantization
// bit for bit, when both round to nearest (see linear.cpp): then a linear layer transposes
// codes instead of quantizing again (W^T for dgrad; dy^T for wgrad, when not stochastic).
bool transposes_bit_for_bit(const lowp::QuantSpec& spec, lowp::Scaling scaling);
// The (C, R) transpose of a quantized (R, C) matrix with one-byte codes and f32 scales.
lowp::QTensor transposed(const lowp::QTensor& q);

// One quantized operand's last figures.
struct OperandStats {
  float amax = 0;                 // largest |value| before scaling
  double saturated_fraction = 0;  // elements beyond the format's range after scaling
};

struct LinearStats {
  OperandStats x, w, dy;
};

// The quantizations of one input tensor, shared by the linear layers that read it (q, k and v
// read the same normalised x; gate and up too): the first layer to quantize it for a spec and
// orientation keeps the result and its statistics, the others take them instead of quantizing
// the same values again. Scoped to one forward, one backward or one split backward's weight
// gradients (of one micro-batch) of the block that owns it; finding an entry of another input
// tensor is an error, which catches a scope shared by layers that read different inputs.
class SharedInput {
 public:
  struct Entry {
    lowp::QuantSpec spec;
    bool transpose = false;
    lowp::QTensor q;
    Tensor stats;                  // a copy of amax and saturated count
    const void* source = nullptr;  // the quantized input's data, to check find's
  };
  const Entry* find(const lowp::QuantSpec& spec, bool transpose, const Tensor& x) const;
  void keep(const lowp::QuantSpec& spec, bool transpose, const Tensor& x, const lowp::QTensor& q,
            const Tensor& stats);

 private:
  std::vector<Entry> entries_;
};

class Linear {
 public:
  explicit Linear(Param weight);

  Param& param() { return w_; }
  const Param& param() const { return w_; }
  // "layers.3.mlp.gate_proj": the parameter name without "model." and ".weight".
  const std::string& module() const { return module_; }

  // nullopt: GEMMs in the compute dtype. Changing the recipe resets the statistics and histories.
  void set_recipe(std::optional<lowp::Recipe> recipe,
                  const lowp::LowPrecisionOptions& options = {});
  // The active recipe's name, or "compute".
  std::string_view recipe_name() const;
  lowp::Precision precision() const {
    return recipe_ ? recipe_->precision : lowp::Precision::compute;
  }
  bool quantized() const { return recipe_.has_value(); }

  // out = x W^T. `shared`: x's quantizations shared with the other layers reading this x.
  void forward(const Tensor& out, const Tensor& x, SharedInput* shared = nullptr);
  // dx = dy W (or += when accumulate_dx); W.grad += dy^T x, or, while weight gradients are
  // deferred, (dy or its codes, x) kept for weight_backward(). `shared` as in forward (for x^T
  // in wgrad).
  void backward(const Tensor& dx, const Tensor& dy, const Tensor& x, bool accumulate_dx = false,
                SharedInput* shared = nullptr);

  // Split backward (ZB-H1's I and W actions): while on, backward() computes dx only and queues
  // its (dy, x), dy's codes instead of dy where wgrad transposes them; weight_backward() adds
  // the oldest queued pair's dy^T x into W.grad, so the micro-batches' gradients still
  // accumulate in order. The recipe cannot change while the queue holds any.
  // `shared` as in backward: the layers that read one x share x^T's quantization here too.
  void set_defer_weight_grad(bool on) { defer_weight_grad_ = on; }
  void weight_backward(SharedInput* shared = nullptr);
  size_t pending_weight_grads() const { return pending_.size(); }

  // While frozen (nn::Unit::set_weights_frozen: the caller promises W does not change), W's
  // quantizations for the forward and for dgrad are made once and kept for every micro-batch,
  // instead of once per micro-batch and orientation; switching either way drops them. The same
  // bits as quantizing each time (weights are never stochastically rounded). Not under delayed
  // scaling, whose history records every quantization.
  void set_weights_frozen(bool frozen);
  // How many times W has been quantized (either orientation) since set_recipe: what the cache
  // saves, for tests and benchmarks.
  int64_t weight_quantizations() const { return weight_quantizations_; }
  // How many times dy has been quantized (either orientation) since set_recipe: one per backward
  // where dy^T's codes are dy's transposed (grad_transposes), deferred or not; two elsewhere.
  int64_t grad_quantizations() const { return grad_quantizations_; }
  // How many times this layer quantized x (either orientation) since set_recipe; what it took
  // from a SharedInput does not count.
  int64_t input_quantizations() const { return input_quantizations_; }

  // Figures of the last quantizations (zeros before the first, or when not quantized). Reads
  // small device tensors: synchronises the device.
  LinearStats stats() const;

 private:
  struct Operand {
    lowp::QuantSpec spec;
    std::optional<lowp::DelayedScaling> history;  // fp8_delayed only
    Tensor stats;                                 // f32 (2): amax, saturated count
    int64_t numel = 0;
  };
  // `stream`: the stochastic-rounding positions (stream << 40) + element, one stream per
  // quantization of dy, so the draws do not depend on the order of dgrad and wgrad.
  lowp::QTensor quantize(Operand& op, const Tensor& in, bool transpose, bool stochastic,
                         uint64_t stream = 0);
  // x (or x^T) quantized, or taken from `shared` (not under delayed scaling: each layer's history
  // records its own quantizations).
  lowp::QTensor quantize_input(const Tensor& x, bool transpose, SharedInput* shared);
  // dy_codes: dy quantized for dgrad, given when grad_transposes(): dy^T is then its transpose.
  void weight_grad(const Tensor& dy, const Tensor& x, uint64_t backward_index,
                   SharedInput* shared = nullptr, const lowp::QTensor* dy_codes = nullptr);
  // Whether W^T's quantization equals the transpose of W's bit for bit, so that dgrad may take
  // the forward's; and dy^T's the transpose of dy's, so that wgrad may take dgrad's (see
  // linear.cpp).
  bool weight_transposes() const;
  bool grad_transposes() const;
  // W quantized for the forward, and W^T for dgrad: kept or made (see set_weights_frozen).
  lowp::QTensor forward_weight();
  lowp::QTensor dgrad_weight();
  bool keeps_weights() const;
  OperandStats read(const Operand& op) const;

  Param w_;
  std::string module_;
  std::optional<lowp::Recipe> recipe_;
  Operand x_, weight_, dy_;
  // The forward's quantized W, kept for dgrad while weight_transposes() (the weights do not
  // change between a micro-batch's forward and its backward: the optimizer steps after both)
  // and for the next forwards while keeps_weights(); dgrad's W^T kept while keeps_weights().
  std::optional<lowp::QTensor> forward_weight_, dgrad_weight_;
  bool weights_frozen_ = false;
  int64_t weight_quantizations_ = 0;
  int64_t grad_quantizations_ = 0;
  int64_t input_quantizations_ = 0;
  uint64_t seed_ = 0;
  uint64_t backward_count_ = 0;  // backward() calls since set_recipe: numbers the SR streams
  bool defer_weight_grad_ = false;
  struct Pending {  // one deferred wgrad: dy, or its codes where wgrad transposes them
    Tensor dy;
    std::optional<lowp::QTensor> dy_codes;
    Tensor x;
    uint64_t backward_index;
  };
  std::deque<Pending> pending_;  // deferred weight gradients, oldest first
};

}  // namespace h2::models
