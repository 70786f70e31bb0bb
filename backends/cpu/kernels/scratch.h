// Temporary kernel memory from the device's own allocator, returned when the buffer goes out of
// scope. On cpu:0 the caching allocator makes this free after the first step; on a virtual chip
// it counts against the chip's memory, as a real device's workspace would.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace h2::cpu {

template <class T>
class ScratchBuffer {
 public:
  ScratchBuffer(Stream& stream, size_t count)
      : allocator_(stream.device().allocator()),
        bytes_(count * sizeof(T)),
        data_(static_cast<T*>(allocator_.allocate(bytes_))) {}
  ~ScratchBuffer() { allocator_.deallocate(data_, bytes_); }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  T* data() const { return data_; }

 private:
  Allocator& allocator_;
  size_t bytes_;
  T* data_;
};

}  // namespace h2::cpu
