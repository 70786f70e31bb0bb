// `h2 devices`, `h2 ops` and `h2 env`: what this machine offers (compute devices and RDMA
// ports), which ops run where, and every H2_* environment knob.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <string_view>
#include <vector>

#include "backends/registry.h"
#include "cli/command.h"
#include "comm/topology/rdma_topology.h"
#include "core/env.h"

namespace h2::cli {

Command make_devices_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "devices", "List the devices of every registered backend and this machine's RDMA ports");
  return {
      app, [] {
        auto runtime = create_runtime();
        fmt::print("{:<10} {:<12} {:>12} {:>12} {:>14}  {:<20} {}\n", "device", "memory",
                   "capacity", "bandwidth", "f32 peak", "native FP8/FP4", "name");
        // The f32 peak MFU divides by: a chip's spec, or the CPU's measured (and cached) GEMM
        // peak, whose source is listed after the table.
        std::vector<std::string> peak_sources;
        for (Device* d : runtime->devices()) {
          const DeviceProps& p = d->props();
          const Device::Peak peak = d->mfu_peak(DType::f32);
          peak_sources.push_back(fmt::format("{}: {}", d->str(), peak.source));
          std::vector<std::string_view> native;
          for (DType t : {DType::f8e4m3, DType::f8e5m2, DType::f4e2m1})
            if (p.native_gemm(t)) native.push_back(dtype_name(t));
          fmt::print("{:<10} {:<12} {:>9.2f} GiB {:>7.1f} GB/s {:>8.1f} GFLOP/s  {:<20} {}\n",
                     d->str(), d->memory_kind() == MemoryKind::host ? "host" : "device",
                     double(p.memory_bytes) / (1 << 30), p.memory_bandwidth / 1e9, peak.flops / 1e9,
                     native.empty() ? "none (emulated)" : fmt::format("{}", fmt::join(native, ",")),
                     p.name);
        }
        fmt::print("\nf32 peaks:\n{}\n", fmt::join(peak_sources, "\n"));
        fmt::print("\nRDMA (libibverbs):\n{}", comm::format_rdma_topology(comm::discover_rdma()));
        return 0;
      }};
}

Command make_ops_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "ops", "Print the op catalogue and which dtypes each device supports for each op");
  return {
      app, [] {
        auto runtime = create_runtime();
        auto devices = runtime->devices();
        fmt::print("{:<18}", "op");
        for (Device* d : devices) fmt::print(" {:<20}", d->str());
        fmt::print("  summary\n");
        for (int i = 0; i < kOpCount; ++i) {
          Op op = Op(i);
          fmt::print("{:<18}", op_name(op));
          for (Device* d : devices) {
            std::vector<std::string_view> dtypes;
            for (DType t :
                 {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2, DType::f4e2m1})
              if (d->supports(op, t)) dtypes.push_back(dtype_name(t));
            fmt::print(" {:<20}", dtypes.empty() ? "-" : fmt::format("{}", fmt::join(dtypes, ",")));
          }
          fmt::print("  {}\n", op_summary(op));
        }
        return 0;
      }};
}

Command make_env_command(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("env", "Print every H2_* environment knob with its value");
  return {app, [] {
            for (const EnvKnob& knob : env_knobs())
              fmt::print("{:<22} = {:<10} (default '{}')\n    {}\n", knob.name,
                         knob.secret ? (env_string(knob.name).empty() ? "(unset)" : "(set)")
                                     : fmt::format("'{}'", env_string(knob.name)),
                         knob.default_value, knob.help);
            return 0;
          }};
}

}  // namespace h2::cli
