// Point-to-point transfers of the NCCL communicator: queued at isend/irecv, launched together
// as one NCCL group at the first test()/wait() or the next collective (see nccl_communicator.h),
// each request holding the communicator's state so that it may outlive the communicator.
#include <fmt/format.h>

#include "comm/collective_checks.h"
#include "comm/vendors/nccl/nccl_state.h"
#include "core/error.h"
#include "core/log.h"

namespace h2::comm {
namespace {

using nccl::Clock;
using nccl::P2pOp;
using nccl::timeout_text;

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
    cuda::DeviceGuard guard(state_->device_index);
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
    cuda::DeviceGuard guard(state_->device_index);
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
    if (!op_->send) nccl::write_back(op_->user, op_->buffer, state_->device->default_stream());
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
  cuda::DeviceGuard guard(s.device_index);
  Stream& stream = s.device->default_stream();
  auto op = std::make_shared<P2pOp>();
  op->send = send;
  op->peer = peer;
  op->tag = tag;
  op->who = std::move(who);
  op->user = tensor;
  op->buffer = send ? tensor.contiguous(&stream) : nccl::dense_output(tensor);
  op->ready.record(nccl::raw_stream(stream));
  s.queued.push_back(op);
  return std::make_unique<NcclRequest>(state, std::move(op));
}

}  // namespace

std::unique_ptr<Request> NcclCommunicator::isend(const Tensor& tensor, int peer, int tag) {
  return post(state_, true, tensor, peer, tag);
}

std::unique_ptr<Request> NcclCommunicator::irecv(const Tensor& tensor, int peer, int tag) {
  return post(state_, false, tensor, peer, tag);
}

}  // namespace h2::comm
