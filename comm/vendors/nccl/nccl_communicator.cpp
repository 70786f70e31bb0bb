// NcclCommunicator: a non-blocking NCCL communicator whose every wait is bounded by
// H2_COMM_TIMEOUT (see nccl_communicator.h). Joining, splitting and the collectives: each checks
// its arguments, then lets a Call (nccl_state.h) prepare the stream, device and buffers around its
// one NCCL call. Point-to-point transfers are in nccl_requests.cpp, the shared state in
// nccl_state.cpp.
#include "comm/vendors/nccl/nccl_communicator.h"

#include <fmt/format.h>

#include <cstring>

#include "comm/collective_checks.h"
#include "comm/vendors/nccl/nccl_state.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::comm {

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
  cuda::DeviceGuard guard(device.id().index);

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
  nccl::OwnedComm comm(raw);
  if (r != ncclSuccess && r != ncclInProgress)
    H2_THROW(CommError, "{}: ncclCommInitRankConfig failed: {}", who, nccl::describe_nccl(r, raw));
  if (std::string err = nccl::poll_ready(comm.get(), comm_timeout()); !err.empty())
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
  cuda::DeviceGuard guard(s.device_index);
  s.begin(who);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t raw = nullptr;
  ncclResult_t r =
      ncclCommSplit(s.comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &raw, &config);
  nccl::OwnedComm child(raw);
  s.complete(r, "ncclCommSplit", who, __FILE__, __LINE__);
  if (child.get() == nullptr) return nullptr;
  if (std::string err = nccl::poll_ready(child.get(), comm_timeout()); !err.empty())
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
  s.check_tensors({out, in}, who);
  const ncclDataType_t type = nccl::nccl_reduce_type(in.dtype(), who);
  Call call(s, std::move(who), stream);
  if (in.numel() == 0) return;
  call.buffers(out, in);
  H2_NCCL_ASYNC(s,
                ncclAllReduce(call.din.data(), call.dout.data(), size_t(in.numel()), type,
                              nccl::nccl_op(op), s.comm, call.raw()),
                call.who());
  call.finish();
}

void NcclCommunicator::reduce_scatter(const Tensor& out, const Tensor& in, ReduceOp op,
                                      Stream* stream) {
  State& s = *state_;
  std::string who = s.who("reduce_scatter");
  check_reduce_scatter(out, in, op, s.rank, s.size, who);
  s.check_tensors({out, in}, who);
  const ncclDataType_t type = nccl::nccl_reduce_type(in.dtype(), who);
  Call call(s, std::move(who), stream);
  if (out.numel() == 0) return;
  call.buffers(out, in);
  H2_NCCL_ASYNC(s,
                ncclReduceScatter(call.din.data(), call.dout.data(), size_t(out.numel()), type,
                                  nccl::nccl_op(op), s.comm, call.raw()),
                call.who());
  call.finish();
}

void NcclCommunicator::all_gather(const Tensor& out, const Tensor& in, Stream* stream) {
  State& s = *state_;
  std::string who = s.who("all_gather");
  check_all_gather(out, in, s.rank, s.size, who);
  s.check_tensors({out, in}, who);
  Call call(s, std::move(who), stream);
  if (in.numel() == 0) return;
  call.buffers(out, in);
  H2_NCCL_ASYNC(s,
                ncclAllGather(call.din.data(), call.dout.data(), size_t(call.din.nbytes()),
                              ncclUint8, s.comm, call.raw()),
                call.who());
  call.finish();
}

void NcclCommunicator::broadcast(const Tensor& out, const Tensor& in, int root, Stream* stream) {
  State& s = *state_;
  std::string who = s.who(fmt::format("broadcast from root {}", root));
  check_broadcast(out, in, root, s.rank, s.size, who);
  const bool is_root = s.rank == root;
  s.check_tensors({out, is_root ? in : out}, who);
  Call call(s, std::move(who), stream);
  if (out.numel() == 0) return;
  if (is_root)
    call.buffers(out, in);
  else
    call.output(out);
  H2_NCCL_ASYNC(s,
                ncclBroadcast(is_root ? call.din.data() : call.dout.data(), call.dout.data(),
                              size_t(call.dout.nbytes()), ncclUint8, root, s.comm, call.raw()),
                call.who());
  call.finish();
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
  s.check_tensors({out, in}, who);
  Call call(s, std::move(who), stream);
  const bool in_place = same_view(out, in);
  if (in_place && s.size == 1) return;  // block 0 goes to itself
  Tensor din = in.contiguous(&call.stream());
  // Sends and receives of one group run concurrently: in place needs its own copy of the input.
  if (in_place && din.data() == in.data() && in.numel() > 0) {
    Tensor copy = Tensor::empty(in.shape(), in.dtype(), in.device());
    H2_CUDA_CHECK(cudaMemcpyAsync(copy.data(), din.data(), size_t(din.nbytes()),
                                  cudaMemcpyDeviceToDevice, call.raw()));
    din = copy;
  }
  call.output(out);
  {
    nccl::NcclGroup group;
    int64_t send_offset = 0, recv_offset = 0;
    auto* send_base = static_cast<char*>(din.data());
    auto* recv_base = static_cast<char*>(call.dout.data());
    for (int peer = 0; peer < s.size; ++peer) {
      const size_t send_bytes = size_t(dtype_storage_bytes(in.dtype(), send_counts[peer]));
      const size_t recv_bytes = size_t(dtype_storage_bytes(in.dtype(), recv_counts[peer]));
      char* send_ptr = send_base + dtype_storage_bytes(in.dtype(), send_offset);
      char* recv_ptr = recv_base + dtype_storage_bytes(in.dtype(), recv_offset);
      if (send_bytes > 0)
        H2_NCCL_IN_GROUP(group,
                         ncclSend(send_ptr, send_bytes, ncclUint8, peer, s.comm, call.raw()));
      if (recv_bytes > 0)
        H2_NCCL_IN_GROUP(group,
                         ncclRecv(recv_ptr, recv_bytes, ncclUint8, peer, s.comm, call.raw()));
      send_offset += send_counts[peer];
      recv_offset += recv_counts[peer];
    }
    H2_NCCL_END_GROUP(s, group, call.who());
  }
  call.finish();
}

void NcclCommunicator::barrier() {
  State& s = *state_;
  const std::string who = s.who("barrier");
  cuda::DeviceGuard guard(s.device_index);
  s.begin(who);
  cudaStream_t stream = nccl::raw_stream(*s.p2p_stream);
  void* buffer = s.barrier_buffer.data();
  H2_NCCL_ASYNC(s, ncclAllReduce(buffer, buffer, 1, ncclInt32, ncclSum, s.comm, stream), who);
  cuda::OwnedEvent done(cudaEventDisableTiming);
  done.record(stream);
  s.wait_event(done.get(), who);
}

}  // namespace h2::comm
