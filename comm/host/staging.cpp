// Host staging of tensors a transport cannot reach directly.
#include "comm/host/staging.h"

#include "core/runtime.h"

namespace h2::comm {

HostView::HostView(const Tensor& tensor, const Transport& transport, Access access, Stream* stream)
    : original_(tensor), access_(access), stream_(stream) {
  Device& device = tensor.device();
  // Work enqueued before the collective must be done before the transport reads the memory.
  (stream != nullptr ? *stream : device.default_stream()).synchronize();
  if (transport.reaches(device) && tensor.is_contiguous()) {
    view_ = tensor;
    return;
  }
  staged_ = true;
  view_ = Tensor::empty(tensor.shape(), tensor.dtype(), device.runtime().cpu());
  if (access & read) view_.copy_from(tensor, stream);
}

void HostView::finish() {
  if (staged_ && (access_ & write)) original_.copy_from(view_, stream_);
}

}  // namespace h2::comm
