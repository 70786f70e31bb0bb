// World::join: store server and client, transport choice, the world communicator.
#include "comm/world.h"

#include <fmt/format.h>

#include "comm/bootstrap/store_client.h"
#include "comm/bootstrap/store_server.h"
#include "comm/comm_error.h"
#include "comm/host_communicator.h"
#include "comm/timeouts.h"
#include "comm/ucx/ucx_context.h"
#include "comm/ucx/ucx_transport.h"
#include "core/log.h"

namespace h2::comm {
namespace {

// Every split opens its own store connection: clients are single-threaded and communicators may
// be split on different threads.
TransportFactory ucx_factory(std::shared_ptr<UcxContext> context, std::string host, int port,
                             std::string token, Millis timeout) {
  return [=](const std::string& prefix, int rank, int size) -> std::unique_ptr<Transport> {
    StoreClient store(host, port, token, timeout);
    return UcxTransport::connect(context, store, prefix, rank, size, timeout);
  };
}

}  // namespace

std::unique_ptr<World> World::join(const RankInfo& info, Device& device,
                                   const WorldOptions& options) {
  if (options.transport != "auto" && options.transport != "ucx")
    H2_THROW(ConfigError, "transport '{}' is not available here (choose auto or ucx)",
             options.transport);
  std::unique_ptr<World> world(new World());
  world->info_ = info;
  const Millis timeout = comm_timeout();
  int port = info.store_port != 0 ? info.store_port : derived_store_port(info.job_id);
  if (info.size > 1 && info.store_port == 0 && info.job_id.empty())
    H2_THROW(ConfigError,
             "rank {} of {}: no store address (set H2_STORE_ADDR=host:port or MASTER_ADDR and "
             "MASTER_PORT) and no launcher job id to derive one from",
             info.rank, info.size);
  if (info.size == 1) port = 0;  // a world of one serves itself on any free port
  if (info.rank == 0 && (options.serve_store || info.size == 1)) {
    world->server_ = std::make_unique<StoreServer>(info.store_host, port, info.token);
    port = world->server_->port();
  }
  world->store_ = std::make_unique<StoreClient>(info.store_host, port, info.token, timeout);

  auto context = UcxContext::create();
  TransportFactory factory = ucx_factory(context, info.store_host, port, info.token, timeout);
  auto transport =
      UcxTransport::connect(context, *world->store_, "world", info.rank, info.size, timeout);
  world->comm_ = std::make_unique<HostCommunicator>(std::move(transport), std::move(factory),
                                                    "world", HostCommOptions::from_env());
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
