// Pipeline schedules as data: an Action is one step of one rank (a compute pass, a point-to-point
// transfer, or an FSDP/gradient-reduction step), and a Schedule is every rank's ordered list of
// actions plus the shape that gives them meaning (ranks, stages, micro-batches, stage -> rank).
//
// Conventions (docs/architecture.md, "Pipelines"):
//  - An action's `stage` is always a stage that lives on the rank whose list holds it. For
//    SEND_*/RECV_* it is the local end of the transfer and `peer` the remote stage: SEND_F s -> s+1
//    carries stage s's output activation, RECV_F s <- s-1 receives stage s's input, SEND_B s ->
//    s-1 carries stage s's input gradient, RECV_B s <- s+1 receives stage s's output gradient.
//  - UNSHARD, RESHARD and REDUCE_GRAD concern a whole stage: `microbatch` and `peer` are -1.
//  - B is a full backward; I (input gradient) and W (weight gradient) split it (B = I + W).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h2::parallel::pipeline {

enum class ActionKind : uint8_t {
  F,            // forward of one micro-batch through one stage
  B,            // full backward (input and weight gradients)
  I,            // backward for the input gradient only
  W,            // backward for the weight gradient only
  SEND_F,       // send the forward activation to the next stage
  RECV_F,       // receive the forward activation from the previous stage
  SEND_B,       // send the input gradient to the previous stage
  RECV_B,       // receive the output gradient from the next stage
  UNSHARD,      // FSDP: all-gather the stage's parameters
  RESHARD,      // FSDP: free the gathered parameters
  REDUCE_GRAD,  // reduce (FSDP: reduce-scatter) the stage's accumulated gradients
};
inline constexpr int kNumActionKinds = 11;

// The kind's name as printed (F, SEND_F, REDUCE_GRAD, ...); parse_action_kind is its inverse.
std::string_view action_kind_name(ActionKind kind);
std::optional<ActionKind> parse_action_kind(std::string_view name);

inline bool is_compute(ActionKind k) {
  return k == ActionKind::F || k == ActionKind::B || k == ActionKind::I || k == ActionKind::W;
}
inline bool is_backward(ActionKind k) {
  return k == ActionKind::B || k == ActionKind::I || k == ActionKind::W;
}
inline bool is_send(ActionKind k) {
  return k == ActionKind::SEND_F || k == ActionKind::SEND_B;
}
inline bool is_recv(ActionKind k) {
  return k == ActionKind::RECV_F || k == ActionKind::RECV_B;
}
inline bool is_comm(ActionKind k) {
  return is_send(k) || is_recv(k);
}
inline bool is_stage_wide(ActionKind k) {
  return k == ActionKind::UNSHARD || k == ActionKind::RESHARD || k == ActionKind::REDUCE_GRAD;
}

struct Action {
  ActionKind kind = ActionKind::F;
  int stage = 0;
  int microbatch = -1;  // -1 for stage-wide actions
  int peer = -1;        // remote stage of SEND_*/RECV_*, else -1

  static Action compute(ActionKind kind, int stage, int microbatch) {
    return {kind, stage, microbatch, -1};
  }
  static Action comm(ActionKind kind, int stage, int microbatch, int peer) {
    return {kind, stage, microbatch, peer};
  }
  static Action stage_wide(ActionKind kind, int stage) { return {kind, stage, -1, -1}; }

  friend auto operator<=>(const Action&, const Action&) = default;
};

// Compact text form: F3.7 (kind, stage, micro-batch), SEND_F3.7->4, RECV_B3.7<-4, UNSHARD3.
std::string to_string(const Action& action);

// Every rank's ordered actions and the shape they refer to. Stages are numbered in model order
// (stage 0 takes the input, stage `stages - 1` computes the loss); `stage_rank[s]` is the rank
// that runs stage s.
struct Schedule {
  int ranks = 0;
  int stages = 0;
  int microbatches = 0;
  std::vector<int> stage_rank;
  std::vector<std::vector<Action>> per_rank;

  // An empty schedule of `stages` stages over `ranks` ranks, stage s on rank s % ranks (the
  // Megatron / PyTorch interleaved layout; stage = rank when stages == ranks). Throws unless
  // stages is a positive multiple of ranks and microbatches is positive.
  static Schedule with_shape(int ranks, int stages, int microbatches);

  int rank_of(int stage) const { return stage_rank.at(static_cast<size_t>(stage)); }
  // Model chunks per rank (v) of the round-robin layout.
  int chunks() const { return ranks > 0 ? stages / ranks : 0; }
  // True when any rank's list holds a SEND_* or RECV_* (add_send_recv has run).
  bool has_comm() const;
  // Throws h2::Error naming the bad field unless the shape is consistent (positive sizes, one
  // rank entry per stage and every entry a valid rank, one list per rank).
  void check_shape() const;

  friend bool operator==(const Schedule&, const Schedule&) = default;
};

}  // namespace h2::parallel::pipeline
