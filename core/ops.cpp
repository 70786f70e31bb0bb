// Dispatch: device and stream checks, contiguity, fallback to the CPU and autocompare.
// One template serves every op; the per-op wrappers are generated from core/ops.def.
#include "core/ops.h"

#include <fmt/format.h>

#include <type_traits>
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

// Replaces every non-contiguous tensor by a contiguous copy made on `stream`. Returns the
// (view, temporary) pairs of outputs that must be copied back after the kernel ran.
template <class Args>
std::vector<std::pair<Tensor, Tensor>> make_contiguous(Args& args, Stream& stream) {
  std::vector<std::pair<Tensor, Tensor>> write_back;
  for (const TensorSlot& slot : args.slots()) {
    Tensor& t = *slot.tensor;
    if (!t.defined() || t.is_contiguous()) continue;
    // inout slots need the current values; pure outputs only need the space.
    Tensor dense = slot.role == TensorRole::out ? Tensor::empty(t.shape(), t.dtype(), t.device())
                                                : t.contiguous(&stream);
    if (writes(slot.role)) write_back.emplace_back(t, dense);
    t = dense;
  }
  return write_back;
}

// Copies every written slot of `from` into the same slot of `into` (any devices), on `stream`
// where the copy runs on into's device.
template <class Args>
void copy_outputs(Args& into, Args& from, Stream& stream) {
  auto into_slots = into.slots();
  auto from_slots = from.slots();
  for (size_t i = 0; i < into_slots.size(); ++i)
    if (writes(into_slots[i].role) && into_slots[i].tensor->defined())
      into_slots[i].tensor->copy_from(*from_slots[i].tensor, &stream);
}

// Copies of every tensor on the CPU device (contiguous, same dtype). The caller has
// synchronised the stream that produced them.
template <class Args>
Args to_cpu(Args args, Device& cpu) {
  for (const TensorSlot& slot : args.slots())
    if (slot.tensor->defined()) *slot.tensor = slot.tensor->to(cpu);
  return args;
}

// Every tensor's dtype must be one the device stores (the key dtype is also checked against the
// kernel's own list by Device::supports).
template <class Args>
void check_storage_dtypes(Op op, Args& args, const Device& device) {
  for (const TensorSlot& slot : args.slots()) {
    const Tensor& t = *slot.tensor;
    if (t.defined() && !device.props().dtypes.contains(t.dtype()))
      H2_THROW(UnsupportedError, "{}: '{}' has dtype {}, which {} ({}) does not support",
               op_name(op), slot.name, dtype_name(t.dtype()), device.str(), device.props().name);
  }
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
void run_on_cpu(Op op, KernelFn<Args> KernelTable::*slot, Args& args, Device& device, Stream& s) {
  Runtime& runtime = device.runtime();
  Device& cpu = runtime.cpu();
  H2_CHECK(cpu.supports(op, args.key_dtype()), "{} falls back to cpu, which lacks it for {}",
           op_name(op), dtype_name(args.key_dtype()));
  s.synchronize();
  Args cpu_args = to_cpu(args, cpu);
  (cpu.kernels().*slot)(cpu_args, cpu.default_stream());
  copy_outputs(args, cpu_args, s);
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
  bool on_cpu = &device == &cpu;
  // copy and fill never fall back: they are the mechanism fallback itself uses.
  bool can_fall_back = !on_cpu && op != Op::copy && op != Op::fill && cpu.supports(op, dtype);

  if (can_fall_back && runtime.policy().falls_back(op)) {
    if (runtime.first_time(fmt::format("fallback {} {}", op_name(op), device.str())))
      H2_LOG_WARN("H2_FALLBACK_OPS: running {} for {} on cpu with copies", op_name(op),
                  device.str());
    return run_on_cpu(op, slot, args, device, s);
  }

  if (!device.supports(op, dtype))
    H2_THROW(
        UnsupportedError, "{} is not supported on {} ({}) for dtype {}{}", op_name(op),
        device.str(), device.props().name, dtype_name(dtype),
        can_fall_back ? fmt::format("; H2_FALLBACK_OPS={} runs it on the cpu", op_name(op)) : "");
  // A kernel that takes the dtype may still refuse the shapes: the CPU runs the call instead.
  if (const std::string why = device.kernels().refusal(op, &args); !why.empty()) {
    if (!can_fall_back)
      H2_THROW(UnsupportedError, "{} on {} ({}): {}, and the cpu cannot run it for dtype {}",
               op_name(op), device.str(), device.props().name, why, dtype_name(dtype));
    if (runtime.first_time(fmt::format("refused {} {} {}", op_name(op), device.str(), why)))
      H2_LOG_WARN("{} on {} ({}): {}; running it on the cpu with copies", op_name(op), device.str(),
                  device.props().name, why);
    return run_on_cpu(op, slot, args, device, s);
  }
  check_storage_dtypes(op, args, device);

  std::vector<std::pair<Tensor, Tensor>> write_back;
  if (op_layout(op) == OpLayout::kContiguous) write_back = make_contiguous(args, s);

  // copy is how a check reads the device's tensors: checking it would check itself, forever.
  bool check = !on_cpu && op != Op::copy && runtime.policy().checks(op);
  if (check && !cpu.supports(op, dtype)) {
    check = false;
    if (runtime.first_time(fmt::format("uncheckable {} {}", op_name(op), dtype_name(dtype))))
      H2_LOG_WARN("H2_CHECK_OPS: {} for {} is not compared: cpu lacks it", op_name(op),
                  dtype_name(dtype));
  }
  Args cpu_args;
  if (check) {
    s.synchronize();
    cpu_args = to_cpu(args, cpu);
  }

  (device.kernels().*slot)(args, s);

  if (check) {
    s.synchronize();
    (cpu.kernels().*slot)(cpu_args, cpu.default_stream());
    check_against_cpu(op, args, cpu_args, runtime);
  }
  for (auto& [view, dense] : write_back) view.copy_from(dense, &s);
}

}  // namespace

// Every op of the catalogue is declared in core/ops.h with this signature.
#define H2_OP(name, Args, layout, summary)                                       \
  static_assert(std::is_same_v<decltype(&name), void (*)(const Args&, Stream*)>, \
                "core/ops.h must declare void " #name "(const " #Args "&, Stream*)");
#include "core/ops.def"
#undef H2_OP

#define H2_OP(name, Args, layout, summary)                  \
  void name(const Args& args, Stream* stream) {             \
    run_kernel(Op::name, &KernelTable::name, args, stream); \
  }
#include "core/ops.def"
#undef H2_OP

}  // namespace h2::ops
