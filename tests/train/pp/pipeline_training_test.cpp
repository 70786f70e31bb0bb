// Pipeline-parallel training in real processes (forked ranks on loopback): every schedule and
// stage layout gives, in FP32, the losses, evaluation losses and final parameters of one process
// accumulating the same micro-batches (relative difference below 1e-5): PP=2 with GPipe, 1F1B
// and ZB-H1, PP=4, interleaved PP=2 x 2 chunks, uneven stages (3 + 1 blocks) and tied
// embeddings (the table lives on the first and the last stage and their gradients are summed),
// HeteroPP stage groups of different sizes ((2, 1), (1, 2), (2, 1, 1) ranks), whose ranks
// split each micro-batch's rows and re-split them between groups, FSDP inside the groups
// (PP=2 x FSDP=2, with ZeroPP gathering per 2 micro-batches, and a (2, 1) plan), and replicas of
// a pipeline (PP=2 x DP=2, a (2, 1) ZB-H1 pipeline x DP=2, FSDP=2 x DP=2), each replica taking
// half of the step's micro-batches; 1F1B with a lead (PP=4, each stage 2 micro-batches
// further ahead) and with overlap off (blocking sends), whose losses equal the plain schedule's
// bit for bit; narrow wires (BF16, FP8) close to FP32, sending half and 9/32 of FP32's bytes
// (counted); and segmented transfers equal to whole ones bit for bit.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "comm/communicator.h"
#include "multiproc.h"
#include "support/training_runs.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"
#include "train/trainer.h"

namespace h2::train {
namespace {

namespace fs = std::filesystem;
using namespace testing;

struct PipelineCase {
  std::string name;
  int ranks;
  std::string schedule;
  int chunks = 1;
  int layers = 4;
  std::string stage_layers;
  bool tied = false;
  std::string stage_ranks;  // HeteroPP groups; empty: one rank per stage
  bool fsdp = false;
  int gather_group = 0;  // ZeroPP
  int replicas = 1;      // data-parallel copies of the pipeline, each grad_accum / replicas
  int lead = 0;          // 1f1b: micro-batches each stage runs ahead of the next
};

void PrintTo(const PipelineCase& c, std::ostream* os) {
  *os << c.name;
}

class Pipeline : public ::testing::TestWithParam<PipelineCase> {};

// Trains `steps` steps on one process and on the case's pipeline; returns their checkpoint
// folders (single, pipeline) after comparing every step's loss and evaluation loss.
std::pair<std::string, std::string> train_both(const PipelineCase& c, const fs::path& dir,
                                               int steps) {
  config::TrainConfig base = small_config(dir, c.layers);
  base.model.tie_embeddings = c.tied;
  base.train.steps = steps;
  base.train.eval_every = steps;
  base.train.grad_accum = 4;  // micro-batches per step: divisible by every case's ranks

  config::TrainConfig single = base;
  single.log.metrics_file = (dir / "single.jsonl").string();
  single.checkpoint.dir = (dir / "single").string();
  train_on_ranks(single, 1);

  config::TrainConfig pp = base;
  pp.parallel.mode = config::ParallelMode::pipeline;
  config::apply_override(pp, "parallel.schedule=" + c.schedule);
  pp.parallel.chunks = c.chunks;
  pp.parallel.stage_layers = c.stage_layers;
  pp.parallel.stage_ranks = c.stage_ranks;
  pp.parallel.fsdp = c.fsdp;
  pp.parallel.gather_group = c.gather_group;
  pp.parallel.replicas = c.replicas;
  pp.parallel.lead = c.lead;
  pp.train.grad_accum = base.train.grad_accum / c.replicas;
  pp.log.metrics_file = (dir / "pp.jsonl").string();
  pp.checkpoint.dir = (dir / "pp").string();
  train_on_ranks(pp, c.ranks);

  const Curve got = read_metrics(dir / "pp.jsonl"), want = read_metrics(dir / "single.jsonl");
  EXPECT_EQ(want.loss.size(), size_t(steps));
  expect_close(got.loss, want.loss, "training loss");
  expect_close(got.eval_loss, want.eval_loss, "evaluation loss");
  return {newest_checkpoint(single.checkpoint.dir), newest_checkpoint(pp.checkpoint.dir)};
}

TEST_P(Pipeline, MatchesOneProcessAccumulatingTheSameMicroBatches) {
  const PipelineCase& c = GetParam();
  const auto [single, pp] = train_both(c, fresh_dir("h2_pp_" + c.name), 5);
  if (c.stage_ranks.empty() && c.replicas == 1) {
    // One rank per stage: every gradient is summed in the single process's order.
    EXPECT_LE(max_relative_difference(pp, single), 1e-5);
    return;
  }
  // Groups split a micro-batch's rows, so a gradient is the sum of two partial products where
  // one process computes one; replicas sum their halves of the micro-batches and then each
  // other's ((g0 + g1) + (g2 + g3) where one process adds g0..g3 in turn): equal to rounding
  // (1.6e-5 after 5 steps in the -O1 sanitizer build, below 1e-5 at -O3, by luck). AdamW's
  // normalised update (about lr per element, whatever the gradient's size) magnifies that for
  // near-zero gradients over steps, so the gradients themselves are compared, after one step,
  // through the first moments (0.1 x the gradient), and the parameters after 5 steps within a
  // looser bound.
  EXPECT_LE(max_relative_difference(pp, single), 1e-3);
  const auto [single1, pp1] = train_both(c, fresh_dir("h2_pp_" + c.name + "_one_step"), 1);
  EXPECT_LE(max_relative_difference(pp1, single1, checkpoint::Section::optimizer), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, Pipeline,
    ::testing::Values(
        PipelineCase{"pp2_gpipe", 2, "gpipe"}, PipelineCase{"pp2_1f1b", 2, "1f1b"},
        PipelineCase{"pp2_zbh1", 2, "zb-h1"}, PipelineCase{"pp4_1f1b", 4, "1f1b"},
        PipelineCase{"pp2_interleaved", 2, "interleaved-1f1b", 2},
        PipelineCase{"pp2_uneven", 2, "1f1b", 1, 4, "3,1"},
        PipelineCase{"pp2_tied", 2, "1f1b", 1, 4, "", true},
        PipelineCase{"hetero_2_1", 3, "1f1b", 1, 4, "3,1", false, "2,1"},
        PipelineCase{"hetero_1_2", 3, "gpipe", 1, 4, "1,3", false, "1,2"},
        PipelineCase{"hetero_2_1_1", 4, "1f1b", 1, 4, "2,1,1", false, "2,1,1"},
        PipelineCase{"pp2_fsdp2", 4, "1f1b", 1, 4, "", false, "2,2", true},
        PipelineCase{"pp2_fsdp2_zeropp", 4, "1f1b", 1, 4, "", false, "2,2", true, 2},
        PipelineCase{"pp2_fsdp2_zbh1", 4, "zb-h1", 1, 4, "", false, "2,2", true},
        PipelineCase{"hetero_fsdp_2_1", 3, "gpipe", 1, 4, "3,1", false, "2,1", true},
        PipelineCase{"pp2_x_dp2", 4, "1f1b", 1, 4, "", false, "", false, 0, 2},
        PipelineCase{"zbh1_hetero_x_dp2", 6, "zb-h1", 1, 4, "3,1", false, "2,1", false, 0, 2},
        PipelineCase{"fsdp2_x_dp2", 4, "1f1b", 1, 4, "", false, "2", true, 0, 2},
        PipelineCase{"pp4_1f1b_lead2", 4, "1f1b", 1, 4, "", false, "", false, 0, 1, 2}),
    [](const auto& info) { return info.param.name; });

// A lead, or turning overlap off (every send blocks its rank), changes when each stage runs, not
// what: the losses of PP=4 1F1B with a lead of 2, and with overlap off, equal the plain
// schedule's bit for bit (every stage still runs its backwards in micro-batch order).
TEST(PipelineLead, LeadAndOverlapOffLossesEqualThePlainScheduleBitForBit) {
  const fs::path dir = fresh_dir("h2_pp_lead");
  config::TrainConfig base = small_config(dir, 4);
  base.train.steps = 4;
  base.train.eval_every = 0;
  base.train.grad_accum = 8;
  base.parallel.mode = config::ParallelMode::pipeline;
  struct Variant {
    const char* name;
    int lead;
    bool overlap;
  };
  std::map<std::string, std::map<int64_t, double>> losses;
  for (const Variant& v :
       {Variant{"plain", 0, true}, Variant{"lead2", 2, true}, Variant{"overlap_off", 0, false}}) {
    config::TrainConfig cfg = base;
    cfg.parallel.lead = v.lead;
    cfg.parallel.overlap = v.overlap;
    cfg.log.metrics_file = (dir / fmt::format("{}.jsonl", v.name)).string();
    train_on_ranks(cfg, 4);
    losses[v.name] = read_metrics(cfg.log.metrics_file).loss;
  }
  ASSERT_EQ(losses["plain"].size(), 4u);
  EXPECT_EQ(losses["lead2"], losses["plain"]);  // exact double equality
  EXPECT_EQ(losses["overlap_off"], losses["plain"]);
}

// Checkpoints cross layouts: one process writes step 2, PP=2 x FSDP=2 resumes it (each rank
// taking its shard of every unit) to step 4 and writes whole tensors again, which one process
// resumes to step 6; every loss equals the uninterrupted single-process run's.
TEST(PipelineCheckpoint, OneProcessToFsdpPipelineAndBack) {
  const fs::path dir = fresh_dir("h2_pp_fsdp_resume");
  config::TrainConfig base = small_config(dir, 4);
  base.model.tie_embeddings = false;
  base.train.steps = 6;
  base.train.eval_every = 0;
  base.train.grad_accum = 4;

  config::TrainConfig whole = base;
  whole.log.metrics_file = (dir / "whole.jsonl").string();
  train_on_ranks(whole, 1);

  config::TrainConfig hop = base;
  hop.checkpoint.dir = (dir / "hops").string();
  hop.checkpoint.keep_last = 0;
  hop.log.metrics_file = (dir / "hops.jsonl").string();
  hop.checkpoint.resume = true;
  hop.train.steps = 2;
  train_on_ranks(hop, 1);
  config::TrainConfig fsdp = hop;
  fsdp.train.steps = 4;
  fsdp.parallel.mode = config::ParallelMode::pipeline;
  fsdp.parallel.stage_ranks = "2,2";
  fsdp.parallel.fsdp = true;
  train_on_ranks(fsdp, 4);
  hop.train.steps = 6;
  train_on_ranks(hop, 1);

  const Curve got = read_metrics(dir / "hops.jsonl"), want = read_metrics(dir / "whole.jsonl");
  expect_close(got.loss, want.loss, "loss across 1 process -> PP=2 x FSDP=2 -> 1 process");
}

// A plan whose stage cannot fit its chip is refused by every rank before the model is built,
// naming the rank, the chip and both sizes.
TEST(PipelinePlan, AStageTooLargeForItsChipIsRefusedBeforeAnyWork) {
  const fs::path dir = fresh_dir("h2_pp_memory");
  config::TrainConfig cfg = small_config(dir, 10);
  cfg.model.dim = 2048;
  cfg.model.ffn_dim = 5504;
  cfg.model.n_heads = 16;
  cfg.model.n_kv_heads = 16;
  cfg.parallel.mode = config::ParallelMode::pipeline;
  cfg.parallel.stage_layers = "4,6";  // 50M-parameter blocks: 4 on chip-a (2 GiB), 6 on chip-b
  cfg.cluster.devices = "vchip:chip-a,vchip:chip-b";
  const auto outcomes = comm::testing::run_ranks(2, [&](comm::testing::RankContext& ctx) {
    Trainer trainer(
        cfg, ctx.runtime, [](const std::string&) {}, ctx.comm());
  });
  EXPECT_EQ(outcomes[0].exit_code, 1) << comm::testing::describe(outcomes);
  EXPECT_NE(outcomes[0].message.find("rank 0 (vchip:0"), std::string::npos) << outcomes[0].message;
  EXPECT_NE(outcomes[0].message.find("the chip has 2048.0 MiB"), std::string::npos)
      << outcomes[0].message;
  EXPECT_NE(outcomes[1].message.find("the chip has 4096.0 MiB"), std::string::npos)
      << outcomes[1].message;
}

// The 4-block model with untied embeddings, pipelined, 4 micro-batches per step, no evaluation
// (the tests below set steps, evaluation and the parallel layout they compare).
config::TrainConfig untied_pipeline(const fs::path& dir) {
  config::TrainConfig cfg = small_config(dir, 4);
  cfg.model.tie_embeddings = false;
  cfg.train.eval_every = 0;
  cfg.train.grad_accum = 4;
  cfg.parallel.mode = config::ParallelMode::pipeline;
  return cfg;
}

// Narrow wires: activations and gradients between stages travel as BF16 (half the bytes) or as
// E4M3 codes with a scale per token (a quarter); each run differs from the FP32 one (so the wire
// really narrows) and stays close to it. The FP8 case also runs with stage groups of (2, 1), so
// the codes and their scales are re-split between groups of different sizes.
double worst_relative_loss_difference(const Curve& a, const Curve& b) {
  double worst = 0;
  for (const auto& [step, loss] : a.loss)
    worst = std::max(worst, std::abs(b.loss.at(step) - loss) / loss);
  return worst;
}

TEST(PipelineWire, NarrowTransfersChangeTheLossOnlySlightly) {
  const fs::path dir = fresh_dir("h2_pp_wire");
  config::TrainConfig cfg = untied_pipeline(dir);
  auto run = [&](const std::string& name, const std::string& wire, int ranks) {
    config::apply_override(cfg, "parallel.wire_dtype=" + wire);
    cfg.parallel.stage_ranks = ranks == 3 ? "2,1" : "";
    cfg.log.metrics_file = (dir / (name + ".jsonl")).string();
    train_on_ranks(cfg, ranks);
    Curve curve = read_metrics(dir / (name + ".jsonl"));
    EXPECT_EQ(curve.loss.size(), 20u) << name;
    return curve;
  };
  const Curve f32 = run("f32", "auto", 2), bf16 = run("bf16", "bf16", 2);
  const Curve fp8 = run("fp8", "f8e4m3", 2);
  const Curve f32_groups = run("f32_groups", "auto", 3),
              fp8_groups = run("fp8_groups", "f8e4m3", 3);
  for (const auto& [name, narrow, wide, bound] :
       {std::tuple{"bf16", &bf16, &f32, 0.02}, std::tuple{"f8e4m3", &fp8, &f32, 0.05},
        std::tuple{"f8e4m3 groups (2, 1)", &fp8_groups, &f32_groups, 0.05}}) {
    const double worst = worst_relative_loss_difference(*wide, *narrow);
    EXPECT_GT(worst, 0) << name << " on the wire changed nothing: was it used?";
    EXPECT_LT(worst, bound) << name << " on the wire moved the loss by more than " << bound;
    std::printf(
        "%s wire: largest relative loss difference over 20 steps %.2e, final %.4f vs %.4f\n", name,
        worst, narrow->loss.at(20), wide->loss.at(20));
  }
}

// A communicator that forwards everything to another and counts the bytes of its point-to-point
// sends: where the pipeline's activations and gradients leave a rank.
class SendCounter final : public comm::Communicator {
 public:
  explicit SendCounter(comm::Communicator& inner) : inner_(inner) {}
  int64_t bytes_sent() const { return bytes_; }

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string name() const override { return inner_.name(); }
  bool can_connect(const Device& device) const override { return inner_.can_connect(device); }
  PacingStats link_pacing() const override { return inner_.link_pacing(); }
  void progress() override { inner_.progress(); }
  std::unique_ptr<comm::Communicator> split(int color, int key) override {
    return inner_.split(color, key);
  }
  void all_reduce(const Tensor& out, const Tensor& in, comm::ReduceOp op, Stream* s) override {
    inner_.all_reduce(out, in, op, s);
  }
  void reduce_scatter(const Tensor& out, const Tensor& in, comm::ReduceOp op, Stream* s) override {
    inner_.reduce_scatter(out, in, op, s);
  }
  void all_gather(const Tensor& out, const Tensor& in, Stream* s) override {
    inner_.all_gather(out, in, s);
  }
  void broadcast(const Tensor& out, const Tensor& in, int root, Stream* s) override {
    inner_.broadcast(out, in, root, s);
  }
  void all_to_all(const Tensor& out, const Tensor& in, Stream* s) override {
    inner_.all_to_all(out, in, s);
  }
  void all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts, const Tensor& in,
                    std::span<const int64_t> send_counts, Stream* s) override {
    inner_.all_to_all_v(out, recv_counts, in, send_counts, s);
  }
  void barrier() override { inner_.barrier(); }
  std::unique_ptr<comm::Request> isend(const Tensor& tensor, int peer, int tag) override {
    bytes_ += int64_t(tensor.nbytes());
    return inner_.isend(tensor, peer, tag);
  }
  std::unique_ptr<comm::Request> irecv(const Tensor& tensor, int peer, int tag) override {
    return inner_.irecv(tensor, peer, tag);
  }

 private:
  comm::Communicator& inner_;
  int64_t bytes_ = 0;
};

// The wire's bytes, counted where they leave each rank of two one-rank stages: 3 steps of 4
// micro-batches of 4 rows x 32 tokens, width 32. Every micro-batch crosses once forward (rank 0
// sends its activation) and once backward (rank 1 sends the gradient), so each rank sends
// 3 x 4 x 4 x 32 = 1,536 tokens: 32 x 4 bytes each in f32 (196,608), 32 x 2 in bf16 (98,304:
// half), 32 one-byte E4M3 codes and a 4-byte FP32 scale in f8e4m3 (55,296: 9/32).
TEST(PipelineWire, NarrowWiresSendHalfAndNineThirtySecondsOfTheBytes) {
  const fs::path dir = fresh_dir("h2_pp_wire_bytes");
  config::TrainConfig cfg = untied_pipeline(dir);
  cfg.train.steps = 3;
  cfg.checkpoint.dir = "";
  ASSERT_EQ(cfg.model.dim, 32);
  ASSERT_EQ(cfg.model.seq_len, 32);
  ASSERT_EQ(cfg.train.batch_size, 4);
  const int64_t tokens = 3 * 4 * 4 * 32;
  for (const auto& [wire, per_token] :
       {std::pair{"auto", 32 * 4}, std::pair{"bf16", 32 * 2}, std::pair{"f8e4m3", 32 + 4}}) {
    config::apply_override(cfg, std::string("parallel.wire_dtype=") + wire);
    cfg.log.metrics_file = (dir / (std::string(wire) + ".jsonl")).string();
    comm::testing::RunOptions options;
    options.env = {{"H2_NUM_THREADS", "1"}};
    const auto outcomes = comm::testing::run_ranks(
        2,
        [&](comm::testing::RankContext& ctx) {
          SendCounter counter(ctx.comm());
          Trainer trainer(
              cfg, ctx.runtime, [](const std::string&) {}, counter);
          trainer.run();
          if (counter.bytes_sent() != tokens * per_token)
            throw std::runtime_error(fmt::format("{} wire: rank {} sent {} bytes, expected {}",
                                                 wire, ctx.rank(), counter.bytes_sent(),
                                                 tokens * per_token));
        },
        options);
    comm::testing::expect_all_ok(outcomes);
  }
}

// ZeroPP prefetch: with overlap on, UNSHARD only posts the gathers of a stage's units and each
// unit waits for its own right before it computes; with overlap off each UNSHARD gathers the
// whole stage first; the stage's last backward posts each unit's gradient reduction as soon as
// the unit is done, and REDUCE_GRAD sums the blocks in the ring's order. The gathers move the
// same bytes and the sums add in the same order, so PP=2 x FSDP=2 and FSDP groups of (3, 1),
// gathering per 2 micro-batches (several gathers per step, forward and backward), give equal
// losses bit for bit; so does a progress helper thread (H2_PROGRESS_THREAD_US) driving the
// communicators while units compute. (flat_param_test.cpp checks the order of the sums itself,
// on gradients chosen so that another order changes the bits; these losses alone would not
// notice. The FSDP cases above check the prefetching runs against one process.)
TEST(PipelineFsdp, PrefetchedGathersEqualBlockingOnesBitForBit) {
  const fs::path dir = fresh_dir("h2_pp_prefetch");
  config::TrainConfig cfg = untied_pipeline(dir);
  cfg.train.steps = 3;
  cfg.parallel.fsdp = true;
  cfg.parallel.gather_group = 2;
  struct Variant {
    const char* name;
    bool overlap;
    bool helper_thread;
  };
  for (const std::string groups : {"2,2", "3,1"}) {
    cfg.parallel.stage_ranks = groups;
    cfg.train.batch_size = groups == "3,1" ? 3 : 4;  // rows of a micro-batch: split evenly
    std::vector<Variant> variants{{"overlap off", false, false}, {"overlap on", true, false}};
    if (groups == "2,2") variants.push_back({"overlap on, helper thread", true, true});
    std::vector<std::map<int64_t, double>> losses;
    for (const Variant& v : variants) {
      if (v.helper_thread) setenv("H2_PROGRESS_THREAD_US", "20", 1);  // the forked ranks see it
      cfg.parallel.overlap = v.overlap;
      cfg.log.metrics_file = (dir / fmt::format("{}_{}.jsonl", groups, losses.size())).string();
      train_on_ranks(cfg, 4);
      unsetenv("H2_PROGRESS_THREAD_US");
      losses.push_back(read_metrics(cfg.log.metrics_file).loss);
    }
    ASSERT_EQ(losses[0].size(), 3u) << groups;
    for (size_t i = 1; i < variants.size(); ++i)
      EXPECT_EQ(losses[i], losses[0]) << groups << ": " << variants[i].name;
  }
}

// Segmented transfers (parallel.segment_kb) carry the same values as whole ones: each piece of
// an activation or gradient goes as 1 KiB segments (bf16: 8 of a 4-row micro-batch's 8 KiB;
// f8e4m3: 4, each with its own scales; f32 between groups of (2, 1): 8 of each 8 KiB piece), is
// converted per segment on both ends and lands in place: the losses equal the unsegmented
// wire's of the same dtype bit for bit.
TEST(PipelineWire, SegmentedTransfersEqualTheWholeWireBitForBit) {
  const fs::path dir = fresh_dir("h2_pp_segments");
  config::TrainConfig cfg = untied_pipeline(dir);
  cfg.train.steps = 4;
  cfg.train.eval_every = 2;
  auto run = [&](const std::string& wire, int ranks, int segment_kb) {
    const std::string name = fmt::format("{}_{}_{}", wire, ranks, segment_kb);
    config::apply_override(cfg, "parallel.wire_dtype=" + wire);
    cfg.parallel.stage_ranks = ranks == 3 ? "2,1" : "";
    cfg.parallel.segment_kb = segment_kb;
    cfg.log.metrics_file = (dir / (name + ".jsonl")).string();
    train_on_ranks(cfg, ranks);
    return read_metrics(cfg.log.metrics_file);
  };
  for (const auto& [wire, ranks] :
       {std::pair{"bf16", 2}, std::pair{"f8e4m3", 2}, std::pair{"auto", 3}}) {
    const Curve whole = run(wire, ranks, 0), segmented = run(wire, ranks, 1);
    ASSERT_EQ(whole.loss.size(), 4u) << wire;
    EXPECT_EQ(segmented.loss, whole.loss) << wire << " on " << ranks << " ranks";
    EXPECT_EQ(segmented.eval_loss, whole.eval_loss) << wire << " on " << ranks << " ranks";
  }
}

}  // namespace
}  // namespace h2::train
