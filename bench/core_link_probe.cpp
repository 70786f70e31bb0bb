// How far apart the machine's first two CPUs are right now: the round trip of one cache line
// between two threads pinned to them (each waits for the other's write, then writes). On the
// 2-vCPU KVM guests of docs/performance.md it is 80-170 ns for minutes and then 350-600 ns for
// minutes, as the host moves the vCPUs between cores that share a last-level cache and cores that
// do not; 2-thread training steps take 17-25% longer in the second state, 1-thread steps and FMA
// throughput do not change. bench/quiet_machine.sh runs this before and after every timed run, so
// that summaries compare runs made in one state.
// Usage: h2_bench_core_link [--round-trips N]   prints "core link round trip: X ns"
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

namespace {

// The first `count` CPUs this process may run on, or fewer if it may run on fewer.
int allowed_cpus(int* cpus, int count) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < count; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus[found++] = cpu;
  return found;
}

void pin_this_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}

// Nanoseconds per round trip: thread A writes odd values when it sees even ones, thread B the
// reverse, so the line crosses between the two CPUs twice per round trip.
double round_trip_ns(int64_t round_trips, const int* cpus) {
  alignas(64) std::atomic<int64_t> line{0};
  auto bounce = [&](int64_t parity) {
    pin_this_thread(cpus[parity]);
    for (int64_t i = parity; i < 2 * round_trips; i += 2) {
      while (line.load(std::memory_order_acquire) != i) {
      }
      line.store(i + 1, std::memory_order_release);
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::thread a(bounce, 0), b(bounce, 1);
  a.join();
  b.join();
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  return took.count() / double(round_trips);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Round trip of a cache line between the first two CPUs (bench/quiet_machine.sh)");
  int64_t round_trips = 100000;
  app.add_option("--round-trips", round_trips, "Round trips timed")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  int cpus[2];
  const int found = allowed_cpus(cpus, 2);
  if (found < 2) {
    fmt::print(stderr, "h2_bench_core_link: this process may run on {} CPU(s); it needs 2\n",
               found);
    return 1;
  }
  fmt::print("core link round trip: {:.0f} ns (CPUs {} and {})\n", round_trip_ns(round_trips, cpus),
             cpus[0], cpus[1]);
  return 0;
}
