// Linear layer GEMMs in the compute dtype or quantized (see linear.h).
#include "models/layers/linear.h"

#include "core/error.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2::models {
namespace {

std::string module_of(const std::string& param_name) {
  std::string m = param_name;
  if (m.starts_with("model.")) m.erase(0, 6);
  if (m.ends_with(".weight")) m.erase(m.size() - 7);
  return m;
}

}  // namespace

// The (C, R) transpose of a quantized (R, C) matrix with one-byte codes and f32 scales: the
// codes copied as bytes (the copy op moves u8, not FP8 values).
lowp::QTensor transposed(const lowp::QTensor& q) {
  lowp::QTensor t = lowp::QTensor::empty(q.spec, q.cols(), q.rows(), q.codes.device());
  auto bytes = [](const Tensor& codes) {
    return Tensor::from_blob(codes.data(), codes.shape(), DType::u8, codes.device());
  };
  bytes(t.codes).copy_from(bytes(q.codes).transpose(0, 1));
  t.scales.copy_from(q.scales.transpose(0, 1));
  return t;
}

// Whether the quantization of a matrix's transpose under `spec` is the transpose of its
// quantization, bit for bit: not under delayed scaling (its scale moves between the two
// quantizations), one-byte codes (E2M1 packs two per byte) and blocks that transposition maps
// onto each other: the whole tensor, or square blocks (fp8_blockwise's 128 x 128 weights). Then
// every block of the transpose has the amax, the scale and, element by element, the codes of its
// transposed block (Quantize.SquareBlocksTransposeBitForBit checks it), when both orientations
// round to nearest (stochastic rounding draws other numbers for the other orientation: the
// caller's condition).
bool transposes_bit_for_bit(const lowp::QuantSpec& spec, lowp::Scaling scaling) {
  return scaling != lowp::Scaling::delayed && spec.element != lowp::Format::e2m1 &&
         spec.rule == lowp::ScaleRule::f32_amax && spec.block_rows == spec.block_cols;
}

const SharedInput::Entry* SharedInput::find(const lowp::QuantSpec& spec, bool transpose,
                                            const Tensor& x) const {
  for (const Entry& e : entries_) {
    if (e.spec != spec || e.transpose != transpose) continue;
    H2_CHECK(e.source == x.data(),
             "SharedInput: a layer reads another input than the one whose quantization is shared");
    return &e;
  }
  return nullptr;
}

void SharedInput::keep(const lowp::QuantSpec& spec, bool transpose, const Tensor& x,
                       const lowp::QTensor& q, const Tensor& stats) {
  Tensor copy = Tensor::empty(stats.shape(), stats.dtype(), stats.device());
  copy.copy_from(stats);
  entries_.push_back({spec, transpose, q, copy, x.data()});
}

Linear::Linear(Param weight) : w_(std::move(weight)), module_(module_of(w_.name)) {}

void Linear::set_recipe(std::optional<lowp::Recipe> recipe,
                        const lowp::LowPrecisionOptions& options) {
  // A deferred wgrad keeps dy's codes under the recipe of its backward (see backward).
  H2_CHECK(pending_.empty(), "Linear {}: recipe changed with {} weight gradients deferred", module_,
           pending_.size());
  recipe_ = std::move(recipe);
  x_ = weight_ = dy_ = Operand{};
  forward_weight_.reset();
  dgrad_weight_.reset();
  weight_quantizations_ = grad_quantizations_ = input_quantizations_ = 0;
  seed_ = name_key(options.seed, module_);  // one stochastic-rounding stream per layer
  backward_count_ = 0;
  if (!recipe_) return;
  x_.spec = recipe_->input;
  weight_.spec = recipe_->weight;
  dy_.spec = recipe_->grad;
  for (Operand* op : {&x_, &weight_, &dy_}) {
    op->stats = Tensor::zeros({2}, DType::f32, w_.value.device());
    if (recipe_->scaling == lowp::Scaling::delayed)
      op->history.emplace(op->spec.element, options.delayed_history, options.delayed_margin);
  }
}

std::string_view Linear::recipe_name() const {
  return recipe_ ? recipe_->name : std::string_view("compute");
}

lowp::QTensor Linear::quantize(Operand& op, const Tensor& in, bool transpose, bool stochastic,
                               uint64_t stream) {
  const int64_t rows = in.size(transpose ? 1 : 0), cols = in.size(transpose ? 0 : 1);
  lowp::QTensor q = lowp::QTensor::empty(op.spec, rows, cols, in.device());
  const bool delayed = op.history && op.history->has_history();
  ops::quantize({.q = q,
                 .stats = op.stats,
                 .in = in,
                 .transpose = transpose,
                 .multiplier = delayed ? op.history->multiplier() : 0.0f,
                 .stochastic = stochastic,
                 .seed = seed_,
                 .first_index = stream << 40});
  op.numel = rows * cols;
  // One history entry per operand and micro-batch: the transposed re-quantization in backward
  // sees the same tensor and uses the same multiplier.
  if (op.history && !transpose) op.history->record(read(op).amax);
  return q;
}

lowp::QTensor Linear::quantize_input(const Tensor& x, bool transpose, SharedInput* shared) {
  const bool shares = shared != nullptr && !x_.history;
  if (shares) {
    if (const SharedInput::Entry* hit = shared->find(x_.spec, transpose, x)) {
      x_.stats.copy_from(hit->stats);
      x_.numel = x.numel();
      return hit->q;
    }
  }
  lowp::QTensor q = quantize(x_, x, transpose, false);
  ++input_quantizations_;
  if (shares) shared->keep(x_.spec, transpose, x, q, x_.stats);
  return q;
}

void Linear::forward(const Tensor& out, const Tensor& x, SharedInput* shared) {
  if (!recipe_) return linear_fwd(out, x, w_);
  lowp::QTensor xq = quantize_input(x, false, shared);
  ops::qmatmul({.out = out, .a = xq, .b = forward_weight()});
}

void Linear::set_weights_frozen(bool frozen) {
  weights_frozen_ = frozen;
  forward_weight_.reset();  // dgrad without it quantizes W^T itself: the same bits
  dgrad_weight_.reset();
}

bool Linear::keeps_weights() const {
  return weights_frozen_ && recipe_ && recipe_->scaling != lowp::Scaling::delayed;
}

lowp::QTensor Linear::forward_weight() {
  // A kept W is reused only while frozen; w_.value is checked all the same, so that a unit
  // whose FSDP shards are not gathered still fails as it would without the cache.
  H2_CHECK(w_.value.defined(), "Linear {}: the weight has no value (FSDP shards not gathered?)",
           module_);
  if (keeps_weights() && forward_weight_) return *forward_weight_;
  lowp::QTensor wq = quantize(weight_, w_.value, false, false);
  ++weight_quantizations_;
  if (weight_transposes() || keeps_weights())
    forward_weight_ = wq;
  else
    forward_weight_.reset();
  return wq;
}

lowp::QTensor Linear::dgrad_weight() {
  if (keeps_weights() && dgrad_weight_) return *dgrad_weight_;
  lowp::QTensor wt;
  if (forward_weight_ && weight_transposes()) {
    wt = transposed(*forward_weight_);
  } else {
    wt = quantize(weight_, w_.value, true, false);
    ++weight_quantizations_;
  }
  if (keeps_weights()) dgrad_weight_ = wt;
  return wt;
}

bool Linear::weight_transposes() const {
  return transposes_bit_for_bit(recipe_->weight, recipe_->scaling);
}

bool Linear::grad_transposes() const {
  return !recipe_->grad_stochastic && transposes_bit_for_bit(recipe_->grad, recipe_->scaling);
}

void Linear::backward(const Tensor& dx, const Tensor& dy, const Tensor& x, bool accumulate_dx,
                      SharedInput* shared) {
  const float beta = accumulate_dx ? 1.0f : 0.0f;
  const uint64_t index = backward_count_++;
  std::optional<lowp::QTensor> dyq;
  if (!recipe_) {
    ops::matmul({.out = dx, .a = dy, .b = w_.value, .beta = beta});
  } else {  // dgrad: dx (N, I) = dy (N, O) . W^T (I, O)^T, K = O.
    dyq = quantize(dy_, dy, false, recipe_->grad_stochastic, 2 * index);
    ++grad_quantizations_;
    ops::qmatmul({.out = dx, .a = *dyq, .b = dgrad_weight(), .beta = beta});
    if (!grad_transposes()) dyq.reset();  // not needed through wgrad
  }
  if (!defer_weight_grad_) return weight_grad(dy, x, index, shared, dyq ? &*dyq : nullptr);
  // Deferred: where wgrad transposes dy's codes, the queue keeps them instead of dy, so that
  // weight_backward does not quantize dy^T again (an amax and an encoding pass).
  pending_.push_back(
      {.dy = dyq ? Tensor() : dy, .dy_codes = std::move(dyq), .x = x, .backward_index = index});
}

void Linear::weight_backward(SharedInput* shared) {
  if (pending_.empty())
    throw Error("Linear " + module_ + ": weight_backward without a deferred backward");
  const Pending p = std::move(pending_.front());
  pending_.pop_front();
  weight_grad(p.dy, p.x, p.backward_index, shared, p.dy_codes ? &*p.dy_codes : nullptr);
}

void Linear::weight_grad(const Tensor& dy, const Tensor& x, uint64_t backward_index,
                         SharedInput* shared, const lowp::QTensor* dy_codes) {
  if (!recipe_) return accumulate_weight_grad(w_.grad, dy, x);
  // wgrad: dW (O, I) += dy^T (O, N) . x^T (I, N)^T, K = N; FP32 straight into the grad. dy^T
  // as dgrad's codes transposed where that is its quantization (a byte transpose instead of an
  // amax and an encoding pass; dy_'s statistics are dy's either way).
  lowp::QTensor dytq;
  if (dy_codes) {
    dytq = transposed(*dy_codes);
  } else {
    dytq = quantize(dy_, dy, true, recipe_->grad_stochastic, 2 * backward_index + 1);
    ++grad_quantizations_;
  }
  lowp::QTensor xtq = quantize_input(x, true, shared);
  ops::qmatmul({.out = w_.grad, .a = dytq, .b = xtq, .beta = 1});
}

OperandStats Linear::read(const Operand& op) const {
  if (!op.stats.defined() || op.numel == 0) return {};
  const std::vector<float> s = tensor_to_floats(op.stats);
  return {.amax = s[0], .saturated_fraction = double(s[1]) / double(op.numel)};
}

LinearStats Linear::stats() const {
  return {.x = read(x_), .w = read(weight_), .dy = read(dy_)};
}

}  // namespace h2::models
