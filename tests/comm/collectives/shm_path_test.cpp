// The shared-memory path of small collectives (comm/host/shm_path.h), in forked ranks on one host:
// all-reduces up to 4 KiB give every rank the same bits, those of adding the ranks' inputs in
// rank order in the dtype (a float loop), and the transport path's values; a rank killed in a
// shared-memory barrier is named by the others within the timeout; ranks that call different
// collectives, one through shared memory and one through the transport, both fail fast
// naming the mismatch instead of waiting for the timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "comm/comm_error.h"
#include "core/runtime.h"
#include "core/tensor_host.h"
#include "multiproc.h"

namespace h2::comm::testing {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Rank r's element i: values whose float sums round differently in different orders.
float input(int rank, int64_t i) {
  return float(1.0 + 1e-3 * double(i % 97)) * (rank % 2 == 0 ? 1.0f : -0.999f) +
         float(rank) * 3.3e-4f * float(i % 13);
}

class ShmSizes : public ::testing::TestWithParam<int> {};

TEST_P(ShmSizes, SmallAllReduceIsTheRankOrderSumOnEveryRank) {
  const int ranks = GetParam();
  for (const char* shm : {"1", "0"}) {
    RunOptions options;
    options.env = {{"H2_COMM_SHM", shm}};
    const auto outcomes = run_ranks(
        ranks,
        [shm](RankContext& ctx) {
          const int n = ctx.size();
          for (int64_t count : {int64_t(1), int64_t(7), int64_t(1024)}) {  // 1024 f32: 4 KiB
            std::vector<float> mine(static_cast<size_t>(count)), want(static_cast<size_t>(count));
            for (int64_t i = 0; i < count; ++i) {
              mine[size_t(i)] = input(ctx.rank(), i);
              float sum = input(0, i);
              for (int r = 1; r < n; ++r) sum += input(r, i);
              want[size_t(i)] = sum;
            }
            Tensor t = tensor_from_floats(mine, Shape{count}, DType::f32, ctx.runtime.cpu());
            ctx.comm().all_reduce(t, ReduceOp::sum);
            const std::vector<float> got = tensor_to_floats(t);
            // Through shared memory the rank-order loop's bits; through the transport (recursive
            // doubling) the same sum up to the order of its additions.
            for (int64_t i = 0; i < count; ++i) {
              const bool exact = std::strcmp(shm, "1") == 0;
              const float g = got[size_t(i)], w = want[size_t(i)];
              H2_CHECK(exact ? std::memcmp(&g, &w, sizeof g) == 0
                             : std::fabs(g - w) <= 1e-6f * std::fabs(w) + 1e-6f,
                       "H2_COMM_SHM={} count {} element {}: {} but the rank-order sum is {}", shm,
                       count, i, g, w);
            }
            // Every rank the same bits: the results gathered (a larger collective) and compared.
            Tensor all = Tensor::empty(Shape{n * count}, DType::f32, ctx.runtime.cpu());
            ctx.comm().all_gather(all, t);
            const std::vector<float> every = tensor_to_floats(all);
            H2_CHECK(std::memcmp(every.data(), got.data(), got.size() * sizeof(float)) == 0 &&
                         std::memcmp(every.data() + (n - 1) * count, got.data(),
                                     got.size() * sizeof(float)) == 0,
                     "H2_COMM_SHM={} count {}: the ranks' results differ", shm, count);
          }
          ctx.comm().barrier();
        },
        options);
    expect_all_ok(outcomes);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmSizes, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "_ranks"; });

TEST(ShmPath, AKilledRankIsNamedByTheOthersInTheBarrier) {
  RunOptions options;
  options.comm_timeout_s = 20;
  double killed_at = 0;
  const auto start = std::chrono::steady_clock::now();
  options.while_running = [&](const std::vector<int>& pids) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    kill(pids[1], SIGKILL);
    killed_at = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const auto outcomes = run_ranks(
      3,
      [](RankContext& ctx) {
        for (;;) ctx.comm().barrier();  // until a peer is lost
      },
      options);
  EXPECT_EQ(outcomes[1].signal, SIGKILL) << describe(outcomes);
  for (int rank : {0, 2}) {
    const RankOutcome& o = outcomes[size_t(rank)];
    EXPECT_EQ(o.exit_code, 1) << describe(outcomes);
    EXPECT_TRUE(contains(o.message, "rank 1")) << describe(outcomes);
    EXPECT_TRUE(contains(o.message, "barrier")) << describe(outcomes);
    EXPECT_LT(o.seconds - killed_at, options.comm_timeout_s) << describe(outcomes);
  }
}

TEST(ShmPath, ACollectiveOnTheTransportAgainstOneInSharedMemoryFailsFastOnBoth) {
  RunOptions options;
  options.comm_timeout_s = 60;
  const auto outcomes = run_ranks(
      2,
      [](RankContext& ctx) {
        Tensor t = Tensor::zeros(Shape{16}, DType::f32, ctx.runtime.cpu());
        if (ctx.rank() == 0)
          ctx.comm().all_reduce(t, ReduceOp::sum);  // 64 bytes: shared memory
        else
          ctx.comm().broadcast(t, 0);  // the transport
      },
      options);
  for (const RankOutcome& o : outcomes) {
    EXPECT_EQ(o.exit_code, 1) << describe(outcomes);
    EXPECT_LT(o.seconds, 30) << describe(outcomes);  // not the 60 s timeout
  }
  EXPECT_TRUE(contains(outcomes[0].message, "broadcast instead of all_reduce"))
      << describe(outcomes);
  EXPECT_TRUE(contains(outcomes[0].message, "shared memory")) << describe(outcomes);
  EXPECT_TRUE(contains(outcomes[1].message, "mismatched collectives")) << describe(outcomes);
}

}  // namespace
}  // namespace h2::comm::testing
