// Joining a job: rank 0 (or the launcher) serves the rendezvous store, every rank connects to it
// and the world communicator is built over the best transport for the group's devices (NCCL when
// every rank drives a CUDA device, hierarchical for mixed groups, UCX otherwise).
#pragma once

#include <memory>
#include <string>

#include "comm/bootstrap/rank_env.h"
#include "comm/communicator.h"
#include "comm/store.h"

namespace h2::comm {

class StoreServer;

struct WorldOptions {
  std::string transport = "auto";  // auto, ucx, nccl
  bool serve_store = true;         // rank 0 serves the store (false: the launcher does)
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
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  std::unique_ptr<Store> store_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace h2::comm
