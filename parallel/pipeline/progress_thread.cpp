// The progress helper thread (see progress_thread.h).
#include "parallel/pipeline/progress_thread.h"

#include <utility>

namespace h2::parallel::pipeline {

ProgressThread::ProgressThread(std::chrono::microseconds interval, std::function<void()> poll)
    : interval_(interval), poll_(std::move(poll)), thread_([this] { loop(); }) {}

ProgressThread::~ProgressThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ProgressThread::resume() {
  {
    std::lock_guard lock(mutex_);
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    running_ = true;
  }
  wake_.notify_all();
}

void ProgressThread::pause() {
  std::lock_guard lock(mutex_);  // a poll runs under the lock: none is under way past this
  running_ = false;
}

long ProgressThread::polls() const {
  std::lock_guard lock(mutex_);
  return polls_;
}

void ProgressThread::loop() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (!running_) {
      wake_.wait(lock, [this] { return running_ || stop_; });
      continue;
    }
    try {
      poll_();
      ++polls_;
    } catch (...) {
      failure_ = std::current_exception();
      running_ = false;
      continue;
    }
    wake_.wait_for(lock, interval_, [this] { return !running_ || stop_; });
  }
}

}  // namespace h2::parallel::pipeline
