// HostBuffer: a large block of host memory that is mapped once and kept, for the copy a
// background checkpoint save makes of the training state (async_save.h). On the virtual machines
// here the first touch of fresh pages costs far more than the copy itself (1.9 GB: 2.4 s the
// first time, 0.15 s into pages already touched), so the trainer hands the same buffer from one
// save to the next, and prepares it in the background before the first (prepare_host_buffer).
#pragma once

#include <cstddef>
#include <future>

namespace h2::checkpoint {

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(size_t bytes);  // Error naming the size when the memory is not there
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// A HostBuffer of `bytes` mapped and touched on a thread of its own at low priority, so that the
// first background save finds its pages ready instead of faulting them in inside a training step.
std::future<HostBuffer> prepare_host_buffer(size_t bytes);

}  // namespace h2::checkpoint
