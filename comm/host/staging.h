// HostView: a tensor's elements as a transport can touch them. The tensor itself when the
// transport reaches its memory and it is contiguous; otherwise a contiguous copy in host memory,
// filled from the tensor when the call reads it and copied back by finish() when it writes it.
#pragma once

#include <cstddef>

#include "comm/transports/transport.h"
#include "core/tensor.h"

namespace h2::comm {

class HostView {
 public:
  enum Access { read = 1, write = 2, read_write = 3 };
  HostView(const Tensor& tensor, const Transport& transport, Access access, Stream* stream);
  std::byte* data() const { return static_cast<std::byte*>(view_.data()); }
  size_t bytes() const { return size_t(view_.nbytes()); }
  bool staged() const { return staged_; }
  // Copies a staged result back into the tensor (no-op otherwise).
  void finish();

 private:
  Tensor original_;
  Tensor view_;
  Access access_;
  Stream* stream_;
  bool staged_ = false;
};

}  // namespace h2::comm
