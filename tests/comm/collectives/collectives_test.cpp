// Every collective, reduction, dtype and count against closed-form results, in place and out of
// place, every broadcast root, on real processes over UCX shared memory and UCX TCP, world sizes
// 1 to 4 (8 for small counts). Rank r's element i is small_value(r, i) (values.h).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <algorithm>

#include "comm/algorithms/reduce_kernels.h"
#include "multiproc.h"
#include "values.h"

namespace h2::comm::testing {
namespace {

const DType kDTypes[] = {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::u8};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::avg};

double reduce_over_ranks(int size, ReduceOp op, const std::function<double(int)>& value) {
  double acc = value(0);
  for (int r = 1; r < size; ++r) {
    const double v = value(r);
    acc = op == ReduceOp::max ? std::max(acc, v) : op == ReduceOp::min ? std::min(acc, v) : acc + v;
  }
  return op == ReduceOp::avg ? acc / size : acc;
}

double tolerance(DType dtype, ReduceOp op) {
  if (op != ReduceOp::avg) return 0;
  return dtype == DType::f32 ? 1e-7 : 1.0 / 128;
}

std::vector<double> rank_values(int rank, int64_t count) {
  std::vector<double> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[size_t(i)] = small_value(rank, i);
  return v;
}

void check_all_reduce(RankContext& ctx, DType dtype, ReduceOp op, int64_t count) {
  Device& cpu = ctx.runtime.cpu();
  const int n = ctx.size();
  std::vector<double> want(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    want[size_t(i)] = reduce_over_ranks(n, op, [&](int r) { return small_value(r, i); });
  const std::string what =
      fmt::format("all_reduce {} {} count {}", dtype_name(dtype), reduce_op_name(op), count);
  Tensor in = make_tensor(rank_values(ctx.rank(), count), dtype, cpu);
  Tensor out = Tensor::zeros(Shape{count}, dtype, cpu);
  ctx.comm().all_reduce(out, in, op);
  expect_values(out, want, what + " out of place", tolerance(dtype, op));
  expect_values(in, rank_values(ctx.rank(), count), what + " leaves its input", 0);
  ctx.comm().all_reduce(in, in, op);
  expect_values(in, want, what + " in place", tolerance(dtype, op));
}

void check_reduce_scatter(RankContext& ctx, DType dtype, ReduceOp op, int64_t block) {
  Device& cpu = ctx.runtime.cpu();
  const int n = ctx.size(), me = ctx.rank();
  std::vector<double> want(static_cast<size_t>(block));
  for (int64_t i = 0; i < block; ++i)
    want[size_t(i)] =
        reduce_over_ranks(n, op, [&](int r) { return small_value(r, me * block + i); });
  const std::string what =
      fmt::format("reduce_scatter {} {} block {}", dtype_name(dtype), reduce_op_name(op), block);
  Tensor in = make_tensor(rank_values(me, n * block), dtype, cpu);
  Tensor out = Tensor::zeros(Shape{block}, dtype, cpu);
  ctx.comm().reduce_scatter(out, in, op);
  expect_values(out, want, what + " out of place", tolerance(dtype, op));
  Tensor own_block = in.slice(0, me * block, (me + 1) * block);
  ctx.comm().reduce_scatter(own_block, in, op);
  expect_values(own_block, want, what + " in place", tolerance(dtype, op));
}

void check_all_gather(RankContext& ctx, DType dtype, int64_t block) {
  Device& cpu = ctx.runtime.cpu();
  const int n = ctx.size(), me = ctx.rank();
  std::vector<double> want(static_cast<size_t>(n * block));
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < block; ++i) want[size_t(r * block + i)] = small_value(r, i);
  const std::string what = fmt::format("all_gather {} block {}", dtype_name(dtype), block);
  Tensor in = make_tensor(rank_values(me, block), dtype, cpu);
  Tensor out = Tensor::zeros(Shape{n * block}, dtype, cpu);
  ctx.comm().all_gather(out, in);
  expect_values(out, want, what + " out of place");
  Tensor in_place = Tensor::zeros(Shape{n * block}, dtype, cpu);
  Tensor own_block = in_place.slice(0, me * block, (me + 1) * block);
  own_block.copy_from(in);
  ctx.comm().all_gather(in_place, own_block);
  expect_values(in_place, want, what + " in place");
}

void check_broadcast(RankContext& ctx, DType dtype, int64_t count) {
  Device& cpu = ctx.runtime.cpu();
  for (int root = 0; root < ctx.size(); ++root) {
    const std::string what =
        fmt::format("broadcast {} count {} root {}", dtype_name(dtype), count, root);
    const std::vector<double> want = rank_values(root, count);
    Tensor in = make_tensor(rank_values(ctx.rank(), count), dtype, cpu);
    Tensor out = Tensor::zeros(Shape{count}, dtype, cpu);
    ctx.comm().broadcast(out, in, root);
    expect_values(out, want, what + " out of place");
    ctx.comm().broadcast(in, root);
    expect_values(in, want, what + " in place");
  }
}

void check_all_to_all(RankContext& ctx, DType dtype, int64_t block) {
  Device& cpu = ctx.runtime.cpu();
  const int n = ctx.size(), me = ctx.rank();
  std::vector<double> want(static_cast<size_t>(n * block));
  for (int r = 0; r < n; ++r)
    for (int64_t i = 0; i < block; ++i)
      want[size_t(r * block + i)] = small_value(r, me * block + i);
  const std::string what = fmt::format("all_to_all {} block {}", dtype_name(dtype), block);
  Tensor in = make_tensor(rank_values(me, n * block), dtype, cpu);
  Tensor out = Tensor::zeros(Shape{n * block}, dtype, cpu);
  ctx.comm().all_to_all(out, in);
  expect_values(out, want, what + " out of place");
  ctx.comm().all_to_all(in, in);
  expect_values(in, want, what + " in place");
}

// Rank i sends (i + j) % 3 + block elements to rank j: uneven, some blocks differ per pair.
void check_all_to_all_v(RankContext& ctx, DType dtype, int64_t block) {
  Device& cpu = ctx.runtime.cpu();
  const int n = ctx.size(), me = ctx.rank();
  auto count_between = [&](int from, int to) { return int64_t((from + 2 * to) % 3) + block; };
  std::vector<int64_t> send_counts(n), recv_counts(n);
  int64_t send_total = 0, recv_total = 0;
  for (int r = 0; r < n; ++r) {
    send_counts[r] = count_between(me, r);
    recv_counts[r] = count_between(r, me);
    send_total += send_counts[r];
    recv_total += recv_counts[r];
  }
  // Element k of what rank `from` sends to `to` is small_value(from, 100 * to + k).
  std::vector<double> send_values, want;
  for (int r = 0; r < n; ++r)
    for (int64_t k = 0; k < send_counts[r]; ++k)
      send_values.push_back(small_value(me, 100 * r + k));
  for (int r = 0; r < n; ++r)
    for (int64_t k = 0; k < recv_counts[r]; ++k) want.push_back(small_value(r, 100 * me + k));
  Tensor in = make_tensor(send_values, dtype, cpu);
  Tensor out = Tensor::zeros(Shape{recv_total}, dtype, cpu);
  ctx.comm().all_to_all_v(out, recv_counts, in, send_counts);
  expect_values(out, want, fmt::format("all_to_all_v {} base block {}", dtype_name(dtype), block));
}

struct Case {
  std::string transport;  // UCX_TLS
  int size;
  std::vector<int64_t> counts;
};

// Rings pipeline each rank's chunk in segments of H2_COMM_SEGMENT bytes. With 16 KiB segments
// (the smallest allowed is 4 KiB) the largest count, 256 KiB of f32, crosses 4 to 16 segments per
// chunk on 4 to 1 ranks: the pipelining the default 1 MiB segments see at 16 times the size
// (2^20 elements took 40 s per case in CI, 4 min under sanitizers).
constexpr size_t kSegmentBytes = 16 << 10;
constexpr int64_t kLargeCount = 1 << 16;

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return fmt::format("{}_ranks{}_{}", info.param.transport == "sm,self" ? "shm" : "tcp",
                     info.param.size,
                     info.param.counts.back() >= kLargeCount ? "all_counts" : "small");
}

class Collectives : public ::testing::TestWithParam<Case> {};

TEST_P(Collectives, MatchClosedFormResults) {
  const Case& c = GetParam();
  RunOptions options;
  options.ucx_tls = c.transport;
  options.env = {{"H2_COMM_SEGMENT", std::to_string(kSegmentBytes)}};
  const auto outcomes = run_ranks(
      c.size,
      [&](RankContext& ctx) {
        for (int64_t count : c.counts) {
          for (DType dtype : kDTypes) {
            for (ReduceOp op : kOps) {
              if (!reduce_supported(dtype, op)) continue;
              check_all_reduce(ctx, dtype, op, count);
              check_reduce_scatter(ctx, dtype, op, count);
            }
            check_all_gather(ctx, dtype, count);
            check_broadcast(ctx, dtype, count);
            check_all_to_all(ctx, dtype, count);
            if (count < 4096) check_all_to_all_v(ctx, dtype, count);
          }
        }
      },
      options);
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.exit_code, 0) << describe(outcomes);
}

const std::vector<int64_t> kAllCounts = {0, 1, 7, 4096, 4099, kLargeCount};
const std::vector<int64_t> kSmallCounts = {0, 1, 7, 4099};

INSTANTIATE_TEST_SUITE_P(
    Ucx, Collectives,
    ::testing::Values(Case{"sm,self", 1, kAllCounts}, Case{"sm,self", 2, kAllCounts},
                      Case{"sm,self", 3, kAllCounts}, Case{"sm,self", 4, kAllCounts},
                      Case{"sm,self", 8, kSmallCounts}, Case{"tcp,self", 2, kAllCounts},
                      Case{"tcp,self", 3, kAllCounts}, Case{"tcp,self", 4, kAllCounts},
                      Case{"tcp,self", 8, kSmallCounts}),
    case_name);

}  // namespace
}  // namespace h2::comm::testing
