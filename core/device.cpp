// Non-virtual parts of the device interface.
#include "core/device.h"

#include "core/error.h"
#include "core/op_catalogue.h"

namespace h2 {

double DeviceProps::peak(DType t) const {
  auto it = peak_flops.find(t);
  return it == peak_flops.end() ? 0.0 : it->second;
}

bool Device::supports(Op op, DType dtype) const {
  return kernels().dtypes(op).contains(dtype) && props().dtypes.contains(dtype);
}

std::string Device::refusal(Op op, DType key_dtype, const void* args) const {
  if (!supports(op, key_dtype)) return "no kernel for this dtype";
  return kernels().refusal(op, args);
}

Runtime& Device::runtime() const {
  H2_CHECK(runtime_ != nullptr, "device {} is not registered with a Runtime", str());
  return *runtime_;
}

}  // namespace h2
