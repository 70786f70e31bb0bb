// Dispatch: device and stream checks, contiguity, fallback to the CPU and autocompare.
// One template serves every op; the per-op wrappers are generated from core/ops.def.
#include "core/ops.h"

#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/runtime.h"
#include "core/tensor_host.h"
#include "core/tolerance.h"

namespace h2::ops {
namespace {

bool writes(TensorRole role) {
  return role != TensorRole::in;
}

template <class Args>
Device& common_device(Op op, Args& args) {
  Device* device = nullptr;
  const char* first = nullptr;
  for (const TensorSlot& slot : args.slots()) {
    if (!slot.tensor->defined()) continue;
    if (device == nullptr) {
      device = &slot.tensor->device();
      first = slot.name;
    } else {
      H2_CHECK(&slot.tensor->device() == device, "{}: '{}' is on {} but '{}' is on {}", op_name(op),
               slot.name, slot.tensor->device().str(), first, device->str());
    }
  }
  H2_CHECK(device != nullptr, "{}: no tensor arguments are defined", op_name(op));
  return *device;
}

// Replaces every non-contiguous tensor by a contiguous one. Returns the (view, temporary) pairs
// of outputs that must be copied back after the kernel ran.
template <class Args>
std::vector<std::pair<Tensor, Tensor>> make_contiguous(Args& args) {
  std::vector<std::pair<Tensor, Tensor>> write_back;
  for (const TensorSlot& slot : args.slots()) {
    Tensor& t = *slot.tensor;
    if (!t.defined() || t.is_contiguous()) continue;
    Tensor dense = t.contiguous();  // copies current values: inout slots need them
    if (writes(slot.role)) write_back.emplace_back(t, dense);
    t = dense;
  }
  return write_back;
}

// Copies of every tensor on the CPU device (contiguous, same dtype).
template <class Args>
Args to_cpu(Args args, Device& cpu) {
  for (const TensorSlot& slot : args.slots())
    if (slot.tensor->defined()) *slot.tensor = slot.tensor->to(cpu);
  return args;
}

template <class Args>
void check_against_cpu(Op op, Args& device_args, Args& cpu_args, Runtime& runtime) {
  auto device_slots = device_args.slots();
  auto cpu_slots = cpu_args.slots();
  for (size_t i = 0; i < device_slots.size(); ++i) {
    const Tensor& got = *device_slots[i].tensor;
    if (!writes(device_slots[i].role) || !got.defined() || !is_floating(got.dtype())) continue;
    Tolerance tol = default_tolerance(got.dtype());
    if (runtime.policy().check_rtol > 0) tol.rtol = runtime.policy().check_rtol;
    Comparison c = compare(tensor_to_floats(got), tensor_to_floats(*cpu_slots[i].tensor), tol);
    if (!c.ok)
      H2_LOG_WARN("H2_CHECK_OPS: {} output '{}' {} on {} differs from cpu: {}", op_name(op),
                  device_slots[i].name, got.shape().str(), got.device().str(), c.str());
    else
      H2_LOG_DEBUG("H2_CHECK_OPS: {} output '{}' on {} matches cpu: {}", op_name(op),
                   device_slots[i].name, got.device().str(), c.str());
  }
}

template <class Args>
void run_kernel(Op op, KernelFn<Args> KernelTable::*slot, const Args& requested, Stream* stream) {
  Args args = requested;
  Device& device = common_device(op, args);
  Stream& s = stream != nullptr ? *stream : device.default_stream();
  H2_CHECK(&s.device() == &device, "{}: stream of {} used for tensors on {}", op_name(op),
           s.device().str(), device.str());
  Runtime& runtime = device.runtime();
  Device& cpu = runtime.cpu();
  DType dtype = args.key_dtype();
  bool mechanism = op == Op::copy || op == Op::fill;

  if (&device != &cpu && !mechanism && runtime.policy().falls_back(op)) {
    H2_CHECK(cpu.supports(op, dtype), "{} falls back to cpu, which lacks it for {}", op_name(op),
             dtype_name(dtype));
    if (runtime.first_time(fmt::format("fallback {} {}", op_name(op), device.str())))
      H2_LOG_WARN("H2_FALLBACK_OPS: running {} for {} on cpu with copies", op_name(op),
                  device.str());
    Args cpu_args = to_cpu(args, cpu);
    (cpu.kernels().*slot)(cpu_args, cpu.default_stream());
    auto device_slots = args.slots();
    auto cpu_slots = cpu_args.slots();
    for (size_t i = 0; i < device_slots.size(); ++i)
      if (writes(device_slots[i].role) && device_slots[i].tensor->defined())
        device_slots[i].tensor->copy_from(*cpu_slots[i].tensor);
    return;
  }

  if (!device.supports(op, dtype))
    H2_THROW(UnsupportedError,
             "{} is not supported on {} ({}) for dtype {}; H2_FALLBACK_OPS={} runs it on the cpu",
             op_name(op), device.str(), device.props().name, dtype_name(dtype), op_name(op));

  std::vector<std::pair<Tensor, Tensor>> write_back;
  if (op_layout(op) == OpLayout::kContiguous) write_back = make_contiguous(args);

  bool check = &device != &cpu && runtime.policy().checks(op);
  Args cpu_args;
  if (check) cpu_args = to_cpu(args, cpu);

  (device.kernels().*slot)(args, s);

  if (check) {
    (cpu.kernels().*slot)(cpu_args, cpu.default_stream());
    check_against_cpu(op, args, cpu_args, runtime);
  }
  for (auto& [view, dense] : write_back) view.copy_from(dense);
}

}  // namespace

#define H2_OP(name, Args, layout, summary)                  \
  void name(const Args& args, Stream* stream) {             \
    run_kernel(Op::name, &KernelTable::name, args, stream); \
  }
#include "core/ops.def"
#undef H2_OP

}  // namespace h2::ops
