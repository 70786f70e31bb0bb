// Moving activations and gradients between the ranks of a pipeline (see pipeline_runtime.h): the
// rows each rank of a group holds, the pieces that go to the ranks of a group of another size,
// the wire dtype (narrowed, or FP8 codes with a scale per token) and the message tags.
#include <fmt/format.h>

#include "core/error.h"
#include "core/lowp/quant_spec.h"
#include "core/ops.h"
#include "parallel/pipeline/pipeline_runtime.h"
#include "parallel/pipeline/segments.h"

namespace h2::parallel::pipeline {
namespace {

std::pair<int64_t, int64_t> intersect(std::pair<int64_t, int64_t> a,
                                      std::pair<int64_t, int64_t> b) {
  return {std::max(a.first, b.first), std::min(a.second, b.second)};
}

}  // namespace

int PipelineRuntime::tag(int from_stage, int mb, bool gradient, int part, int segment) const {
  const int message = ((mb * schedule_.stages + from_stage) * 2 + (gradient ? 1 : 0)) * 2 + part;
  return message * kMaxSegments + segment;
}

std::vector<std::pair<int64_t, int64_t>> PipelineRuntime::segments_of(int64_t tokens) const {
  const DType wire = wire_dtype_.value_or(model_.dtype());
  return transfer_segments(tokens, dtype_storage_bytes(wire, model_.hidden_size()), segment_bytes_,
                           kMaxSegments);
}

namespace {

// FP8 wire format: E4M3 codes with one FP32 amax scale per token (row of C channels).
constexpr lowp::QuantSpec kWireSpec{
    .element = lowp::Format::e4m3, .rule = lowp::ScaleRule::f32_amax, .block_rows = 1};

}  // namespace

std::pair<int64_t, int64_t> PipelineRuntime::rows_of(int q, int k, int mb) const {
  return group_rows(batches_.at(size_t(mb)).rows, k, int64_t(groups_.at(size_t(q)).size()));
}

Tensor PipelineRuntime::take_incoming(std::map<Key, Incoming>& box, Key key, const char* what) {
  auto it = box.find(key);
  H2_CHECK(it != box.end(), "stage {} micro-batch {}: no {} (schedule order broken)", key.stage,
           key.microbatch, what);
  Incoming in = std::move(it->second);
  box.erase(it);
  Tensor t = std::move(in.tensor);
  if (in.segments.empty() || (!in.scales.defined() && t.dtype() == model_.dtype())) {
    for (Segment& segment : in.segments)
      for (auto& request : segment.requests) request->wait();
    return t;  // a local hand-over, or the compute dtype on the wire
  }
  // Each segment is widened (or dequantized) as soon as it is here, while later ones arrive.
  const int64_t C = t.size(2);
  Tensor out = Tensor::empty(t.shape(), model_.dtype(), model_.device());
  Tensor wire = t.view({t.size(0) * t.size(1), C}), flat = out.view(wire.shape());
  for (Segment& segment : in.segments) {
    for (auto& request : segment.requests) request->wait();
    Tensor to = flat.slice(0, segment.begin, segment.end);
    Tensor from = wire.slice(0, segment.begin, segment.end);
    if (in.scales.defined())  // FP8 wire: codes with a scale per token
      ops::dequantize(
          {.out = to,
           .q = {from, in.scales.slice(0, segment.begin, segment.end), Tensor(), kWireSpec}});
    else
      ops::copy({.out = to, .in = from});
  }
  return out;
}

void PipelineRuntime::post_sends(Tensor mine, int stage, int peer_stage, int mb, bool gradient) {
  const auto rows = rows_of(position_, group_rank_, mb);
  const int q = position_of(peer_stage);
  const int64_t C = mine.size(2);
  for (int j = 0; j < int(groups_[size_t(q)].size()); ++j) {
    const auto [lo, hi] = intersect(rows, rows_of(q, j, mb));
    if (lo >= hi) continue;
    Tensor piece = mine.slice(0, lo - rows.first, hi - rows.first).contiguous();
    piece = piece.view({piece.size(0) * piece.size(1), C});
    const int peer = groups_[size_t(q)][size_t(j)];
    const auto segments = segments_of(piece.size(0));
    for (int k = 0; k < int(segments.size()); ++k) {
      Tensor part = piece.slice(0, segments[size_t(k)].first, segments[size_t(k)].second);
      if (fp8_wire()) {
        lowp::QTensor wire = lowp::QTensor::empty(kWireSpec, part.size(0), C, part.device());
        ops::quantize({.q = wire, .in = part});
        sends_.push_back(
            {job_.isend(wire.codes, peer, tag(stage, mb, gradient, 0, k)), wire.codes});
        sends_.push_back(
            {job_.isend(wire.scales, peer, tag(stage, mb, gradient, 1, k)), wire.scales});
        continue;
      }
      if (wire_dtype_ && *wire_dtype_ != part.dtype()) part = part.to(*wire_dtype_);
      sends_.push_back({job_.isend(part, peer, tag(stage, mb, gradient, 0, k)), part});
    }
    if (lane_) {  // one span per piece, closed by its last message
      sends_.back().lane_id = next_lane_id_;
      lane_->transfer_posted(
          next_lane_id_++,
          fmt::format("{} {}.{} -> rank {}", gradient ? "SEND_B" : "SEND_F", stage, mb, peer));
    }
  }
}

void PipelineRuntime::reap_sends() {
  std::erase_if(sends_, [this](SendInFlight& s) {
    if (!s.request->test()) return false;
    if (lane_ && s.lane_id >= 0) lane_->transfer_done(s.lane_id);
    return true;
  });
}

void PipelineRuntime::wait_sends() {
  for (SendInFlight& send : sends_) {
    send.request->wait();
    if (lane_ && send.lane_id >= 0) lane_->transfer_done(send.lane_id);
  }
  sends_.clear();
}

void PipelineRuntime::post_receives(std::map<Key, Incoming>& box, int stage, int peer_stage, int mb,
                                    bool gradient) {
  const auto rows = rows_of(position_, group_rank_, mb);
  const int64_t my_rows = rows.second - rows.first, C = model_.hidden_size();
  Incoming in{
      Tensor::empty({my_rows, seq_len_, C}, wire_dtype_.value_or(model_.dtype()), model_.device()),
      fp8_wire() ? Tensor::empty({my_rows * seq_len_, 1}, DType::f32, model_.device()) : Tensor(),
      {}};
  Tensor tokens = in.tensor.view({my_rows * seq_len_, C});
  const int q = position_of(peer_stage);
  for (int k = 0; k < int(groups_[size_t(q)].size()); ++k) {
    const auto [lo, hi] = intersect(rows, rows_of(q, k, mb));
    if (lo >= hi) continue;
    const int peer = groups_[size_t(q)][size_t(k)];
    const int64_t base = (lo - rows.first) * seq_len_;
    const auto segments = segments_of((hi - lo) * seq_len_);
    for (int s = 0; s < int(segments.size()); ++s) {
      Segment segment{base + segments[size_t(s)].first, base + segments[size_t(s)].second, {}};
      segment.requests.push_back(job_.irecv(tokens.slice(0, segment.begin, segment.end), peer,
                                            tag(peer_stage, mb, gradient, 0, s)));
      if (in.scales.defined())
        segment.requests.push_back(job_.irecv(in.scales.slice(0, segment.begin, segment.end), peer,
                                              tag(peer_stage, mb, gradient, 1, s)));
      in.segments.push_back(std::move(segment));
    }
  }
  box[{stage, mb}] = std::move(in);
}

}  // namespace h2::parallel::pipeline
