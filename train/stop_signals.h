// Stop requests for a training run: SIGINT (Ctrl-C), SIGTERM (Slurm's preemption and time limit,
// h2run and mpirun passing a stop on) and SIGUSR1 (Slurm's `--signal=USR1@SECONDS` warning).
// The first one is noted and the run stops at the end of the current step, consistently on every
// rank, after writing a checkpoint; a second one ends the process at once (exit 128 + signal):
// what was saved is safe, since checkpoints are written aside and renamed into place. One
// within a second of the first is the same stop delivered twice (Slurm signals the ranks and
// h2run, which passes it on) and changes nothing.
//
// POSIX signal handlers take no context, so the received signal and when it came live in
// process-wide lock-free atomics (stop_signals.cpp): the only global state of the trainer. One
// StopSignals may be live at a time; it restores the previous handlers when destroyed.
#pragma once

#include <csignal>

namespace h2::train {

class StopSignals {
 public:
  // Installs the handlers; throws h2::Error if another StopSignals is live.
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 0, or the first stop signal this process received since construction.
  int received() const;

 private:
  struct sigaction previous_[3];
};

// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
const char* stop_signal_name(int signal);

}  // namespace h2::train
