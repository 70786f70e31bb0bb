// `h2 comm-bench` flags: nccl-tests' command line (-b -e -f -i -n -w -c -d -o -r ...) parsed and
// checked into BenchOptions, and the sizes, element counts and bandwidth factors of each
// benchmark row, computed the way nccl-tests computes them (src/*.cu getCollByteCount, getBw).
// Pure: no communication, no device; unit-tested in tests/cli/comm_bench_test.cpp.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"

namespace h2::cli::comm_bench {

// barrier: every row makes the same call (its size is only a label) and has nothing to check.
enum class Collective {
  all_reduce,
  reduce_scatter,
  all_gather,
  broadcast,
  all_to_all,
  sendrecv,
  barrier
};

// H2's name ("all_reduce", ...), used in the table's preamble.
std::string_view collective_name(Collective c);
// H2's names and nccl-tests' spellings: all_reduce, allreduce, all_reduce_perf, reduce_scatter,
// reducescatter, all_gather, allgather, broadcast, bcast, all_to_all, alltoall, sendrecv,
// barrier, ...
std::optional<Collective> parse_collective(std::string_view name);
// Whether the collective reduces (takes -o) and whether it has a root (takes -r).
bool collective_reduces(Collective c);
bool collective_rooted(Collective c);
// Whether it has an in-place form (NCCL's: one tensor for all_reduce, broadcast and all_to_all;
// for reduce_scatter and all_gather the smaller side is this rank's block of the larger).
// sendrecv and barrier have none.
bool collective_in_place(Collective c);

// nccl-tests' names in the table: float, half, bfloat16, int32, int64, uint8.
std::string_view nccl_type_name(DType t);
// Accepts nccl-tests' names (float, half, bfloat16, int32, int64, uint8, and float32, float16,
// int, char-free aliases) and H2's (f32, f16, bf16, i32, i64, u8). "all" is handled by the caller.
// Throws ConfigError naming -d and the value; double and the other nccl types are rejected.
DType parse_bench_dtype(std::string_view name);
std::string_view reduce_op_label(comm::ReduceOp op);  // sum, max, min, avg
// Throws ConfigError naming -o and the value (prod and mulsum are not supported).
comm::ReduceOp parse_bench_op(std::string_view name);

// nccl-tests' size syntax: a number (fractions allowed) with an optional K, M or G suffix
// (powers of 1024, either case; a trailing "B" or "iB" is accepted). Throws ConfigError naming
// `flag` and `text` for anything else (negative, empty, unknown suffix, trailing garbage).
int64_t parse_size(std::string_view flag, std::string_view text);

// The flags as typed; add_bench_flags binds them to a CLI11 app.
struct BenchArgs {
  std::string collective;
  std::string min_bytes = "32M";  // nccl-tests' defaults
  std::string max_bytes = "32M";
  std::string step_bytes;   // empty: not given (1M when stepping by bytes)
  std::string step_factor;  // empty: not given (2, unless -i is given)
  int iters = 20;
  int warmup_iters = 5;
  int check = 1;
  std::string datatype = "float";
  std::string op = "sum";
  int root = 0;
  int average = 3;  // 0 rank 0, 1 mean, 2 min, 3 max over ranks
  int blocking = 0;
  int threads = 1;
  int gpus = 1;
  std::string device = "cpu";
  std::string transport = "auto";
};

// Registers COLLECTIVE and every flag (short and long names as nccl-tests spells them).
void add_bench_flags(CLI::App& app, BenchArgs& args);

struct BenchOptions {
  Collective collective = Collective::all_reduce;
  int64_t min_bytes = 0;
  int64_t max_bytes = 0;
  int64_t step_factor = 2;  // > 1: multiply; 1: add step_bytes (nccl-tests' rule)
  int64_t step_bytes = 1 << 20;
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  std::vector<DType> dtypes;        // one, or every supported one for -d all
  std::vector<comm::ReduceOp> ops;  // one, or sum/max/min/avg for -o all (avg: floats only)
  int root = 0;
  int average = 3;
  std::string device = "cpu";
  std::string transport = "auto";
};

// Checks every flag; throws ConfigError naming the flag and the bad value.
BenchOptions resolve_bench_options(const BenchArgs& args);

// The byte sizes of the rows: min, then times the factor (or plus the step) while <= max.
std::vector<int64_t> bench_sizes(const BenchOptions& options);

// One row's buffers, as nccl-tests' getCollByteCount lays them out for `nranks` ranks:
// count = bytes / element size; reduce_scatter, all_gather and all_to_all use blocks of
// count / nranks elements per rank (count rounded down to a multiple of nranks).
struct RowCounts {
  int64_t bytes = 0;       // the "size" column: max(send, recv) bytes
  int64_t count = 0;       // the "count" column: nccl-tests' parameter count
  int64_t send_count = 0;  // elements of each rank's input
  int64_t recv_count = 0;  // elements of each rank's output
};
RowCounts row_counts(Collective c, int64_t bytes, DType dtype, int nranks);

// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; reduce_scatter, all_gather and
// all_to_all (n-1)/n; broadcast, sendrecv and barrier 1.
double bus_factor(Collective c, int nranks);
// algbw = row bytes / time (GB/s, 1e9), busbw = algbw * bus_factor.
struct Bandwidth {
  double algbw = 0;
  double busbw = 0;
};
Bandwidth bandwidth(Collective c, const RowCounts& row, double seconds, int nranks);

}  // namespace h2::cli::comm_bench
