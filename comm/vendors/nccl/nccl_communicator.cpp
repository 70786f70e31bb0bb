// NcclCommunicator: a non-blocking NCCL communicator whose every wait is bounded by
// H2_COMM_TIMEOUT. Shared State (NCCL handle, internal stream, queued point-to-point transfers)
// lives as long as the communicator or any of its requests. Order of setup: internal buffer,
// internal stream, NCCL communicator; teardown releases them in reverse.
#include "comm/vendors/nccl/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "comm/collective_checks.h"
#include "comm/timeouts.h"
#include "comm/vendors/nccl/nccl_check.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Makes a CUDA device current for the guard's lifetime, then restores the previous one.
class CurrentDevice {
 public:
  explicit CurrentDevice(int index) : index_(index) {
    H2_NCCL_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index_) H2_NCCL_CUDA_CHECK(cudaSetDevice(index_));
  }
  ~CurrentDevice() {
    if (previous_ != index_) (void)cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int index_;
  int previous_ = -1;
};

// A timing-free cudaEvent_t on the current device.
class CudaEvent {
 public:
  CudaEvent() { H2_NCCL_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() { (void)cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) { H2_NCCL_CUDA_CHECK(cudaEventRecord(event_, stream)); }

 private:
  cudaEvent_t event_ = nullptr;
};

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

// One queued or running isend/irecv.
struct P2pOp {
  bool send = false;
  int peer = 0;
  int tag = 0;
  std::string who;                  // "nccl rank 0/2 isend to peer 1 tag 3"
  Tensor user;                      // the caller's tensor
  Tensor buffer;                    // what NCCL reads or writes (user, or a contiguous copy)
  CudaEvent ready;                  // after the caller's earlier work on the default stream
  std::shared_ptr<CudaEvent> done;  // set when launched: after the transfer
  Clock::time_point started;        // when launched
  bool finished = false;
};

}  // namespace

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
    throw CommError(::h2::detail::with_location(file, line, message));
  }
  // Ends a group of sends/receives: a failed call inside may have left peers waiting on the
  // part that was launched, so it aborts the communicator.
  void end_group(NcclGroup& group, std::string_view who, const char* file, int line) {
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
      if (std::string err = poll_ready(comm, comm_timeout()); !err.empty())
        fail(who, fmt::format("{}: {}", call, err), file, line);
      return;
    }
    std::string why = fmt::format("{} failed: {}", call, nccl::describe_nccl(status, comm));
    // A bad argument leaves the communicator usable; anything else may have left peers waiting.
    if (status == ncclInvalidArgument || status == ncclInvalidUsage)
      throw CommError(::h2::detail::with_location(file, line, fmt::format("{}: {}", who, why)));
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
  std::vector<std::shared_ptr<P2pOp>> queued;
};

#define H2_NCCL_ASYNC(state, expr, who) (state).complete((expr), #expr, (who), __FILE__, __LINE__)
#define H2_NCCL_IN_GROUP(group, expr) (group).add((expr), #expr)
#define H2_NCCL_END_GROUP(state, group, who) (state).end_group((group), (who), __FILE__, __LINE__)

NcclCommunicator::State::State(Device& dev, int rank_, int size_)
    : device(&dev), device_index(dev.id().index), rank(rank_), size(size_) {
  barrier_buffer = Tensor::empty({1}, DType::i32, dev);
  p2p_stream = dev.create_stream();
  H2_NCCL_CUDA_CHECK(cudaMemsetAsync(barrier_buffer.data(), 0, 4, raw_stream(*p2p_stream)));
}

NcclCommunicator::State::~State() {
  if (comm == nullptr) return;  // never set up, or aborted
  try {
    CurrentDevice guard(device_index);
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
  for (const auto& op : batch) H2_NCCL_CUDA_CHECK(cudaStreamWaitEvent(stream, op->ready.get(), 0));
  auto done = std::make_shared<CudaEvent>();
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

namespace {

// A queued or running isend/irecv; holds the communicator's state, so it may outlive it.
class NcclRequest final : public Request {
 public:
  NcclRequest(std::shared_ptr<NcclCommunicator::State> state, std::shared_ptr<P2pOp> op)
      : state_(std::move(state)), op_(std::move(op)) {}
  ~NcclRequest() override {
    if (op_->finished) return;
    try {
      wait();
    } catch (const std::exception& e) {
      H2_LOG_ERROR("{}: unfinished request destroyed and its wait failed: {}", op_->who, e.what());
    }
  }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;

  bool test() override {
    if (op_->finished) return true;
    CurrentDevice guard(state_->device_index);
    start();
    if (!state_->query_event(op_->done->get(), op_->who)) {
      Millis timeout = comm_timeout();
      if (Clock::now() - op_->started > timeout)
        state_->fail(op_->who, timeout_text(timeout), __FILE__, __LINE__);
      return false;
    }
    finish();
    return true;
  }

  void wait() override {
    if (op_->finished) return;
    CurrentDevice guard(state_->device_index);
    start();
    state_->wait_event(op_->done->get(), op_->who);
    finish();
  }

 private:
  // Launches the queued transfers (this one among them) unless already running.
  void start() {
    if (op_->done) return;
    state_->begin(op_->who);
    H2_CHECK(op_->done != nullptr, "{}: the transfer was never started", op_->who);
  }
  // Copies a staged receive into the caller's tensor and lets go of the buffers.
  void finish() {
    if (!op_->send) write_back(op_->user, op_->buffer, state_->device->default_stream());
    op_->finished = true;
    op_->buffer = Tensor();
    op_->user = Tensor();
  }

  std::shared_ptr<NcclCommunicator::State> state_;
  std::shared_ptr<P2pOp> op_;
};

std::unique_ptr<Request> post(const std::shared_ptr<NcclCommunicator::State>& state, bool send,
                              const Tensor& tensor, int peer, int tag) {
  NcclCommunicator::State& s = *state;
  std::string who = s.who(fmt::format("{} {} peer {} tag {}", send ? "isend to" : "irecv from",
                                      tensor.str(), peer, tag));
  check_point_to_point(tensor, peer, tag, s.size, who);
  s.check_tensor(tensor, who);
  s.check_usable(who);
  CurrentDevice guard(s.device_index);
  Stream& stream = s.device->default_stream();
  auto op = std::make_shared<P2pOp>();
  op->send = send;
  op->peer = peer;
  op->tag = tag;
  op->who = std::move(who);
  op->user = tensor;
  op->buffer = send ? tensor.contiguous(&stream) : dense_output(tensor);
  op->ready.record(raw_stream(stream));
  s.queued.push_back(op);
  return std::make_unique<NcclRequest>(state, std::move(op));
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::shared_ptr<State> state) : state_(std::move(state)) {}

NcclCommunicator::~NcclCommunicator() = default;

std::unique_ptr<NcclCommunicator> NcclCommunicator::create(Store& store,
                                                           const std::string& key_prefix, int rank,
                                                           int size, Device& device) {
  H2_CHECK(size >= 1 && rank >= 0 && rank < size, "NCCL communicator: rank {} of size {}", rank,
           size);
  H2_CHECK(device.id().backend == "cuda", "NCCL communicator: {} is not a CUDA device",
           device.str());
  std::string who = fmt::format("nccl rank {}/{} init on {}", rank, size, device.str());
  std::string key = key_prefix + "/nccl_id";
  CurrentDevice guard(device.id().index);

  ncclUniqueId id;
  if (rank == 0) {
    H2_NCCL_CHECK(ncclGetUniqueId(&id));
    store.set(key, std::string(id.internal, sizeof(id.internal)));
  } else {
    std::string bytes;
    try {
      bytes = store.get(key, comm_timeout());
    } catch (const CommError& e) {
      H2_THROW(CommError, "{}: waiting for rank 0's NCCL id: {}", who, e.what());
    }
    if (bytes.size() != sizeof(id.internal))
      H2_THROW(CommError, "{}: store key {} holds {} bytes, not an NCCL unique id ({} bytes)", who,
               key, bytes.size(), sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }

  auto state = std::make_shared<State>(device, rank, size);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t raw = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&raw, size, id, rank, &config);
  OwnedComm comm(raw);
  if (r != ncclSuccess && r != ncclInProgress)
    H2_THROW(CommError, "{}: ncclCommInitRankConfig failed: {}", who, nccl::describe_nccl(r, raw));
  if (std::string err = poll_ready(comm.get(), comm_timeout()); !err.empty())
    H2_THROW(CommError, "{}: {}", who, err);
  state->comm = comm.release();
  H2_LOG_DEBUG("{}: ready", who);
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(state)));
}

int NcclCommunicator::rank() const {
  return state_->rank;
}
int NcclCommunicator::size() const {
  return state_->size;
}

bool NcclCommunicator::can_connect(const Device& device) const {
  return device.id().backend == "cuda";
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key) {
  State& s = *state_;
  std::string who = s.who(fmt::format("split(color {}, key {})", color, key));
  CurrentDevice guard(s.device_index);
  s.begin(who);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t raw = nullptr;
  ncclResult_t r =
      ncclCommSplit(s.comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &raw, &config);
  OwnedComm child(raw);
  s.complete(r, "ncclCommSplit", who, __FILE__, __LINE__);
  if (child.get() == nullptr) return nullptr;
  if (std::string err = poll_ready(child.get(), comm_timeout()); !err.empty())
    H2_THROW(CommError, "{}: the new communicator: {}", who, err);
  int child_rank = 0, child_size = 0;
  H2_NCCL_CHECK(ncclCommUserRank(child.get(), &child_rank));
  H2_NCCL_CHECK(ncclCommCount(child.get(), &child_size));
  auto state = std::make_shared<State>(*s.device, child_rank, child_size);
  state->comm = child.release();
  return std::unique_ptr<Communicator>(new NcclCommunicator(std::move(state)));
}

void NcclCommunicator::all_reduce(const Tensor& out, const Tensor& in, ReduceOp op,
                                  Stream* stream) {
  State& s = *state_;
  std::string who = s.who("all_reduce");
  check_all_reduce(out, in, op, who);
  s.check_tensor(out, who);
  s.check_tensor(in, who);
  ncclDataType_t type = nccl_reduce_type(in.dtype(), who);
  Stream& st = s.stream_for(stream, who);
  CurrentDevice guard(s.device_index);
  s.begin(who);
  if (in.numel() == 0) return;
  Tensor din = in.contiguous(&st);
  Tensor dout = same_view(out, in) ? din : dense_output(out);
  H2_NCCL_ASYNC(s,
                ncclAllReduce(din.data(), dout.data(), size_t(in.numel()), type, nccl_op(op),
                              s.comm, raw_stream(st)),
                who);
  write_back(out, dout, st);
}

void NcclCommunicator::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                      Stream* stream) {
  State& s = *state_;
  std::string who = s.who("reduce_scatter");
  check_reduce_scatter(out, in, op, s.rank, s.size, who);
  s.check_tensor(out, who);
  s.check_tensor(in, who);
  ncclDataType_t type = nccl_reduce_type(in.dtype(), who);
  Stream& st = s.stream_for(stream, who);
  CurrentDevice guard(s.device_index);
  s.begin(who);
  if (out.numel() == 0) return;
  Tensor din = in.contiguous(&st);
  Tensor dout = same_view(out, in) ? din : dense_output(out);
  H2_NCCL_ASYNC(s,
                ncclReduceScatter(din.data(), dout.data(), size_t(out.numel()), type, nccl_op(op),
                                  s.comm, raw_stream(st)),
                who);
  write_back(out, dout, st);
}

void NcclCommunicator::all_gather(const Tensor& out, const Tensor& in, Stream* stream) {
  State& s = *state_;
  std::string who = s.who("all_gather");
  check_all_gather(out, in, s.rank, s.size, who);
  s.check_tensor(out, who);
  s.check_tensor(in, who);
  Stream& st = s.stream_for(stream, who);
  CurrentDevice guard(s.device_index);
  s.begin(who);
  if (in.numel() == 0) return;
  Tensor din = in.contiguous(&st);
  Tensor dout = same_view(out, in) ? din : dense_output(out);
  H2_NCCL_ASYNC(
      s, ncclAllGather(din.data(), dout.data(), bytes_of(din), ncclUint8, s.comm, raw_stream(st)),
      who);
  write_back(out, dout, st);
}

void NcclCommunicator::broadcast(const Tensor& out, const Tensor& in, int root, Stream* stream) {
  State& s = *state_;
  std::string who = s.who(fmt::format("broadcast from root {}", root));
  check_broadcast(out, in, root, s.rank, s.size, who);
  s.check_tensor(out, who);
  bool is_root = s.rank == root;
  if (is_root) s.check_tensor(in, who);
  Stream& st = s.stream_for(stream, who);
  CurrentDevice guard(s.device_index);
  s.begin(who);
  if (out.numel() == 0) return;
  Tensor din = is_root ? in.contiguous(&st) : Tensor();
  Tensor dout = is_root && same_view(out, in) ? din : dense_output(out);
  H2_NCCL_ASYNC(s,
                ncclBroadcast(is_root ? din.data() : dout.data(), dout.data(), bytes_of(dout),
                              ncclUint8, root, s.comm, raw_stream(st)),
                who);
  write_back(out, dout, st);
}

void NcclCommunicator::all_to_all(const Tensor& out, const Tensor& in, Stream* stream) {
  State& s = *state_;
  std::string who = s.who("all_to_all");
  check_all_to_all(out, in, s.size, who);
  std::vector<int64_t> counts(size_t(s.size), in.numel() / s.size);
  all_to_all_v(out, counts, in, counts, stream);
}

void NcclCommunicator::all_to_all_v(const Tensor& out, std::span<const int64_t> recv_counts,
                                    const Tensor& in, std::span<const int64_t> send_counts,
                                    Stream* stream) {
  State& s = *state_;
  std::string who = s.who("all_to_all_v");
  check_all_to_all_v(out, recv_counts, in, send_counts, s.size, who);
  s.check_tensor(out, who);
  s.check_tensor(in, who);
  Stream& st = s.stream_for(stream, who);
  cudaStream_t cs = raw_stream(st);
  CurrentDevice guard(s.device_index);
  s.begin(who);
  bool in_place = same_view(out, in);
  if (in_place && s.size == 1) return;  // block 0 goes to itself
  Tensor din = in.contiguous(&st);
  // Sends and receives of one group run concurrently: in place needs its own copy of the input.
  if (in_place && din.data() == in.data() && in.numel() > 0) {
    Tensor copy = Tensor::empty(in.shape(), in.dtype(), in.device());
    H2_NCCL_CUDA_CHECK(
        cudaMemcpyAsync(copy.data(), din.data(), bytes_of(din), cudaMemcpyDeviceToDevice, cs));
    din = copy;
  }
  Tensor dout = dense_output(out);
  {
    NcclGroup group;
    int64_t send_offset = 0, recv_offset = 0;
    for (int peer = 0; peer < s.size; ++peer) {
      size_t send_bytes = size_t(dtype_storage_bytes(in.dtype(), send_counts[peer]));
      size_t recv_bytes = size_t(dtype_storage_bytes(in.dtype(), recv_counts[peer]));
      char* send_ptr = byte_ptr(din) + dtype_storage_bytes(in.dtype(), send_offset);
      char* recv_ptr = byte_ptr(dout) + dtype_storage_bytes(in.dtype(), recv_offset);
      if (send_bytes > 0)
        H2_NCCL_IN_GROUP(group, ncclSend(send_ptr, send_bytes, ncclUint8, peer, s.comm, cs));
      if (recv_bytes > 0)
        H2_NCCL_IN_GROUP(group, ncclRecv(recv_ptr, recv_bytes, ncclUint8, peer, s.comm, cs));
      send_offset += send_counts[peer];
      recv_offset += recv_counts[peer];
    }
    H2_NCCL_END_GROUP(s, group, who);
  }
  write_back(out, dout, st);
}

void NcclCommunicator::barrier() {
  State& s = *state_;
  std::string who = s.who("barrier");
  CurrentDevice guard(s.device_index);
  s.begin(who);
  cudaStream_t stream = raw_stream(*s.p2p_stream);
  void* buffer = s.barrier_buffer.data();
  H2_NCCL_ASYNC(s, ncclAllReduce(buffer, buffer, 1, ncclInt32, ncclSum, s.comm, stream), who);
  CudaEvent done;
  done.record(stream);
  s.wait_event(done.get(), who);
}

std::unique_ptr<Request> NcclCommunicator::isend(const Tensor& tensor, int peer, int tag) {
  return post(state_, true, tensor, peer, tag);
}

std::unique_ptr<Request> NcclCommunicator::irecv(const Tensor& tensor, int peer, int tag) {
  return post(state_, false, tensor, peer, tag);
}

}  // namespace h2::comm
