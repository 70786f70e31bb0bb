// UcxTransport: the Transport of one communicator over UCP. It owns one worker and an endpoint to
// every rank of its group (itself included), all connected by exchanging worker addresses
// through the rendezvous store. Data moves with the tag API; control (abort notices) with
// active messages. A rank that dies is noticed, not waited on: endpoints to other hosts use UCX
// peer error handling (TCP and RDMA support it); peers on this host, whose shared-memory
// transports do not, are watched through their process ids.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/store.h"
#include "comm/transports/shm/shared_slots.h"
#include "comm/transports/transport.h"
#include "comm/transports/ucx/ucx_context.h"

namespace h2::comm {

class UcxTransport final : public Transport {
 public:
  // Collective over the group: publishes this rank's worker address under `prefix`, reads every
  // peer's and connects. Waits at most `timeout` for the peers' addresses.
  static std::unique_ptr<UcxTransport> connect(std::shared_ptr<UcxContext> context, Store& store,
                                               const std::string& prefix, int rank, int size,
                                               Millis timeout);
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override;
  bool reaches(const Device& device) const override;
  OpId post_send(int peer, uint64_t tag, const void* data, size_t bytes) override;
  OpId post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) override;
  std::optional<Completion> test(OpId op) override;
  bool progress() override;
  std::optional<PeerFailure> failure() override;
  void notify_abort(const std::string& reason, int blamed) override;
  std::optional<AbortNotice> notice_from(int rank) const override;
  uint64_t blame_count() const override { return blame_count_; }
  int last_blamer() const override { return last_blamer_; }
  void cancel_all() override;
  SharedSlots* shared_slots() override { return slots_.get(); }

 private:
  // One transfer in flight; UCX callbacks write into it through user_data.
  struct Pending {
    bool in_use = false;
    bool abandoned = false;  // given up by cancel_all(); UCX may still write into it
    bool done = false;
    bool recv = false;
    int peer = -1;
    size_t bytes = 0;
    ucs_status_t status = UCS_INPROGRESS;
    ucp_tag_recv_info_t info{};
    void* request = nullptr;
  };
  // What an endpoint's error callback needs to name the peer.
  struct PeerSlot {
    UcxTransport* owner = nullptr;
    int rank = -1;
  };

  UcxTransport(std::shared_ptr<UcxContext> context, int rank, int size);
  void create_worker();
  void connect_peers(Store& store, const std::string& prefix, Millis timeout);
  OpId acquire();
  // Records what a UCX post call returned for transfer `id`: done, in flight, or an error that
  // test() will report.
  OpId track(OpId id, ucs_status_ptr_t request);
  void record_failure(int rank, std::string reason);
  void close_endpoints();
  void probe_local_peers();

  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t on_abort_message(void* arg, const void* header, size_t header_length,
                                       void* data, size_t length, const ucp_am_recv_param_t*);

  std::shared_ptr<UcxContext> context_;
  int rank_ = 0;
  int size_ = 1;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<std::unique_ptr<PeerSlot>> peer_slots_;
  std::vector<bool> peer_failed_;
  std::vector<std::optional<AbortNotice>> notices_;  // first abort notice from each rank
  uint64_t blame_count_ = 0;                         // notices that blamed this rank
  int last_blamer_ = -1;
  std::vector<int> local_pids_;  // process id of each peer on this host, 0 for remote peers
  std::chrono::steady_clock::time_point next_probe_{};
  uint64_t failure_calls_ = 0;
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<OpId> free_ids_;
  std::optional<PeerFailure> failure_;
  std::unique_ptr<SharedSlots> slots_;  // every rank on this host (H2_COMM_SHM)
  // The header and reason of every abort notice sent: a notice to a peer whose wire-up never
  // finished stays queued in UCX after its request is freed and is packed when the endpoints
  // close (ASan: a use after free of the caller's message), so the payload lives as long as the
  // worker. One per failure, a few hundred bytes.
  struct AbortPayload {
    int32_t header[2];
    std::string reason;
  };
  std::deque<AbortPayload> abort_payloads_;
};

}  // namespace h2::comm
