// Unit profiles measured on a device (see unit_profiler.h).
#include "train/unit_profiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "core/error.h"
#include "core/tensor_host.h"
#include "models/llama.h"
#include "nn/loss.h"
#include "optim/adamw.h"

namespace h2::train {
namespace {

namespace planner = parallel::planner;
using Clock = std::chrono::steady_clock;

// Seconds `fn` takes on `device`, its stream drained before and after.
template <class Fn>
double timed(Device& device, Fn&& fn) {
  device.default_stream().synchronize();
  const auto start = Clock::now();
  fn();
  device.default_stream().synchronize();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Tensor random_tensor(const Shape& shape, DType dtype, Device& device, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  for (float& v : values) v = normal(rng);
  return tensor_from_floats(values, shape, dtype, device);
}

Tensor random_ids(int64_t n, int64_t vocab, Device& device, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t& id : ids) id = pick(rng);
  return tensor_from_ints(ids, {n}, DType::i32, device);
}

// Whether any tensor of `stash` lies in `x`'s memory (the unit kept its input).
bool holds(const nn::Stash& stash, const Tensor& x) {
  if (!x.defined()) return false;
  for (const Tensor& t : stash)
    if (t.defined() && t.may_alias(x)) return true;
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int64_t median_bytes(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One measurement of one unit at one size.
struct Sample {
  double forward = 0, backward = 0, input = 0, weight = 0, optimizer = 0;
  int64_t stash = 0, forward_workspace = 0, workspace = 0, deferred = 0;
};

class UnitRunner {
 public:
  UnitRunner(models::Llama& model, int64_t rows, std::mt19937& rng)
      : model_(model), device_(model.device()), rows_(rows), rng_(rng) {
    const int64_t T = model.config().seq_len;
    ids_ = random_ids(rows * T, model.vocab_size(), device_, rng).view({rows, T});
    targets_ = random_ids(rows * T, model.vocab_size(), device_, rng);
    hidden_ = random_tensor({rows, T, model.hidden_size()}, model.dtype(), device_, rng);
  }

  // unit 0 the embedding, 1 the block, 2 the head (with the loss).
  Sample measure(int index, optim::AdamW& optimizer) {
    nn::Unit& unit = *model_.units()[size_t(index)];
    Allocator& memory = device_.allocator();
    const Tensor input = index == 0 ? ids_ : hidden_;
    Sample s;
    // Forward: its time, what it keeps (its input included when it keeps it) and its peak.
    memory.reset_peak();
    const int64_t base = memory.stats().bytes_in_use;
    Tensor out, dout;
    s.forward = timed(device_, [&] { out = forward(index, unit, input, dout); });
    nn::Stash stash = unit.take_stash();
    const int64_t produced = out.nbytes() + (dout.defined() ? dout.nbytes() : 0);
    const int64_t after = memory.stats().bytes_in_use;
    s.stash = after - base - produced + (index > 0 && holds(stash, input) ? input.nbytes() : 0);
    s.forward_workspace = std::max<int64_t>(memory.stats().peak_bytes_in_use - after, 0);
    if (!dout.defined()) dout = random_tensor(out.shape(), out.dtype(), device_, rng_);
    // Whole backward.
    unit.put_stash(std::move(stash));
    memory.reset_peak();
    const int64_t before_backward = memory.stats().bytes_in_use;
    s.backward = timed(device_, [&] { unit.backward(dout); });
    s.workspace = std::max<int64_t>(memory.stats().peak_bytes_in_use - before_backward, 0);
    // Split backward: input gradient, then the weight gradient.
    Tensor again, unused;
    const int64_t before_again = memory.stats().bytes_in_use;
    again = forward(index, unit, input, unused);
    unit.put_stash(unit.take_stash());
    unit.set_defer_weight_grads(true);
    s.input = timed(device_, [&] { unit.backward(dout); });
    // What the deferred weight gradient holds from the input-gradient pass until it runs.
    s.deferred = std::max<int64_t>(memory.stats().bytes_in_use - before_again - again.nbytes() -
                                       (unused.defined() ? unused.nbytes() : 0),
                                   0);
    unit.set_defer_weight_grads(false);
    s.weight = timed(device_, [&] { unit.weight_backward(); });
    s.optimizer = timed(device_, [&] {
      (void)optimizer.grad_sum_squares();
      optimizer.step(1e-4);
    });
    return s;
  }

 private:
  // The unit's forward; the head also computes the loss and its gradient, as the last stage does.
  Tensor forward(int index, nn::Unit& unit, const Tensor& input, Tensor& dlogits) {
    Tensor out = unit.forward(input);
    if (index != 2) return out;
    const int64_t N = out.numel() / model_.vocab_size();
    Tensor logits = out.view({N, model_.vocab_size()});
    dlogits = Tensor::empty(logits.shape(), logits.dtype(), device_);
    (void)nn::cross_entropy_loss(logits, targets_, dlogits, 1.0f);
    dlogits = dlogits.view(out.shape());
    return out;
  }

  models::Llama& model_;
  Device& device_;
  int64_t rows_;
  std::mt19937& rng_;
  Tensor ids_, targets_, hidden_;
};

}  // namespace

planner::ChipProfile profile_chip(Device& device, const planner::ProfileKey& key,
                                  const ProfileOptions& options) {
  H2_CHECK(options.repeats >= 1 && !options.rows.empty(), "profile: {} repeats of {} sizes",
           options.repeats, options.rows.size());
  const planner::ModelShape& shape = key.model;
  const models::LlamaConfig config{.vocab_size = shape.vocab_size,
                                   .dim = shape.dim,
                                   .n_layers = 1,
                                   .n_heads = shape.n_heads,
                                   .n_kv_heads = shape.n_kv_heads,
                                   .ffn_dim = shape.ffn_dim,
                                   .seq_len = shape.seq_len,
                                   .tie_embeddings = shape.tie_embeddings};
  models::Llama model(config, device, {.dtype = key.dtype, .seed = options.seed});
  std::vector<std::unique_ptr<optim::AdamW>> optimizers;
  for (nn::Unit* unit : model.units()) {
    std::vector<optim::ParamRef> refs;
    for (nn::Param* p : nn::params_of(*unit)) refs.push_back({p->name, p->value, p->grad});
    optimizers.push_back(
        refs.empty() ? nullptr : std::make_unique<optim::AdamW>(refs, optim::AdamwOptions{}));
  }
  std::mt19937 rng(uint32_t(options.seed));
  planner::ChipProfile profile{.key = key};
  const PacingStats pacing_before = device.pacing().value_or(PacingStats{});
  for (int64_t rows : options.rows) {
    UnitRunner runner(model, rows, rng);
    std::array<planner::UnitCost, planner::kUnitKinds> costs;
    for (int k = 0; k < planner::kUnitKinds; ++k) {
      std::vector<Sample> samples;
      for (int r = 0; r <= options.repeats; ++r) {
        optim::AdamW dummy({}, {});
        Sample s = runner.measure(k, optimizers[size_t(k)] ? *optimizers[size_t(k)] : dummy);
        if (r > 0) samples.push_back(s);  // the first run warms caches and allocator
      }
      auto field = [&](double Sample::*f) {
        std::vector<double> v;
        for (const Sample& s : samples) v.push_back(s.*f);
        return median(v);
      };
      auto bytes = [&](int64_t Sample::*f) {
        std::vector<int64_t> v;
        for (const Sample& s : samples) v.push_back(s.*f);
        return median_bytes(v);
      };
      costs[size_t(k)] = {.forward_s = field(&Sample::forward),
                          .backward_s = field(&Sample::backward),
                          .input_s = field(&Sample::input),
                          .weight_s = field(&Sample::weight),
                          .optimizer_s = field(&Sample::optimizer),
                          .stash_bytes = bytes(&Sample::stash),
                          .forward_workspace_bytes = bytes(&Sample::forward_workspace),
                          .workspace_bytes = bytes(&Sample::workspace),
                          .deferred_bytes = bytes(&Sample::deferred)};
    }
    profile.by_rows[rows] = costs;
    if (options.progress)
      options.progress(fmt::format(
          "  {} rows: embedding {:.2f}/{:.2f} ms, block {:.2f}/{:.2f} ms, head {:.2f}/{:.2f} ms "
          "(forward/backward), block keeps {:.2f} MiB",
          rows, 1e3 * costs[0].forward_s, 1e3 * costs[0].backward_s, 1e3 * costs[1].forward_s,
          1e3 * costs[1].backward_s, 1e3 * costs[2].forward_s, 1e3 * costs[2].backward_s,
          double(costs[1].stash_bytes) / (1 << 20)));
  }
  if (const std::optional<PacingStats> after = device.pacing()) {
    PacingStats run = *after;
    run.events -= pacing_before.events, run.overruns -= pacing_before.overruns;
    run.modelled_s -= pacing_before.modelled_s, run.overrun_s -= pacing_before.overrun_s;
    profile.overrun_share = run.overrun_share();
  }
  return profile;
}

}  // namespace h2::train
