// World::join: store server (rank 0 unless h2run serves it) and client, transport choice, the world
// communicator.
#include "comm/world/world.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "comm/bootstrap/local_token.h"
#include "comm/bootstrap/store_client.h"
#include "comm/bootstrap/store_server.h"
#include "comm/comm_error.h"
#include "comm/host/host_communicator.h"
#include "comm/timeouts.h"
#include "comm/transports/loopback/loopback_transport.h"
#include "comm/transports/paced/paced_transport.h"
#include "comm/transports/ucx/ucx_context.h"
#include "comm/transports/ucx/ucx_transport.h"
#include "comm/world/data_plane.h"
#include "comm/world/hierarchical_communicator.h"
#include "core/log.h"

#if H2_HAVE_NCCL
#include "comm/vendors/nccl/nccl_communicator.h"
#endif

namespace h2::comm {
namespace {

// Every split opens its own store connection: clients are single-threaded and communicators may
// be split on different threads.
TransportFactory ucx_factory(std::shared_ptr<UcxContext> context, std::string host, int port,
                             std::string token, Millis timeout) {
  return [=](const std::string& prefix, int rank,
             const std::vector<int>& members) -> std::unique_ptr<Transport> {
    StoreClient store(host, port, token, timeout);
    return UcxTransport::connect(context, store, prefix, rank, int(members.size()), timeout);
  };
}

// On an emulated cluster every transport is paced to the links between its members' chips.
TransportFactory paced_factory(TransportFactory inner, const Cluster* cluster,
                               std::vector<int> chips, std::shared_ptr<LinkPacing> pacing) {
  return [=](const std::string& prefix, int rank,
             const std::vector<int>& members) -> std::unique_ptr<Transport> {
    auto link = [cluster, chips, members, rank](int peer) {
      return cluster->link(chips[size_t(members[size_t(rank)])],
                           chips[size_t(members[size_t(peer)])]);
    };
    return std::make_unique<PacedTransport>(inner(prefix, rank, members), link, pacing);
  };
}

// A chip type: ranks of one type share a vendor library ("cuda:NVIDIA H200", "vchip:chip-a").
std::string chip_type(const Device& device) {
  return device.id().backend + ":" + device.props().name;
}

bool nccl_available() {
#if H2_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

// The vendor library's communicator for ranks `members` (world ranks, ascending) of one CUDA type.
std::unique_ptr<Communicator> nccl_group(Store& store, const std::string& prefix,
                                         const std::vector<int>& members, int world_rank,
                                         Device& device) {
#if H2_HAVE_NCCL
  const int local_rank =
      int(std::find(members.begin(), members.end(), world_rank) - members.begin());
  return NcclCommunicator::create(store, prefix, local_rank, int(members.size()), device);
#else
  H2_THROW(UnsupportedError, "this build has no NCCL (H2_WITH_NCCL=OFF)");
#endif
}

// One communicator, or the hierarchical composition when the ranks drive different chip types.
std::unique_ptr<Communicator> build_world_communicator(Store& store,
                                                       std::unique_ptr<Communicator> flat,
                                                       const RankInfo& info, Device& device,
                                                       const WorldOptions& options) {
  const Millis timeout = comm_timeout();
  store.set(fmt::format("world/chip/{}", info.rank), chip_type(device));
  std::vector<std::string> types(size_t(info.size));
  for (int r = 0; r < info.size; ++r)
    types[r] = store.get(fmt::format("world/chip/{}", r), timeout);
  const std::string& mine = types[info.rank];
  const bool cuda = device.id().backend == "cuda";
  const bool use_nccl = cuda && options.transport != "ucx" && nccl_available();
  if (options.transport == "nccl" && !use_nccl)
    H2_THROW(ConfigError, "transport nccl needs a CUDA device and an NCCL build (rank {}: {})",
             info.rank, mine);
  std::vector<int> members;  // ranks of this rank's chip type, ascending
  for (int r = 0; r < info.size; ++r)
    if (types[r] == mine) members.push_back(r);
  if (int(members.size()) == info.size || options.transport == "ucx") {
    if (!use_nccl) return flat;
    return nccl_group(store, "world/nccl", members, info.rank, device);
  }
  // Mixed chip types: every rank takes part in both splits (collective over the flat group).
  const int type_index = int(std::find(types.begin(), types.end(), mine) - types.begin());
  std::unique_ptr<Communicator> local = flat->split(use_nccl ? -1 : type_index, info.rank);
  if (use_nccl)
    local = nccl_group(store, fmt::format("world/local{}", type_index), members, info.rank, device);
  const bool leader = members.front() == info.rank;
  std::unique_ptr<Communicator> leaders = flat->split(leader ? 0 : -1, info.rank);
  return std::make_unique<HierarchicalCommunicator>(std::move(flat), std::move(local),
                                                    std::move(leaders));
}

// The CPUs the ranks on this node may run on together: the union of their affinity masks, each
// published through the store. A launcher that binds every rank to a core of its own (mpirun's
// default for a few ranks) leaves each rank one CPU, yet none shares it.
int node_cpu_count(Store& store, const RankInfo& info, Millis timeout) {
  const std::vector<int> mine = usable_cpus();
  if (info.local_size <= 1) return int(mine.size());
  // Keyed by the host's name, not node_rank: for launchers without a node index node_rank is a
  // guess (rank / local_size) that holds only for ranks placed in blocks, and Open MPI's
  // --map-by node (local ranks 0, 0, 1, 1) left every rank waiting for a key nobody set.
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    std::snprintf(host, sizeof host, "node%d", info.node_rank);
  auto key = [&](int local_rank) { return fmt::format("world/cpus/{}/{}", host, local_rank); };
  store.set(key(info.local_rank), fmt::format("{}", fmt::join(mine, ",")));
  std::set<int> all;
  for (int r = 0; r < info.local_size; ++r) {
    const std::string list = store.get(key(r), timeout);
    for (size_t at = 0; at < list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      all.insert(std::stoi(list.substr(at, comma - at)));
      at = comma + 1;
    }
  }
  return int(all.size());
}

}  // namespace

std::unique_ptr<Communicator> loopback_communicator() {
  TransportFactory factory = [](const std::string&, int rank, const std::vector<int>& members) {
    H2_CHECK(rank == 0 && members.size() == 1,
             "a loopback group has one rank; asked for rank {} of {}", rank, members.size());
    return std::unique_ptr<Transport>(std::make_unique<LoopbackTransport>());
  };
  return std::make_unique<HostCommunicator>(std::make_unique<LoopbackTransport>(),
                                            std::move(factory), "loopback",
                                            HostCommOptions::from_env());
}

std::unique_ptr<World> World::join(const RankInfo& launched, Device& device,
                                   const WorldOptions& options) {
  RankInfo info = launched;
  // A token derived from the job id is no secret: on one machine rank 0 makes a real one.
  const bool local_secret = info.token_from_job_id && info.size > 1 &&
                            info.local_size == info.size && info.launcher != "h2run";
  if (options.transport != "auto" && options.transport != "ucx" && options.transport != "nccl")
    H2_THROW(ConfigError, "transport '{}' is not one of auto, ucx, nccl", options.transport);
  std::unique_ptr<World> world(new World());
  const Millis timeout = comm_timeout();
  int port = info.store_port != 0 ? info.store_port : derived_store_port(info.job_id);
  if (info.size > 1 && info.store_port == 0 && info.job_id.empty())
    H2_THROW(ConfigError,
             "rank {} of {}: no store address (set H2_STORE_ADDR=host:port or MASTER_ADDR and "
             "MASTER_PORT) and no launcher job id to derive one from",
             info.rank, info.size);
  // Ranks on several nodes left at the default 127.0.0.1 each reach their own node, and those
  // on other nodes than rank 0's wait out the timeout for a store that is not there.
  if (info.local_size < info.size && !info.store_host_given)
    H2_THROW(ConfigError,
             "rank {} of {} ({} on this node): a job over several nodes needs the store's address "
             "on a network every node reaches: set H2_STORE_ADDR=host:port, or MASTER_ADDR and "
             "MASTER_PORT",
             info.rank, info.size, info.local_size);
  if (info.size == 1) port = 0;  // a world of one serves itself on any free port
  if (local_secret && info.rank == 0) info.token = publish_local_token(info, port);
  const bool serve = options.serve_store.value_or(info.launcher != "h2run");
  if (info.rank == 0 && (serve || info.size == 1)) {
    world->server_ = std::make_unique<StoreServer>(info.store_host, port, info.token);
    port = world->server_->port();
  }
  world->store_ = local_secret && info.rank != 0
                      ? connect_with_local_token(info, info.store_host, port, timeout)
                      : std::make_unique<StoreClient>(info.store_host, port, info.token, timeout);
  world->info_ = info;

  const DataPlaneChoice data_plane = choose_data_plane(info, process_env());
  H2_LOG_DEBUG("rank {}: the data plane listens on {} ({})", info.rank,
               data_plane.devices.empty() ? "UCX's choice of devices" : data_plane.devices,
               data_plane.reason);
  auto context =
      UcxContext::create({.eager = options.cluster != nullptr, .net_devices = data_plane.devices});
  TransportFactory factory = ucx_factory(context, info.store_host, port, info.token, timeout);
  HostCommOptions host_options = HostCommOptions::from_env();
  host_options.spins_before_yield =
      spins_before_yield(info.local_size, node_cpu_count(*world->store_, info, timeout));
  std::unique_ptr<Transport> transport =
      UcxTransport::connect(context, *world->store_, "world", info.rank, info.size, timeout);
  // Every rank has met every other through the store: nobody needs the token file any more.
  if (local_secret && info.rank == 0) remove_local_token(info, port);
  if (options.cluster != nullptr) {
    if (options.cluster->size() != info.size)
      H2_THROW(ConfigError, "{}: the cluster has {} chips; the job has {} ranks (one per chip)",
               options.cluster->source, options.cluster->size(), info.size);
    auto pacing = std::make_shared<LinkPacing>();
    const Cluster* cluster = options.cluster;
    std::vector<int> chips = options.cluster_chips;
    if (chips.empty())
      for (int r = 0; r < info.size; ++r) chips.push_back(r);
    transport = std::make_unique<PacedTransport>(
        std::move(transport),
        [cluster, chips, rank = info.rank](int peer) {
          return cluster->link(chips[size_t(rank)], chips[size_t(peer)]);
        },
        pacing);
    factory = paced_factory(std::move(factory), cluster, chips, pacing);
    host_options.link_pacing = [pacing] { return pacing->stats(); };
  }
  auto flat = std::make_unique<HostCommunicator>(std::move(transport), std::move(factory), "world",
                                                 std::move(host_options));
  world->comm_ = build_world_communicator(*world->store_, std::move(flat), info, device, options);
  H2_LOG_DEBUG("rank {} of {} joined through {} (store {}:{}, device {})", info.rank, info.size,
               world->comm_->name(), info.store_host, port, device.str());
  return world;
}

World::~World() {
  // Rank 0's store must outlive every rank's last use of it, and UCX endpoints close cleanly
  // when no transfer is in flight: leave together, unless the job already failed.
  if (comm_) {
    try {
      comm_->barrier();
    } catch (const Error& e) {
      H2_LOG_DEBUG("rank {} leaves without the final barrier: {}", info_.rank, e.what());
    }
  }
  comm_.reset();
  store_.reset();
  server_.reset();
}

}  // namespace h2::comm
