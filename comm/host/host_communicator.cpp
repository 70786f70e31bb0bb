// Collectives and point-to-point transfers of the host communicator: argument checks, staging,
// algorithm choice, and the poisoning that follows a failure.
#include "comm/host/host_communicator.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "comm/algorithms/exchange.h"
#include "comm/algorithms/give_up.h"
#include "comm/algorithms/recursive_doubling.h"
#include "comm/algorithms/reduce_kernels.h"
#include "comm/algorithms/ring.h"
#include "comm/algorithms/small_collectives.h"
#include "comm/collective_checks.h"
#include "comm/comm_error.h"
#include "comm/host/shm_path.h"
#include "comm/host/staging.h"
#include "comm/timeouts.h"
#include "core/env.h"
#include "core/runtime.h"

namespace h2::comm {
namespace {

void check_reducible(DType dtype, ReduceOp op, std::string_view who) {
  if (!reduce_supported(dtype, op))
    H2_THROW(UnsupportedError, "{}: reduction {} is not defined on {} tensors", who,
             reduce_op_name(op), dtype_name(dtype));
}

void check_byte_sized(DType dtype, std::string_view who) {
  if (dtype_bits(dtype) % 8 != 0)
    H2_THROW(UnsupportedError, "{}: {} packs two elements per byte; communicate its bytes as u8",
             who, dtype_name(dtype));
}

// One tagged point-to-point transfer in flight.
class HostRequest final : public Request {
 public:
  // Posts the transfer of `tensor` (through a host copy where the transport cannot reach it).
  HostRequest(Transport& transport, const Tensor& tensor, int peer, int tag, bool recv,
              Millis timeout, uint64_t spins_before_yield)
      : transport_(transport),
        view_(tensor, transport, recv ? HostView::write : HostView::read, nullptr),
        peer_(peer),
        tag_(tag),
        recv_(recv),
        timeout_(timeout),
        spins_before_yield_(spins_before_yield) {
    op_ = recv
              ? transport.post_recv(peer, p2p_tag(peer, tag), kP2pMask, view_.data(), view_.bytes())
              : transport.post_send(peer, p2p_tag(transport.rank(), tag), view_.data(),
                                    view_.bytes());
  }
  ~HostRequest() override {
    if (done_) return;
    try {
      wait();
    } catch (...) {  // a destructor must not throw (it may run while another error unwinds)
      transport_.cancel_all();  // and the buffer must be let go
    }
  }

  bool test() override {
    if (done_) return true;
    std::optional<Completion> completion;
    try {
      completion = transport_.test(op_);
    } catch (const CommError& e) {
      done_ = true;
      throw CommError(fmt::format("{}: {}", what(), e.what()));
    }
    if (!completion) {
      if (auto failure = transport_.failure(); failure && failure->rank == peer_) {
        done_ = true;
        transport_.cancel_all();
        give_up_after(transport_, what(), *failure);
      }
      return false;
    }
    done_ = true;
    if (recv_ && completion->bytes != view_.bytes())
      throw CommError(fmt::format("{}: rank {} sent {} bytes where {} were expected", what(), peer_,
                                  completion->bytes, view_.bytes()));
    view_.finish();
    return true;
  }

  void wait() override {
    // H2_COMM_TIMEOUT bounds the wait, counted from its 256th poll (a short wait reads no
    // clock). A request posted long before its wait (a prefetch) is not timed out for that.
    // A peer that gives up waiting for this rank ends the wait at once (comm/algorithms/give_up.h).
    WaitDeadline deadline(timeout_);
    const BlameWatch blame(transport_);
    for (uint64_t spins = 1; !test(); ++spins) {
      if ((spins & 255) == 0 && (blame.blamed() || deadline.passed())) {
        done_ = true;
        transport_.cancel_all();
        give_up(
            transport_,
            fmt::format("{} {}: rank {} died, hangs or posted no matching {}", what(),
                        blame.blamed() ? "gave up (" + blame.explain() + ")"
                                       : fmt::format("timed out after {:.0f} s (H2_COMM_TIMEOUT)",
                                                     timeout_.count() / 1000.0),
                        peer_, recv_ ? "send" : "receive"),
            peer_);
      }
      if (spins >= spins_before_yield_) sched_yield();
    }
  }

 private:
  std::string what() const {
    return fmt::format("rank {} {} rank {} (tag {}, {} bytes)", transport_.rank(),
                       recv_ ? "receiving from" : "sending to", peer_, tag_, view_.bytes());
  }

  Transport& transport_;
  HostView view_;  // by value: one allocation less per request
  OpId op_ = 0;
  int peer_, tag_;
  bool recv_;
  Millis timeout_;
  uint64_t spins_before_yield_;
  bool done_ = false;
};

}  // namespace

HostCommOptions HostCommOptions::from_env() {
  HostCommOptions options;
  options.timeout = comm_timeout();
  options.ring_threshold_bytes = size_t(env_int("H2_COMM_RING_THRESHOLD", 0, 1L << 40));
  options.segment_bytes = size_t(env_int("H2_COMM_SEGMENT", 4096, 1L << 30));
  return options;
}

HostCommunicator::HostCommunicator(std::unique_ptr<Transport> transport, TransportFactory factory,
                                   std::string prefix, HostCommOptions options,
                                   std::vector<int> members)
    : transport_(std::move(transport)),
      factory_(std::move(factory)),
      prefix_(std::move(prefix)),
      options_(std::move(options)),
      members_(std::move(members)) {
  if (members_.empty())
    for (int r = 0; r < transport_->size(); ++r) members_.push_back(r);
  H2_CHECK(int(members_.size()) == transport_->size(), "{} members for a group of {}",
           members_.size(), transport_->size());
  if (SharedSlots* slots = transport_->shared_slots())
    shm_ = std::make_unique<ShmPath>(*slots, *transport_, options_.timeout,
                                     options_.spins_before_yield);
}

HostCommunicator::~HostCommunicator() = default;

void HostCommunicator::check_usable() const {
  if (!poisoned_.empty())
    H2_THROW(CommError, "communicator (rank {}) is unusable after an earlier failure: {}", rank(),
             poisoned_);
}

void HostCommunicator::run(const Signature& signature, const std::function<void(Exchange&)>& body) {
  check_usable();
  try {
    if (shm_) shm_->announce(signature);
    {
      Exchange exchange(*transport_, signature, sequence_++, options_.timeout,
                        options_.spins_before_yield);
      body(exchange);
    }
    if (shm_) shm_->complete();
  } catch (const CommError& e) {
    poisoned_ = e.what();
    throw;
  }
}

template <class Body>
void HostCommunicator::run_shm(const Body& body) {
  check_usable();
  try {
    body(*shm_);
  } catch (const CommError& e) {
    poisoned_ = e.what();
    throw;
  }
}

void HostCommunicator::all_reduce(const Tensor& out, const Tensor& in, ReduceOp op,
                                  Stream* stream) {
  check_all_reduce(out, in, op, "all_reduce");
  check_reducible(in.dtype(), op, "all_reduce");
  const bool in_place = same_view(out, in);
  HostView dst(out, *transport_, in_place ? HostView::read_write : HostView::write, stream);
  std::optional<HostView> src;  // on the stack: small all-reduces are a few hundred ns in all
  if (!in_place) src.emplace(in, *transport_, HostView::read, stream);
  const std::byte* source = in_place ? dst.data() : src->data();
  const Signature signature{CollectiveKind::all_reduce, in.dtype(), op, in.numel()};
  if (shm_ && ShmPath::takes_all_reduce(dst.bytes())) {
    run_shm([&](ShmPath& shm) {
      shm.all_reduce(dst.data(), source, signature.count, signature.dtype, op, signature);
    });
    dst.finish();
    return;
  }
  run(signature, [&](Exchange& ex) {
    if (dst.bytes() >= options_.ring_threshold_bytes)
      ring_all_reduce(ex, dst.data(), source, in.numel(), in.dtype(), op,
                      RingOptions{options_.segment_bytes, &scratch_});
    else
      recursive_doubling_all_reduce(ex, dst.data(), source, in.numel(), in.dtype(), op, scratch_);
  });
  dst.finish();
}

void HostCommunicator::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                      Stream* stream) {
  check_reduce_scatter(out, in, op, rank(), size(), "reduce_scatter");
  check_reducible(in.dtype(), op, "reduce_scatter");
  // The ring reads all of `in` while writing `out`; a view of out inside in is staged apart.
  HostView src(in, *transport_, HostView::read, stream);
  Tensor out_target = out.may_alias(in)
                          ? Tensor::empty(out.shape(), out.dtype(), out.device().runtime().cpu())
                          : out;
  HostView dst(out_target, *transport_, HostView::write, stream);
  const Signature signature{CollectiveKind::reduce_scatter, in.dtype(), op, in.numel()};
  run(signature, [&](Exchange& ex) {
    ring_reduce_scatter(ex, dst.data(), src.data(), out.numel(), in.dtype(), op,
                        RingOptions{options_.segment_bytes, &scratch_});
  });
  dst.finish();
  if (out_target.data() != out.data()) Tensor(out).copy_from(out_target, stream);
}

void HostCommunicator::all_gather(const Tensor& out, const Tensor& in, Stream* stream) {
  check_all_gather(out, in, rank(), size(), "all_gather");
  check_byte_sized(in.dtype(), "all_gather");
  HostView src(in, *transport_, HostView::read, stream);
  HostView dst(out, *transport_, HostView::write, stream);
  const Signature signature{CollectiveKind::all_gather, in.dtype(), ReduceOp::sum, in.numel()};
  run(signature, [&](Exchange& ex) {
    ring_all_gather(ex, dst.data(), src.data(), in.numel(),
                    size_t(dtype_storage_bytes(in.dtype(), 1)),
                    RingOptions{options_.segment_bytes, &scratch_});
  });
  dst.finish();
}

void HostCommunicator::broadcast(const Tensor& out, const Tensor& in, int root, Stream* stream) {
  check_broadcast(out, in, root, rank(), size(), "broadcast");
  check_byte_sized(out.dtype(), "broadcast");
  const bool is_root = rank() == root;
  const bool in_place = !is_root || !in.defined() || same_view(out, in);
  HostView dst(out, *transport_, is_root && in_place ? HostView::read_write : HostView::write,
               stream);
  std::unique_ptr<HostView> src;
  if (is_root && !in_place)
    src = std::make_unique<HostView>(in, *transport_, HostView::read, stream);
  const std::byte* source = src ? src->data() : dst.data();
  Signature signature{CollectiveKind::broadcast, out.dtype(), ReduceOp::sum, out.numel()};
  signature.root = root;
  run(signature, [&](Exchange& ex) {
    if (dst.bytes() >= options_.ring_threshold_bytes && size() > 2)
      chain_broadcast(ex, dst.data(), source, dst.bytes(), root, options_.segment_bytes);
    else
      tree_broadcast(ex, dst.data(), source, dst.bytes(), root);
  });
  dst.finish();
}

void HostCommunicator::all_to_all(const Tensor& out, const Tensor& in, Stream* stream) {
  check_all_to_all(out, in, size(), "all_to_all");
  const std::vector<int64_t> counts(size_t(size()), in.numel() / size());
  all_to_all_v(out, counts, in, counts, stream);
}

void HostCommunicator::all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts,
                                    const Tensor& in, std::span<const int64_t> send_counts,
                                    Stream* stream) {
  check_all_to_all_v(out, recv_counts, in, send_counts, size(), "all_to_all");
  check_byte_sized(in.dtype(), "all_to_all");
  const size_t es = size_t(dtype_storage_bytes(in.dtype(), 1));
  std::vector<size_t> recv_bytes(size()), recv_offsets(size()), send_bytes(size()),
      send_offsets(size());
  for (int r = 0; r < size(); ++r) {
    recv_bytes[r] = size_t(recv_counts[r]) * es;
    send_bytes[r] = size_t(send_counts[r]) * es;
    if (r > 0) {
      recv_offsets[r] = recv_offsets[r - 1] + recv_bytes[r - 1];
      send_offsets[r] = send_offsets[r - 1] + send_bytes[r - 1];
    }
  }
  // Receives land in out while sends read in: in place, in is staged apart first.
  const bool in_place = out.may_alias(in);
  Tensor source_tensor = in_place ? in.to(in.device().runtime().cpu()) : in;
  HostView src(source_tensor, *transport_, HostView::read, stream);
  HostView dst(out, *transport_, HostView::write, stream);
  // The signature's count is this rank's total; per-peer agreement is checked by byte counts.
  const Signature signature{CollectiveKind::all_to_all, in.dtype(), ReduceOp::sum, 0};
  run(signature, [&](Exchange& ex) {
    pairwise_all_to_all(ex, dst.data(), recv_bytes, recv_offsets, src.data(), send_bytes,
                        send_offsets);
  });
  dst.finish();
}

void HostCommunicator::progress() {
  transport_->progress();
}

void HostCommunicator::barrier() {
  const Signature signature{CollectiveKind::barrier, DType::u8, ReduceOp::sum, 0};
  if (shm_) {
    run_shm([&](ShmPath& shm) { shm.barrier(signature); });
    return;
  }
  run(signature, [](Exchange& ex) { dissemination_barrier(ex); });
}

std::unique_ptr<Communicator> HostCommunicator::split(int color, int key) {
  const int n = size();
  std::vector<int64_t> mine = {color, key}, all(size_t(2 * n));
  run(Signature{CollectiveKind::split, DType::i64, ReduceOp::sum, 2}, [&](Exchange& ex) {
    ring_all_gather(ex, reinterpret_cast<std::byte*>(all.data()),
                    reinterpret_cast<const std::byte*>(mine.data()), 2, sizeof(int64_t),
                    RingOptions{options_.segment_bytes, &scratch_});
  });
  const int split_index = splits_++;
  if (color < 0) return nullptr;
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (all[2 * r] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
  const int new_rank = int(std::find(members.begin(), members.end(), rank()) - members.begin());
  const std::string prefix = fmt::format("{}/split{}/color{}", prefix_, split_index, color);
  std::vector<int> root_ranks;
  for (int m : members) root_ranks.push_back(members_[size_t(m)]);
  return std::make_unique<HostCommunicator>(factory_(prefix, new_rank, root_ranks), factory_,
                                            prefix, options_, root_ranks);
}

std::unique_ptr<Request> HostCommunicator::isend(const Tensor& tensor, int peer, int tag) {
  check_usable();
  check_point_to_point(tensor, peer, tag, size(), "send");
  return std::make_unique<HostRequest>(*transport_, tensor, peer, tag, /*recv=*/false,
                                       options_.timeout, options_.spins_before_yield);
}

std::unique_ptr<Request> HostCommunicator::irecv(const Tensor& tensor, int peer, int tag) {
  check_usable();
  check_point_to_point(tensor, peer, tag, size(), "recv");
  return std::make_unique<HostRequest>(*transport_, tensor, peer, tag, /*recv=*/true,
                                       options_.timeout, options_.spins_before_yield);
}

}  // namespace h2::comm
