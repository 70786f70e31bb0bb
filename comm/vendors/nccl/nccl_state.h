// The NCCL communicator's insides, shared by its three source files (not a public header):
// NcclCommunicator::State (the NCCL handle, the internal stream, the queued point-to-point
// transfers, completion and timeout handling), Call (what every collective does before and after
// its one NCCL call), and the small RAII pieces around NCCL's own API. Device guards and events
// are the CUDA backend's (backends/cuda/cuda_guard.h).
#pragma once

#include <nccl.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_guard.h"
#include "comm/collective_checks.h"
#include "comm/timeouts.h"
#include "comm/vendors/nccl/nccl_check.h"
#include "comm/vendors/nccl/nccl_communicator.h"
#include "core/log.h"

namespace h2::comm {
namespace nccl {

using Clock = std::chrono::steady_clock;

// An NCCL communicator not yet handed to a State: aborted if setup fails before release().
class OwnedComm {
 public:
  explicit OwnedComm(ncclComm_t comm) : comm_(comm) {}
  ~OwnedComm() {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
  }
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  ncclComm_t get() const { return comm_; }
  ncclComm_t release() { return std::exchange(comm_, nullptr); }

 private:
  ncclComm_t comm_;
};

// ncclGroupStart/End as a scope. Calls inside only record their first failure (add()), so that
// nothing throws between start and end; the destructor only balances NCCL's group depth.
class NcclGroup {
 public:
  NcclGroup() { H2_NCCL_CHECK(ncclGroupStart()); }
  ~NcclGroup() {
    if (open_) (void)ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void add(ncclResult_t status, const char* call) {
    if (status != ncclSuccess && status != ncclInProgress && first_error_ == ncclSuccess) {
      first_error_ = status;
      first_call_ = call;
    }
  }
  ncclResult_t end() {
    open_ = false;
    return ncclGroupEnd();
  }
  ncclResult_t first_error() const { return first_error_; }
  const char* first_call() const { return first_call_; }

 private:
  bool open_ = true;
  ncclResult_t first_error_ = ncclSuccess;
  const char* first_call_ = "";
};

// Polls `comm` until its last non-blocking call has finished: "" on success, else why not.
std::string poll_ready(ncclComm_t comm, Millis timeout);
// "not complete after N s (H2_COMM_TIMEOUT): ...".
std::string timeout_text(Millis timeout);
cudaStream_t raw_stream(Stream& stream);
ncclRedOp_t nccl_op(ReduceOp op);
// The NCCL type reductions run in; UnsupportedError naming `who` for other dtypes.
ncclDataType_t nccl_reduce_type(DType dtype, std::string_view who);
// Where NCCL writes: the tensor itself when contiguous, else a contiguous temporary.
Tensor dense_output(const Tensor& t);
// Copies a temporary NCCL wrote back into the caller's non-contiguous tensor, on `stream`.
void write_back(const Tensor& out, const Tensor& dense, Stream& stream);

// One queued or running isend/irecv.
struct P2pOp {
  bool send = false;
  int peer = 0;
  int tag = 0;
  std::string who;  // "nccl rank 0/2 isend to peer 1 tag 3"
  Tensor user;      // the caller's tensor
  Tensor buffer;    // what NCCL reads or writes (user, or a contiguous copy)
  cuda::OwnedEvent ready{cudaEventDisableTiming};  // after the caller's earlier work
  std::shared_ptr<cuda::OwnedEvent> done;          // set when launched: after the transfer
  Clock::time_point started;                       // when launched
  bool finished = false;
};

}  // namespace nccl

struct NcclCommunicator::State {
  State(Device& device, int rank, int size);
  ~State();
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  std::string who(std::string_view op) const {
    return fmt::format("nccl rank {}/{} {}", rank, size, op);
  }
  // Refuses calls on an aborted communicator.
  void check_usable(std::string_view who) const {
    if (!broken.empty())
      H2_THROW(CommError, "{}: the communicator was aborted earlier: {}", who, broken);
  }
  void check_tensor(const Tensor& t, std::string_view who) const {
    H2_CHECK(&t.device() == device,
             "{}: {} is not on {}; the NCCL communicator moves only its own CUDA device's memory",
             who, t.str(), device->str());
  }
  void check_tensors(std::initializer_list<Tensor> tensors, std::string_view who) const {
    for (const Tensor& t : tensors) check_tensor(t, who);
  }
  // The stream to enqueue on: the caller's, else the device's default stream.
  Stream& stream_for(Stream* stream, std::string_view who) const {
    Stream& s = stream != nullptr ? *stream : device->default_stream();
    H2_CHECK(&s.device() == device && s.native_handle() != nullptr,
             "{}: the stream must be a CUDA stream of {}; got a stream of {}", who, device->str(),
             s.device().str());
    return s;
  }
  // Aborts the NCCL communicator (kernels waiting on peers exit) and remembers why.
  void abort(const std::string& reason) {
    if (comm != nullptr) {
      if (ncclResult_t r = ncclCommAbort(comm); r != ncclSuccess && r != ncclInProgress)
        H2_LOG_ERROR("{}: ncclCommAbort failed: {}", who("abort"), nccl::describe_nccl(r));
      comm = nullptr;
    }
    if (broken.empty()) broken = reason;
  }
  [[noreturn]] void fail(std::string_view who, const std::string& why, const char* file, int line) {
    std::string message = fmt::format("{}: {}", who, why);
    abort(message);
    throw CommError(message, ::h2::SourceLine{file, line});
  }
  // Ends a group of sends/receives: a failed call inside may have left peers waiting on the
  // part that was launched, so it aborts the communicator.
  void end_group(nccl::NcclGroup& group, std::string_view who, const char* file, int line) {
    ncclResult_t status = group.end();
    if (group.first_error() != ncclSuccess)
      fail(who,
           fmt::format("{} failed: {}", group.first_call(),
                       nccl::describe_nccl(group.first_error(), comm)),
           file, line);
    complete(status, "ncclGroupEnd()", who, file, line);
  }
  // Completes a call on the non-blocking communicator: ncclInProgress is polled to its end.
  void complete(ncclResult_t status, const char* call, std::string_view who, const char* file,
                int line) {
    if (status == ncclSuccess) return;
    if (status == ncclInProgress) {
      if (std::string err = nccl::poll_ready(comm, comm_timeout()); !err.empty())
        fail(who, fmt::format("{}: {}", call, err), file, line);
      return;
    }
    std::string why = fmt::format("{} failed: {}", call, nccl::describe_nccl(status, comm));
    // A bad argument leaves the communicator usable; anything else may have left peers waiting.
    if (status == ncclInvalidArgument || status == ncclInvalidUsage)
      throw CommError(fmt::format("{}: {}", who, why), ::h2::SourceLine{file, line});
    fail(who, why, file, line);
  }
  // Blocks until `event` completed, NCCL reported an error or H2_COMM_TIMEOUT passed.
  void wait_event(cudaEvent_t event, std::string_view who);
  // Whether `event` completed; throws on NCCL or CUDA errors.
  bool query_event(cudaEvent_t event, std::string_view who);
  // Launches the queued transfers as one NCCL group on the internal stream.
  void flush(std::string_view who);
  // Every operation starts here: usable, and queued transfers started before it (NCCL runs a
  // communicator's operations in issue order, which must agree across ranks).
  void begin(std::string_view who) {
    check_usable(who);
    flush(who);
  }

  Device* device;
  int device_index;
  int rank;
  int size;
  Tensor barrier_buffer;               // one i32, reduced by barrier()
  std::unique_ptr<Stream> p2p_stream;  // send/recv and barrier; known to the device's allocator
  ncclComm_t comm = nullptr;
  std::string broken;  // why the communicator was aborted; "" while usable
  std::vector<std::shared_ptr<nccl::P2pOp>> queued;
};

// What every collective does around its one NCCL call: the stream it runs on (the caller's, else
// the device's default), the device made current, queued transfers started (NCCL runs a
// communicator's operations in issue order, which must agree across ranks), and the contiguous
// buffers NCCL reads and writes; finish() copies a temporary output back into the caller's
// non-contiguous tensor. The op's own argument checks and the tensors' device come first.
class Call {
 public:
  Call(NcclCommunicator::State& state, std::string who, Stream* stream)
      : state_(state),
        who_(std::move(who)),
        stream_(state.stream_for(stream, who_)),
        guard_(state.device_index) {
    state.begin(who_);
  }
  // din: `in` made contiguous; dout: `out` itself where NCCL can write it (`in` when in place).
  void buffers(const Tensor& out, const Tensor& in) {
    out_ = out;
    din = in.contiguous(&stream_);
    dout = same_view(out, in) ? din : nccl::dense_output(out);
  }
  // The output only (broadcast on a non-root rank reads no input).
  void output(const Tensor& out) {
    out_ = out;
    dout = nccl::dense_output(out);
  }
  void finish() { nccl::write_back(out_, dout, stream_); }
  const std::string& who() const { return who_; }
  Stream& stream() { return stream_; }
  cudaStream_t raw() { return nccl::raw_stream(stream_); }

  Tensor din, dout;

 private:
  NcclCommunicator::State& state_;
  std::string who_;
  Stream& stream_;
  cuda::DeviceGuard guard_;
  Tensor out_;
};

#define H2_NCCL_ASYNC(state, expr, who) (state).complete((expr), #expr, (who), __FILE__, __LINE__)
#define H2_NCCL_IN_GROUP(group, expr) (group).add((expr), #expr)
#define H2_NCCL_END_GROUP(state, group, who) (state).end_group((group), (who), __FILE__, __LINE__)

}  // namespace h2::comm
