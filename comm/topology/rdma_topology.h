// RDMA topology discovery: the RDMA devices libibverbs sees and, per port, its state, link layer
// (InfiniBand or RoCE over Ethernet), link rate, MTU and first GID. The launcher prints it and the
// world picks inter-node transports by it. Discovery never throws: a machine without RDMA (or a
// device that fails to open) yields fewer ports and a note saying why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace h2::comm {

struct RdmaPort {
  std::string device;      // "mlx5_0"
  int port = 0;            // 1-based, as verbs numbers them
  std::string state;       // "PORT_ACTIVE", "PORT_DOWN", ...
  std::string link_layer;  // "InfiniBand" | "Ethernet" | "unspecified"
  double gbps = 0;         // active width x per-lane rate; 0 when the encoding is unknown
  int mtu = 0;             // active MTU in bytes
  std::string gid0;        // GID index 0, "fe80:0000:0000:0000:..."; "" when it cannot be read
};

struct RdmaTopology {
  std::vector<RdmaPort> ports;
  std::string note;  // why there are no (or fewer) ports; "" when every device was read
};

// Link rate in Gb/s from ibv_port_attr's encodings: active_width (1: 1x, 2: 4x, 4: 8x, 8: 12x,
// 16: 2x lanes) times the per-lane rate of active_speed (1 SDR 2.5, 2 DDR 5, 4 QDR 10, 8 FDR10 10,
// 16 FDR 14, 32 EDR 25, 64 HDR 50, 128 NDR 100, 256 XDR 200; the IB spec's nominal data rates).
// 0 for an encoding it does not know.
double ibv_link_gbps(uint8_t active_width, uint32_t active_speed);

// Every port of every RDMA device. Never throws.
RdmaTopology discover_rdma();

// A table: device, port, state, link layer, Gb/s, MTU, GID 0, then the note.
std::string format_rdma_topology(const RdmaTopology& topology);

}  // namespace h2::comm
