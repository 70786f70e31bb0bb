// RDMA discovery over libibverbs. Device list and contexts are owned by unique_ptrs with the
// verbs release calls as deleters, so every exit path (including a failing query) frees them.
#include "comm/topology/rdma_topology.h"

#include <fmt/format.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace h2::comm {
namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;

struct ContextDeleter {
  void operator()(ibv_context* context) const { ibv_close_device(context); }
};
using Context = std::unique_ptr<ibv_context, ContextDeleter>;

// Verbs calls return 0 or an errno value (some set errno and return -1).
std::string verbs_error(int rc) {
  int code = rc > 0 ? rc : errno;
  return fmt::format("{} (errno {})", std::strerror(code), code);
}

std::string link_layer_name(uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
      return "Ethernet";
    default:
      return "unspecified";
  }
}

int mtu_bytes(ibv_mtu mtu) {
  int code = static_cast<int>(mtu);
  return code >= IBV_MTU_256 && code <= IBV_MTU_4096 ? 128 << code : 0;
}

std::string format_gid(const ibv_gid& gid) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    if (i > 0) out += ':';
    out += fmt::format("{:02x}{:02x}", gid.raw[i], gid.raw[i + 1]);
  }
  return out;
}

void append_note(std::string& note, const std::string& line) {
  if (!note.empty()) note += "; ";
  note += line;
}

// Reads every port of one open device into `topology`; failures become notes.
void read_device(ibv_context* context, const std::string& name, RdmaTopology& topology) {
  ibv_device_attr device_attr{};
  if (int rc = ibv_query_device(context, &device_attr); rc != 0) {
    append_note(topology.note,
                fmt::format("{}: ibv_query_device failed: {}", name, verbs_error(rc)));
    return;
  }
  for (int port = 1; port <= device_attr.phys_port_cnt; ++port) {
    ibv_port_attr attr{};
    if (int rc = ibv_query_port(context, uint8_t(port), &attr); rc != 0) {
      append_note(topology.note, fmt::format("{} port {}: ibv_query_port failed: {}", name, port,
                                             verbs_error(rc)));
      continue;
    }
    RdmaPort p;
    p.device = name;
    p.port = port;
    p.state = ibv_port_state_str(attr.state);
    p.link_layer = link_layer_name(attr.link_layer);
    p.gbps = ibv_link_gbps(attr.active_width, attr.active_speed);
    p.mtu = mtu_bytes(attr.active_mtu);
    ibv_gid gid{};
    if (attr.gid_tbl_len > 0) {
      if (int rc = ibv_query_gid(context, uint8_t(port), 0, &gid); rc == 0)
        p.gid0 = format_gid(gid);
      else
        append_note(topology.note, fmt::format("{} port {}: ibv_query_gid failed: {}", name, port,
                                               verbs_error(rc)));
    }
    topology.ports.push_back(std::move(p));
  }
}

}  // namespace

double ibv_link_gbps(uint8_t active_width, uint32_t active_speed) {
  int lanes = 0;
  switch (active_width) {
    case 1:
      lanes = 1;
      break;
    case 2:
      lanes = 4;
      break;
    case 4:
      lanes = 8;
      break;
    case 8:
      lanes = 12;
      break;
    case 16:
      lanes = 2;
      break;
    default:
      return 0;
  }
  double lane_gbps = 0;
  switch (active_speed) {
    case 1:  // SDR
      lane_gbps = 2.5;
      break;
    case 2:  // DDR
      lane_gbps = 5;
      break;
    case 4:  // QDR
    case 8:  // FDR10
      lane_gbps = 10;
      break;
    case 16:  // FDR
      lane_gbps = 14;
      break;
    case 32:  // EDR
      lane_gbps = 25;
      break;
    case 64:  // HDR
      lane_gbps = 50;
      break;
    case 128:  // NDR
      lane_gbps = 100;
      break;
    case 256:  // XDR
      lane_gbps = 200;
      break;
    default:
      return 0;
  }
  return lanes * lane_gbps;
}

RdmaTopology discover_rdma() {
  RdmaTopology topology;
  const std::string none =
      "no RDMA devices found (libibverbs sees none); inter-node traffic uses TCP";
  int count = 0;
  errno = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (!list) {
    // ENOSYS: the kernel has no RDMA support at all; other errno values are real failures.
    topology.note = errno == ENOSYS || errno == 0
                        ? none
                        : fmt::format("{} (ibv_get_device_list failed: {})", none, verbs_error(-1));
    return topology;
  }
  if (count == 0) {
    topology.note = none;
    return topology;
  }
  for (int i = 0; i < count; ++i) {
    ibv_device* device = list.get()[i];
    const char* raw_name = ibv_get_device_name(device);
    std::string name = raw_name != nullptr ? raw_name : fmt::format("device{}", i);
    errno = 0;
    Context context(ibv_open_device(device));
    if (!context) {
      append_note(topology.note,
                  fmt::format("{}: ibv_open_device failed: {}", name, verbs_error(-1)));
      continue;
    }
    read_device(context.get(), name, topology);
  }
  return topology;
}

std::string format_rdma_topology(const RdmaTopology& topology) {
  std::string out;
  if (!topology.ports.empty()) {
    out += fmt::format("{:<12} {:>4}  {:<14} {:<11} {:>7} {:>5}  {}\n", "device", "port", "state",
                       "link", "Gb/s", "MTU", "GID[0]");
    for (const RdmaPort& p : topology.ports)
      out += fmt::format("{:<12} {:>4}  {:<14} {:<11} {:>7} {:>5}  {}\n", p.device, p.port, p.state,
                         p.link_layer, p.gbps > 0 ? fmt::format("{:g}", p.gbps) : "?", p.mtu,
                         p.gid0.empty() ? "-" : p.gid0);
  }
  if (!topology.note.empty()) out += topology.note + "\n";
  return out;
}

}  // namespace h2::comm
