// Which network devices the data plane (UCX's TCP and RDMA transports) listens on. Its
// listeners take any peer that connects, so they are kept off interfaces the job does not use:
// loopback alone for a job on one machine; otherwise the interface that reaches the rendezvous
// store plus the machine's active RDMA ports. H2_COMM_INTERFACE names them by hand (UCX's
// NET_DEVICES syntax: "eth0,mlx5_0:1"); UCX_NET_DEVICES, when the user sets it, is left to UCX.
#pragma once

#include <string>

#include "comm/bootstrap/rank_env.h"

namespace h2::comm {

struct DataPlaneChoice {
  std::string devices;  // the UCX NET_DEVICES value to apply; empty: leave UCX's choice
  std::string reason;   // why, for the log ("one machine: loopback only", ...)
};

// `env` is the process environment (comm/bootstrap/rank_env.h's lookup).
DataPlaneChoice choose_data_plane(const RankInfo& info, const EnvLookup& env);

// The name of the local interface whose address routes to `host` ("eth0"); empty when unknown.
std::string interface_towards(const std::string& host);

}  // namespace h2::comm
