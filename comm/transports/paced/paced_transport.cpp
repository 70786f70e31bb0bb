// Transfers paced to an emulated cluster's links (see paced_transport.h).
#include "comm/transports/paced/paced_transport.h"

#include <algorithm>
#include <cstring>

#include "comm/comm_error.h"
#include "comm/timeouts.h"
#include "core/error.h"

namespace h2::comm {
namespace {

constexpr size_t kTrailer = sizeof(int64_t);  // the sender's clock, nanoseconds
constexpr int kDrainPolls = 4096;             // bounds one drain of the transport's queue

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

// A link carries one transfer at a time: one of `bytes` posted at `sent` starts once the link
// is free and holds it for bytes / bandwidth. Returns the start; `free` becomes the end.
std::chrono::steady_clock::time_point occupy(std::chrono::steady_clock::time_point& free,
                                             std::chrono::steady_clock::time_point sent,
                                             double bytes, double bandwidth) {
  const auto start = std::max(sent, free);
  free = start + seconds(bytes / bandwidth);
  return start;
}

}  // namespace

void LinkPacing::record(double modelled_s, double overrun_s) {
  std::lock_guard lock(mutex_);
  ++stats_.events;
  stats_.modelled_s += modelled_s;
  if (overrun_s > 0) {
    ++stats_.overruns;
    stats_.overrun_s += overrun_s;
  }
}

PacingStats LinkPacing::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

PacedTransport::PacedTransport(std::unique_ptr<Transport> inner,
                               std::function<LinkSpec(int peer)> link,
                               std::shared_ptr<LinkPacing> pacing)
    : inner_(std::move(inner)), link_(std::move(link)), pacing_(std::move(pacing)) {
  H2_CHECK(inner_ && link_ && pacing_, "PacedTransport needs a transport, links and a counter");
}

PacedTransport::~PacedTransport() {
  // Buffers must outlive the inner transport's use of them.
  if (!pending_.empty()) inner_->cancel_all();
}

bool PacedTransport::reaches(const Device& device) const {
  return device.memory_kind() == MemoryKind::host && inner_->reaches(device);
}

OpId PacedTransport::post_send(int peer, uint64_t tag, const void* data, size_t bytes) {
  Pending p{.recv = false, .peer = peer, .buffer = std::vector<std::byte>(bytes + kTrailer)};
  if (bytes > 0) std::memcpy(p.buffer.data(), data, bytes);
  const int64_t sent = now_ns();
  std::memcpy(p.buffer.data() + bytes, &sent, kTrailer);
  p.inner = inner_->post_send(peer, tag, p.buffer.data(), p.buffer.size());
  // The bytes leave now, whatever the sender does next: a link moves data without its sender's
  // CPU, while the transport underneath may need the sender to poll (fragments, rendezvous). The
  // receiver paces the arrival. Bounded by the communication timeout; a failed peer ends it.
  const auto give_up = Clock::now() + comm_timeout();
  std::optional<Completion> sent_now;
  while (!(sent_now = inner_->test(p.inner))) {
    if (inner_->failure() || Clock::now() > give_up) break;  // the caller's wait reports it
    inner_->progress();
  }
  if (sent_now) p.arrived = sent_now;
  p.due = Clock::time_point(std::chrono::nanoseconds(sent));
  if (peer != rank()) {  // the same figures the receiver computes: done when the last byte left
    Clock::time_point& free = send_free_[peer];
    occupy(free, p.due, double(bytes), link_(peer).bandwidth);
    p.due = free;
  }
  const OpId op = next_id_++;
  pending_.emplace(op, std::move(p));
  return op;
}

OpId PacedTransport::post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) {
  Pending p{.recv = true,
            .peer = peer,
            .buffer = std::vector<std::byte>(bytes + kTrailer),
            .user = data,
            .capacity = bytes};
  p.inner = inner_->post_recv(peer, tag, mask, p.buffer.data(), p.buffer.size());
  const OpId op = next_id_++;
  pending_.emplace(op, std::move(p));
  return op;
}

std::optional<Completion> PacedTransport::test(OpId op) {
  auto it = pending_.find(op);
  H2_CHECK(it != pending_.end(), "paced transport: unknown transfer {}", op);
  Pending& p = it->second;
  const Clock::time_point now = Clock::now();
  if (!p.recv) {  // a send: done once its last byte left the modelled link
    if (!p.arrived) p.arrived = inner_->test(p.inner);
    if (!p.arrived || now < p.due) return std::nullopt;
    const Completion done{p.arrived->sender_tag, p.arrived->bytes - kTrailer};
    pending_.erase(it);
    return done;
  }
  if (!p.arrived) {
    p.arrived = inner_->test(p.inner);
    if (!p.arrived) {
      // One poll may take only part of what is queued (a long message is many fragments):
      // drain the transport before concluding that the bytes are not here yet.
      for (int i = 0; i < kDrainPolls && inner_->progress(); ++i) {
      }
      p.arrived = inner_->test(p.inner);
    }
    if (!p.arrived) {
      p.last_miss = now;
      return std::nullopt;
    }
    if (p.arrived->bytes < kTrailer)
      H2_THROW(CommError, "paced transport: a {}-byte message from rank {} has no send time",
               p.arrived->bytes, p.peer);
    const size_t payload = p.arrived->bytes - kTrailer;
    int64_t sent_ns = 0;
    std::memcpy(&sent_ns, p.buffer.data() + payload, kTrailer);
    const Clock::time_point sent{std::chrono::nanoseconds(sent_ns)};
    if (p.peer == rank()) {
      p.due = sent;
    } else {
      const LinkSpec link = link_(p.peer);
      Clock::time_point& free = link_free_[p.peer];
      const Clock::time_point start = occupy(free, sent, double(payload), link.bandwidth);
      p.due = free + seconds(link.latency);
      const double modelled = std::chrono::duration<double>(p.due - start).count();
      // It had not arrived at an earlier poll past its modelled arrival: the real transfer
      // (or the sender's host) was slower than the link it emulates.
      const double overrun =
          p.last_miss > p.due ? std::chrono::duration<double>(now - p.due).count() : 0;
      pacing_->record(modelled, overrun);
    }
  }
  if (now < p.due) return std::nullopt;
  const size_t payload = p.arrived->bytes - kTrailer;
  if (payload > 0) std::memcpy(p.user, p.buffer.data(), payload);
  const Completion done{p.arrived->sender_tag, payload};
  pending_.erase(it);
  return done;
}

void PacedTransport::cancel_all() {
  inner_->cancel_all();
  pending_.clear();
}

}  // namespace h2::comm
