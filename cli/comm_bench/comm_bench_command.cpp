// `h2 comm-bench COLLECTIVE [flags]`: nccl-tests for H2's Communicator. Every rank (started by
// mpirun, srun or a torchrun-style launcher) joins the world, runs each size out of place then in
// place (warm-up, barrier, -n timed iterations; the reported time is the maximum over ranks of the
// mean per iteration unless -a says otherwise), checks the result against analytic values and
// rank 0 prints nccl-tests' table.
//
// Inputs: element i of rank r is (r + i) mod 7, so sums, minima, maxima and means over up to
// 42 ranks are exact (or rounded once) in every dtype, u8 and bf16 included; outputs start as
// 99, which no correct result of fewer than 17 ranks equals.
#include "cli/command.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "backends/registry.h"
#include "cli/comm_bench/bench_options.h"
#include "cli/comm_bench/bench_table.h"
#include "comm/bootstrap/rank_env.h"
#include "comm/world/world.h"
#include "core/error.h"
#include "core/tensor.h"
#include "core/tensor_host.h"

namespace h2::cli {
namespace {

using comm::ReduceOp;
using namespace comm_bench;

constexpr double kSentinel = 99;
constexpr int64_t kRankLineBytes = 256;

double input_value(int rank, int64_t i) {
  return double((int64_t(rank) + i) % 7);
}

// Relative tolerance of a mean (a sum divided once, then rounded to the dtype).
double avg_tolerance(DType t) {
  switch (t) {
    case DType::bf16:
      return 1.0 / 128;
    case DType::f16:
      return 1.0 / 1024;
    default:
      return 1e-6;
  }
}

Device& pick_device(Runtime& runtime, const std::string& spec, const comm::RankInfo& info) {
  if (spec == "cuda") {
    Backend* cuda = runtime.backend("cuda");
    if (!cuda || cuda->device_count() == 0)
      throw ConfigError("comm-bench: --device cuda: this machine has no CUDA device");
    return runtime.device(fmt::format("cuda:{}", info.local_rank % cuda->device_count()));
  }
  return runtime.device(spec);
}

// One benchmark run: the buffers of one dtype, the row loop, the check and the table.
class Bench {
 public:
  Bench(const BenchOptions& options, Runtime& runtime, Device& device, comm::Communicator& comm)
      : o_(options), runtime_(runtime), device_(device), comm_(comm) {}

  int run() {
    const int n = comm_.size();
    if (o_.collective == Collective::broadcast && o_.root >= n)
      throw ConfigError(
          fmt::format("comm-bench: -r/--root {} is not a rank of this {}-rank job", o_.root, n));
    print_preamble();
    for (DType dtype : o_.dtypes) {
      allocate(dtype);
      for (ReduceOp op : o_.ops) {
        if (op == ReduceOp::avg && !is_floating(dtype)) continue;
        op_ = op;
        run_rows();
      }
    }
    if (comm_.rank() == 0) {
      std::fputs(format_trailer(totals_).c_str(), stdout);
      std::fflush(stdout);
    }
    return totals_.errors() ? 1 : 0;
  }

 private:
  // The tensors one call works on.
  struct Views {
    Tensor in, out;
  };

  void print_preamble() {
    char host[128] = {};
    gethostname(host, sizeof(host) - 1);
    std::string line = format_rank_line(
        comm_.rank(), 0, int(getpid()), host, device_.str(),
        device_.memory_kind() == MemoryKind::host ? "host" : "device", device_.props().name);
    line.resize(size_t(kRankLineBytes), '\0');
    line.back() = '\0';
    Tensor mine = Tensor::empty({kRankLineBytes}, DType::u8, runtime_.cpu());
    std::memcpy(mine.data(), line.data(), size_t(kRankLineBytes));
    Tensor all = Tensor::empty({kRankLineBytes * comm_.size()}, DType::u8, runtime_.cpu());
    comm_.all_gather(all, mine);
    if (comm_.rank() != 0) return;
    std::string out = format_preamble(o_, comm_.name(), comm_.size());
    for (int r = 0; r < comm_.size(); ++r)
      out += static_cast<const char*>(all.data()) + r * kRankLineBytes;
    out += format_header();
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }

  void allocate(DType dtype) {
    dtype_ = dtype;
    int64_t capacity = 1;
    for (int64_t bytes : bench_sizes(o_)) {
      RowCounts r = row_counts(o_.collective, bytes, dtype, comm_.size());
      capacity = std::max({capacity, r.send_count, r.recv_count});
    }
    send_ = Tensor();
    recv_ = Tensor();
    // Zeros, not garbage: uninitialised floats may be NaNs or denormals that slow reductions.
    send_ = Tensor::zeros({capacity}, dtype, device_);
    recv_ = Tensor::zeros({capacity}, dtype, device_);
  }

  void run_rows() {
    const std::vector<int64_t> sizes = bench_sizes(o_);
    // nccl-tests warms up at the largest, then at the smallest size.
    for (int64_t bytes : {sizes.back(), sizes.front()}) {
      RowCounts row = row_counts(o_.collective, bytes, dtype_, comm_.size());
      for (int i = 0; i < o_.warmup_iters; ++i) call(row, false);
      device_.default_stream().synchronize();
    }
    const int root = collective_rooted(o_.collective) ? o_.root : -1;
    const std::string_view redop =
        collective_reduces(o_.collective) ? reduce_op_label(op_) : std::string_view("none");
    for (int64_t bytes : sizes) {
      RowCounts row = row_counts(o_.collective, bytes, dtype_, comm_.size());
      Measurement out_of_place = measure(row, false);
      Measurement in_place;
      if (collective_in_place(o_.collective))
        in_place = measure(row, true);
      else
        in_place.measured = false;
      totals_.add(out_of_place);
      totals_.add(in_place);
      if (comm_.rank() == 0) {
        std::fputs(format_row(row.bytes, row.count, nccl_type_name(dtype_), redop, root,
                              out_of_place, in_place)
                       .c_str(),
                   stdout);
        std::fflush(stdout);
      }
    }
  }

  // In place as nccl-tests and NCCL define it: the same tensor for all_reduce, broadcast and
  // all_to_all; for reduce_scatter the output is this rank's block of the input, for all_gather
  // the input is this rank's block of the output.
  Views views(const RowCounts& row, bool in_place) const {
    if (in_place) {
      const int r = comm_.rank();
      if (o_.collective == Collective::reduce_scatter) {
        Tensor in = recv_.slice(0, 0, row.send_count);
        return {in, in.slice(0, r * row.recv_count, (r + 1) * row.recv_count)};
      }
      Tensor out = recv_.slice(0, 0, row.recv_count);
      if (o_.collective == Collective::all_gather)
        return {out.slice(0, r * row.send_count, (r + 1) * row.send_count), out};
      return {out, out};
    }
    return {send_.slice(0, 0, row.send_count), recv_.slice(0, 0, row.recv_count)};
  }

  void call(const RowCounts& row, bool in_place) { call(views(row, in_place)); }

  // One call on prepared views (the timed loop prepares them once, as nccl-tests does its
  // buffers: slicing per call would time tensor bookkeeping, not communication).
  void call(const Views& v) {
    switch (o_.collective) {
      case Collective::all_reduce:
        comm_.all_reduce(v.out, v.in, op_);
        return;
      case Collective::reduce_scatter:
        comm_.reduce_scatter(v.out, v.in, op_);
        return;
      case Collective::all_gather:
        comm_.all_gather(v.out, v.in);
        return;
      case Collective::broadcast:
        comm_.broadcast(v.out, v.in, o_.root);
        return;
      case Collective::all_to_all:
        comm_.all_to_all(v.out, v.in);
        return;
      case Collective::barrier:
        comm_.barrier();
        return;
      case Collective::sendrecv: {
        const int n = comm_.size(), r = comm_.rank();
        auto recv = comm_.irecv(v.out, (r - 1 + n) % n, 0);
        auto send = comm_.isend(v.in, (r + 1) % n, 0);
        send->wait();
        recv->wait();
        return;
      }
    }
  }

  // Writes fn(i) into every element of `view` (through a host buffer).
  void fill(Tensor view, const std::function<double(int64_t)>& fn) {
    if (view.numel() == 0) return;
    Tensor host = Tensor::empty({view.numel()}, dtype_, runtime_.cpu());
    for (int64_t i = 0; i < view.numel(); ++i) store_host_element(host.data(), dtype_, i, fn(i));
    view.copy_from(host);
  }

  // Outputs become the sentinel, then inputs get their values (in place, after the outputs).
  void init(const RowCounts& row, bool in_place) {
    Views v = views(row, in_place);
    const int r = comm_.rank();
    fill(v.out, [](int64_t) { return kSentinel; });
    if (o_.collective == Collective::broadcast && r != o_.root) return;  // read on root only
    fill(v.in, [r](int64_t i) { return input_value(r, i); });
  }

  double expected(const RowCounts& row, int64_t j) const {
    const int n = comm_.size(), r = comm_.rank();
    switch (o_.collective) {
      case Collective::all_reduce:
      case Collective::reduce_scatter: {
        const int64_t i = o_.collective == Collective::all_reduce ? j : r * row.recv_count + j;
        double acc = input_value(0, i);
        for (int q = 1; q < n; ++q) {
          double x = input_value(q, i);
          acc = op_ == ReduceOp::max   ? std::max(acc, x)
                : op_ == ReduceOp::min ? std::min(acc, x)
                                       : acc + x;
        }
        return op_ == ReduceOp::avg ? acc / n : acc;
      }
      case Collective::all_gather:
        return input_value(int(j / row.send_count), j % row.send_count);
      case Collective::broadcast:
        return input_value(o_.root, j);
      case Collective::all_to_all: {
        const int64_t block = row.recv_count / n;
        return input_value(int(j / block), r * block + j % block);
      }
      case Collective::sendrecv:
        return input_value((r - 1 + n) % n, j);
      case Collective::barrier:  // never checked
        return 0;
    }
    return 0;
  }

  // Wrong elements of this rank's output.
  int64_t count_wrong(const RowCounts& row, bool in_place) {
    Views v = views(row, in_place);
    if (v.out.numel() == 0) return 0;
    Tensor host = v.out.to(runtime_.cpu());
    const bool approximate = op_ == ReduceOp::avg && collective_reduces(o_.collective);
    const double tol = avg_tolerance(dtype_);
    double one = 0;
    int64_t wrong = 0;
    for (int64_t j = 0; j < host.numel(); ++j) {
      double want = expected(row, j);
      store_host_element(&one, dtype_, 0,
                         want);  // rounded to the dtype as a correct result would be
      double got = load_host_element(host.data(), dtype_, j);
      bool ok = approximate ? std::abs(got - want) <= tol * std::max(1.0, std::abs(want))
                            : got == load_host_element(&one, dtype_, 0);
      wrong += ok ? 0 : 1;
    }
    return wrong;
  }

  // Reduces a per-rank figure as -a asks (0 rank 0, 1 mean, 2 min, 3 max).
  double across_ranks(double value) {
    Tensor t = Tensor::empty({1}, DType::f32, runtime_.cpu());
    *t.data_as<float>() = float(value);
    switch (o_.average) {
      case 0:
        comm_.broadcast(t, 0);
        break;
      case 1:
        comm_.all_reduce(t, ReduceOp::avg);
        break;
      case 2:
        comm_.all_reduce(t, ReduceOp::min);
        break;
      default:
        comm_.all_reduce(t, ReduceOp::max);
        break;
    }
    return *t.data_as<float>();
  }

  int64_t sum_over_ranks(int64_t value) {
    Tensor t = Tensor::empty({1}, DType::i64, runtime_.cpu());
    *t.data_as<int64_t>() = value;
    comm_.all_reduce(t, ReduceOp::sum);
    return *t.data_as<int64_t>();
  }

  Measurement measure(const RowCounts& row, bool in_place) {
    Stream& stream = device_.default_stream();
    if (o_.check) init(row, in_place);
    call(row, in_place);
    stream.synchronize();
    comm_.barrier();
    const Views prepared = views(row, in_place);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o_.iters; ++i) call(prepared);
    stream.synchronize();
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    Measurement m;
    m.seconds = across_ranks(elapsed.count() / o_.iters);
    m.bw = bandwidth(o_.collective, row, m.seconds, comm_.size());
    if (o_.check) {
      init(row, in_place);
      call(row, in_place);
      stream.synchronize();
      m.wrong = sum_over_ranks(count_wrong(row, in_place));
    }
    return m;
  }

  const BenchOptions& o_;
  Runtime& runtime_;
  Device& device_;
  comm::Communicator& comm_;
  DType dtype_ = DType::f32;
  ReduceOp op_ = ReduceOp::sum;
  Tensor send_, recv_;
  TableTotals totals_;
};

constexpr const char* kFooter = R"(
Prints nccl-tests' table: one row per size with the out-of-place, then the in-place time (us),
algorithm bandwidth (bytes / time, GB/s), bus bandwidth (algbw times 2(n-1)/n for all_reduce,
(n-1)/n for reduce_scatter, all_gather and all_to_all, 1 for broadcast and sendrecv) and the
number of wrong elements (-c 1); N/A where a figure does not apply. Sizes run from -b to -e,
multiplied by -f (default 2) or increased by -i. The time is the maximum over ranks of the mean
per iteration (-a 3; nccl-tests defaults to -a 1, the mean). reduce_scatter, all_gather and
all_to_all use count / ranks elements per rank block; sendrecv sends to rank + 1 and receives
from rank - 1; barrier makes the same call on every row (the size is a label, nothing checked).
In place means out and in are one tensor, which H2's Communicator defines for all_reduce,
broadcast and all_to_all; the other collectives' in-place halves read N/A. Exit code 1 when an
element was wrong.

Start one process per rank with any launcher, e.g.
  mpirun --allow-run-as-root -np 2 build/bin/h2 comm-bench all_reduce -b 8 -e 64M -f 2
  mpirun --allow-run-as-root -np 4 build/bin/h2 comm-bench sendrecv -b 8 -e 8 -n 1000 -w 100
  h2run -n 2 -- build/bin/h2 comm-bench all_gather -b 1K -e 16M -d bf16 --device vchip:chip-a)";

}  // namespace

Command make_comm_bench_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "comm-bench", "Collective and point-to-point benchmark with nccl-tests' flags and table");
  auto args = std::make_shared<BenchArgs>();
  add_bench_flags(*app, *args);
  app->footer(kFooter);
  return {app, [args] {
            BenchOptions options = resolve_bench_options(*args);
            comm::RankInfo info = comm::discover_rank(comm::process_env());
            auto runtime = create_runtime();
            Device& device = pick_device(*runtime, options.device, info);
            comm::WorldOptions world_options;
            world_options.transport = options.transport;
            auto world = comm::World::join(info, device, world_options);
            int code = Bench(options, *runtime, device, world->comm()).run();
            world->comm().barrier();
            return code;
          }};
}

}  // namespace h2::cli
