// Mapped host memory for checkpoint snapshots (see host_buffer.h).
#include "train/checkpoint/host_buffer.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace h2::checkpoint {

HostBuffer::HostBuffer(size_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    H2_THROW(Error, "cannot map {:.1f} MiB of host memory for a checkpoint copy: {}",
             double(bytes) / (1 << 20), std::strerror(errno));
  data_ = static_cast<std::byte*>(p);
}

HostBuffer::~HostBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::future<HostBuffer> prepare_host_buffer(size_t bytes) {
  return std::async(std::launch::async, [bytes] {
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);  // below the training threads
    HostBuffer buffer(bytes);
    // A write per page, not MAP_POPULATE: that holds the process's memory-map lock until every
    // page is in, stalling the training threads' own allocations (step 1 took 3x its time).
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    volatile std::byte* p = buffer.data();
    for (size_t at = 0; at < bytes; at += page) p[at] = std::byte{0};
    return buffer;
  });
}

}  // namespace h2::checkpoint
