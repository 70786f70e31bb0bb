// The NCCL communicator's state: setup and teardown, completion of non-blocking calls, bounded
// waits on events, and the launch of queued point-to-point transfers (see nccl_state.h).
#include "comm/vendors/nccl/nccl_state.h"

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace h2::comm {
namespace nccl {
namespace {

// Polling pace: yield for the first rounds (latency), then sleep up to 1 ms (CPU).
class Backoff {
 public:
  void pause() {
    if (rounds_++ < 64) {
      std::this_thread::yield();
      return;
    }
    sleep_ = std::min(sleep_ * 2, std::chrono::microseconds(1000));
    std::this_thread::sleep_for(sleep_);
  }

 private:
  int rounds_ = 0;
  std::chrono::microseconds sleep_{8};
};

}  // namespace

std::string timeout_text(Millis timeout) {
  return fmt::format(
      "not complete after {:.3g} s (H2_COMM_TIMEOUT): a peer died, never arrived or called "
      "another operation; the communicator was aborted",
      timeout.count() / 1000.0);
}

// Polls `comm` until its last non-blocking call has finished: "" on success, else why not.
std::string poll_ready(ncclComm_t comm, Millis timeout) {
  Clock::time_point deadline = Clock::now() + timeout;
  Backoff backoff;
  for (;;) {
    ncclResult_t async = ncclInProgress;
    if (ncclResult_t r = ncclCommGetAsyncError(comm, &async); r != ncclSuccess)
      return "ncclCommGetAsyncError failed: " + nccl::describe_nccl(r, comm);
    if (async == ncclSuccess) return "";
    if (async != ncclInProgress) return nccl::describe_nccl(async, comm);
    if (Clock::now() > deadline) return timeout_text(timeout);
    backoff.pause();
  }
}

cudaStream_t raw_stream(Stream& stream) {
  return static_cast<cudaStream_t>(stream.native_handle());
}

size_t bytes_of(const Tensor& t) {
  return size_t(t.nbytes());
}

char* byte_ptr(const Tensor& t) {
  return static_cast<char*>(t.data());
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
    case ReduceOp::avg:
      return ncclAvg;
  }
  return ncclSum;
}

// The NCCL type reductions run in; data movement sends bytes and needs none.
ncclDataType_t nccl_reduce_type(DType dtype, std::string_view who) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
    case DType::u8:
      return ncclUint8;
    default:
      H2_THROW(UnsupportedError, "{}: NCCL reductions take f32, bf16, f16, i32, i64 and u8, not {}",
               who, dtype_name(dtype));
  }
}

// Where NCCL writes: the tensor itself when contiguous, else a contiguous temporary.
Tensor dense_output(const Tensor& t) {
  return t.is_contiguous() ? t : Tensor::empty(t.shape(), t.dtype(), t.device());
}

// Copies a temporary NCCL wrote back into the caller's non-contiguous tensor, on `stream`.
void write_back(const Tensor& out, const Tensor& dense, Stream& stream) {
  if (out.is_contiguous()) return;
  Tensor target = out;
  target.copy_from(dense, &stream);
}

}  // namespace nccl

using nccl::Backoff;
using nccl::bytes_of;
using nccl::Clock;
using nccl::NcclGroup;
using nccl::P2pOp;
using nccl::poll_ready;
using nccl::raw_stream;
using nccl::timeout_text;

NcclCommunicator::State::State(Device& dev, int rank_, int size_)
    : device(&dev), device_index(dev.id().index), rank(rank_), size(size_) {
  barrier_buffer = Tensor::empty({1}, DType::i32, dev);
  p2p_stream = dev.create_stream();
  H2_CUDA_CHECK(cudaMemsetAsync(barrier_buffer.data(), 0, 4, raw_stream(*p2p_stream)));
}

NcclCommunicator::State::~State() {
  if (comm == nullptr) return;  // never set up, or aborted
  try {
    cuda::DeviceGuard guard(device_index);
    Millis timeout = comm_timeout();
    ncclResult_t r = ncclCommFinalize(comm);
    std::string err = r == ncclSuccess || r == ncclInProgress ? poll_ready(comm, timeout)
                                                              : nccl::describe_nccl(r, comm);
    if (err.empty()) {
      r = ncclCommDestroy(comm);
      if (r != ncclSuccess && r != ncclInProgress)
        H2_LOG_ERROR("{}: ncclCommDestroy failed: {}", who("destroy"), nccl::describe_nccl(r));
      comm = nullptr;
    } else {
      H2_LOG_ERROR("{}: ncclCommFinalize: {}; aborting", who("destroy"), err);
      abort(err);
    }
  } catch (const std::exception& e) {
    H2_LOG_ERROR("{}: {}; aborting", who("destroy"), e.what());
    abort(e.what());
  }
}

bool NcclCommunicator::State::query_event(cudaEvent_t event, std::string_view who) {
  cudaError_t q = cudaEventQuery(event);
  if (q == cudaSuccess) return true;
  check_usable(who);
  if (q != cudaErrorNotReady)
    fail(who, fmt::format("cudaEventQuery: {}: {}", cudaGetErrorName(q), cudaGetErrorString(q)),
         __FILE__, __LINE__);
  ncclResult_t async = ncclSuccess;
  if (ncclResult_t r = ncclCommGetAsyncError(comm, &async); r != ncclSuccess)
    fail(who, "ncclCommGetAsyncError failed: " + nccl::describe_nccl(r, comm), __FILE__, __LINE__);
  if (async != ncclSuccess && async != ncclInProgress)
    fail(who, nccl::describe_nccl(async, comm), __FILE__, __LINE__);
  return false;
}

void NcclCommunicator::State::wait_event(cudaEvent_t event, std::string_view who) {
  Millis timeout = comm_timeout();
  Clock::time_point deadline = Clock::now() + timeout;
  Backoff backoff;
  while (!query_event(event, who)) {
    if (Clock::now() > deadline) fail(who, timeout_text(timeout), __FILE__, __LINE__);
    backoff.pause();
  }
}

void NcclCommunicator::State::flush(std::string_view who) {
  if (queued.empty()) return;
  std::vector<std::shared_ptr<P2pOp>> batch;
  batch.swap(queued);
  cudaStream_t stream = raw_stream(*p2p_stream);
  for (const auto& op : batch) H2_CUDA_CHECK(cudaStreamWaitEvent(stream, op->ready.get(), 0));
  auto done = std::make_shared<cuda::OwnedEvent>(cudaEventDisableTiming);
  {
    NcclGroup group;
    for (const auto& op : batch) {
      size_t bytes = bytes_of(op->buffer);
      if (bytes == 0) continue;
      if (op->send)
        H2_NCCL_IN_GROUP(group,
                         ncclSend(op->buffer.data(), bytes, ncclUint8, op->peer, comm, stream));
      else
        H2_NCCL_IN_GROUP(group,
                         ncclRecv(op->buffer.data(), bytes, ncclUint8, op->peer, comm, stream));
    }
    H2_NCCL_END_GROUP(*this, group,
                      fmt::format("{} (starting {} queued transfers)", who, batch.size()));
  }
  done->record(stream);
  Clock::time_point now = Clock::now();
  for (const auto& op : batch) {
    op->done = done;
    op->started = now;
  }
}

}  // namespace h2::comm
