// The shared-memory segment of a group on one host (see shared_slots.h).
#include "comm/transports/shm/shared_slots.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "comm/comm_error.h"

namespace h2::comm {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

SharedSlots::SharedSlots(void* base, size_t bytes, int rank, int size)
    : base_(base), bytes_(bytes), rank_(rank), size_(size) {}

SharedSlots::~SharedSlots() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

std::unique_ptr<SharedSlots> SharedSlots::create(Store& store, const std::string& prefix,
                                                 const std::string& group_id, int rank, int size,
                                                 Millis timeout) {
  static_assert(std::atomic_ref<uint64_t>::is_always_lock_free,
                "shared-memory slots need lock-free 64-bit atomics");
  const size_t bytes = sizeof(Slot) * size_t(size);
  const std::string name =
      fmt::format("/h2.{}.{:x}", group_id, std::hash<std::string>{}(prefix)&0xffffffffu);
  const std::string ready_key = prefix + "/shm/ready";
  if (rank == 0) {
    // A name left by a job that died during set-up, with the same process id: not ours to keep.
    shm_unlink(name.c_str());
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
      H2_THROW(CommError, "cannot create shared memory {} for {}: {}", name, prefix, errno_text());
    if (ftruncate(fd, off_t(bytes)) != 0) {
      const std::string why = errno_text();
      close(fd);
      shm_unlink(name.c_str());
      H2_THROW(CommError, "cannot size shared memory {} to {} bytes: {}", name, bytes, why);
    }
    close(fd);  // the mapping below reopens it; ftruncate zero-filled every slot
    store.set(ready_key, name);
  } else if (store.get(ready_key, timeout) != name) {
    H2_THROW(CommError, "shared memory of {}: rank 0 named another segment", prefix);
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0)
    H2_THROW(CommError, "rank {} cannot open shared memory {}: {}", rank, name, errno_text());
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED)
    H2_THROW(CommError, "rank {} cannot map shared memory {}: {}", rank, name, errno_text());
  std::unique_ptr<SharedSlots> slots(new SharedSlots(base, bytes, rank, size));
  store.set(fmt::format("{}/shm/mapped/{}", prefix, rank), "1");
  if (rank == 0) {
    for (int r = 1; r < size; ++r) store.get(fmt::format("{}/shm/mapped/{}", prefix, r), timeout);
    shm_unlink(name.c_str());  // every rank holds its mapping; the name is no longer needed
  }
  return slots;
}

void SharedSlots::enter(uint64_t sequence, Header header, const void* data, size_t bytes) {
  H2_CHECK(bytes <= kDataBytes, "{} bytes do not fit a {}-byte shared slot", bytes, kDataBytes);
  Slot::Page& page = slot(rank_).page[sequence % 2];
  page.signature = header.signature;
  page.count = header.count;
  if (data != nullptr && bytes > 0) std::memcpy(page.data, data, bytes);
  std::atomic_ref<uint64_t>(page.sequence).store(sequence, std::memory_order_release);
}

}  // namespace h2::comm
