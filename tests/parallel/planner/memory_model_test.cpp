// The memory model (parallel/planner/memory_model.h) against figures computed by hand in the
// comments: unit_state_bytes from a small ModelShape's tensor sizes, the dtype sizes and the
// allocator's size classes (core/size_class.h: 64-byte quantum up to 4 KiB, then four classes per
// power of two), replicated and FSDP-sharded (padded to a multiple of the group); transfer and
// token buffers; stage_activations walked unit by unit (with and without recompute); and
// peak_activation_bytes on hand-built 1F1B, GPipe, ZB-H1 and two-stage lists. HeldCounts::peak_of
// is checked against peak_activation_bytes on the generators' single-stage lists for random
// stage sizes.
#include "parallel/planner/memory_model.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/size_class.h"
#include "parallel/pipeline/generators.h"
#include "parallel/pipeline/lowering.h"

namespace h2::parallel::planner {
namespace {

using pipeline::Action;
using pipeline::ActionKind;

// dim 20, 2 heads of 10, 1 KV head: kv = 10. A block's tensors (element counts):
//   attention norm 20, wq 400, wk 200, wv 200, wo 400, ffn norm 20, w1 1040, w3 1040, w2 1040
// = 4360 = 2 C^2 + 2 C kv + 3 C ffn + 2 C.  Embedding 70 x 20 = 1400. Head: norm 20 (+ 1400).
ModelShape shape(bool tie) {
  return {.vocab_size = 70,
          .dim = 20,
          .n_layers = 4,
          .n_heads = 2,
          .n_kv_heads = 1,
          .ffn_dim = 52,
          .seq_len = 8,
          .tie_embeddings = tie};
}

TEST(MemoryModel, SizeClassesUsedByTheHandFigures) {
  // The rounding every figure below relies on.
  EXPECT_EQ(allocation_size_class(80, 64), 128u);
  EXPECT_EQ(allocation_size_class(800, 64), 832u);
  EXPECT_EQ(allocation_size_class(1600, 64), 1600u);
  EXPECT_EQ(allocation_size_class(4160, 64), 5120u);  // 4096 + 4 x 1024 classes: 5 x 1024
  EXPECT_EQ(allocation_size_class(17448, 64), 20480u);
  EXPECT_EQ(shape(false).block_parameters(), 4360);
  EXPECT_EQ(shape(false).embedding_parameters(), 1400);
}

TEST(MemoryModel, ReplicatedStateIsRoundedPerTensor) {
  const ModelShape m = shape(false);
  // f32: value, gradient and two moments, each sc(4n):
  //   4n = 80, 1600, 800, 800, 1600, 80, 4160 x 3
  //   sc = 128 + 1600 + 832 + 832 + 1600 + 128 + 3 x 5120 = 20480; x 4 = 81920
  EXPECT_EQ(unit_state_bytes(m, UnitKind::block, DType::f32, 1, false), 81920);
  // The group size does not matter without FSDP.
  EXPECT_EQ(unit_state_bytes(m, UnitKind::block, DType::f32, 3, false), 81920);
  // bf16: sc(2n) + 4 sc(4n) (the FP32 master added):
  //   2n = 40, 800, 400, 400, 800, 40, 2080 x 3 -> 64 + 832 + 448 + 448 + 832 + 64 + 3 x 2112
  //   = 9024; + 81920 = 90944
  EXPECT_EQ(unit_state_bytes(m, UnitKind::block, DType::bf16, 1, false), 90944);
  // Embedding f32: 4n = 5600 -> 6 x 1024 = 6144; x 4 = 24576.
  EXPECT_EQ(unit_state_bytes(m, UnitKind::embedding, DType::f32, 1, false), 24576);
  // Head: norm 4 x sc(80) = 512, plus the untied output table 4 x 6144.
  EXPECT_EQ(unit_state_bytes(m, UnitKind::head, DType::f32, 1, false), 512 + 24576);
  EXPECT_EQ(unit_state_bytes(shape(true), UnitKind::head, DType::f32, 1, false), 512);
}

TEST(MemoryModel, FsdpStateIsShardedWithPadding) {
  const ModelShape m = shape(false);
  // f32 over 3 ranks: N = 4360 -> shard ceil(4360 / 3) = 1454, padded N' = 4362.
  //   4 sc(4 x 1454 = 5816) = 4 x 6144 = 24576 (master, gradient shard, two moments)
  //   sc(4 x 4362 = 17448) = 20480, twice (gathered f32 unit and its full gradient)
  //   = 24576 + 40960 = 65536
  EXPECT_EQ(unit_state_bytes(m, UnitKind::block, DType::f32, 3, true), 65536);
  // bf16 over 4 ranks: shard 1090, no padding.
  //   4 sc(4360) = 4 x 5120 = 20480; sc(2 x 4360 = 8720) = 5 x 2048 = 10240;
  //   sc(4 x 4360 = 17440) = 20480; = 51200
  EXPECT_EQ(unit_state_bytes(m, UnitKind::block, DType::bf16, 4, true), 51200);
  // Embedding f32 over 3: N = 1400 -> shard 467, N' = 1401.
  //   4 sc(1868) = 4 x 1920 = 7680; sc(5604) = 6144, twice; = 19968
  EXPECT_EQ(unit_state_bytes(m, UnitKind::embedding, DType::f32, 3, true), 19968);
  // Sharding the tied head's norm (20 elements) over 3: shard 7, N' = 21:
  //   4 sc(28) = 4 x 64; sc(84) = 128, twice; = 512
  EXPECT_EQ(unit_state_bytes(shape(true), UnitKind::head, DType::f32, 3, true), 512);
}

TEST(MemoryModel, TransferAndTokenBuffers) {
  const ModelShape m = shape(false);
  // One row's activation: T x C = 160 elements; f32 640 bytes, bf16 320. 3 rows: 1920 and 960,
  // both multiples of 64. Two compute-dtype buffers, plus the wire copy when it differs.
  EXPECT_EQ(transfer_bytes(m, 3, DType::f32, std::nullopt, true), 3840);
  EXPECT_EQ(transfer_bytes(m, 3, DType::f32, DType::f32, true), 3840);
  EXPECT_EQ(transfer_bytes(m, 3, DType::f32, DType::bf16, true), 3840 + 960);
  EXPECT_EQ(transfer_bytes(m, 3, DType::f32, DType::bf16, false), 0);
  // 1 row bf16: 320 -> sc 320; 2 x 320 + f8 wire 160 -> sc 192.
  EXPECT_EQ(transfer_bytes(m, 1, DType::bf16, DType::f8e4m3, true), 640 + 192);
  // Token ids and targets: 4 bytes x 3 rows x 8 tokens = 96 -> 128, two of them per micro-batch.
  EXPECT_EQ(token_bytes(m, 3, 5), 5 * 2 * 128);
}

// Units of a stage: embedding, two blocks, head.
std::vector<UnitCost> units() {
  const UnitCost emb{.stash_bytes = 100,
                     .forward_workspace_bytes = 10,
                     .workspace_bytes = 30,
                     .deferred_bytes = 0};
  const UnitCost blk{.stash_bytes = 1000,
                     .forward_workspace_bytes = 200,
                     .workspace_bytes = 500,
                     .deferred_bytes = 300};
  const UnitCost head{.stash_bytes = 400,
                      .forward_workspace_bytes = 50,
                      .workspace_bytes = 100,
                      .deferred_bytes = 100};
  return {emb, blk, blk, head};
}
const std::vector<UnitKind> kKinds = {UnitKind::embedding, UnitKind::block, UnitKind::block,
                                      UnitKind::head};

TEST(MemoryModel, StageActivationsWalkTheUnits) {
  const StageActivations a = stage_activations(units(), kKinds, false, 64);
  // Forward: held before + the running unit's stash and forward workspace:
  //   emb 0 + 110 = 110; blk 100 + 1200 = 1300; blk 1100 + 1200 = 2300; head 2100 + 450 = 2550
  EXPECT_EQ(a.stash, 2500);
  EXPECT_EQ(a.deferred, 700);
  EXPECT_EQ(a.forward_peak, 2550);
  // Backward from 2500 held, last unit first, freeing each stash as it passes:
  //   head 2500 + 100 = 2600; blk 2100 + 500 = 2600; blk 1100 + 500 = 1600; emb 100 + 30
  EXPECT_EQ(a.backward_peak, 2600);
  // Input gradient: each passed unit's stash swapped for its deferred state:
  //   head 2600, then held 2100 + 100 = 2200; blk 2200 + 500 = 2700, held 1500; blk 2000 ...
  EXPECT_EQ(a.input_peak, 2700);
}

TEST(MemoryModel, StageActivationsWithRecompute) {
  // Each block keeps only its input (64 bytes) and rebuilds its stash inside its backward.
  const StageActivations a = stage_activations(units(), kKinds, true, 64);
  //   kept: 100 + 64 + 64 + 400 = 628
  //   forward: 110; 100 + 1200 = 1300; 164 + 1200 = 1364; 228 + 450 = 678
  EXPECT_EQ(a.stash, 628);
  EXPECT_EQ(a.deferred, 700);
  EXPECT_EQ(a.forward_peak, 1364);
  //   backward: head 628 + 100 = 728, held 228; blk 228 + 1000 + 500 = 1728, held 164;
  //   blk 164 + 1500 = 1664, held 100; emb 130
  EXPECT_EQ(a.backward_peak, 1728);
  //   input: head 728, held 228 + 100 = 328; blk 328 + 1500 = 1828, held 328 + 300 - 64 = 564;
  //   blk 564 + 1500 = 2064, held 800; emb 830
  EXPECT_EQ(a.input_peak, 2064);
}

Action F(int s, int mb) {
  return Action::compute(ActionKind::F, s, mb);
}
Action B(int s, int mb) {
  return Action::compute(ActionKind::B, s, mb);
}
Action I(int s, int mb) {
  return Action::compute(ActionKind::I, s, mb);
}
Action W(int s, int mb) {
  return Action::compute(ActionKind::W, s, mb);
}

// Stage 0: the figures of StageActivationsWalkTheUnits; stage 1: those with recompute.
const StageActivations kPlain{.stash = 2500,
                              .deferred = 700,
                              .forward_peak = 2550,
                              .backward_peak = 2600,
                              .input_peak = 2700};
const StageActivations kRecompute{
    .stash = 628, .deferred = 700, .forward_peak = 1364, .backward_peak = 1728, .input_peak = 2064};

TEST(MemoryModel, PeakOverOneF1BAndGPipeLists) {
  // Rank 0 of 1F1B over 2 ranks, 3 micro-batches, with its transfers (which hold nothing here).
  const std::vector<Action> one_f_one_b = {F(0, 0),
                                           Action::comm(ActionKind::SEND_F, 0, 0, 1),
                                           F(0, 1),
                                           Action::comm(ActionKind::SEND_F, 0, 1, 1),
                                           Action::comm(ActionKind::RECV_B, 0, 0, 1),
                                           B(0, 0),
                                           F(0, 2),
                                           B(0, 1),
                                           B(0, 2),
                                           Action::stage_wide(ActionKind::REDUCE_GRAD, 0)};
  // F0: 2550, held 2500; F1: 2500 + 2550 = 5050, held 5000; B0: 2500 + 2600 = 5100;
  // F2: 5050; B1: 5100; B2: 2600.
  EXPECT_EQ(peak_activation_bytes(one_f_one_b, {kPlain}), 5100);
  // Recompute: F0 1364; F1 628 + 1364 = 1992; B0 628 + 1728 = 2356; ...
  EXPECT_EQ(peak_activation_bytes(one_f_one_b, {kRecompute}), 2356);
  // GPipe, 3 micro-batches: F2 at 5000 + 2550 = 7550, B0 at 5000 + 2600 = 7600.
  const std::vector<Action> gpipe = {F(0, 0), F(0, 1), F(0, 2), B(0, 0), B(0, 1), B(0, 2)};
  EXPECT_EQ(peak_activation_bytes(gpipe, {kPlain}), 7600);
  EXPECT_EQ(peak_activation_bytes(gpipe, {kRecompute}), 2 * 628 + 1728);
}

TEST(MemoryModel, PeakOverAZeroBubbleListHoldsTheDeferredState) {
  // ZB-H1-like rank: W's postponed by one micro-batch.
  const std::vector<Action> zb = {F(0, 0), F(0, 1), I(0, 0), F(0, 2), I(0, 1),
                                  W(0, 0), I(0, 2), W(0, 1), W(0, 2)};
  // F0 2550, held 2500; F1 5050, held 5000; I0: 2500 + 2700 = 5200, held 3200;
  // F2: 3200 + 2550 = 5750, held 5700; I1: 3200 + 2700 = 5900, held 3900; W0: held 3200;
  // I2: 700 + 2700 = 3400.
  EXPECT_EQ(peak_activation_bytes(zb, {kPlain}), 5900);
  // The same list with each weight gradient right after its input gradient holds less:
  // F1 5050; I0 2500 + 2700 = 5200, W0 frees its 700; F2 2500 + 2550 = 5050; I1 5200; I2 2700.
  const std::vector<Action> eager = {F(0, 0), F(0, 1), I(0, 0), W(0, 0), F(0, 2),
                                     I(0, 1), W(0, 1), I(0, 2), W(0, 2)};
  EXPECT_EQ(peak_activation_bytes(eager, {kPlain}), 5200);
}

TEST(MemoryModel, PeakOverTwoStagesOnOneRank) {
  // Interleaved: stages 0 (kPlain) and 1 (kRecompute) on one rank.
  const std::vector<Action> list = {F(0, 0), F(1, 0), F(0, 1), B(1, 0),
                                    F(1, 1), B(0, 0), B(1, 1), B(0, 1)};
  // F0.0 2550, held 2500; F1.0 2500 + 1364 = 3864, held 3128; F0.1 3128 + 2550 = 5678,
  // held 5628; B1.0 5000 + 1728 = 6728; F1.1 5000 + 1364 = 6364, held 5628;
  // B0.0 3128 + 2600 = 5728; B1.1 2500 + 1728; B0.1 2600.
  EXPECT_EQ(peak_activation_bytes(list, {kPlain, kRecompute}), 6728);
}

StageActivations random_stage(std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> bytes(0, 1 << 20);
  return {.stash = bytes(rng),
          .deferred = bytes(rng),
          .forward_peak = bytes(rng),
          .backward_peak = bytes(rng),
          .input_peak = bytes(rng)};
}

TEST(MemoryModel, HeldCountsAgreeWithTheWalkOnSingleStageLists) {
  std::mt19937 rng(7);
  int lists = 0;
  for (auto kind : {pipeline::ScheduleKind::kGPipe, pipeline::ScheduleKind::k1F1B,
                    pipeline::ScheduleKind::kZBH1})
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 8; ++m)
        for (bool lowered : {false, true}) {
          pipeline::Schedule s = pipeline::generate(kind, p, m);
          if (lowered) s = pipeline::lower(s, {.fsdp = true});
          for (int r = 0; r < p; ++r) {
            const auto& list = s.per_rank[size_t(r)];
            const HeldCounts held = HeldCounts::of(list);
            for (int trial = 0; trial < 10; ++trial) {
              // Random figures, and ones from random units through stage_activations.
              StageActivations stage = random_stage(rng);
              if (trial % 2) {
                std::vector<UnitCost> us(1 + rng() % 4);
                std::vector<UnitKind> ks;
                for (size_t i = 0; i < us.size(); ++i) {
                  const StageActivations x = random_stage(rng);
                  us[i] = {.stash_bytes = x.stash,
                           .forward_workspace_bytes = x.forward_peak,
                           .workspace_bytes = x.backward_peak,
                           .deferred_bytes = x.deferred};
                  ks.push_back(i == 0 ? UnitKind::embedding : UnitKind::block);
                }
                stage = stage_activations(us, ks, rng() % 2 == 0, int64_t(rng() % 4096));
              }
              // The rank's actions name its own stage r.
              const std::vector<StageActivations> by_stage(size_t(p), stage);
              ASSERT_EQ(held.peak_of(stage), peak_activation_bytes(list, by_stage))
                  << pipeline::schedule_kind_name(kind) << " p " << p << " m " << m << " rank " << r
                  << " trial " << trial;
            }
            ++lists;
          }
        }
  EXPECT_EQ(lists, 3 * 2 * (1 + 2 + 3 + 4) * 8);
}

}  // namespace
}  // namespace h2::parallel::planner
