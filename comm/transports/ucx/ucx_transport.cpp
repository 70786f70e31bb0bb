// UCP worker, endpoints, tagged transfers, abort notices and an orderly (bounded) shutdown.
#include "comm/transports/ucx/ucx_transport.h"

#include <fmt/format.h>

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "comm/transports/ucx/ucx_check.h"
#include "core/env.h"
#include "core/log.h"

namespace h2::comm {
namespace {

constexpr unsigned kAbortMessageId = 7;
constexpr auto kShutdownBudget = std::chrono::seconds(2);
constexpr auto kAbortBudget = std::chrono::milliseconds(300);

using Clock = std::chrono::steady_clock;

constexpr auto kProbeInterval = std::chrono::milliseconds(250);

std::string address_key(const std::string& prefix, int rank) {
  return fmt::format("{}/ucx_address/{}", prefix, rank);
}

// What a rank publishes: its host name, process id and UCP worker address.
struct PeerCard {
  std::string host;
  int pid = 0;
  std::string worker_address;

  std::string encode() const { return host + '\n' + std::to_string(pid) + '\n' + worker_address; }
  static PeerCard decode(const std::string& text) {
    PeerCard card;
    const size_t a = text.find('\n'), b = text.find('\n', a + 1);
    H2_CHECK(a != std::string::npos && b != std::string::npos, "malformed peer card in the store");
    card.host = text.substr(0, a);
    card.pid = std::stoi(text.substr(a + 1, b - a - 1));
    card.worker_address = text.substr(b + 1);
    return card;
  }
};

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// Whether process `pid` is gone: no such process, or a zombie waiting to be reaped.
bool process_gone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() &&
         (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

}  // namespace

UcxTransport::UcxTransport(std::shared_ptr<UcxContext> context, int rank, int size)
    : context_(std::move(context)),
      rank_(rank),
      size_(size),
      peer_failed_(size, false),
      notices_(size) {}

std::unique_ptr<UcxTransport> UcxTransport::connect(std::shared_ptr<UcxContext> context,
                                                    Store& store, const std::string& prefix,
                                                    int rank, int size, Millis timeout) {
  H2_CHECK(size >= 1 && size <= (1 << 16) && rank >= 0 && rank < size,
           "rank {} of {} is not a valid place in a group", rank, size);
  std::unique_ptr<UcxTransport> transport(new UcxTransport(std::move(context), rank, size));
  transport->create_worker();
  transport->connect_peers(store, prefix, timeout);
  bool one_host = size > 1;
  for (int peer = 0; peer < size; ++peer)
    one_host = one_host && (peer == rank || transport->local_pids_[size_t(peer)] != 0);
  if (one_host && env_int("H2_COMM_SHM", 0, 1) == 1) {
    const int first_pid = rank == 0 ? int(getpid()) : transport->local_pids_[0];
    transport->slots_ =
        SharedSlots::create(store, prefix, std::to_string(first_pid), rank, size, timeout);
  }
  return transport;
}

void UcxTransport::create_worker() {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  // One thread at a time, not always the same one: a pipeline rank's progress helper
  // (parallel/pipeline/progress_thread.h) drives the worker while the compute thread computes.
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  H2_UCX_CHECK(ucp_worker_create(context_->get(), &params, &worker_));

  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                  UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  am.id = kAbortMessageId;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  am.cb = &UcxTransport::on_abort_message;
  am.arg = this;
  H2_UCX_CHECK(ucp_worker_set_am_recv_handler(worker_, &am));
}

void UcxTransport::connect_peers(Store& store, const std::string& prefix, Millis timeout) {
  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  H2_UCX_CHECK(ucp_worker_get_address(worker_, &address, &address_length));
  const std::string host = this_host();
  PeerCard mine{host, int(getpid()),
                std::string(reinterpret_cast<const char*>(address), address_length)};
  ucp_worker_release_address(worker_, address);
  store.set(address_key(prefix, rank_), mine.encode());

  endpoints_.assign(size_, nullptr);
  local_pids_.assign(size_, 0);
  for (int peer = 0; peer < size_; ++peer) {
    const PeerCard card = PeerCard::decode(store.get(address_key(prefix, peer), timeout));
    const bool local = card.host == host;
    if (local && peer != rank_) local_pids_[peer] = card.pid;
    peer_slots_.push_back(std::make_unique<PeerSlot>(PeerSlot{this, peer}));
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(card.worker_address.data());
    // Shared memory has no peer-failure support in UCX; local peers are watched by pid instead.
    params.err_mode = local ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &UcxTransport::on_endpoint_error;
    params.err_handler.arg = peer_slots_.back().get();
    H2_UCX_CHECK(ucp_ep_create(worker_, &params, &endpoints_[peer]));
  }
}

std::optional<PeerFailure> UcxTransport::failure() {
  // Waiters call this on every poll: the clock is read on every 64th call only (a clock read
  // costs as much as an idle progress call), the peers probed every kProbeInterval.
  if (!failure_ && (++failure_calls_ & 63) == 1) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_probe_) {
      next_probe_ = now + kProbeInterval;
      probe_local_peers();
    }
  }
  return failure_;
}

void UcxTransport::probe_local_peers() {
  for (int peer = 0; peer < size_; ++peer)
    if (local_pids_[peer] != 0 && !peer_failed_[peer] && process_gone(local_pids_[peer]))
      record_failure(peer,
                     fmt::format("rank {} (pid {} on this host) exited", peer, local_pids_[peer]));
}

UcxTransport::~UcxTransport() {
  cancel_all();
  close_endpoints();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
}

void UcxTransport::close_endpoints() {
  std::vector<void*> closing;
  for (int peer = 0; peer < int(endpoints_.size()); ++peer) {
    if (endpoints_[peer] == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A healthy peer gets its eager data flushed; a failed one is dropped at once.
    param.flags = peer_failed_[peer] || failure_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t request = ucp_ep_close_nbx(endpoints_[peer], &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing.push_back(request);
  }
  const auto deadline = Clock::now() + kShutdownBudget;
  for (void* request : closing) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline)
      ucp_worker_progress(worker_);
    ucp_request_free(request);
  }
  endpoints_.clear();
}

std::string UcxTransport::name() const {
  return fmt::format("ucx({})", context_->transports());
}

bool UcxTransport::reaches(const Device& device) const {
  if (device.memory_kind() == MemoryKind::host) return true;
  return device.id().backend == "cuda" && context_->reaches_cuda();
}

OpId UcxTransport::acquire() {
  if (free_ids_.empty()) {
    pending_.push_back(std::make_unique<Pending>());
    free_ids_.push_back(OpId(pending_.size() - 1));
  }
  const OpId id = free_ids_.back();
  free_ids_.pop_back();
  *pending_[id] = Pending{};
  pending_[id]->in_use = true;
  return id;
}

OpId UcxTransport::post_send(int peer, uint64_t tag, const void* data, size_t bytes) {
  H2_CHECK(peer >= 0 && peer < size_, "send to rank {} in a group of {}", peer, size_);
  const OpId id = acquire();
  Pending& p = *pending_[id];
  p.peer = peer;
  p.bytes = bytes;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxTransport::on_send;
  param.user_data = &p;
  return track(id, ucp_tag_send_nbx(endpoints_[peer], data, bytes, tag, &param));
}

OpId UcxTransport::post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) {
  H2_CHECK(peer >= 0 && peer < size_, "receive from rank {} in a group of {}", peer, size_);
  const OpId id = acquire();
  Pending& p = *pending_[id];
  p.peer = peer;
  p.bytes = bytes;
  p.recv = true;
  ucp_request_param_t param{};
  // UCX 1.13 does not always fill recv_info when a receive completes inside the call, so
  // completion always goes through the callback, which gets the sender's tag.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                       UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &UcxTransport::on_recv;
  param.user_data = &p;
  param.recv_info.tag_info = &p.info;
  return track(id, ucp_tag_recv_nbx(worker_, data, bytes, tag, mask, &param));
}

OpId UcxTransport::track(OpId id, ucs_status_ptr_t request) {
  Pending& p = *pending_[id];
  if (UCS_PTR_IS_ERR(request)) {
    // Refused at once (typically a peer already known to be dead): reported by test(), where the
    // caller knows which operation it belongs to.
    p.done = true;
    p.status = UCS_PTR_STATUS(request);
  } else if (request == nullptr) {  // completed inside the call
    p.done = true;
    p.status = UCS_OK;
  } else {
    p.request = request;
  }
  return id;
}

std::optional<Completion> UcxTransport::test(OpId op) {
  Pending& p = *pending_.at(op);
  H2_CHECK(p.in_use, "transfer {} is not in flight", op);
  if (!p.done) ucp_worker_progress(worker_);
  if (!p.done) return std::nullopt;
  if (p.request != nullptr) ucp_request_free(p.request);
  const Pending finished = p;
  p.in_use = false;
  free_ids_.push_back(op);
  if (finished.status == UCS_ERR_MESSAGE_TRUNCATED)
    H2_THROW(CommError,
             "rank {}: a message from rank {} is larger than the {}-byte receive buffer (the "
             "ranks disagree on the count)",
             rank_, finished.peer, finished.bytes);
  if (finished.status != UCS_OK)
    H2_THROW(CommError, "rank {}: {} with rank {} failed: {}", rank_,
             finished.recv ? "receive" : "send", finished.peer, ucs_status_string(finished.status));
  Completion done;
  done.bytes = finished.recv ? finished.info.length : finished.bytes;
  done.sender_tag = finished.recv ? finished.info.sender_tag : 0;
  return done;
}

bool UcxTransport::progress() {
  return ucp_worker_progress(worker_) != 0;
}

void UcxTransport::record_failure(int rank, std::string reason) {
  if (rank >= 0 && rank < size_) peer_failed_[rank] = true;
  if (!failure_) failure_ = PeerFailure{rank, std::move(reason)};
}

std::optional<AbortNotice> UcxTransport::notice_from(int rank) const {
  return rank >= 0 && rank < size_ ? notices_[rank] : std::nullopt;
}

void UcxTransport::notify_abort(const std::string& reason, int blamed) {
  if (worker_ == nullptr) return;
  abort_payloads_.push_back({{rank_, blamed}, reason});  // UCX may read it until the worker goes
  const AbortPayload& payload = abort_payloads_.back();
  std::vector<void*> sending;
  for (int peer = 0; peer < int(endpoints_.size()); ++peer) {
    if (peer == rank_ || peer_failed_[peer] || endpoints_[peer] == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t request =
        ucp_am_send_nbx(endpoints_[peer], kAbortMessageId, payload.header, sizeof(payload.header),
                        payload.reason.data(), payload.reason.size(), &param);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) sending.push_back(request);
  }
  const auto deadline = Clock::now() + kAbortBudget;
  for (void* request : sending) {
    while (ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline)
      ucp_worker_progress(worker_);
    ucp_request_free(request);
  }
}

void UcxTransport::cancel_all() {
  if (worker_ == nullptr) return;
  for (auto& p : pending_)
    if (p->in_use && !p->abandoned && !p->done && p->request != nullptr)
      ucp_request_cancel(worker_, p->request);
  const auto deadline = Clock::now() + kAbortBudget;
  for (OpId id = 0; id < OpId(pending_.size()); ++id) {
    Pending& p = *pending_[id];
    if (!p.in_use || p.abandoned) continue;
    while (!p.done && Clock::now() < deadline) ucp_worker_progress(worker_);
    if (p.request != nullptr) ucp_request_free(p.request);
    if (!p.done) {
      // UCX releases the request when it completes and its callback still writes this slot, so
      // the slot is never reused; the buffer may be touched until then, which is why the
      // communicator refuses further use after an error.
      p.abandoned = true;
      continue;
    }
    p.in_use = false;
    free_ids_.push_back(id);
  }
}

void UcxTransport::on_send(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  p->status = status;
  p->done = true;
}

void UcxTransport::on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  p->status = status;
  if (info != nullptr) p->info = *info;
  p->done = true;
}

void UcxTransport::on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* slot = static_cast<PeerSlot*>(arg);
  slot->owner->record_failure(slot->rank, fmt::format("rank {} is unreachable ({})", slot->rank,
                                                      ucs_status_string(status)));
}

ucs_status_t UcxTransport::on_abort_message(void* arg, const void* header, size_t header_length,
                                            void* data, size_t length, const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  int32_t fields[2] = {-1, -1};  // origin, blamed
  if (header_length == sizeof(fields)) std::memcpy(fields, header, sizeof(fields));
  const std::string text(static_cast<const char*>(data), length);
  // A rank's first notice says why it gave up; a later one (its World's final barrier, failing
  // in turn) repeats that failure and would hide whom it waited for.
  if (fields[0] >= 0 && fields[0] < self->size_ && !self->notices_[fields[0]])
    self->notices_[fields[0]] = AbortNotice{text, fields[1]};
  // A peer that timed out waiting for this rank is not the cause: this rank is waiting too (its
  // waits see blame_count() grow and give up, naming their own peer).
  // The sender is alive and listening for reports a while: it is not marked unreachable.
  if (fields[1] != self->rank_) {
    if (!self->failure_)
      self->failure_ = PeerFailure{fields[0], fmt::format("rank {} gave up: {}", fields[0], text)};
  } else {
    ++self->blame_count_;
    self->last_blamer_ = fields[0];
  }
  return UCS_OK;
}

}  // namespace h2::comm
