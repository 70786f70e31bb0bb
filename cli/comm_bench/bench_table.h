// The text of `h2 comm-bench`'s report in nccl-tests' layout (src/common.cu): the '#' preamble
// with one line per rank, the three header lines, one row per size with the out-of-place then
// the in-place figures, and the trailer ("# Out of bounds values", "# Avg bus bandwidth").
// Pure formatting, so that a table printed by H2 reads, and parses, like one by nccl-tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cli/comm_bench/bench_options.h"

namespace h2::cli::comm_bench {

// One half of a row (out-of-place or in-place).
struct Measurement {
  bool measured = true;  // false: not run (sendrecv in place): every column reads N/A
  double seconds = 0;    // per iteration
  Bandwidth bw;
  int64_t wrong = -1;  // wrong elements summed over ranks; -1: not checked (N/A)
};

// nccl-tests' time column: %7.0f from 10000 us, %7.1f from 100 us, else %7.2f.
std::string format_time_us(double us);

// "# h2 comm-bench ..." and nccl-tests' "# nThread 1 nGpus 1 minBytes ..." line, then
// "#\n# Using devices\n".
std::string format_preamble(const BenchOptions& options, std::string_view comm_name, int nranks);
// "#  Rank  0 Group  0 Pid  12345 on     host device cpu:0 [host] NAME\n"
std::string format_rank_line(int rank, int group, int pid, std::string_view host,
                             std::string_view device, std::string_view memory,
                             std::string_view name);
// "#\n" and the three column-header lines (each ends with '\n').
std::string format_header();
// A whole row: size, count, type, redop, root, then both measurements, '\n'-terminated.
std::string format_row(int64_t bytes, int64_t count, std::string_view type, std::string_view redop,
                       int root, const Measurement& out_of_place, const Measurement& in_place);

// Sums what the trailer reports: measurements with wrong elements, and the mean bus bandwidth
// over every measurement that ran (both halves of every row, as nccl-tests averages).
class TableTotals {
 public:
  void add(const Measurement& m);
  int errors() const { return errors_; }
  double avg_busbw() const { return count_ ? busbw_sum_ / count_ : 0; }

 private:
  int errors_ = 0;
  int count_ = 0;
  double busbw_sum_ = 0;
};
// "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.234 \n#\n"
std::string format_trailer(const TableTotals& totals);

}  // namespace h2::cli::comm_bench
