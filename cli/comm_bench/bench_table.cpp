// nccl-tests' table layout for `h2 comm-bench`; printf formats as in nccl-tests' src/common.cu.
#include "cli/comm_bench/bench_table.h"

#include <cstdarg>
#include <cstdio>
#include <string>

namespace h2::cli::comm_bench {
namespace {

__attribute__((format(printf, 1, 2))) std::string printf_string(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(size_t(n > 0 ? n : 0), '\0');
  std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

std::string c_str(std::string_view s) {
  return std::string(s);
}

std::string format_measurement(const Measurement& m) {
  if (!m.measured) return printf_string("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  std::string time = format_time_us(m.seconds * 1e6);
  if (m.wrong < 0)
    return printf_string("  %7s  %6.2f  %6.2f  %5s", time.c_str(), m.bw.algbw, m.bw.busbw, "N/A");
  return printf_string("  %7s  %6.2f  %6.2f  %5g", time.c_str(), m.bw.algbw, m.bw.busbw,
                       double(m.wrong));
}

}  // namespace

std::string format_time_us(double us) {
  if (us >= 10000.0) return printf_string("%7.0f", us);
  if (us >= 100.0) return printf_string("%7.1f", us);
  return printf_string("%7.2f", us);
}

std::string format_preamble(const BenchOptions& o, std::string_view comm_name, int nranks) {
  static constexpr const char* kAverage[] = {"rank 0's", "the mean over ranks of the",
                                             "the minimum over ranks of the",
                                             "the maximum over ranks of the"};
  std::string out =
      printf_string("# h2 comm-bench %s: %d rank%s, communicator %s, device %s\n",
                    c_str(collective_name(o.collective)).c_str(), nranks, nranks == 1 ? "" : "s",
                    c_str(comm_name).c_str(), o.device.c_str());
  out += printf_string("# time: %s mean time per iteration\n", kAverage[o.average & 3]);
  out += printf_string(
      "# nThread 1 nGpus 1 minBytes %lld maxBytes %lld step: %lld(%s) warmup iters: %d iters: %d "
      "agg iters: 1 validation: %d graph: 0\n",
      (long long)o.min_bytes, (long long)o.max_bytes,
      (long long)(o.step_factor > 1 ? o.step_factor : o.step_bytes),
      o.step_factor > 1 ? "factor" : "bytes", o.warmup_iters, o.iters, o.check ? 1 : 0);
  out += "#\n# Using devices\n";
  return out;
}

std::string format_rank_line(int rank, int group, int pid, std::string_view host,
                             std::string_view device, std::string_view memory,
                             std::string_view name) {
  return printf_string("#  Rank %2d Group %2d Pid %6d on %10s device %s [%s] %s\n", rank, group,
                       pid, c_str(host).c_str(), c_str(device).c_str(), c_str(memory).c_str(),
                       c_str(name).c_str());
}

std::string format_header() {
  std::string out = "#\n";
  out += printf_string(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  out += printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n",
                       "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                       "time", "algbw", "busbw", "#wrong");
  out += printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n",
                       "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                       "(GB/s)", "(GB/s)", "");
  return out;
}

std::string format_row(int64_t bytes, int64_t count, std::string_view type, std::string_view redop,
                       int root, const Measurement& out_of_place, const Measurement& in_place) {
  std::string out =
      printf_string("%12lld  %12lld  %8s  %6s  %6i", (long long)bytes, (long long)count,
                    c_str(type).c_str(), c_str(redop).c_str(), root);
  out += format_measurement(out_of_place);
  out += format_measurement(in_place);
  out += "\n";
  return out;
}

void TableTotals::add(const Measurement& m) {
  if (!m.measured) return;
  if (m.wrong > 0) ++errors_;
  busbw_sum_ += m.bw.busbw;
  ++count_;
}

std::string format_trailer(const TableTotals& totals) {
  std::string out = printf_string("# Out of bounds values : %d %s\n", totals.errors(),
                                  totals.errors() ? "FAILED" : "OK");
  out += printf_string("# Avg bus bandwidth    : %g \n", totals.avg_busbw());
  out += "#\n";
  return out;
}

}  // namespace h2::cli::comm_bench
