// `h2 comm-bench`'s pure parts: nccl-tests' flags (sizes with suffixes, steps, dtype and op
// names, rejected values), the row sizes, counts and bandwidth factors, and the table layout.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/comm_bench/bench_options.h"
#include "cli/comm_bench/bench_table.h"
#include "core/error.h"

namespace h2::cli::comm_bench {
namespace {

// Parses a command line the way `h2 comm-bench` does.
BenchOptions parse(std::vector<std::string> argv) {
  CLI::App app{"test"};
  BenchArgs args;
  add_bench_flags(app, args);
  std::reverse(argv.begin(), argv.end());  // CLI11 takes the arguments reversed
  app.parse(argv);
  return resolve_bench_options(args);
}

std::string config_error(std::vector<std::string> argv) {
  try {
    parse(std::move(argv));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CommBenchOptions, ParsesSizesLikeNcclTests) {
  EXPECT_EQ(parse_size("-b", "8"), 8);
  EXPECT_EQ(parse_size("-b", "1K"), 1024);
  EXPECT_EQ(parse_size("-b", "1k"), 1024);
  EXPECT_EQ(parse_size("-e", "64M"), 64 << 20);
  EXPECT_EQ(parse_size("-e", "2G"), int64_t(2) << 30);
  EXPECT_EQ(parse_size("-e", "1.5K"), 1536);
  EXPECT_EQ(parse_size("-e", "64MB"), 64 << 20);
  EXPECT_EQ(parse_size("-e", "64MiB"), 64 << 20);
  EXPECT_EQ(parse_size("-e", "0"), 0);
  for (const char* bad : {"", "abc", "-5", "12X", "64MQ", "1..2", "K", "8 ", "1e3", "64Mb4"}) {
    try {
      parse_size("-b/--minbytes", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      std::string message = e.what();
      EXPECT_NE(message.find("-b/--minbytes"), std::string::npos) << message;
      EXPECT_NE(message.find(std::string("'") + bad + "'"), std::string::npos) << message;
    }
  }
}

TEST(CommBenchOptions, Defaults) {
  BenchOptions o = parse({"all_reduce"});
  EXPECT_EQ(o.collective, Collective::all_reduce);
  EXPECT_EQ(o.min_bytes, 32 << 20);
  EXPECT_EQ(o.max_bytes, 32 << 20);
  EXPECT_EQ(o.step_factor, 2);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 5);
  EXPECT_TRUE(o.check);
  EXPECT_EQ(o.dtypes, std::vector<DType>{DType::f32});
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], comm::ReduceOp::sum);
  EXPECT_EQ(o.root, 0);
  EXPECT_EQ(o.device, "cpu");
}

TEST(CommBenchOptions, ShortAndLongFlags) {
  BenchOptions o = parse({"allreduce", "-b", "8", "-e", "64M", "-f", "4", "-n", "7", "-w", "2",
                          "-c", "0", "-d", "bf16", "-o", "max", "--device", "vchip:chip-a"});
  EXPECT_EQ(o.min_bytes, 8);
  EXPECT_EQ(o.max_bytes, 64 << 20);
  EXPECT_EQ(o.step_factor, 4);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 2);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.dtypes, std::vector<DType>{DType::bf16});
  EXPECT_EQ(o.ops[0], comm::ReduceOp::max);
  EXPECT_EQ(o.device, "vchip:chip-a");
  BenchOptions l =
      parse({"broadcast", "--minbytes=1K", "--maxbytes", "4K", "--stepfactor", "2", "--iters=3",
             "--warmup_iters", "1", "--check", "1", "--datatype", "half", "--root", "1"});
  EXPECT_EQ(l.collective, Collective::broadcast);
  EXPECT_EQ(l.min_bytes, 1024);
  EXPECT_EQ(l.iters, 3);
  EXPECT_EQ(l.dtypes, std::vector<DType>{DType::f16});
  EXPECT_EQ(l.root, 1);
}

TEST(CommBenchOptions, CollectiveSpellings) {
  EXPECT_EQ(parse_collective("all_reduce"), Collective::all_reduce);
  EXPECT_EQ(parse_collective("all_reduce_perf"), Collective::all_reduce);
  EXPECT_EQ(parse_collective("reducescatter"), Collective::reduce_scatter);
  EXPECT_EQ(parse_collective("allgather"), Collective::all_gather);
  EXPECT_EQ(parse_collective("bcast"), Collective::broadcast);
  EXPECT_EQ(parse_collective("alltoall"), Collective::all_to_all);
  EXPECT_EQ(parse_collective("alltoall_perf"), Collective::all_to_all);
  EXPECT_EQ(parse_collective("sendrecv"), Collective::sendrecv);
  EXPECT_EQ(parse_collective("reduce"), std::nullopt);
  EXPECT_NE(config_error({"gather"}).find("COLLECTIVE 'gather'"), std::string::npos);
  EXPECT_TRUE(collective_reduces(Collective::reduce_scatter));
  EXPECT_FALSE(collective_reduces(Collective::all_gather));
  EXPECT_TRUE(collective_rooted(Collective::broadcast));
  EXPECT_TRUE(collective_in_place(Collective::all_to_all));
  EXPECT_TRUE(collective_in_place(Collective::reduce_scatter));
  EXPECT_TRUE(collective_in_place(Collective::all_gather));
  EXPECT_FALSE(collective_in_place(Collective::sendrecv));
  EXPECT_EQ(parse_collective("barrier"), Collective::barrier);
  EXPECT_FALSE(collective_in_place(Collective::barrier));
  EXPECT_FALSE(collective_reduces(Collective::barrier));
  // A barrier has no result to check, whatever -c says.
  EXPECT_FALSE(parse({"barrier", "-b", "8", "-e", "8", "-c", "1"}).check);
  EXPECT_TRUE(parse({"sendrecv", "-b", "8", "-e", "8", "-c", "1"}).check);
}

TEST(CommBenchOptions, DtypeAndOpNames) {
  EXPECT_EQ(parse_bench_dtype("float"), DType::f32);
  EXPECT_EQ(parse_bench_dtype("f32"), DType::f32);
  EXPECT_EQ(parse_bench_dtype("half"), DType::f16);
  EXPECT_EQ(parse_bench_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_bench_dtype("int32"), DType::i32);
  EXPECT_EQ(parse_bench_dtype("i64"), DType::i64);
  EXPECT_EQ(parse_bench_dtype("uint8"), DType::u8);
  EXPECT_THROW(parse_bench_dtype("double"), ConfigError);
  EXPECT_THROW(parse_bench_dtype("int8"), ConfigError);
  EXPECT_NE(config_error({"all_reduce", "-d", "double"}).find("-d/--datatype 'double'"),
            std::string::npos);
  EXPECT_EQ(parse({"all_reduce", "-d", "all"}).dtypes.size(), 6u);
  EXPECT_EQ(nccl_type_name(DType::bf16), "bfloat16");
  EXPECT_EQ(nccl_type_name(DType::u8), "uint8");

  EXPECT_EQ(parse_bench_op("avg"), comm::ReduceOp::avg);
  EXPECT_NE(config_error({"all_reduce", "-o", "prod"}).find("-o/--op 'prod'"), std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-o", "avg", "-d", "int32"}).find("floating"),
            std::string::npos);
  EXPECT_EQ(parse({"all_reduce", "-o", "all"}).ops.size(), 4u);
  // Collectives that do not reduce run one pass whatever -o says.
  EXPECT_EQ(parse({"all_gather", "-o", "all"}).ops.size(), 1u);
}

TEST(CommBenchOptions, RejectsBadValues) {
  EXPECT_NE(config_error({"all_reduce", "-b", "1M", "-e", "1K"}).find("larger than"),
            std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-e", "64Z"}).find("-e/--maxbytes '64Z'"),
            std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-f", "x"}).find("-f/--stepfactor 'x'"), std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-c", "2"}).find("-c/--check"), std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-n", "0"}).find("-n/--iters"), std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-t", "2"}).find("mpirun"), std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-b", "0", "-e", "8"}).find("-b/--minbytes"),
            std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "-b", "1", "-e", "1G", "-i", "1"}).find("rows"),
            std::string::npos);
  EXPECT_NE(config_error({"all_reduce", "--transport", "mpi"}).find("--transport 'mpi'"),
            std::string::npos);
}

TEST(CommBenchSizes, FactorAndStep) {
  BenchOptions o = parse({"all_reduce", "-b", "8", "-e", "64M"});
  std::vector<int64_t> sizes = bench_sizes(o);
  ASSERT_EQ(sizes.size(), 24u);  // 8 B .. 64 MiB by 2: 2^3 .. 2^26
  EXPECT_EQ(sizes.front(), 8);
  EXPECT_EQ(sizes.back(), 64 << 20);
  // Not reaching max exactly: stops at the last size <= max.
  EXPECT_EQ(bench_sizes(parse({"all_reduce", "-b", "3", "-e", "100", "-f", "3"})),
            (std::vector<int64_t>{3, 9, 27, 81}));
  // -i alone steps by bytes; so does -f 1 (nccl-tests' rule); -f > 1 wins over -i.
  EXPECT_EQ(bench_sizes(parse({"all_reduce", "-b", "1K", "-e", "4K", "-i", "1K"})),
            (std::vector<int64_t>{1024, 2048, 3072, 4096}));
  EXPECT_EQ(bench_sizes(parse({"all_reduce", "-b", "1M", "-e", "3M", "-f", "1"})),
            (std::vector<int64_t>{1 << 20, 2 << 20, 3 << 20}));
  EXPECT_EQ(bench_sizes(parse({"all_reduce", "-b", "1K", "-e", "4K", "-i", "1K", "-f", "2"})),
            (std::vector<int64_t>{1024, 2048, 4096}));
  EXPECT_EQ(bench_sizes(parse({"all_reduce", "-b", "0", "-e", "0"})), std::vector<int64_t>{0});
}

TEST(CommBenchSizes, CountsPerCollective) {
  // all_reduce: count = bytes / sizeof(dtype), rounded down.
  RowCounts r = row_counts(Collective::all_reduce, 10, DType::f32, 3);
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(r.bytes, 8);
  EXPECT_EQ(r.send_count, 2);
  EXPECT_EQ(r.recv_count, 2);
  // reduce_scatter: count column is the per-rank block; size is the whole input.
  r = row_counts(Collective::reduce_scatter, 1024, DType::f32, 3);  // 256 elements
  EXPECT_EQ(r.count, 85);
  EXPECT_EQ(r.send_count, 255);
  EXPECT_EQ(r.recv_count, 85);
  EXPECT_EQ(r.bytes, 1020);
  // all_gather: count column is the per-rank input; size is the whole output.
  r = row_counts(Collective::all_gather, 1024, DType::bf16, 3);  // 512 elements
  EXPECT_EQ(r.count, 170);
  EXPECT_EQ(r.send_count, 170);
  EXPECT_EQ(r.recv_count, 510);
  EXPECT_EQ(r.bytes, 1020);
  // all_to_all: count column is one block; both buffers hold n blocks.
  r = row_counts(Collective::all_to_all, 64, DType::f32, 4);
  EXPECT_EQ(r.count, 4);
  EXPECT_EQ(r.send_count, 16);
  EXPECT_EQ(r.recv_count, 16);
  EXPECT_EQ(r.bytes, 64);
  // Fewer elements than ranks: empty blocks.
  r = row_counts(Collective::all_gather, 8, DType::f32, 4);
  EXPECT_EQ(r.count, 0);
  EXPECT_EQ(r.bytes, 0);
  r = row_counts(Collective::broadcast, 7, DType::u8, 4);
  EXPECT_EQ(r.count, 7);
  EXPECT_EQ(r.bytes, 7);
}

TEST(CommBenchSizes, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::reduce_scatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_gather, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_to_all, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::sendrecv, 8), 1.0);
  // 64 MiB all_reduce in 10 ms on 4 ranks: algbw 6.71 GB/s, busbw 10.07.
  RowCounts r = row_counts(Collective::all_reduce, 64 << 20, DType::f32, 4);
  Bandwidth b = bandwidth(Collective::all_reduce, r, 0.010, 4);
  EXPECT_NEAR(b.algbw, 6.7108864, 1e-9);
  EXPECT_NEAR(b.busbw, 10.0663296, 1e-9);
  // nccl-tests' all_gather: count * typesize * n / time, times (n-1)/n.
  r = row_counts(Collective::all_gather, 4096, DType::f32, 4);
  b = bandwidth(Collective::all_gather, r, 1e-6, 4);
  EXPECT_NEAR(b.algbw, 256 * 4 * 4 / 1e9 / 1e-6, 1e-9);
  EXPECT_NEAR(b.busbw, b.algbw * 0.75, 1e-9);
  EXPECT_EQ(bandwidth(Collective::all_reduce, r, 0, 4).algbw, 0);
}

TEST(CommBenchTable, TimeFormat) {
  EXPECT_EQ(format_time_us(12.345), "  12.35");
  EXPECT_EQ(format_time_us(99.994), "  99.99");
  EXPECT_EQ(format_time_us(123.45), "  123.5");
  EXPECT_EQ(format_time_us(9999.94), " 9999.9");
  EXPECT_EQ(format_time_us(12345.6), "  12346");
}

TEST(CommBenchTable, HeaderAndRowsLineUp) {
  std::string header = format_header();
  EXPECT_EQ(header,
            "#\n"
            "#                                                              out-of-place        "
            "               in-place          \n"
            "#       size         count      type   redop    root     time   algbw   busbw #wrong "
            "    time   algbw   busbw #wrong\n"
            "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
            "     (us)  (GB/s)  (GB/s)       \n");
  Measurement out{true, 36.23e-6, {0.00022, 0.00033}, 0};
  Measurement in{true, 12345e-6, {5.43, 8.15}, 3};
  std::string row = format_row(8, 2, "float", "sum", -1, out, in);
  EXPECT_EQ(row,
            "           8             2     float     sum      -1    36.23    0.00    0.00      0"
            "    12345    5.43    8.15      3\n");
  // Columns end where the header's do.
  std::string names = header.substr(header.find("#       size"));
  names = names.substr(0, names.find('\n'));
  EXPECT_EQ(row.size() - 1, names.size());
  Measurement unchecked{true, 150e-6, {1, 2}, -1};
  Measurement absent;
  absent.measured = false;
  EXPECT_EQ(format_row(8, 2, "uint8", "none", 0, unchecked, absent),
            "           8             2     uint8    none       0    150.0    1.00    2.00    N/A"
            "      N/A     N/A     N/A    N/A\n");
}

TEST(CommBenchTable, PreambleAndTrailer) {
  BenchOptions o = parse({"all_reduce", "-b", "8", "-e", "64M"});
  std::string pre = format_preamble(o, "ucx", 2);
  EXPECT_NE(pre.find("# h2 comm-bench all_reduce: 2 ranks, communicator ucx, device cpu\n"),
            std::string::npos);
  EXPECT_NE(pre.find("# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 2(factor) warmup "
                     "iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n"),
            std::string::npos);
  EXPECT_TRUE(pre.ends_with("#\n# Using devices\n"));
  EXPECT_EQ(format_rank_line(1, 0, 4242, "myhost", "cpu:0", "host", "CPU"),
            "#  Rank  1 Group  0 Pid   4242 on     myhost device cpu:0 [host] CPU\n");

  TableTotals totals;
  totals.add({true, 1e-3, {1, 2}, 0});
  totals.add({true, 1e-3, {1, 4}, 0});
  Measurement absent;
  absent.measured = false;
  totals.add(absent);
  EXPECT_EQ(format_trailer(totals),
            "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3 \n#\n");
  totals.add({true, 1e-3, {1, 6}, 5});
  EXPECT_EQ(totals.errors(), 1);
  EXPECT_EQ(format_trailer(totals),
            "# Out of bounds values : 1 FAILED\n# Avg bus bandwidth    : 4 \n#\n");
}

}  // namespace
}  // namespace h2::cli::comm_bench
