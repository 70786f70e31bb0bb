// Runs one rank's part of a pipeline schedule (schedules as data: action.h) on a model's units
// (nn::Model), with HeteroPP's stage groups: a schedule position (a "rank" of the schedule) is a
// group of one or more ranks of one replica, of any size, each group running its stages' units.
// It is the executor inside the one runtime (parallel/runtime/plan_runtime.h), which adds data
// parallel replicas and the optimizer state; a one-rank replica runs the same code (one stage,
// every hand-over local).
//
// Every stage runs a contiguous range of units (stage_layout.h). A micro-batch of M rows is
// split over a group of g ranks, rank k taking rows [M k / g, M (k + 1) / g); between stages whose
// groups differ, activations and gradients are re-split: each rank sends the rows it holds to the
// ranks of the next (or previous) group that own them.
//
// For every action of the position's lowered list, in order: F runs the stage's units forward on
// the rank's rows (the token ids on stage 0, else the activation received from, or left by, the
// previous stage) and takes each unit's stash out, keyed by micro-batch; the last stage also
// computes the loss and its gradient, scaled so that the group's gradients add up to the
// gradient of the micro-batch's mean loss over all its rows, divided by the step's micro-batches
// over all replicas (options.loss_micro_batches). B puts the stashes
// back and runs the units backward, accumulating weight gradients. SEND_*/RECV_* post
// non-blocking transfers; a receive is waited for by the compute that consumes it. I runs the
// backward without the linear layers' weight gradients (dy^T x), which the units keep until W
// adds them, in the order of the I's (ZB-H1); norm, embedding and head weights take theirs in I.
// Without FSDP, parameters are replicated within a group, REDUCE_GRAD sums the stage's gradients
// over it and UNSHARD/RESHARD are no-ops. With FSDP every unit's parameters are sharded over its
// group (fsdp/flat_param.h): UNSHARD gathers the stage's units, RESHARD frees them and REDUCE_GRAD
// reduce-scatters their gradients into the shards, which fsdp::ShardedAdamW then updates.
//
// A stage's micro-batch gradients accumulate in micro-batch order, as in one process with
// gradient accumulation, so a pipeline of one-rank groups reproduces its numerics bit for bit.
// With tied embeddings (one-rank groups only) the table lives on the first and the last stage's
// ranks; their gradients are summed between them at the end of the step.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "nn/model.h"
#include "parallel/fsdp/flat_param.h"
#include "parallel/pipeline/action.h"
#include "parallel/pipeline/progress_thread.h"
#include "parallel/pipeline/stage_layout.h"

namespace h2::parallel::pipeline {

// Told when each action of a training step starts and ends on this rank (a timeline, the
// measured bubble, peak stashes). Called on the rank's own thread, in action order.
class ActionObserver {
 public:
  virtual ~ActionObserver() = default;
  virtual void step_started() {}
  virtual void action_started(const Action& action) = 0;
  // A compute action's inputs have arrived (the wait before this is idle, not work).
  virtual void action_ready(const Action& action) {}
  // The running compute action waited this long for transfers other than its inputs: a
  // prefetched FSDP gather of one of its units, or (overlap off) the rank's own sends
  // (communication that compute did not hide; not work).
  virtual void comm_waited(double microseconds) {}
  // The communication lane: transfer `id` (unique in the step) was posted / was seen complete
  // (completions are observed at safe points: after actions and between units). `label` names
  // it ("SEND_F 0.3 -> 1", "gather unit 4").
  virtual void transfer_posted(int64_t id, const std::string& label) {}
  virtual void transfer_done(int64_t id) {}
  virtual void action_finished(const Action& action) = 0;
  virtual void step_finished() {}
};

// One micro-batch, whole (every rank sees every row): token ids and targets (rows * T, i32 on
// the model's device) and its rows.
struct MicroBatch {
  Tensor ids, targets;
  int64_t rows = 0;
};
// Every rank calls it for every micro-batch of the step (it must be cheap and deterministic).
using MicroBatchSource = std::function<MicroBatch(int microbatch)>;

struct PipelineOptions {
  int64_t seq_len = 0;           // T of every micro-batch
  std::vector<int> group_sizes;  // ranks of each position; empty: one rank each
  bool fsdp = false;             // shard every unit's parameters over its group
  // The dtype activations and gradients travel in between ranks (bf16 halves the bytes; the
  // receiver widens them back to the compute dtype). f8e4m3 sends E4M3 codes with one FP32 amax
  // scale per token (a quarter of the f32 bytes plus 4 per token), dequantized on arrival.
  // nullopt: the compute dtype.
  std::optional<DType> wire_dtype;
  // Transfers run while the rank computes: sends are waited for at the end of the step and, with
  // FSDP, UNSHARD only posts its units' gathers, each unit waiting for its own (prefetch).
  // false: the next compute waits for every send in flight once its inputs are here, so the
  // rank spends the link's time (on a paced link, until the last byte has left), and UNSHARD
  // gathers the whole stage: the no-overlap baseline. The same numerics either way.
  bool overlap = true;
  // Each piece of an activation or gradient goes in segments of about this many wire bytes (whole
  // tokens, at most 64 per piece), converted to the wire dtype and posted one after another; the
  // receiver converts each back as it arrives. 0: one message per piece. Same values either way
  // (the FP8 wire scales each token on its own).
  size_t segment_bytes = 0;
  // Progress while computing: > 0 starts a helper thread (progress_thread.h) that drives the
  // communicators every this many microseconds while a unit computes; 0: progress at safe points
  // only (between units and after actions), no extra thread. docs/performance.md measures both.
  int progress_thread_us = 0;
  // The loss gradient is that of the mean over this many micro-batches (the step's, over every
  // replica); 0: the schedule's own.
  int loss_micro_batches = 0;
};

class PipelineRuntime {
 public:
  // `schedule`: the lowered schedule of options.group_sizes.size() positions; position q is the
  // replica's ranks sum(group_sizes[< q]) .. + group_sizes[q] - 1, and stage s runs layout's
  // units. Collective over `replica` (creates the group communicators).
  PipelineRuntime(nn::Model& model, StageLayout layout, Schedule schedule,
                  comm::Communicator& replica, PipelineOptions options);
  ~PipelineRuntime();

  // One step: every action of this rank's position. Returns each micro-batch's mean loss (the
  // last group's row shares added in rank order), the same on every rank of the replica.
  // Gradients accumulate (the caller zeroes them between steps).
  std::vector<double> train_step(const MicroBatchSource& source);
  // Forward only over `microbatches` micro-batches (evaluation); their losses as train_step's.
  std::vector<double> evaluate(const MicroBatchSource& source, int microbatches);

  // Told, during a training step, each unit (index into model.units()) of this rank the moment
  // its gradients are final for the step: right after its last backward (B, or W when split)
  // when its group is one rank without FSDP, else after REDUCE_GRAD reduced them. Units report
  // in backward order. Data-parallel replicas reduce them meanwhile.
  void set_gradients_final(std::function<void(int unit)> callback) {
    gradients_final_ = std::move(callback);
  }
  // The gradients a step leaves on this rank, per unit of the model: the unit's FSDP gradient
  // shard, or its Params' grads; empty for units other ranks run.
  std::vector<std::vector<Tensor>> gradients_per_unit() const;

  // Receives every training step's actions (not evaluation's); nullptr stops. Not owned.
  void set_observer(ActionObserver* observer) { observer_ = observer; }
  // Activations stashed on this rank right now (forwards whose backward has not run), by stage.
  std::map<int, int> stashed_per_stage() const;

  // Whether this rank runs the unit (an index into model.units()).
  bool owns_unit(int unit) const;
  // The parameters this rank updates, in Hugging Face order (a tied table on the first and the
  // last stage's ranks both), and whether this rank counts the parameter in the global gradient
  // norm and writes it to checkpoints (one rank per parameter: rank 0 of its group; the tied
  // table: the first stage's).
  std::vector<nn::Param*> owned_parameters();
  bool counts_in_norm(const std::string& name) const;

  const StageLayout& layout() const { return layout_; }
  const Schedule& schedule() const { return schedule_; }
  // "2+1 ranks" style description of the groups.
  std::string groups_str() const;
  // FSDP: this rank's units' sharded parameters, in unit order (empty without FSDP).
  std::vector<fsdp::FlatParamGroup*> flat_groups() const;
  bool fsdp() const { return !flats_.empty(); }
  // This rank's stage group (null when every group is one rank and FSDP is off).
  comm::Communicator* stage_group() const { return group_.get(); }
  int group_rank() const { return group_rank_; }
  int position() const { return position_; }
  // Whether the first and the last stage share a tied table across ranks (summed every step).
  bool ties_across_ranks() const { return tied_pair_ != nullptr; }

 private:
  struct Key {
    int stage, microbatch;
    auto operator<=>(const Key&) const = default;
  };
  // Tokens [begin, end) of an incoming tensor and the transfers that bring them (one segment of
  // one sender's piece: the codes, and the scales on an FP8 wire).
  struct Segment {
    int64_t begin = 0, end = 0;
    std::vector<std::unique_ptr<comm::Request>> requests;
  };
  struct Incoming {
    Tensor tensor;  // in the wire dtype while transfers are in flight
    Tensor scales;  // FP8 wire: one FP32 scale per token (B*T, 1) for the codes in `tensor`
    std::vector<Segment> segments;  // in token order; empty for a local hand-over
  };

  // This rank's units whose weights it holds whole (not FSDP-sharded).
  std::vector<nn::Unit*> whole_weight_units() const;
  std::vector<double> run(const std::vector<Action>& actions, const MicroBatchSource& source,
                          int microbatches, bool training);
  // Tells the callback that units [begin, end) of a stage are final (backward order).
  void report_final(int begin_unit, int end_unit);
  // The stage's last backward finished `unit`: its gradients are final on this rank. Reported
  // at once when the group has nothing to reduce, else (overlap on) its reduction is posted.
  void unit_gradients_final(int unit);
  // Whether stage's gradients need REDUCE_GRAD (a group of several ranks, or FSDP shards).
  bool reduces_in_group() const { return group_ != nullptr; }
  // Runs one unit's compute once its prefetched gather is here, with the progress helper
  // driving the communicators meanwhile.
  template <class Compute>
  void compute_unit(int unit, const Compute& compute);
  void forward(int stage, int mb, bool training);
  void backward(ActionKind kind, int stage, int mb);
  void weight_backward(int stage, int mb);
  // Posts the sends of `mine` (taken from its map: the sends keep what they read).
  void post_sends(Tensor mine, int stage, int peer_stage, int mb, bool gradient);
  // Drops the sends that completed, with their buffers.
  void reap_sends();
  // Waits for every send in flight (bounded by the communication timeout).
  void wait_sends();
  void post_receives(std::map<Key, Incoming>& box, int stage, int peer_stage, int mb,
                     bool gradient);
  Tensor take_incoming(std::map<Key, Incoming>& box, Key key, const char* what);
  // REDUCE_GRAD: reduces every unit's gradients in the group (finishing a reduction begun).
  void reduce_grads(int stage);
  void unshard(int stage, bool gather);
  // ZeroPP prefetch (overlap on): UNSHARD posts the gathers of the stage's units, in the order
  // the stage's next compute runs them (backward: last unit first), and each unit waits for its
  // own gather right before it computes, while the later ones move; between units the gathers
  // in flight are polled (progress at safe points).
  void begin_gathers(int stage, bool backward_next);
  void await_gather(int unit);
  // Reduction behind the backward (overlap on, FSDP): the stage's last backward posts each
  // unit's reduce-scatter as soon as the unit's gradients are final, and it moves while the
  // next units run their backward; REDUCE_GRAD finishes them.
  void begin_reduce(int unit);
  // Tests the gathers and reductions of the stage's units in flight (between units).
  void poll_group_transfers(int stage);
  // Message tags of a unit's gather and reduction on the group: distinct for every unit.
  int gather_tag(int unit) const { return unit; }
  int reduce_tag(int unit) const { return int(units_.size()) + unit; }
  // The communication lane's span of the group transfer with message tag `tag`.
  void lane_open(int tag, const std::string& label);
  void lane_close(int tag);
  // Reports the time since `start` as a wait for communication inside a compute action.
  void report_comm_wait(std::chrono::steady_clock::time_point start);
  // Overlap off: a compute, once its inputs are here, first waits for every send in flight (the
  // receives the lowering put before it are posted, so two ranks sending to each other both
  // proceed, as Megatron pairs a send with the opposite receive); the wait is communication.
  void settle_sends();
  void sum_tied_grads();
  // A piece of `tokens` tokens cut into segments (segments.h) of segment_bytes_ on the wire.
  std::vector<std::pair<int64_t, int64_t>> segments_of(int64_t tokens) const;
  // Message tag; `part` 1 is the scales message of an FP8 wire transfer, `segment` the piece's
  // segment.
  int tag(int from_stage, int mb, bool gradient, int part = 0, int segment = 0) const;
  static constexpr int kMaxSegments = 64;
  bool fp8_wire() const { return wire_dtype_ == DType::f8e4m3; }
  int position_of(int stage) const { return schedule_.rank_of(stage); }
  bool here(int stage) const { return position_of(stage) == position_; }
  // Rows [begin, end) of micro-batch `mb` that rank k of position q's group holds.
  std::pair<int64_t, int64_t> rows_of(int q, int k, int mb) const;

  nn::Model& model_;
  std::vector<nn::Unit*> units_;
  nn::Param* tied_ = nullptr;  // the table the first and last units share, if tied
  StageLayout layout_;
  Schedule schedule_;
  comm::Communicator& job_;
  int64_t seq_len_;
  int loss_micro_batches_;
  std::vector<std::vector<int>> groups_;  // job ranks of each position
  int position_ = 0, group_rank_ = 0;
  std::unique_ptr<comm::Communicator> group_;      // this position's ranks (when more than one)
  std::unique_ptr<comm::Communicator> tied_pair_;  // first and last stage's ranks, when tied
  ActionObserver* observer_ = nullptr;
  std::function<void(int unit)> gradients_final_;
  std::map<int, Action> last_backward_;  // stage -> its last B or W action on this position
  std::optional<DType> wire_dtype_;
  bool overlap_ = true;
  size_t segment_bytes_ = 0;
  std::map<int, std::unique_ptr<fsdp::FlatParamGroup>> flats_;  // by unit, FSDP only

  // Per step.
  std::vector<MicroBatch> batches_;
  std::map<Key, std::vector<nn::Stash>> stashes_;
  std::map<Key, Incoming> inputs_;     // stage's input activation (received or handed over)
  std::map<Key, Incoming> out_grads_;  // gradient of the stage's output
  std::map<Key, Tensor> outputs_;      // stage's output activation, until its send is posted
  std::map<Key, Tensor> in_grads_;     // gradient of the stage's input, until its send is posted
  std::map<int, std::deque<int>> deferred_weight_grads_;  // by stage: micro-batches I ran, W not
  // Sends in flight with the tensor each reads (a piece of the output or its wire copy): freed as
  // soon as the send completes (reap_sends after every action), so that a step holds only the
  // transfers in flight, not one buffer per micro-batch.
  struct SendInFlight {
    std::unique_ptr<comm::Request> request;
    Tensor buffer;
    int64_t lane_id = -1;  // the communication lane's span (its last message closes it)
  };
  ActionObserver* lane_ = nullptr;  // the observer of the step running (training), or none
  int64_t next_lane_id_ = 0;
  std::map<int, int64_t> lane_ids_;  // message tag of a group transfer -> its open span
  std::vector<SendInFlight> sends_;
  std::vector<double> losses_;  // per micro-batch: this rank's share of the mean loss
  // Last: stopped before the communicators it drives are destroyed.
  std::unique_ptr<ProgressThread> progress_;
};

}  // namespace h2::parallel::pipeline
