// UcxContext: the process's UCP context (tag matching and active messages), shared by the
// workers of every communicator split from the same world. UCX reads its own environment
// (UCX_TLS, UCX_NET_DEVICES, ...) when the context is created.
#pragma once

#include <ucp/api/ucp.h>

#include <memory>
#include <string>

namespace h2::comm {

struct UcxContextOptions {
  // Send every message eagerly (the data moves without the sender polling again), as an RDMA NIC
  // moves it without the CPU. Emulated links ask for it: with rendezvous, a pipeline stage's
  // transfer waits until its sender returns from computing and polls, which no real link does.
  // Unset: UCX's own threshold (UCX_RNDV_THRESH).
  bool eager = false;
  // UCX_NET_DEVICES for this context ("lo", "eth0,mlx5_0:1"): the interfaces its TCP and RDMA
  // transports listen on (comm/world/data_plane.h). Empty: UCX's own choice.
  std::string net_devices;
};

class UcxContext {
 public:
  static std::shared_ptr<UcxContext> create(const UcxContextOptions& options = {});
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h get() const { return context_; }
  // Whether UCX was built to move CUDA device memory directly.
  bool reaches_cuda() const { return reaches_cuda_; }
  // The transports UCX may use: UCX_TLS when set, "all" otherwise.
  const std::string& transports() const { return transports_; }

 private:
  UcxContext() = default;
  ucp_context_h context_ = nullptr;
  bool reaches_cuda_ = false;
  std::string transports_;
};

}  // namespace h2::comm
