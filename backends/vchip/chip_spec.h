// A virtual chip type, as described in YAML (configs/chips/*.yaml):
//   chips:
//     - name: chip-a              # chip type; devices are "vchip:chip-a" or "vchip:N"
//       count: 2                  # devices of this type (default 1)
//       memory: 2GiB              # capacity: bytes, or with KiB/MiB/GiB/KB/MB/GB
//       memory_bandwidth: 10e9    # bytes/s
//       link_bandwidth: 5e9       # bytes/s host <-> chip (default: memory_bandwidth)
//       peak_flops: {f32: 50e9, bf16: 100e9}
//       dtypes: [f32, bf16]       # storage dtypes its kernels accept
//       time_scale: 1             # multiplies modelled kernel time (default 1)
// Parse errors name the file, the line and the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cluster.h"
#include "core/dtype.h"

namespace h2::vchip {

// The chip type's fields (core/cluster.h): virtual chips and the planner read the same spec.
using ChipSpec = h2::ChipSpec;

// `source` names the text in error messages (a file path, or "built-in chips").
std::vector<ChipSpec> parse_chip_specs(const std::string& yaml_text, const std::string& source);
std::vector<ChipSpec> load_chip_specs(const std::string& path);
// The chips compiled in from configs/chips/default.yaml.
std::vector<ChipSpec> builtin_chip_specs();

// "2GiB" -> 2147483648; accepts plain numbers (1e9) and KiB/MiB/GiB/TiB/KB/MB/GB/TB suffixes.
int64_t parse_bytes(const std::string& text);

}  // namespace h2::vchip
