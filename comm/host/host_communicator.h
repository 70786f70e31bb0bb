// HostCommunicator: every collective built from tagged sends and receives on a Transport (UCX
// here), with the algorithm chosen by message size: recursive doubling below
// H2_COMM_RING_THRESHOLD bytes, pipelined rings above; binomial-tree or chain broadcast likewise.
// Where the transport offers shared memory (every rank on this host, H2_COMM_SHM), all-reduces of
// up to 4 KiB and barriers go through it instead (shm_path.h).
// Tensors the transport cannot reach (device memory, non-contiguous views) are staged through
// host memory. After a CommError the communicator refuses further calls: transfers of the failed
// call may still be in flight.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/algorithms/tag.h"
#include "comm/communicator.h"
#include "comm/transports/transport.h"

namespace h2::comm {

class Exchange;
class ShmPath;

// Builds the transport of a new group (for split): `prefix` is unique to the group, `members` are
// its ranks as ranks of the root communicator (the world), in the group's order, and this rank is
// members[rank].
using TransportFactory = std::function<std::unique_ptr<Transport>(
    const std::string& prefix, int rank, const std::vector<int>& members)>;

struct HostCommOptions {
  Millis timeout{300000};
  size_t ring_threshold_bytes = 256 * 1024;
  size_t segment_bytes = 1 << 20;
  uint64_t spins_before_yield = 2000;        // see comm/timeouts.h
  std::function<PacingStats()> link_pacing;  // emulated links' figures, if the transport paces
  // From the environment (H2_COMM_TIMEOUT, H2_COMM_RING_THRESHOLD, H2_COMM_SEGMENT).
  static HostCommOptions from_env();
};

class HostCommunicator final : public Communicator {
 public:
  // `members`: this group's ranks as root ranks (empty: the root itself, 0 .. size - 1).
  HostCommunicator(std::unique_ptr<Transport> transport, TransportFactory factory,
                   std::string prefix, HostCommOptions options, std::vector<int> members = {});
  ~HostCommunicator() override;

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  std::string name() const override { return transport_->name(); }
  bool can_connect(const Device& device) const override { return transport_->reaches(device); }
  PacingStats link_pacing() const override {
    return options_.link_pacing ? options_.link_pacing() : PacingStats{};
  }
  std::unique_ptr<Communicator> split(int color, int key) override;

  void all_reduce(const Tensor& out, const Tensor& in, ReduceOp op, Stream* stream) override;
  void reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op, Stream* stream) override;
  void all_gather(const Tensor& out, const Tensor& in, Stream* stream) override;
  void broadcast(const Tensor& out, const Tensor& in, int root, Stream* stream) override;
  void all_to_all(const Tensor& out, const Tensor& in, Stream* stream) override;
  void all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts, const Tensor& in,
                    std::span<const int64_t> send_counts, Stream* stream) override;
  void barrier() override;
  void progress() override;
  std::unique_ptr<Request> isend(const Tensor& tensor, int peer, int tag) override;
  std::unique_ptr<Request> irecv(const Tensor& tensor, int peer, int tag) override;

  using Communicator::all_reduce;
  using Communicator::broadcast;

 private:
  // Runs `body` as collective number sequence_++ with a fresh Exchange (announced to the shared
  // slots first, where there are some); a CommError poisons the communicator.
  void run(const Signature& signature, const std::function<void(Exchange&)>& body);
  // Runs body(ShmPath&), a collective of the shared-memory path; a CommError poisons the
  // communicator. A template, not std::function: this path's calls take a few hundred ns.
  template <class Body>
  void run_shm(const Body& body);
  void check_usable() const;

  std::unique_ptr<Transport> transport_;
  TransportFactory factory_;
  std::string prefix_;
  HostCommOptions options_;
  std::vector<int> members_;  // root ranks of this group's ranks
  uint16_t sequence_ = 0;
  int splits_ = 0;
  std::string poisoned_;  // the first CommError's message
  std::vector<std::byte> scratch_;
  std::unique_ptr<ShmPath> shm_;  // when the transport has shared slots
};

}  // namespace h2::comm
