// Moving activations and gradients between the ranks of a pipeline (see pipeline_runtime.h): the
// rows each rank of a group holds, the pieces that go to the ranks of a group of another size,
// the wire dtype (narrowed, or FP8 codes with a scale per token) and the message tags.
#include <fmt/format.h>

#include "core/error.h"
#include "core/lowp/quant_spec.h"
#include "core/ops.h"
#include "parallel/pipeline/pipeline_runtime.h"

namespace h2::parallel::pipeline {
namespace {

std::pair<int64_t, int64_t> intersect(std::pair<int64_t, int64_t> a,
                                      std::pair<int64_t, int64_t> b) {
  return {std::max(a.first, b.first), std::min(a.second, b.second)};
}

}  // namespace

int PipelineRuntime::tag(int from_stage, int mb, bool gradient, int part) const {
  return ((mb * schedule_.stages + from_stage) * 2 + (gradient ? 1 : 0)) * 2 + part;
}

namespace {

// FP8 wire format: E4M3 codes with one FP32 amax scale per token (row of C channels).
constexpr lowp::QuantSpec kWireSpec{
    .element = lowp::Format::e4m3, .rule = lowp::ScaleRule::f32_amax, .block_rows = 1};

}  // namespace

std::pair<int64_t, int64_t> PipelineRuntime::rows_of(int q, int k, int mb) const {
  const int64_t rows = batches_.at(size_t(mb)).rows;
  const int64_t g = int64_t(groups_.at(size_t(q)).size());
  return {rows * k / g, rows * (k + 1) / g};
}

Tensor PipelineRuntime::take_incoming(std::map<Key, Incoming>& box, Key key, const char* what) {
  auto it = box.find(key);
  H2_CHECK(it != box.end(), "stage {} micro-batch {}: no {} (schedule order broken)", key.stage,
           key.microbatch, what);
  for (auto& request : it->second.requests) request->wait();
  Tensor t = std::move(it->second.tensor);
  Tensor scales = std::move(it->second.scales);
  box.erase(it);
  if (scales.defined()) {  // FP8 wire: codes (rows, T, C) with a scale per token
    const int64_t tokens = t.size(0) * t.size(1), C = t.size(2);
    Tensor out = Tensor::empty(t.shape(), model_.dtype(), model_.device());
    ops::dequantize(
        {.out = out.view({tokens, C}), .q = {t.view({tokens, C}), scales, Tensor(), kWireSpec}});
    return out;
  }
  return t.dtype() == model_.dtype() ? t : t.to(model_.dtype());
}

void PipelineRuntime::post_sends(Tensor mine, int stage, int peer_stage, int mb, bool gradient) {
  const auto rows = rows_of(position_, group_rank_, mb);
  const int q = position_of(peer_stage);
  for (int j = 0; j < int(groups_[size_t(q)].size()); ++j) {
    const auto [lo, hi] = intersect(rows, rows_of(q, j, mb));
    if (lo >= hi) continue;
    Tensor piece = mine.slice(0, lo - rows.first, hi - rows.first);
    const int peer = groups_[size_t(q)][size_t(j)];
    if (fp8_wire()) {
      const int64_t tokens = piece.size(0) * piece.size(1), C = piece.size(2);
      lowp::QTensor wire = lowp::QTensor::empty(kWireSpec, tokens, C, piece.device());
      ops::quantize({.q = wire, .in = piece.contiguous().view({tokens, C})});
      sends_.push_back({job_.isend(wire.codes, peer, tag(stage, mb, gradient)), wire.codes});
      sends_.push_back({job_.isend(wire.scales, peer, tag(stage, mb, gradient, 1)), wire.scales});
      continue;
    }
    if (wire_dtype_ && *wire_dtype_ != piece.dtype()) piece = piece.to(*wire_dtype_);
    sends_.push_back({job_.isend(piece, peer, tag(stage, mb, gradient)), piece});
  }
}

void PipelineRuntime::reap_sends() {
  std::erase_if(sends_, [](SendInFlight& s) { return s.request->test(); });
}

void PipelineRuntime::post_receives(std::map<Key, Incoming>& box, int stage, int peer_stage, int mb,
                                    bool gradient) {
  const auto rows = rows_of(position_, group_rank_, mb);
  const int64_t my_rows = rows.second - rows.first;
  Incoming in{
      Tensor::empty({my_rows, seq_len_, model_.hidden_size()}, wire_dtype_.value_or(model_.dtype()),
                    model_.device()),
      fp8_wire() ? Tensor::empty({my_rows * seq_len_, 1}, DType::f32, model_.device()) : Tensor(),
      {}};
  const int q = position_of(peer_stage);
  for (int k = 0; k < int(groups_[size_t(q)].size()); ++k) {
    const auto [lo, hi] = intersect(rows, rows_of(q, k, mb));
    if (lo >= hi) continue;
    const int peer = groups_[size_t(q)][size_t(k)];
    in.requests.push_back(job_.irecv(in.tensor.slice(0, lo - rows.first, hi - rows.first), peer,
                                     tag(peer_stage, mb, gradient)));
    if (in.scales.defined())
      in.requests.push_back(
          job_.irecv(in.scales.view({my_rows, seq_len_}).slice(0, lo - rows.first, hi - rows.first),
                     peer, tag(peer_stage, mb, gradient, 1)));
  }
  box[{stage, mb}] = std::move(in);
}

}  // namespace h2::parallel::pipeline
