// nccl-tests' flags for `h2 comm-bench`, their checks, and the per-row sizes and bandwidths.
#include "cli/comm_bench/bench_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "core/error.h"

namespace h2::cli::comm_bench {
namespace {

std::string lower(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

[[noreturn]] void bad_flag(std::string_view flag, std::string_view value, std::string_view why) {
  throw ConfigError(fmt::format("comm-bench: {} '{}': {}", flag, value, why));
}

constexpr int64_t kMaxRows = 10000;

}  // namespace

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::broadcast:
      return "broadcast";
    case Collective::all_to_all:
      return "all_to_all";
    case Collective::sendrecv:
      return "sendrecv";
    case Collective::barrier:
      return "barrier";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view name) {
  std::string s = lower(name);
  if (s.ends_with("_perf")) s.resize(s.size() - 5);  // nccl-tests' binary names
  std::erase(s, '_');
  std::erase(s, '-');
  if (s == "allreduce") return Collective::all_reduce;
  if (s == "reducescatter") return Collective::reduce_scatter;
  if (s == "allgather") return Collective::all_gather;
  if (s == "broadcast" || s == "bcast") return Collective::broadcast;
  if (s == "alltoall") return Collective::all_to_all;
  if (s == "sendrecv") return Collective::sendrecv;
  if (s == "barrier") return Collective::barrier;
  return std::nullopt;
}

bool collective_reduces(Collective c) {
  return c == Collective::all_reduce || c == Collective::reduce_scatter;
}

bool collective_rooted(Collective c) {
  return c == Collective::broadcast;
}

bool collective_in_place(Collective c) {
  return c != Collective::sendrecv && c != Collective::barrier;
}

std::string_view nccl_type_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "half";
    case DType::bf16:
      return "bfloat16";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
    case DType::u8:
      return "uint8";
    default:
      return dtype_name(t);
  }
}

DType parse_bench_dtype(std::string_view name) {
  std::string s = lower(name);
  if (s == "float" || s == "float32" || s == "f32") return DType::f32;
  if (s == "half" || s == "float16" || s == "f16") return DType::f16;
  if (s == "bfloat16" || s == "bf16") return DType::bf16;
  if (s == "int32" || s == "int" || s == "i32") return DType::i32;
  if (s == "int64" || s == "i64") return DType::i64;
  if (s == "uint8" || s == "u8") return DType::u8;
  if (s == "double" || s == "float64" || s == "f64")
    bad_flag("-d/--datatype", name, "double is not supported by H2's communicator");
  if (s == "int8" || s == "char" || s == "uint32" || s == "uint64")
    bad_flag("-d/--datatype", name, "not supported by H2's communicator");
  bad_flag("-d/--datatype", name,
           "expected float, half, bfloat16, int32, int64, uint8 (or f32, f16, bf16, i32, i64, "
           "u8) or all");
}

std::string_view reduce_op_label(comm::ReduceOp op) {
  switch (op) {
    case comm::ReduceOp::sum:
      return "sum";
    case comm::ReduceOp::max:
      return "max";
    case comm::ReduceOp::min:
      return "min";
    case comm::ReduceOp::avg:
      return "avg";
  }
  return "?";
}

comm::ReduceOp parse_bench_op(std::string_view name) {
  std::string s = lower(name);
  if (s == "sum") return comm::ReduceOp::sum;
  if (s == "max") return comm::ReduceOp::max;
  if (s == "min") return comm::ReduceOp::min;
  if (s == "avg") return comm::ReduceOp::avg;
  if (s == "prod" || s == "mulsum")
    bad_flag("-o/--op", name, "not supported by H2's communicator (sum, max, min, avg)");
  bad_flag("-o/--op", name, "expected sum, max, min, avg or all");
}

int64_t parse_size(std::string_view flag, std::string_view text) {
  constexpr std::string_view expected = "expected a size such as 8, 512K, 64M or 1G";
  std::string s(text);
  // Leading number: digits with at most one decimal point.
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  std::string number = s.substr(0, i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".")
    bad_flag(flag, text, expected);
  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size()) bad_flag(flag, text, expected);
  const std::string suffix = lower(std::string_view(s).substr(i));
  double unit = 0;
  for (auto [names, scale] :
       {std::pair{"|b", 1.0}, std::pair{"k|kb|kib", 1024.0}, std::pair{"m|mb|mib", 1024.0 * 1024},
        std::pair{"g|gb|gib", 1024.0 * 1024 * 1024}}) {
    for (std::string_view rest = names; unit == 0;) {
      size_t bar = rest.find('|');
      if (rest.substr(0, bar) == suffix) unit = scale;
      if (bar == std::string_view::npos) break;
      rest.remove_prefix(bar + 1);
    }
  }
  if (unit == 0) bad_flag(flag, text, expected);
  double bytes = value * unit;
  if (!std::isfinite(bytes) || bytes > double(int64_t(1) << 50))
    bad_flag(flag, text, "too large (the limit is 1P)");
  return int64_t(bytes);
}

void add_bench_flags(CLI::App& app, BenchArgs& args) {
  app.add_option("collective", args.collective,
                 "all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, sendrecv or "
                 "barrier "
                 "(nccl-tests' spellings such as allreduce or alltoall_perf also work)")
      ->required();
  app.add_option("-b,--minbytes", args.min_bytes, "Smallest size in bytes (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", args.max_bytes, "Largest size in bytes (K, M, G suffixes)")
      ->capture_default_str();
  app.add_option("-f,--stepfactor", args.step_factor,
                 "Multiply the size by this from one row to the next (default 2)");
  app.add_option("-i,--stepbytes", args.step_bytes,
                 "Add this many bytes from one row to the next instead (used when -f is not "
                 "given or is 1; default 1M)");
  app.add_option("-n,--iters", args.iters, "Timed iterations per row")->capture_default_str();
  app.add_option("-w,--warmup_iters", args.warmup_iters,
                 "Untimed iterations at the largest and the smallest size first")
      ->capture_default_str();
  app.add_option("-c,--check", args.check,
                 "1: check every row's result against analytic values and count wrong "
                 "elements; 0: skip (#wrong shows N/A)")
      ->capture_default_str();
  app.add_option("-d,--datatype", args.datatype,
                 "float, half, bfloat16, int32, int64, uint8 (or f32, f16, bf16, i32, i64, u8), "
                 "or all")
      ->capture_default_str();
  app.add_option("-o,--op", args.op, "sum, max, min, avg (floating types only) or all")
      ->capture_default_str();
  app.add_option("-r,--root", args.root, "Broadcast root")->capture_default_str();
  app.add_option("-a,--average", args.average,
                 "Time reported per row: 0 rank 0's, 1 mean, 2 min, 3 max over ranks")
      ->capture_default_str();
  app.add_option("-z,--blocking", args.blocking,
                 "Accepted for nccl-tests compatibility; ignored (host transports block)");
  app.add_option("-t,--nthreads", args.threads,
                 "Must be 1: one process drives one device (start ranks with mpirun or h2run)");
  app.add_option("-g,--ngpus", args.gpus, "Must be 1 (see -t)");
  app.add_option("--device", args.device,
                 "Device each rank computes on: cpu, vchip:NAME, cuda (cuda:LOCAL_RANK) or cuda:N")
      ->capture_default_str();
  app.add_option("--transport", args.transport, "auto, ucx or nccl (World::join)")
      ->capture_default_str();
}

BenchOptions resolve_bench_options(const BenchArgs& args) {
  BenchOptions o;
  auto collective = parse_collective(args.collective);
  if (!collective)
    bad_flag("COLLECTIVE", args.collective,
             "expected all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, sendrecv or "
             "barrier");
  o.collective = *collective;
  o.min_bytes = parse_size("-b/--minbytes", args.min_bytes);
  o.max_bytes = parse_size("-e/--maxbytes", args.max_bytes);
  if (o.min_bytes > o.max_bytes)
    throw ConfigError(fmt::format("comm-bench: -b/--minbytes {} is larger than -e/--maxbytes {}",
                                  o.min_bytes, o.max_bytes));
  std::optional<int64_t> factor;
  if (!args.step_factor.empty()) {
    int64_t f = 0;
    auto [end, ec] = std::from_chars(args.step_factor.data(),
                                     args.step_factor.data() + args.step_factor.size(), f);
    if (ec != std::errc() || end != args.step_factor.data() + args.step_factor.size() || f < 1)
      bad_flag("-f/--stepfactor", args.step_factor, "expected an integer >= 1");
    factor = f;
  }
  if (!args.step_bytes.empty()) o.step_bytes = parse_size("-i/--stepbytes", args.step_bytes);
  // nccl-tests: a factor > 1 wins; otherwise the size grows by the step.
  o.step_factor = factor ? *factor : (args.step_bytes.empty() ? 2 : 1);
  if (o.step_factor == 1 && o.step_bytes <= 0)
    bad_flag("-i/--stepbytes", args.step_bytes, "must be positive");
  if (o.step_factor > 1 && o.min_bytes == 0 && o.max_bytes > 0)
    bad_flag("-b/--minbytes", args.min_bytes,
             "must be positive when the size grows by a factor (use -i to step by bytes)");
  if (args.iters < 1) bad_flag("-n/--iters", std::to_string(args.iters), "must be at least 1");
  if (args.warmup_iters < 0)
    bad_flag("-w/--warmup_iters", std::to_string(args.warmup_iters), "must be at least 0");
  o.iters = args.iters;
  o.warmup_iters = args.warmup_iters;
  if (args.check != 0 && args.check != 1)
    bad_flag("-c/--check", std::to_string(args.check), "expected 0 or 1");
  o.check = args.check == 1 && o.collective != Collective::barrier;  // a barrier has no result
  if (args.average < 0 || args.average > 3)
    bad_flag("-a/--average", std::to_string(args.average), "expected 0, 1, 2 or 3");
  o.average = args.average;
  if (args.threads != 1)
    bad_flag("-t/--nthreads", std::to_string(args.threads),
             "h2 comm-bench drives one device per process; start more ranks with mpirun -np");
  if (args.gpus != 1)
    bad_flag("-g/--ngpus", std::to_string(args.gpus),
             "h2 comm-bench drives one device per process; start more ranks with mpirun -np");
  if (args.root < 0) bad_flag("-r/--root", std::to_string(args.root), "must be >= 0");
  o.root = args.root;

  if (lower(args.datatype) == "all")
    o.dtypes = {DType::u8, DType::i32, DType::i64, DType::f16, DType::f32, DType::bf16};
  else
    o.dtypes = {parse_bench_dtype(args.datatype)};

  if (lower(args.op) == "all") {
    o.ops = {comm::ReduceOp::sum, comm::ReduceOp::max, comm::ReduceOp::min, comm::ReduceOp::avg};
  } else {
    o.ops = {parse_bench_op(args.op)};
    if (o.ops[0] == comm::ReduceOp::avg && collective_reduces(o.collective))
      for (DType t : o.dtypes)
        if (!is_floating(t))
          bad_flag("-o/--op", args.op,
                   fmt::format("avg needs a floating type, not {}", nccl_type_name(t)));
  }
  if (!collective_reduces(o.collective)) o.ops = {comm::ReduceOp::sum};  // unused: one pass

  if (args.device.empty()) bad_flag("--device", args.device, "expected cpu, vchip:NAME or cuda");
  o.device = args.device;
  if (args.transport != "auto" && args.transport != "ucx" && args.transport != "nccl")
    bad_flag("--transport", args.transport, "expected auto, ucx or nccl");
  o.transport = args.transport;
  if (int64_t(bench_sizes(o).size()) > kMaxRows)
    throw ConfigError(fmt::format(
        "comm-bench: -b {} -e {} with step {} gives more than {} rows; use a larger -i or -f",
        o.min_bytes, o.max_bytes, o.step_factor > 1 ? o.step_factor : o.step_bytes, kMaxRows));
  return o;
}

std::vector<int64_t> bench_sizes(const BenchOptions& options) {
  std::vector<int64_t> sizes;
  for (int64_t size = options.min_bytes; size <= options.max_bytes;
       size = options.step_factor > 1 ? size * options.step_factor : size + options.step_bytes) {
    sizes.push_back(size);
    if (int64_t(sizes.size()) > kMaxRows) break;  // resolve_bench_options reports it
    if (options.step_factor > 1 && size == 0) break;
  }
  return sizes;
}

RowCounts row_counts(Collective c, int64_t bytes, DType dtype, int nranks) {
  const int64_t elt = dtype_bits(dtype) / 8;
  const int64_t count = bytes / elt;
  const int64_t n = std::max(nranks, 1);
  RowCounts r;
  switch (c) {
    case Collective::all_reduce:
    case Collective::broadcast:
    case Collective::sendrecv:
    case Collective::barrier:  // buffers unused
      r.count = r.send_count = r.recv_count = count;
      break;
    case Collective::reduce_scatter:
      r.count = r.recv_count = count / n;
      r.send_count = r.recv_count * n;
      break;
    case Collective::all_gather:
      r.count = r.send_count = count / n;
      r.recv_count = r.send_count * n;
      break;
    case Collective::all_to_all:
      r.count = count / n;
      r.send_count = r.recv_count = r.count * n;
      break;
  }
  r.bytes = std::max(r.send_count, r.recv_count) * elt;
  return r;
}

double bus_factor(Collective c, int nranks) {
  const double n = std::max(nranks, 1);
  switch (c) {
    case Collective::all_reduce:
      return 2 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
      return (n - 1) / n;
    case Collective::broadcast:
    case Collective::sendrecv:
    case Collective::barrier:
      return 1;
  }
  return 1;
}

Bandwidth bandwidth(Collective c, const RowCounts& row, double seconds, int nranks) {
  Bandwidth b;
  if (seconds <= 0) return b;
  b.algbw = double(row.bytes) / 1.0e9 / seconds;
  b.busbw = b.algbw * bus_factor(c, nranks);
  return b;
}

}  // namespace h2::cli::comm_bench
