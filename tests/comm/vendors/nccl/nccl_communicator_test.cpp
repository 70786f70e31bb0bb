// The NCCL communicator on real GPUs (label cuda): every collective, dtype and count with
// analytic expected values (rank r contributes r + i % 8, so the all-reduce sum is
// n(n-1)/2 + n * (i % 8), exact in every dtype), in place and out of place, non-contiguous
// tensors, side streams, point-to-point, split, barrier, argument errors and the timeout of a
// rank whose peer never arrives. Ranks are forked processes (one per GPU, at most two); with one
// GPU the world has one rank, which still runs every call. Skipped without a CUDA device.
#include "comm/vendors/nccl/nccl_communicator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "comm/comm_error.h"
#include "core/tensor_host.h"
#include "tests/comm/vendors/nccl/fork_ranks.h"

namespace h2::comm {
namespace {

using testing::RankContext;

constexpr int64_t kCounts[] = {0, 1, 7, 4096, 1 << 20};

double v(int rank, int64_t i) {
  return rank + double(i % 8);
}

// A 1-D tensor on `device` with values fn(i), exact in dtype.
Tensor make(int64_t n, DType dtype, Device& device, const std::function<double(int64_t)>& fn) {
  if (is_floating(dtype)) {
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[size_t(i)] = float(fn(i));
    return tensor_from_floats(values, {n}, dtype, device);
  }
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = int64_t(fn(i));
  return tensor_from_ints(values, {n}, dtype, device);
}

std::vector<double> read(const Tensor& t) {
  std::vector<double> out;
  if (is_floating(t.dtype())) {
    for (float x : tensor_to_floats(t)) out.push_back(x);
  } else {
    for (int64_t x : tensor_to_ints(t)) out.push_back(double(x));
  }
  return out;
}

// Throws (failing the rank) at the first element that differs from expected(i).
void expect_values(const Tensor& t, const std::function<double(int64_t)>& expected,
                   const std::string& what) {
  std::vector<double> got = read(t);
  for (size_t i = 0; i < got.size(); ++i)
    H2_CHECK(got[i] == expected(int64_t(i)), "{} {}: element {} is {}, expected {}", what, t.str(),
             i, got[i], expected(int64_t(i)));
}

std::unique_ptr<NcclCommunicator> join(RankContext& c, const std::string& prefix) {
  return NcclCommunicator::create(c.store, prefix, c.rank, c.size, c.gpu);
}

// Runs fn and fails unless it throws ErrorType whose message contains `needle`.
template <class ErrorType, class Fn>
void expect_throw(Fn&& fn, const std::string& needle, const std::string& what) {
  try {
    fn();
  } catch (const ErrorType& e) {
    H2_CHECK(std::string(e.what()).find(needle) != std::string::npos, "{}: message lacks '{}': {}",
             what, needle, e.what());
    return;
  }
  H2_CHECK(false, "{}: no exception", what);
}

class NcclCommunicatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int gpus = testing::probe_gpu_count();
    if (gpus == 0) GTEST_SKIP() << "no CUDA device (or no CUDA backend in this build)";
    size_ = std::min(gpus, 2);
  }
  void run(const std::function<void(RankContext&)>& body, int size = 0) {
    for (const std::string& failure : testing::run_ranks(size > 0 ? size : size_, body))
      ADD_FAILURE() << failure;
  }
  int size_ = 1;
};

TEST_F(NcclCommunicatorTest, AllReduceEveryOpDtypeAndCount) {
  run([](RankContext& c) {
    auto comm = join(c, "all_reduce");
    H2_CHECK(comm->rank() == c.rank && comm->size() == c.size && comm->name() == "nccl", "ids");
    double n = c.size;
    for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::avg}) {
        if (op == ReduceOp::avg && !is_floating(dtype)) continue;
        auto expected = [&](int64_t i) {
          double base = double(i % 8);
          switch (op) {
            case ReduceOp::sum:
              return n * (n - 1) / 2 + n * base;
            case ReduceOp::max:
              return n - 1 + base;
            case ReduceOp::min:
              return base;
            case ReduceOp::avg:
              return (n - 1) / 2 + base;
          }
          return 0.0;
        };
        for (int64_t count : kCounts) {
          for (bool in_place : {false, true}) {
            Tensor in = make(count, dtype, c.gpu, [&](int64_t i) { return v(c.rank, i); });
            Tensor out = in_place ? in : Tensor::empty({count}, dtype, c.gpu);
            comm->all_reduce(out, in, op);
            expect_values(out, expected,
                          fmt::format("all_reduce {} {} count {}{}", reduce_op_name(op),
                                      dtype_name(dtype), count, in_place ? " in place" : ""));
          }
        }
      }
    }
  });
}

TEST_F(NcclCommunicatorTest, ReduceScatterAllGatherAndBroadcast) {
  run([](RankContext& c) {
    auto comm = join(c, "rs_ag_bc");
    int n = c.size;
    for (DType dtype : {DType::f32, DType::bf16, DType::i64}) {
      for (int64_t count : kCounts) {
        std::string what = fmt::format("{} count {}", dtype_name(dtype), count);
        Tensor in = make(n * count, dtype, c.gpu, [&](int64_t i) { return v(c.rank, i); });
        Tensor out = Tensor::empty({count}, dtype, c.gpu);
        comm->reduce_scatter(out, in, ReduceOp::sum);
        expect_values(
            out,
            [&](int64_t j) { return n * (n - 1) / 2.0 + n * double((c.rank * count + j) % 8); },
            "reduce_scatter " + what);

        Tensor mine = make(count, dtype, c.gpu, [&](int64_t i) { return c.rank * 10 + i % 8; });
        Tensor all = Tensor::empty({n * count}, dtype, c.gpu);
        comm->all_gather(all, mine);
        expect_values(
            all,
            [&](int64_t k) { return (k / std::max<int64_t>(count, 1)) * 10 + (k % count) % 8; },
            "all_gather " + what);

        // In place, NCCL's convention: the rank's own block of the whole tensor.
        Tensor whole = make(n * count, dtype, c.gpu, [&](int64_t i) { return v(c.rank, i); });
        Tensor block = whole.slice(0, c.rank * count, (c.rank + 1) * count);
        comm->reduce_scatter(block, whole, ReduceOp::sum);
        expect_values(
            block,
            [&](int64_t j) { return n * (n - 1) / 2.0 + n * double((c.rank * count + j) % 8); },
            "in-place reduce_scatter " + what);
        Tensor gather = make(n * count, dtype, c.gpu, [&](int64_t k) {
          return k / count == c.rank ? c.rank * 10 + (k % count) % 8 : -1;
        });
        comm->all_gather(gather, gather.slice(0, c.rank * count, (c.rank + 1) * count));
        expect_values(
            gather, [&](int64_t k) { return (k / count) * 10 + (k % count) % 8; },
            "in-place all_gather " + what);

        for (int root = 0; root < n; ++root) {
          Tensor src = make(count, dtype, c.gpu, [&](int64_t i) { return 7 + root + i % 8; });
          Tensor dst = Tensor::zeros({count}, dtype, c.gpu);
          comm->broadcast(dst, src, root);
          expect_values(
              dst, [&](int64_t i) { return 7 + root + i % 8; }, "broadcast " + what);
          Tensor same = c.rank == root ? src : Tensor::zeros({count}, dtype, c.gpu);
          comm->broadcast(same, root);  // in place
          expect_values(
              same, [&](int64_t i) { return 7 + root + i % 8; }, "in-place broadcast " + what);
        }
      }
    }
  });
}

TEST_F(NcclCommunicatorTest, AllToAllAndAllToAllV) {
  run([](RankContext& c) {
    auto comm = join(c, "all_to_all");
    int n = c.size;
    for (DType dtype : {DType::f32, DType::i32}) {
      for (int64_t block : {int64_t(0), int64_t(1), int64_t(7), int64_t(4096)}) {
        for (bool in_place : {false, true}) {
          // Rank i's block j element k: i * 1000 + j * 100 + k % 50.
          Tensor in = make(n * block, dtype, c.gpu, [&](int64_t x) {
            return c.rank * 1000 + (x / block) * 100 + (x % block) % 50;
          });
          Tensor out = in_place ? in : Tensor::empty({n * block}, dtype, c.gpu);
          comm->all_to_all(out, in);
          expect_values(
              out, [&](int64_t x) { return (x / block) * 1000 + c.rank * 100 + (x % block) % 50; },
              fmt::format("all_to_all {} block {}{}", dtype_name(dtype), block,
                          in_place ? " in place" : ""));
        }
      }
    }
    // Uneven: rank s sends count(s, d) elements s * 1000 + d * 100 + k to rank d.
    auto count = [](int s, int d) { return int64_t((s * 3 + d * 5) % 4 + (s == d ? 0 : 2)); };
    std::vector<int64_t> send(n), recv(n);
    for (int p = 0; p < n; ++p) {
      send[p] = count(c.rank, p);
      recv[p] = count(p, c.rank);
    }
    std::vector<float> in_values, out_values;
    for (int d = 0; d < n; ++d)
      for (int64_t k = 0; k < send[d]; ++k) in_values.push_back(c.rank * 1000 + d * 100 + k);
    for (int s = 0; s < n; ++s)
      for (int64_t k = 0; k < recv[s]; ++k) out_values.push_back(s * 1000 + c.rank * 100 + k);
    Tensor in = tensor_from_floats(in_values, {int64_t(in_values.size())}, DType::f32, c.gpu);
    Tensor out = Tensor::empty({int64_t(out_values.size())}, DType::f32, c.gpu);
    comm->all_to_all_v(out, recv, in, send);
    expect_values(
        out, [&](int64_t i) { return out_values[size_t(i)]; }, "all_to_all_v");
  });
}

TEST_F(NcclCommunicatorTest, NonContiguousTensorsAndSideStreams) {
  run([](RankContext& c) {
    auto comm = join(c, "strided");
    double n = c.size;
    // A transposed (6, 4) view of a (4, 6) tensor in, another transposed view out.
    Tensor base = make(24, DType::f32, c.gpu, [&](int64_t i) { return c.rank + double(i); });
    Tensor in = base.view({4, 6}).transpose(0, 1);
    Tensor out = Tensor::zeros({4, 6}, DType::f32, c.gpu).transpose(0, 1);
    std::vector<float> mine = tensor_to_floats(in);
    comm->all_reduce(out, in, ReduceOp::sum);
    expect_values(
        out, [&](int64_t i) { return n * (mine[size_t(i)] - c.rank) + n * (n - 1) / 2; },
        "strided all_reduce");
    comm->all_reduce(in, ReduceOp::max);  // in place on a strided view
    expect_values(
        in, [&](int64_t i) { return mine[size_t(i)] - c.rank + n - 1; },
        "strided in-place all_reduce");
    Tensor gathered = Tensor::zeros({6, int64_t(n) * 4}, DType::f32, c.gpu).transpose(0, 1);
    // all_gather into a strided out: elements r * 24 .. r * 24 + 23 (row-major) are rank r's.
    Tensor flat_in = make(24, DType::f32, c.gpu, [&](int64_t i) { return c.rank * 100 + i; });
    comm->all_gather(gathered, flat_in);
    expect_values(
        gathered, [&](int64_t k) { return (k / 24) * 100 + k % 24; },
        "all_gather into a strided out");

    // A side stream: the caller orders its own work and synchronises.
    std::unique_ptr<Stream> side = c.gpu.create_stream();
    Tensor x = make(4096, DType::bf16, c.gpu, [&](int64_t i) { return v(c.rank, i); });
    c.gpu.default_stream().synchronize();
    comm->all_reduce(x, x, ReduceOp::sum, side.get());
    side->synchronize();
    expect_values(
        x, [&](int64_t i) { return n * (n - 1) / 2 + n * double(i % 8); },
        "all_reduce on a side stream");
  });
}

TEST_F(NcclCommunicatorTest, PointToPointRing) {
  run([](RankContext& c) {
    auto comm = join(c, "p2p");
    int n = c.size, next = (c.rank + 1) % n, prev = (c.rank + n - 1) % n;
    for (int64_t count : {int64_t(0), int64_t(1), int64_t(7), int64_t(1) << 20}) {
      Tensor a = make(count, DType::f32, c.gpu, [&](int64_t i) { return c.rank * 10 + i % 8; });
      Tensor b = make(count, DType::i64, c.gpu, [&](int64_t i) { return c.rank * 20 + i % 8; });
      Tensor ra = Tensor::empty({count}, DType::f32, c.gpu);
      Tensor rb = Tensor::empty({count}, DType::i64, c.gpu);
      // Sends before receives on every rank: the queued group keeps this deadlock-free.
      auto s1 = comm->isend(a, next, 1);
      auto s2 = comm->isend(b, next, 2);
      auto r1 = comm->irecv(ra, prev, 1);
      auto r2 = comm->irecv(rb, prev, 2);
      while (!r1->test()) {
      }
      r2->wait();
      s1->wait();
      s2->wait();
      H2_CHECK(s2->test(), "a finished request tests true");
      expect_values(
          ra, [&](int64_t i) { return prev * 10 + i % 8; }, "recv f32");
      expect_values(
          rb, [&](int64_t i) { return prev * 20 + i % 8; }, "recv i64");
    }
    // Into a non-contiguous tensor; a request destroyed unfinished waits for itself.
    Tensor src = make(12, DType::f32, c.gpu, [&](int64_t i) { return c.rank * 100 + i; });
    Tensor dst = Tensor::zeros({3, 4}, DType::f32, c.gpu).transpose(0, 1);
    {
      auto s = comm->isend(src.view({4, 3}), next, 7);
      auto r = comm->irecv(dst, prev, 7);
    }
    expect_values(
        dst, [&](int64_t i) { return prev * 100 + i; }, "recv into a strided tensor");
    if (n == 2) {  // blocking send/recv in opposite orders
      Tensor t = make(1000, DType::f32, c.gpu, [&](int64_t i) { return c.rank + i; });
      Tensor r = Tensor::empty({1000}, DType::f32, c.gpu);
      if (c.rank == 0) {
        comm->send(t, 1, 0);
        comm->recv(r, 1, 0);
      } else {
        comm->recv(r, 0, 0);
        comm->send(t, 0, 0);
      }
      expect_values(
          r, [&](int64_t i) { return (1 - c.rank) + i; }, "blocking send/recv");
    }
  });
}

TEST_F(NcclCommunicatorTest, SplitAndBarrier) {
  run([](RankContext& c) {
    auto comm = join(c, "split");
    comm->barrier();
    comm->barrier();
    int n = c.size;
    // One group, ranked in reverse.
    auto reversed = comm->split(0, -c.rank);
    H2_CHECK(reversed != nullptr, "split(0) gave no communicator");
    H2_CHECK(reversed->rank() == n - 1 - c.rank && reversed->size() == n, "reversed rank {}",
             reversed->rank());
    Tensor t = make(7, DType::f32, c.gpu, [&](int64_t i) { return reversed->rank() + i; });
    reversed->all_reduce(t, ReduceOp::sum);
    expect_values(
        t, [&](int64_t i) { return n * (n - 1) / 2.0 + n * double(i); }, "all_reduce on a split");
    reversed->barrier();
    // Rank 0 joins no group (negative colour); the others form one.
    auto rest = comm->split(c.rank == 0 ? -1 : 0, c.rank);
    H2_CHECK((rest == nullptr) == (c.rank == 0), "negative colour");
    if (rest) {
      H2_CHECK(rest->rank() == c.rank - 1 && rest->size() == n - 1, "rest rank");
      Tensor u = make(3, DType::i32, c.gpu, [&](int64_t) { return 5; });
      rest->all_reduce(u, ReduceOp::sum);
      expect_values(
          u, [&](int64_t) { return 5.0 * (n - 1); }, "all_reduce on the rest");
    }
    comm->barrier();
  });
}

TEST_F(NcclCommunicatorTest, RejectsBadArgumentsAndMovesAnyDtypeAsBytes) {
  run([](RankContext& c) {
    auto comm = join(c, "errors");
    H2_CHECK(comm->can_connect(c.gpu) && !comm->can_connect(c.runtime.cpu()), "can_connect");
    Tensor host = Tensor::empty({4}, DType::f32, c.runtime.cpu());
    Tensor gpu = Tensor::empty({4}, DType::f32, c.gpu);
    expect_throw<Error>([&] { comm->all_reduce(gpu, host, ReduceOp::sum); }, "cpu:0", "cpu tensor");
    Tensor ints = Tensor::empty({4}, DType::i32, c.gpu);
    expect_throw<UnsupportedError>([&] { comm->all_reduce(ints, ReduceOp::avg); }, "avg",
                                   "avg on i32");
    Tensor f8 = Tensor::empty({4}, DType::f8e4m3, c.gpu);
    expect_throw<UnsupportedError>([&] { comm->all_reduce(f8, ReduceOp::sum); }, "f8e4m3",
                                   "f8 reduction");
    expect_throw<Error>([&] { comm->all_reduce(gpu, ints, ReduceOp::sum); }, "same dtype",
                        "dtype mismatch");
    expect_throw<Error>([&] { comm->broadcast(gpu, c.size); }, "root", "bad root");
    expect_throw<Error>([&] { comm->isend(gpu, c.size, 0); }, "peer", "bad peer");
    // The communicator is still usable, and moves f8 as bytes: view i32 memory as f8e4m3.
    int n = c.size;
    Tensor words = make(2, DType::i32, c.gpu, [&](int64_t i) { return c.rank * 1000 + i; });
    Tensor gathered = Tensor::empty({2 * n}, DType::i32, c.gpu);
    Tensor f8_in = Tensor::from_blob(words.data(), {8}, DType::f8e4m3, c.gpu);
    Tensor f8_out = Tensor::from_blob(gathered.data(), {8 * n}, DType::f8e4m3, c.gpu);
    comm->all_gather(f8_out, f8_in);
    expect_values(
        gathered, [&](int64_t k) { return (k / 2) * 1000 + k % 2; }, "f8 all_gather");
  });
}

TEST_F(NcclCommunicatorTest, AMissingPeerTimesOutNamingTheRank) {
  // A world of two in which rank 1 never arrives: init must fail within H2_COMM_TIMEOUT.
  run(
      [](RankContext& c) {
        setenv("H2_COMM_TIMEOUT", "5", 1);
        expect_throw<CommError>([&] { NcclCommunicator::create(c.store, "lonely", 0, 2, c.gpu); },
                                "rank 0/2", "missing peer at init");
        // Rank 1 of a world whose rank 0 never publishes the id: the store wait times out.
        expect_throw<CommError>([&] { NcclCommunicator::create(c.store, "nobody", 1, 2, c.gpu); },
                                "rank 1/2", "missing rank 0");
      },
      1);
}

}  // namespace
}  // namespace h2::comm
