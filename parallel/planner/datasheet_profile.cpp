// Data-sheet profiles (see datasheet_profile.h for every formula).
#include "parallel/planner/datasheet_profile.h"

#include <fmt/format.h>

#include "core/error.h"

namespace h2::parallel::planner {
namespace {

struct Roofline {
  double gemm_flops_per_s, attention_flops_per_s, bytes_per_s, scale;
  double seconds(double gemm_flops, double attention_flops, double bytes) const {
    return scale * (gemm_flops / gemm_flops_per_s + attention_flops / attention_flops_per_s +
                    bytes / bytes_per_s);
  }
};

int64_t to_bytes(double bytes) {
  return int64_t(bytes + 0.5);
}

}  // namespace

std::string datasheet_origin(const Efficiency& e) {
  return fmt::format(
      "datasheet (efficiency: GEMM {:g} x N / (N + {:g}) for N tokens, attention {:g} x T / (T + "
      "{:g}) for a T-token sequence, memory {:g})",
      e.gemm, e.gemm_half_tokens, e.attention, e.attention_half_tokens, e.memory);
}

ChipProfile datasheet_profile(const ChipSpec& chip, double time_scale, const ModelShape& model,
                              DType dtype, const std::vector<int64_t>& rows, const Efficiency& e) {
  const double peak = chip.peak(dtype);
  if (!(peak > 0) || !(chip.memory_bandwidth > 0))
    H2_THROW(ConfigError,
             "chip type '{}' has no peak FLOP/s for {} or no memory bandwidth: a data-sheet "
             "profile needs both",
             chip.name, dtype_name(dtype));
  H2_CHECK(e.gemm > 0 && e.attention > 0 && e.memory > 0 && e.gemm_half_tokens >= 0 &&
               e.attention_half_tokens >= 0,
           "efficiencies must be positive");
  const double b = double(dtype_storage_bytes(dtype, 1));
  const double C = double(model.dim), T = double(model.seq_len), V = double(model.vocab_size);
  const double K = C / double(model.n_heads) * double(model.n_kv_heads), F = double(model.ffn_dim);
  const double H = double(model.n_heads);
  const double master = b < 4 ? 8.0 : 0.0;  // FP32 master weights beside a 16-bit copy
  const double block_params = double(model.block_parameters());

  ChipProfile p;
  p.key = profile_key(chip, time_scale, model, dtype, datasheet_origin(e));
  const double attention_efficiency = e.attention * T / (T + e.attention_half_tokens);
  for (const int64_t r : rows) {
    H2_CHECK(r >= 1, "a data-sheet profile of {} rows", r);
    const double N = double(r) * T;
    const Roofline roof{e.gemm * N / (N + e.gemm_half_tokens) * peak, attention_efficiency * peak,
                        e.memory * chip.memory_bandwidth, chip.time_scale * time_scale};
    std::array<UnitCost, kUnitKinds> units;

    UnitCost& blk = units[size_t(UnitKind::block)];
    const double gemm = 2 * N * (2 * C * C + 2 * C * K + 3 * C * F);
    const double attention = 2 * N * T * C;
    const double bytes = block_params * b + N * (12 * C + 4 * F) * b;
    blk.forward_s = roof.seconds(gemm, attention, bytes);
    blk.input_s = roof.seconds(gemm, 2 * attention, 2 * bytes);
    blk.weight_s = roof.seconds(gemm, 0, block_params * 4);
    blk.backward_s = blk.input_s + blk.weight_s;
    blk.optimizer_s = roof.seconds(0, 0, block_params * (28 + master));
    blk.stash_bytes = to_bytes(N * (6 * C + 2 * K + 3 * F) * b + N * H * 4);
    blk.forward_workspace_bytes = to_bytes(N * 2 * F * b);
    blk.workspace_bytes = to_bytes(N * (2 * F + 4 * C) * b);
    blk.deferred_bytes = to_bytes(N * (4 * C + F) * b);

    UnitCost& emb = units[size_t(UnitKind::embedding)];
    const double emb_params = double(model.embedding_parameters());
    emb.forward_s = roof.seconds(0, 0, N * C * b);
    emb.backward_s = roof.seconds(0, 0, N * C * 4 * 2);
    emb.input_s = 0;
    emb.weight_s = emb.backward_s;
    emb.optimizer_s = roof.seconds(0, 0, emb_params * (28 + master));
    emb.stash_bytes = to_bytes(N * 4);

    UnitCost& head = units[size_t(UnitKind::head)];
    const double head_params = double(model.head_parameters());
    const double logits = 2 * N * C * V;
    head.forward_s = roof.seconds(logits, 0, head_params * b + N * V * 4 * 2);
    head.input_s = roof.seconds(logits, 0, N * V * 4 * 2);
    head.weight_s = roof.seconds(logits, 0, head_params * 4);
    head.backward_s = head.input_s + head.weight_s;
    head.optimizer_s = roof.seconds(0, 0, head_params * (28 + master));
    head.stash_bytes = to_bytes(N * C * b + N * V * 4);
    head.forward_workspace_bytes = to_bytes(N * V * 4);
    head.workspace_bytes = to_bytes(N * V * 4 + N * C * 4);
    head.deferred_bytes = to_bytes(N * C * b);

    p.by_rows[r] = units;
  }
  return p;
}

}  // namespace h2::parallel::planner
