// The rendezvous key-value store through which the ranks of a job find each other: UCX worker
// addresses, NCCL unique ids and split colours travel through it. Values are byte strings.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace h2::comm {

using Millis = std::chrono::milliseconds;

// A client's view of the store. Every call blocks the calling thread until the server answered
// or `timeout` passed (CommError naming the key, the operation and the timeout). Not thread-safe:
// one thread uses a client at a time.
class Store {
 public:
  virtual ~Store() = default;
  // Sets `key` to `value`, replacing any old value.
  virtual void set(const std::string& key, const std::string& value) = 0;
  // The value of `key`, waiting for another client to set it.
  virtual std::string get(const std::string& key, Millis timeout) = 0;
  // Adds `delta` to the integer stored at `key` (absent: 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Waits until every key exists.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  // Sets `key` to `desired` when its value equals `expected` (an absent key equals ""); returns
  // the value after the call either way.
  virtual std::string compare_set(const std::string& key, const std::string& expected,
                                  const std::string& desired) = 0;
};

}  // namespace h2::comm
