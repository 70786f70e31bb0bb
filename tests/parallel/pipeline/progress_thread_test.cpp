// ProgressThread: the helper polls only between resume() and pause(), never once pause() has
// returned (the compute thread owns the communicators again), many times per resumed stretch; a
// poll that throws stops the polling and the next resume() rethrows it on the caller's thread;
// the destructor joins a helper that is polling or waiting.
#include "parallel/pipeline/progress_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

namespace h2::parallel::pipeline {
namespace {

using namespace std::chrono_literals;

// Waits (up to 10 s: a loaded machine) until `done`.
template <class Done>
bool eventually(const Done& done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

TEST(ProgressThread, PollsOnlyWhileResumed) {
  std::atomic<bool> compute_owns{true};
  std::atomic<int> polls{0}, polls_while_owned{0};
  {
    ProgressThread helper(50us, [&] {
      if (compute_owns) ++polls_while_owned;
      ++polls;
    });
    std::this_thread::sleep_for(5ms);
    EXPECT_EQ(polls, 0) << "polled before the first resume()";
    for (int stretch = 0; stretch < 3; ++stretch) {
      const int before = polls;
      compute_owns = false;
      helper.resume();
      ASSERT_TRUE(eventually([&] { return polls >= before + 3; })) << "no polls while resumed";
      helper.pause();
      compute_owns = true;
      const int after = polls;
      std::this_thread::sleep_for(5ms);
      EXPECT_EQ(polls, after) << "polled after pause() returned";
    }
    EXPECT_EQ(helper.polls(), polls);
    compute_owns = false;
    helper.resume();  // destroyed while polling: the destructor stops and joins it
  }
  EXPECT_EQ(polls_while_owned, 0);
}

TEST(ProgressThread, AFailedPollIsRethrownByTheNextResume) {
  std::atomic<int> polls{0};
  ProgressThread helper(50us, [&] {
    if (++polls == 2) throw std::runtime_error("peer 3 failed");
  });
  helper.resume();
  ASSERT_TRUE(eventually([&] { return polls >= 2; }));
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(polls, 2) << "kept polling after a failure";
  helper.pause();
  try {
    helper.resume();
    FAIL() << "resume() did not rethrow the failed poll";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "peer 3 failed");
  }
  helper.resume();  // rethrown once: polling goes on
  ASSERT_TRUE(eventually([&] { return polls >= 3; }));
  helper.pause();
}

}  // namespace
}  // namespace h2::parallel::pipeline
