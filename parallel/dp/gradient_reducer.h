// Data-parallel gradient reduction overlapped with backward.
//
// The model reports each unit (embedding, blocks, head) as soon as its backward has finished
// and its gradients are final. Gradients are grouped, in backward order, into buckets of about
// `bucket_bytes`; when a bucket's last unit reports, its gradients are copied into the bucket's
// host buffer and a communication thread sums the bucket over the group while the main thread
// goes on with the next units' backward. finish() waits for every bucket and writes the sums
// back into the gradients, so every rank ends the step with identical gradients.
//
// The communication thread is the only user of the communicator between begin() and finish();
// the caller must not use it in that window. A communication error is rethrown by finish().
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/communicator.h"
#include "core/tensor.h"

namespace h2::parallel {

class GradientReducer {
 public:
  // grads_per_unit[u]: unit u's gradient tensors (f32, contiguous, any device), units in
  // forward order; `host` is the device of the bucket buffers (the CPU).
  GradientReducer(comm::Communicator& group, std::vector<std::vector<Tensor>> grads_per_unit,
                  size_t bucket_bytes, Device& host);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Starts a step's reduction: units will report in backward order.
  void begin();
  // Unit `unit` finished its backward (main thread).
  void unit_done(size_t unit);
  // Waits for every bucket, then copies the sums into the gradients.
  void finish();

  size_t num_buckets() const { return buckets_.size(); }
  // Seconds finish() waited for communication in the last step (what overlap did not hide).
  double last_wait_seconds() const { return last_wait_s_; }

 private:
  struct Bucket {
    std::vector<size_t> units;  // backward order; the last one completes the bucket
    Tensor buffer;              // f32 on `host`, every gradient of the units, flattened
  };
  void pack(const Bucket& bucket);
  void unpack(const Bucket& bucket);
  void communicate();  // the communication thread's loop

  comm::Communicator& group_;
  std::vector<std::vector<Tensor>> grads_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_unit_;
  std::vector<size_t> reported_;  // per bucket, units reported this step

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<size_t> queue_;
  size_t completed_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  double last_wait_s_ = 0;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace h2::parallel
