// The one-rank in-process transport (see loopback_transport.h).
#include "comm/transports/loopback/loopback_transport.h"

#include <cstring>

#include "comm/comm_error.h"
#include "core/error.h"

namespace h2::comm {

bool LoopbackTransport::reaches(const Device& device) const {
  return device.memory_kind() == MemoryKind::host;
}

void LoopbackTransport::check_peer(int peer, const char* what) const {
  if (peer != 0)
    H2_THROW(CommError, "loopback transport: {} peer {} in a group of one rank", what, peer);
}

void LoopbackTransport::deliver(const Receive& receive, const Message& message) {
  if (message.bytes.size() > receive.capacity)
    H2_THROW(CommError, "loopback transport: a message of {} bytes (tag {:#x}) for a receive of {}",
             message.bytes.size(), message.tag, receive.capacity);
  if (!message.bytes.empty()) std::memcpy(receive.data, message.bytes.data(), message.bytes.size());
  completed_[receive.op] = Completion{message.tag, message.bytes.size()};
}

OpId LoopbackTransport::post_send(int peer, uint64_t tag, const void* data, size_t bytes) {
  check_peer(peer, "send to");
  const OpId op = next_op_++;
  Message message{tag, std::vector<std::byte>(bytes)};
  if (bytes > 0) std::memcpy(message.bytes.data(), data, bytes);
  completed_[op] = Completion{tag, bytes};  // copied: the sender's buffer is free at once
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if ((tag & it->mask) == (it->tag & it->mask)) {
      deliver(*it, message);
      waiting_.erase(it);
      return op;
    }
  unexpected_.push_back(std::move(message));
  return op;
}

OpId LoopbackTransport::post_recv(int peer, uint64_t tag, uint64_t mask, void* data, size_t bytes) {
  check_peer(peer, "receive from");
  const Receive receive{next_op_++, tag, mask, data, bytes};
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it)
    if ((it->tag & mask) == (tag & mask)) {
      deliver(receive, *it);
      unexpected_.erase(it);
      return receive.op;
    }
  waiting_.push_back(receive);
  return receive.op;
}

std::optional<Completion> LoopbackTransport::test(OpId op) {
  auto it = completed_.find(op);
  if (it == completed_.end()) return std::nullopt;
  const Completion done = it->second;
  completed_.erase(it);
  return done;
}

void LoopbackTransport::cancel_all() {
  waiting_.clear();
  unexpected_.clear();
}

}  // namespace h2::comm
