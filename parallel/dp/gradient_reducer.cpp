// Bucketed, overlapped gradient all-reduce (see gradient_reducer.h).
#include "parallel/dp/gradient_reducer.h"

#include <chrono>

#include "core/error.h"

namespace h2::parallel {

GradientReducer::GradientReducer(comm::Communicator& group,
                                 std::vector<std::vector<Tensor>> grads_per_unit,
                                 size_t bucket_bytes, Device& host)
    : group_(group), grads_(std::move(grads_per_unit)), bucket_of_unit_(grads_.size(), -1) {
  // Buckets in backward order: units join the current bucket until it holds bucket_bytes.
  int64_t elements = 0;
  std::vector<size_t> units;
  auto close_bucket = [&] {
    if (elements == 0) {
      units.clear();
      return;
    }
    for (size_t u : units) bucket_of_unit_[u] = int(buckets_.size());
    buckets_.push_back({units, Tensor::empty({elements}, DType::f32, host)});
    units.clear();
    elements = 0;
  };
  for (size_t u = grads_.size(); u-- > 0;) {
    int64_t unit_elements = 0;
    for (const Tensor& g : grads_[u]) {
      H2_CHECK(g.dtype() == DType::f32 && g.is_contiguous(),
               "gradient reduction needs contiguous f32 gradients (got {} {})",
               dtype_name(g.dtype()), g.shape().str());
      unit_elements += g.numel();
    }
    if (unit_elements == 0) continue;  // a unit without parameters (a tied head)
    units.push_back(u);
    elements += unit_elements;
    if (size_t(elements) * sizeof(float) >= bucket_bytes) close_bucket();
  }
  close_bucket();
  reported_.assign(buckets_.size(), 0);
  thread_ = std::thread([this] { communicate(); });
}

GradientReducer::~GradientReducer() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GradientReducer::begin() {
  std::lock_guard lock(mutex_);
  H2_CHECK(queue_.empty(), "GradientReducer::begin while a step is still reducing");
  std::fill(reported_.begin(), reported_.end(), 0);
  completed_ = 0;
  error_ = nullptr;
}

void GradientReducer::unit_done(size_t unit) {
  H2_CHECK(unit < grads_.size(), "unit {} of {}", unit, grads_.size());
  const int b = bucket_of_unit_[unit];
  if (b < 0) return;
  Bucket& bucket = buckets_[size_t(b)];
  if (++reported_[size_t(b)] < bucket.units.size()) return;
  pack(bucket);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(size_t(b));
  }
  wake_.notify_one();
}

void GradientReducer::finish() {
  const auto start = std::chrono::steady_clock::now();
  {
    std::unique_lock lock(mutex_);
    for (size_t b = 0; b < buckets_.size(); ++b)
      H2_CHECK(reported_[b] == buckets_[b].units.size(),
               "bucket {} is missing units at finish() (units reported out of order?)", b);
    done_.wait(lock, [this] { return completed_ == buckets_.size() || error_; });
    if (error_) {
      // The thread stops at the first error; later buckets are dropped with it.
      queue_.clear();
      std::rethrow_exception(error_);
    }
  }
  last_wait_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Bucket& bucket : buckets_) unpack(bucket);
}

void GradientReducer::pack(const Bucket& bucket) {
  int64_t offset = 0;
  for (size_t u : bucket.units)
    for (const Tensor& g : grads_[u]) {
      bucket.buffer.slice(0, offset, offset + g.numel()).copy_from(g.view({g.numel()}));
      offset += g.numel();
    }
}

void GradientReducer::unpack(const Bucket& bucket) {
  int64_t offset = 0;
  for (size_t u : bucket.units)
    for (const Tensor& g : grads_[u]) {
      g.view({g.numel()}).copy_from(bucket.buffer.slice(0, offset, offset + g.numel()));
      offset += g.numel();
    }
}

void GradientReducer::communicate() {
  for (;;) {
    size_t b;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || (!queue_.empty() && !error_); });
      if (stop_) return;
      b = queue_.front();
      queue_.pop_front();
    }
    try {
      group_.all_reduce(buckets_[b].buffer, comm::ReduceOp::sum);
      std::lock_guard lock(mutex_);
      ++completed_;
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    done_.notify_all();
  }
}

}  // namespace h2::parallel
