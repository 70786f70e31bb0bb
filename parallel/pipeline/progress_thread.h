// ProgressThread: a helper thread that drives a rank's communicators while its compute thread
// runs one unit's forward or backward, the alternative to progress at safe points only (between
// units and after actions; docs/performance.md measures the two against each other).
//
// The compute thread owns the communicators except between resume() and pause(): resume() hands
// them to the helper, which calls `poll` (communicator progress: it completes no request and
// touches no tensor), then sleeps `interval`, until pause() takes them back, waiting for a poll
// under way. A poll that throws (a failed peer) stops the polling; the next resume() rethrows it
// on the compute thread (whose own next wait sees the failure too). The destructor stops and
// joins the helper.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace h2::parallel::pipeline {

class ProgressThread {
 public:
  ProgressThread(std::chrono::microseconds interval, std::function<void()> poll);
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  void resume();
  void pause();
  // Polls made so far (for tests and reports).
  long polls() const;

 private:
  void loop();

  const std::chrono::microseconds interval_;
  const std::function<void()> poll_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool running_ = false, stop_ = false;
  long polls_ = 0;
  std::exception_ptr failure_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace h2::parallel::pipeline
