// The kill-at-any-moment check shared by the synchronous and the background checkpoint writers:
// a child process saves ever newer checkpoints of a 16 MiB tensor (numbered(1024, 4096, step)),
// the parent kills it with SIGKILL at varying moments; after each kill the newest complete
// checkpoint must load and hold exactly what was saved at its step.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "tests/train/checkpoint/numbered_tensor.h"
#include "train/checkpoint/checkpoint.h"

namespace h2::checkpoint::test {

// `save_from(step)`: runs in the child, saving steps step, step + 1, ... until killed.
inline void expect_kills_leave_complete_checkpoints(const std::filesystem::path& dir,
                                                    const std::function<void(int64_t)>& save_from) {
  int64_t last_step = 1;
  save_checkpoint(dir.string(), {1, 0, "", 1}, {{"w", numbered(1024, 4096, 1)}}, {}, 2);
  for (int round = 0; round < 6; ++round) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      save_from(last_step + 1);
      std::_Exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200 + 90 * round));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    auto latest = latest_checkpoint(dir.string());
    ASSERT_TRUE(latest.has_value()) << "round " << round << ": no complete checkpoint";
    const int64_t step = read_trainer_state(*latest).step;
    EXPECT_GE(step, last_step) << "round " << round;
    EXPECT_EQ(read_model_tensors(*latest).at("w").bytes, numbered(1024, 4096, float(step)).bytes)
        << "round " << round << ", " << *latest;
    last_step = step;
  }
  EXPECT_GT(last_step, 1) << "the writer never finished a checkpoint; the test proves nothing";
}

}  // namespace h2::checkpoint::test
