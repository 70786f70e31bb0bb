// Joining a job: the rendezvous store is served by h2run when it started the job, else by rank 0;
// every rank connects to it and the world communicator is built over the best transport for the
// group's devices (NCCL when every rank drives a CUDA device, hierarchical for mixed groups, UCX
// otherwise). A process that runs alone needs none of that: loopback_communicator() is a
// communicator of one rank over the in-process loopback transport.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "comm/bootstrap/rank_env.h"
#include "comm/communicator.h"
#include "comm/store.h"
#include "core/cluster.h"

namespace h2::comm {

class StoreServer;

// A communicator of one rank (this process), every collective and self-transfer in memory.
std::unique_ptr<Communicator> loopback_communicator();

struct WorldOptions {
  std::string transport = "auto";  // auto, ucx, nccl
  // An emulated cluster (one rank per chip, in rank order): transfers between ranks take the time
  // its links say (comm/transports/paced). Not owned; must outlive the world. nullptr: real links.
  const Cluster* cluster = nullptr;
  std::vector<int> cluster_chips;  // the cluster chip each rank drives (empty: rank r, chip r)
  // Whether rank 0 serves the store. nullopt: decide from the launcher (h2run serves it itself,
  // every other launcher leaves it to rank 0). A world of one always serves itself.
  std::optional<bool> serve_store;
};

class World {
 public:
  // Blocks until every rank joined or H2_COMM_TIMEOUT passed (CommError naming missing ranks).
  // `device` is the device this rank computes on.
  static std::unique_ptr<World> join(const RankInfo& info, Device& device,
                                     const WorldOptions& options = {});
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  const RankInfo& info() const { return info_; }
  Store& store() { return *store_; }
  Communicator& comm() { return *comm_; }

 private:
  World() = default;
  RankInfo info_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only, and only when it serves the store
  std::unique_ptr<Store> store_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace h2::comm
