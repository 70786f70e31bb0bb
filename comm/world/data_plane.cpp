// Choosing the data plane's network devices (see data_plane.h).
#include "comm/world/data_plane.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "comm/topology/rdma_topology.h"

namespace h2::comm {
namespace {

bool set_in(const EnvLookup& env, const char* name) {
  const std::optional<std::string> value = env(name);
  return value && !value->empty();
}

// The local IPv4 address the kernel would send from towards `host`: a UDP socket connected to it
// (which sends nothing) and asked for its own address.
std::optional<in_addr> source_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return std::nullopt;
  std::optional<in_addr> source;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) source = local.sin_addr;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return source;
}

}  // namespace

std::string interface_towards(const std::string& host) {
  const std::optional<in_addr> source = source_address_towards(host);
  if (!source) return "";
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return "";
  std::string name;
  for (ifaddrs* i = interfaces; i != nullptr && name.empty(); i = i->ifa_next)
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == source->s_addr)
      name = i->ifa_name;
  freeifaddrs(interfaces);
  return name;
}

DataPlaneChoice choose_data_plane(const RankInfo& info, const EnvLookup& env) {
  if (set_in(env, "UCX_NET_DEVICES")) return {"", "UCX_NET_DEVICES as set"};
  if (std::optional<std::string> chosen = env("H2_COMM_INTERFACE"); chosen && !chosen->empty())
    return {*chosen, "H2_COMM_INTERFACE"};
  if (info.local_size == info.size) return {"lo", "one machine: loopback only"};
  const std::string interface = interface_towards(info.store_host);
  if (interface.empty())
    return {"", fmt::format("every interface (none found that reaches the store host {}; set "
                            "H2_COMM_INTERFACE)",
                            info.store_host)};
  std::string devices = interface;
  for (const RdmaPort& port : discover_rdma().ports)
    if (port.state == "PORT_ACTIVE") devices += fmt::format(",{}:{}", port.device, port.port);
  return {devices, fmt::format("the interface that reaches the store host {}, and RDMA ports",
                               info.store_host)};
}

}  // namespace h2::comm
