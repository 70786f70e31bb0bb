// Dispatch behaviour, with a deliberately faulty test device: unsupported ops fail with an
// error that names the op, device and dtype; H2_FALLBACK_OPS routes them to the CPU; a kernel
// that refuses a shape has that call run on the CPU (warned once); H2_CHECK_OPS
// (autocompare) catches a kernel that computes wrong values; views are handled for kContiguous
// ops; tensors on different devices are rejected.
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/registry.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/tensor_host.h"

namespace h2 {
namespace {

// A host stream with a name, that records the kernels run on it into the device's log, so tests
// can see on which stream dispatch ran each copy and kernel.
class NamedStream final : public Stream {
 public:
  NamedStream(Device& device, std::string name, std::vector<std::string>& log)
      : device_(device), name_(std::move(name)), log_(log) {}
  Device& device() override { return device_; }
  void synchronize() override {}
  void record(const char* kernel) { log_.push_back(fmt::format("{}@{}", kernel, name_)); }

 private:
  Device& device_;
  std::string name_;
  std::vector<std::string>& log_;
};

template <class Args, KernelFn<Args> Kernel>
void recorded(const Args& args, Stream& stream, const char* name) {
  static_cast<NamedStream&>(stream).record(name);
  Kernel(args, stream);
}

void recorded_copy(const CopyArgs& args, Stream& stream) {
  recorded<CopyArgs, &cpu::copy>(args, stream, "copy");
}

// add() that is off by one (the kind of vendor-kernel bug autocompare exists to find), and that
// also adds i32 tensors, which the CPU backend lacks.
void faulty_add(const AddArgs& args, Stream& stream) {
  static_cast<NamedStream&>(stream).record("add");
  if (args.out.dtype() == DType::i32) {
    for (int64_t i = 0; i < args.out.numel(); ++i)
      args.out.data_as<int32_t>()[i] = args.a.data_as<int32_t>()[i] + args.b.data_as<int32_t>()[i];
    return;
  }
  cpu::add(args, stream);
  float* out = args.out.data_as<float>();
  for (int64_t i = 0; i < args.out.numel(); ++i) out[i] += 1.0f;
}

// A "device"-memory chip that runs CPU kernels, except a broken add and no swiglu_fwd.
class FaultyDevice final : public Device {
 public:
  FaultyDevice()
      : allocator_("faulty:0", 0),
        stream_(*this, "default", log),
        kernels_(cpu::cpu_kernel_table()) {
    kernels_.add = &faulty_add;
    kernels_.add_dtypes = {DType::f32, DType::i32};
    // Like a vendor kernel with a size limit (CUDA attention's head dim): larger calls refused.
    kernels_.add_refusal = [](const AddArgs& a) {
      return a.out.numel() > 16 ? "more than 16 elements" : std::string();
    };
    kernels_.copy = &recorded_copy;
    kernels_.swiglu_fwd = nullptr;
    props_.name = "faulty-chip";
    props_.dtypes = {DType::f32, DType::i32, DType::i64};
  }
  DeviceId id() const override { return {"faulty", 0}; }
  const DeviceProps& props() const override { return props_; }
  MemoryKind memory_kind() const override { return MemoryKind::device; }
  Allocator& allocator() override { return allocator_; }
  Stream& default_stream() override { return stream_; }
  std::unique_ptr<Stream> create_stream() override {
    return std::make_unique<NamedStream>(*this, "side", log);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<cpu::HostEvent>(); }
  void copy_bytes(void* dst, bool, const void* src, bool, size_t bytes, Stream&) override {
    std::memmove(dst, src, bytes);
  }
  const KernelTable& kernels() const override { return kernels_; }

  std::vector<std::string> log;  // "kernel@stream" per kernel run

 private:
  DeviceProps props_;
  cpu::CachingHostAllocator allocator_;
  NamedStream stream_;
  KernelTable kernels_;
};

class FaultyBackend final : public Backend {
 public:
  std::string name() const override { return "faulty"; }
  int device_count() const override { return 1; }
  Device& device(int) override { return device_; }

 private:
  FaultyDevice device_;
};

class DispatchTest : public ::testing::Test {
 protected:
  DispatchTest() {
    std::vector<std::unique_ptr<Backend>> backends;
    backends.push_back(std::make_unique<cpu::CpuBackend>(cpu::CpuOptions{}));
    backends.push_back(std::make_unique<FaultyBackend>());
    runtime = std::make_unique<Runtime>(std::move(backends), DispatchPolicy{});
    sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
    spdlog::default_logger()->sinks().push_back(sink);
  }
  ~DispatchTest() override { spdlog::default_logger()->sinks().pop_back(); }

  std::string logged() {
    std::string all;
    for (const std::string& line : sink->last_formatted()) all += line;
    return all;
  }
  Tensor on(Device& device, std::vector<float> values, const Shape& shape) {
    return tensor_from_floats(values, shape, DType::f32, device);
  }

  std::unique_ptr<Runtime> runtime;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink;
  Device& faulty() { return runtime->device("faulty:0"); }
  std::vector<std::string>& kernel_log() { return static_cast<FaultyDevice&>(faulty()).log; }
};

TEST_F(DispatchTest, UnsupportedOpNamesOpDeviceAndDtype) {
  Tensor g = on(faulty(), {1, 2}, {2}), u = on(faulty(), {3, 4}, {2});
  Tensor out = Tensor::empty({2}, DType::f32, faulty());
  try {
    ops::swiglu_fwd({.out = out, .gate = g, .up = u});
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("swiglu_fwd is not supported on faulty:0 (faulty-chip) for dtype f32"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("H2_FALLBACK_OPS=swiglu_fwd"), std::string::npos) << msg;
  }
  EXPECT_FALSE(faulty().supports(Op::swiglu_fwd, DType::f32));
  EXPECT_FALSE(faulty().supports(Op::add, DType::bf16));  // the chip lacks bf16 storage
  EXPECT_TRUE(faulty().supports(Op::add, DType::f32));
}

TEST_F(DispatchTest, FallbackRunsOnCpuWithOneWarning) {
  runtime->policy().fallback[size_t(Op::swiglu_fwd)] = true;
  Tensor g = on(faulty(), {0.5f, -1.0f}, {2}), u = on(faulty(), {2.0f, 3.0f}, {2});
  Tensor out = Tensor::empty({2}, DType::f32, faulty());
  for (int i = 0; i < 3; ++i) ops::swiglu_fwd({.out = out, .gate = g, .up = u});
  auto got = tensor_to_floats(out);
  auto silu = [](double x) { return x / (1 + std::exp(-x)); };
  EXPECT_NEAR(got[0], silu(0.5) * 2.0, 1e-6);
  EXPECT_NEAR(got[1], silu(-1.0) * 3.0, 1e-6);
  std::string log = logged();
  EXPECT_NE(log.find("H2_FALLBACK_OPS: running swiglu_fwd for faulty:0 on cpu"), std::string::npos);
  EXPECT_EQ(log.find("H2_FALLBACK_OPS"), log.rfind("H2_FALLBACK_OPS")) << "warned more than once";
}

TEST_F(DispatchTest, AutocompareReportsAFaultyKernel) {
  runtime->policy().check[size_t(Op::add)] = true;
  Tensor a = on(faulty(), {1, 2, 3}, {3}), b = on(faulty(), {10, 20, 30}, {3});
  Tensor out = Tensor::empty({3}, DType::f32, faulty());
  ops::add({.out = out, .a = a, .b = b});
  EXPECT_EQ(tensor_to_floats(out), (std::vector<float>{12, 23, 34}));  // observes, never fixes
  std::string log = logged();
  EXPECT_NE(
      log.find("H2_CHECK_OPS: add output 'out' (3) on faulty:0 differs from cpu: 3 mismatches"),
      std::string::npos)
      << log;
}

TEST_F(DispatchTest, FallbackFixesTheFaultyKernel) {
  runtime->policy().fallback[size_t(Op::add)] = true;
  Tensor a = on(faulty(), {1, 2, 3}, {3}), b = on(faulty(), {10, 20, 30}, {3});
  Tensor out = Tensor::empty({3}, DType::f32, faulty());
  ops::add({.out = out, .a = a, .b = b});
  EXPECT_EQ(tensor_to_floats(out), (std::vector<float>{11, 22, 33}));
}

TEST_F(DispatchTest, NonContiguousOutputIsWrittenBack) {
  Device& cpu = runtime->cpu();
  Tensor a = on(cpu, {1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor base = Tensor::zeros({3, 2}, DType::f32, cpu);
  Tensor out = base.transpose(0, 1);  // (2, 3) view with strides (1, 2)
  ops::add({.out = out,
            .a = a,
            .b = a.transpose(0, 1).contiguous().transpose(0, 1),
            .alpha = 1,
            .beta = 1});
  EXPECT_EQ(tensor_to_floats(out), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(tensor_to_floats(base), (std::vector<float>{2, 8, 4, 10, 6, 12}));
}

TEST_F(DispatchTest, TensorsOnDifferentDevicesAreRejected) {
  Tensor a = on(runtime->cpu(), {1}, {1}), b = on(faulty(), {2}, {1});
  Tensor out = Tensor::empty({1}, DType::f32, runtime->cpu());
  try {
    ops::add({.out = out, .a = a, .b = b});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: 'b' is on faulty:0 but 'out' is on cpu:0"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DispatchTest, StreamOfAnotherDeviceIsRejected) {
  Tensor a = on(faulty(), {1}, {1});
  Tensor out = Tensor::empty({1}, DType::f32, faulty());
  EXPECT_THROW(ops::add({.out = out, .a = a}, &runtime->cpu().default_stream()), Error);
}

TEST_F(DispatchTest, CopiesForViewsRunOnTheCallersStream) {
  auto side = faulty().create_stream();
  Tensor a = on(faulty(), {1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // (3, 2) view
  Tensor base = Tensor::zeros({2, 3}, DType::f32, faulty());
  Tensor out = base.transpose(0, 1);
  kernel_log().clear();
  ops::add({.out = out, .a = a, .alpha = 1}, side.get());
  // The input made contiguous, the kernel, and the write-back of the output (which, being a pure
  // output, is not copied in): all on the stream the caller chose.
  EXPECT_EQ(kernel_log(), (std::vector<std::string>{"copy@side", "add@side", "copy@side"}));
  EXPECT_EQ(tensor_to_floats(base), (std::vector<float>{2, 3, 4, 5, 6, 7}));  // faulty add: +1
}

TEST_F(DispatchTest, AutocompareSkipsWhatTheCpuLacks) {
  runtime->policy().check[size_t(Op::add)] = true;
  std::vector<int64_t> values = {1, 2, 3};
  Tensor a = tensor_from_ints(values, {3}, DType::i32, faulty());
  Tensor out = Tensor::empty({3}, DType::i32, faulty());
  ops::add({.out = out, .a = a, .b = a});
  EXPECT_EQ(tensor_to_ints(out), (std::vector<int64_t>{2, 4, 6}));
  EXPECT_NE(logged().find("H2_CHECK_OPS: add for i32 is not compared: cpu lacks it"),
            std::string::npos)
      << logged();
}

TEST_F(DispatchTest, AShapeTheKernelRefusesRunsOnTheCpu) {
  std::vector<float> a(20), b(20);
  for (int i = 0; i < 20; ++i) a[size_t(i)] = float(i), b[size_t(i)] = float(100 * i);
  Tensor big_a = on(faulty(), a, {20}), big_b = on(faulty(), b, {20});
  Tensor big = Tensor::empty({20}, DType::f32, faulty());
  const AddArgs refused{.out = big, .a = big_a, .b = big_b};
  EXPECT_EQ(faulty().refusal(Op::add, refused), "more than 16 elements");
  for (int i = 0; i < 2; ++i) ops::add(refused);
  const std::vector<float> got = tensor_to_floats(big);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(got[size_t(i)], float(101 * i)) << i;  // not faulty's +1
  const std::string log = logged();
  EXPECT_NE(log.find("add on faulty:0 (faulty-chip): more than 16 elements; running it on the cpu"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("more than 16"), log.rfind("more than 16")) << "warned more than once";
  // A call within the limit runs on the device itself (faulty's +1 shows it).
  Tensor small = on(faulty(), {1, 2}, {2});
  EXPECT_EQ(faulty().refusal(Op::add, AddArgs{.out = small, .a = small}), "");
  ops::add({.out = small, .a = small, .b = small});
  EXPECT_EQ(tensor_to_floats(small), (std::vector<float>{3, 5}));
  // Where the CPU cannot run it either (i32 add), the refusal is an error naming the reason.
  Tensor ints = Tensor::zeros({20}, DType::i32, faulty());
  try {
    ops::add({.out = ints, .a = ints, .b = ints});
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("more than 16 elements, and the cpu cannot run it"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DispatchTest, NoFallbackHintWhereFallbackCannotHelp) {
  Tensor x = Tensor::empty({2}, DType::i32, runtime->cpu());
  try {
    ops::add({.out = x, .a = x});
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_EQ(std::string(e.what()).find("H2_FALLBACK_OPS"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace h2
